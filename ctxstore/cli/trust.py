"""``ctx trust``: consent, per clone, to committed settings that need it.

Settings with effects outside ``.ctx/`` (``ctxstore.claude.trust``), resource limits a
committed config.toml raises (``ctxstore.limits``) and ``[security]`` settings that let
secrets through (``ctxstore.security.consent``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from ctxstore import limits
from ctxstore.claude import trust
from ctxstore.claude.claudemd import resolve_claude_md
from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.security import consent

if TYPE_CHECKING:
    from ctxstore.claude.trust import TrustRecord
    from ctxstore.repo import Store


def _security_records(store: Store) -> list[dict[str, Any]]:

    name = consent.store_name(store)
    current = consent.security_record(name, consent.policy_from_config(store.config))
    return [{"store": data["store"], "security": data["security"], "current": raw == current}
            for raw, data in consent.read_records(store)
            if isinstance(data, dict) and data.get("store") == name and "security" in data]


def _values(record: TrustRecord) -> str:
    parts = []
    if record.claude_md_on_stop:
        parts.append(f"claude_md_on_stop = true, claude_md_path = {json.dumps(record.claude_md_path)}")
    if record.agents_md_path is not None:
        parts.append(f"agents_md_on_stop = true, agents_md_path = {json.dumps(record.agents_md_path)}")
    return "[claude] " + ", ".join(parts)


def _record_json(record: TrustRecord) -> dict[str, object]:
    out: dict[str, object] = {"store": record.store, "claude_md_on_stop": record.claude_md_on_stop,
                              "claude_md_path": record.claude_md_path}
    if record.agents_md_path is not None:  # only then: the output of older records is unchanged
        out["agents_md_on_stop"] = True
        out["agents_md_path"] = record.agents_md_path
    return out


def _limits(values: dict[str, object]) -> str:
    return "resource limits " + ", ".join(
        f"[{key.split('.', 1)[0]}] {key.split('.', 1)[1]} = {value}" for key, value in values.items())


@click.command("trust")
@click.option("--revoke", is_flag=True, help="Withdraw the consent recorded for this store.")
@click.option("--list", "list_", is_flag=True, help="List the consents recorded for this store.")
@format_option
@pass_env
def trust_command(env: Env, revoke: bool, list_: bool) -> None:
    """Allow this repository's config.toml to write CLAUDE.md/AGENTS.md, raise limits, weaken secret scanning.

    `.ctx/config.toml` is committed, so a clone's `[claude] claude_md_on_stop`,
    `agents_md_on_stop` and their paths (`claude_md_path`, `agents_md_path`) take effect
    only after you consent to exactly those values here, and
    so do resource limits it sets above what a committed config may (`[storage]
    max_object_bytes`, `[ingestion] max_file_bytes`, ...: docs/reliability.md).
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

    if list_:
        records = trust.list_records(store)
        limit_records = limits.listed(store.config, store.root)
        security = _security_records(store)
        if env.fmt == "json":
            emit_json({"git": True, "records": [
                {**_record_json(r), "current": current} for r, current in records],
                "limits": [{"values": v, "current": current} for v, current in limit_records],
                "security": security})
            return
        if not records and not limit_records and not security:
            click.echo("no consent recorded for this store")
        for r, current in records:
            click.echo(f"{r.store}: {_values(r)} "
                       f"({'current' if current else 'stale: config.toml changed since'})")
        for values, current in limit_records:
            click.echo(f"{store.root.name}: {_limits(values)} "
                       f"({'current' if current else 'stale: config.toml changed since'})")
        for rec in security:
            click.echo(f"{rec['store']}: [security] {json.dumps(rec['security'], sort_keys=True)} "
                       f"({'current' if rec['current'] else 'stale: config.toml changed since'})")
        return
    if revoke:
        removed = trust.revoke(store)
        removed_limits = limits.revoke(store.root)
        security_removed = consent.revoke_security(store)
        if env.fmt == "json":
            emit_json({"git": True, "changed": bool(removed or removed_limits or security_removed),
                       "records": [
                _record_json(r) for r in removed],
                "limits": removed_limits, "security_removed": security_removed})
            return
        if security_removed:
            click.echo(f"revoked: consent to the [security] settings of {config}")
        count = len(removed) + len(removed_limits)
        if count or not security_removed:
            click.echo(f"revoked: {count} consent(s) for {config}" if count
                       else f"nothing to revoke for {config}")
        return

    if store.config.get("claude", "claude_md_on_stop"):
        resolve_claude_md(store)  # never record consent to a path that leads out
    if store.config.get("claude", "agents_md_on_stop"):
        resolve_claude_md(store, kind="agents")
    record, new = trust.grant(store)
    raised, limits_new = limits.grant(store.config, store.root)
    granted, security_new = consent.grant_security(store)
    if env.fmt == "json":
        emit_json({"git": True, "changed": new or limits_new or security_new,
                   "records": [] if record is None else [
            _record_json(record)], "limits": raised,
            "security": None if granted is None
            else consent.policy_from_config(store.config).fingerprint()})
        return
    if record is None and not raised and granted is None:
        click.echo(f"nothing to trust: {config} sets [claude] claude_md_on_stop and "
                   "agents_md_on_stop = false, raises no resource limit and keeps the default secret policy")
        return
    if record is not None:
        click.echo(f"{'trusted' if new else 'already trusted'}: {config} "
                   f"{_values(record)} (recorded in this clone's Git configuration)")
    if raised:
        click.echo(f"{'trusted' if limits_new else 'already trusted'}: {config} {_limits(raised)}"
                   " (recorded in this clone's Git configuration)")
    if granted is not None:
        weak = "; ".join(consent.policy_from_config(store.config).weakenings())
        click.echo(f"{'trusted' if security_new else 'already trusted'}: {config} {weak} "
                   "(secrets may be stored as these settings say; recorded in this clone's "
                   "Git configuration)")
