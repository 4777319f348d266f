"""``ctx trust``: consent, per clone, to committed settings with effects outside ``.ctx/``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env

if TYPE_CHECKING:
    from ctxstore.repo import Store


def _security_records(store: Store) -> list[dict[str, Any]]:
    from ctxstore.security import consent

    name = consent.store_name(store)
    current = consent.security_record(name, consent.policy_from_config(store.config))
    return [{"store": data["store"], "security": data["security"], "current": raw == current}
            for raw, data in consent.read_records(store)
            if isinstance(data, dict) and data.get("store") == name and "security" in data]


def _values(claude_md_path: str) -> str:
    return f"[claude] claude_md_on_stop = true, claude_md_path = {json.dumps(claude_md_path)}"


@click.command("trust")
@click.option("--revoke", is_flag=True, help="Withdraw the consent recorded for this store.")
@click.option("--list", "list_", is_flag=True, help="List the consents recorded for this store.")
@format_option
@pass_env
def trust_command(env: Env, revoke: bool, list_: bool) -> None:
    """Allow this repository's config.toml to write CLAUDE.md or to weaken secret scanning.

    `.ctx/config.toml` is committed, so a clone's `[claude] claude_md_on_stop` and
    `claude_md_path` take effect only after you consent to exactly those values here.
    The consent is kept in this clone's Git configuration (`git config --local
    ctx.trusted`), which `git clone` never copies; if a pull changes the values, it no
    longer applies and the Stop hook asks again (once). The path must stay inside the
    repository and name a Markdown file; a symbolic link is refused. The same consent
    is needed for `[security]` settings that let secrets into `.ctx/` (a path set to
    `allow`, `disabled_rules`, `allow_values`, `index_sensitive_files = true`); until
    then the default policy applies (docs/security.md). A store outside
    any Git work tree needs no consent: its configuration is your own.

    \b
    Examples:
        ctx trust                    # consent to the current [claude] settings
        ctx trust --list --format json
        ctx trust --revoke
    """
    from ctxstore.claude import trust

    if revoke and list_:
        raise click.UsageError("--revoke and --list cannot be combined")
    store = env.store()
    config = store.root / "config.toml"
    if not trust.in_git_work_tree(store.worktree):
        if env.fmt == "json":
            emit_json({"git": False, "records": [], "changed": False})
        else:
            click.echo(f"nothing to trust: {store.worktree} is not in a Git work tree, so "
                       f"{config} is your own configuration and applies as written")
        return
    from ctxstore.security import consent

    if list_:
        records = trust.list_records(store)
        security = _security_records(store)
        if env.fmt == "json":
            emit_json({"git": True, "records": [
                {"store": r.store, "claude_md_on_stop": r.claude_md_on_stop,
                 "claude_md_path": r.claude_md_path, "current": current} for r, current in records],
                "security": security})
            return
        for rec in security:
            click.echo(f"{rec['store']}: [security] {json.dumps(rec['security'], sort_keys=True)} "
                       f"({'current' if rec['current'] else 'stale: config.toml changed since'})")
        if security and not records:
            return
        if not records:
            click.echo("no consent recorded for this store")
        for r, current in records:
            click.echo(f"{r.store}: {_values(r.claude_md_path)} "
                       f"({'current' if current else 'stale: config.toml changed since'})")
        return
    if revoke:
        removed = trust.revoke(store)
        security_removed = consent.revoke_security(store)
        if env.fmt == "json":
            emit_json({"git": True, "changed": bool(removed) or bool(security_removed), "records": [
                {"store": r.store, "claude_md_on_stop": r.claude_md_on_stop,
                 "claude_md_path": r.claude_md_path} for r in removed],
                "security_removed": security_removed})
            return
        if security_removed:
            click.echo(f"revoked: consent to the [security] settings of {config}")
        click.echo(f"revoked: {len(removed)} consent(s) for {config}" if removed
                   else f"nothing to revoke for {config}")
        return
    from ctxstore.claude.claudemd import resolve_claude_md

    if store.config.get("claude", "claude_md_on_stop"):
        resolve_claude_md(store)  # never record consent to a path that leads out
    record, new = trust.grant(store)
    granted, security_new = consent.grant_security(store)
    if env.fmt == "json":
        emit_json({"git": True, "changed": new or security_new, "records": [] if record is None else [
            {"store": record.store, "claude_md_on_stop": record.claude_md_on_stop,
             "claude_md_path": record.claude_md_path}],
            "security": None if granted is None else json.loads(granted)["security"]})
        return
    if granted is not None:
        weak = "; ".join(consent.policy_from_config(store.config).weakenings())
        click.echo(f"{'trusted' if security_new else 'already trusted'}: {config} {weak} "
                   "(secrets may be stored as these settings say; recorded in this clone's "
                   "Git configuration)")
        if record is None:
            return
    if record is None:
        click.echo(f"nothing to trust: {config} sets [claude] claude_md_on_stop = false")
        return
    click.echo(f"{'trusted' if new else 'already trusted'}: {config} {_values(record.claude_md_path)}"
               " (recorded in this clone's Git configuration)")
