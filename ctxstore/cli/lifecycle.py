"""``ctx lifecycle`` and ``ctx consolidate``: the memory lifecycle of spec 003."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ctxstore.claude.state import read_access_counts
from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.errors import InvalidInput
from ctxstore.lifecycle.consolidate import choose_proposals, propose
from ctxstore.lifecycle.drafting import llm_drafts
from ctxstore.lifecycle.policy import run_configured_lifecycle
from ctxstore.llm.ask import call_settings
from ctxstore.repo import now_ms

if TYPE_CHECKING:
    from ctxstore.lifecycle.drafting import Drafts


@click.command("lifecycle")
@click.option("--dry-run", is_flag=True, help="Show the transitions without writing them.")
@format_option
@pass_env
def lifecycle_command(env: Env, dry_run: bool) -> None:
    """Decay memories and apply status transitions (archive, restore, prune).

    Confidence decays by type (spec 003 half-lives; pinned never, frequently recalled
    and central memories at half speed). An active memory below
    [lifecycle] archive_confidence_threshold for archive_grace_days is archived
    (off-context); one recalled since is restored; one left archived for
    prune_after_days is pruned. Each transition is an ordinary change record, so it
    merges through Git like any edit. The pass also runs at session end.

    \b
    Examples:
        ctx lifecycle --dry-run
        ctx lifecycle --format json
    """
    store = env.store()
    rep = run_configured_lifecycle(env.session(), now_ms=now_ms(), access=read_access_counts(store.root),
                                   dry_run=dry_run)
    counts = {k: rep.count(k) for k in ("archive", "restore", "prune")}
    if env.fmt == "json":
        emit_json({"version": 1, "dry_run": dry_run, "scanned": rep.scanned,
                   "archived": counts["archive"], "restored": counts["restore"],
                   "pruned": counts["prune"],
                   "transitions": [{"id": t.node_id, "action": t.kind,
                                    "confidence": round(t.confidence, 4), "reason": t.reason}
                                   for t in rep.transitions]})
        return
    verb = "would " if dry_run else ""
    for t in rep.transitions:
        click.echo(f"{verb}{t.kind} {t.node_id} (confidence {t.confidence:.2f}): {t.reason}")
    click.echo(f"{'dry run: ' if dry_run else ''}{counts['archive']} archived, "
               f"{counts['restore']} restored, {counts['prune']} pruned "
               f"(of {rep.scanned} nodes)")


def _proposal_json(p: Any) -> dict[str, Any]:
    return {"id": p.id, "type": p.type, "members": list(p.members),
            "similarity": p.similarity, "draft": p.draft}


@click.command("consolidate")
@click.option("--dry-run", is_flag=True, help="List merge proposals only (the default).")
@click.option("--apply", "apply_ids", multiple=True, metavar="ID",
              help="Apply a proposal by id (repeat, or separate ids by commas).")
@click.option("--content", default=None, help="The merged text (one --apply only); "
              "default: the proposal's draft.")
@click.option("--undo", is_flag=True, help="Undo the newest consolidation.")
@click.option("--llm/--no-llm", "use_llm", default=None,
              help="Draft the merged text with the LLM server (default: when [llm] server_url "
                   "or CTX_LLM_SERVER names one).")
@format_option
@pass_env
def consolidate_command(env: Env, dry_run: bool, apply_ids: tuple[str, ...],
                        content: str | None, undo: bool, use_llm: bool | None) -> None:
    """Group similar memories into merge proposals; apply or undo one.

    A proposal joins memories of one type whose word overlap is at least 0.5.
    Applying it writes a summary node DERIVED_FROM every source and archives the
    sources (never supersedes them). The merged text is --content, else an LLM's
    draft when a server is configured (docs/llm.md), else the sources' distinct
    lines. --undo deletes the newest consolidation's summary and restores its
    sources.

    \b
    Examples:
        ctx consolidate --dry-run
        ctx consolidate --apply 3f9a2c1b7d4e --content "Retries use exponential backoff."
        CTX_LLM_SERVER=http://127.0.0.1:8080 ctx consolidate --apply 3f9a2c1b7d4e
        ctx consolidate --undo
    """
    ids = [i for raw in apply_ids for i in raw.split(",") if i.strip()]
    if undo and (ids or dry_run or content is not None):
        raise InvalidInput("--undo cannot be combined with --apply, --content or --dry-run")
    if dry_run and ids:
        raise InvalidInput("--dry-run cannot be combined with --apply")
    if content is not None and not ids:
        raise InvalidInput("--content needs --apply ID")
    if use_llm is not None and not ids:
        raise InvalidInput("--llm/--no-llm needs --apply ID")
    if undo:
        from ctxstore.lifecycle.consolidate import undo_last

        summary_id, res = undo_last(env.session())
        if env.fmt == "json":
            emit_json({"version": 1, "undone": summary_id, "records": len(res.records)})
        else:
            click.echo(f"undid consolidation {summary_id} ({len(res.records)} records)")
        return
    if ids:
        from ctxstore.lifecycle.consolidate import apply_proposals

        drafts = _llm_drafts(env, ids, use_llm) if content is None else None
        applied = apply_proposals(env.session(), ids, content=content,
                                  drafts=drafts.texts if drafts else None,
                                  drafted_by=f"llm:{drafts.model}" if drafts else None)
        if env.fmt == "json":
            emit_json({"version": 1, "applied": [
                {"proposal": a.proposal.id, "summary": a.summary_id,
                 "archived": list(a.proposal.members),
                 "drafted_by": f"llm:{drafts.model}" if drafts else None} for a in applied]})
            return
        for a in applied:
            click.echo(f"consolidated {len(a.proposal.members)} {a.proposal.type} nodes into "
                       f"summary {a.summary_id} (proposal {a.proposal.id})")
        return

    proposals = propose(env.index())
    if env.fmt == "json":
        emit_json({"version": 1, "proposals": [_proposal_json(p) for p in proposals]})
        return
    if not proposals:
        click.echo("no merge proposals")
        return
    for p in proposals:
        click.echo(f"{p.id}  {len(p.members)} {p.type} nodes, similarity >= {p.similarity:.2f}: "
                   f"{', '.join(p.members)}")
    click.echo("apply with: ctx consolidate --apply ID [--content TEXT]")


def _llm_drafts(env: Env, ids: list[str], use_llm: bool | None) -> Drafts | None:
    """The LLM's merged texts for the proposals ``ids`` names, asked before anything is written.

    None with ``--no-llm``, or (by default) when no server is configured: the built-in
    default URL is used only with ``--llm``.
    """
    if use_llm is False:
        return None

    choice = env.llm_server(None)  # refuses a remote URL from a clone's committed config (E015)
    if use_llm is None and choice.source == "default":
        return None
    conn = env.index()
    chosen = choose_proposals(propose(conn), ids)
    settings = call_settings(env.store().config, choice.url, total_budget=env.default_budget())
    return llm_drafts(conn, chosen, settings)
