"""The session summary ctx writes into today's log at compaction (``history.compact``).

The log is written before the commit pointer moves; after a crash in between, compacting
again finds the summary (by its session marker) and writes it no second time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxstore.model import ChangeBatch
from ctxstore.model.knowledge import (
    EdgeRecord,
    EdgeRemoved,
    KnowledgeRecord,
    NodeRecord,
    NodeRemoved,
    ViewRecord,
    ViewRemoved,
)
from ctxstore.narrative.entries import _appended, _hhmm, _inert, _write_text
from ctxstore.narrative.markdown import (
    demote_headings,
    end_marker,
    log_header,
    log_rel,
    session_marker,
)
from ctxstore.narrative.snapshot import iter_narrative_files, read_narrative_bytes
from ctxstore.objects import ObjectId
from ctxstore.replay import fold_records
from ctxstore.repo import Store, now_ms
from ctxstore.staging import stage_chain
from ctxstore.templates import render_template

__all__ = ["MAX_LISTED_NODES", "write_session_summary"]

MAX_LISTED_NODES = 50


def _summary_counts(records: Sequence[KnowledgeRecord]) -> tuple[str, list[str]]:
    """The counts line of a session summary and the ids of the nodes it touched.

    ``records``: every record of the session, unfolded. A node whose first version is in
    the session counts as added even when a later version of it is what the fold keeps.
    """
    created = {r.id for r in records if isinstance(r, NodeRecord) and r.prev is None}
    added = updated = removed = edges = views = 0
    ids: list[str] = []
    for rec in fold_records(records):
        if isinstance(rec, NodeRecord):
            added, updated = (added + 1, updated) if rec.id in created else (added, updated + 1)
            ids.append(rec.id)
        elif isinstance(rec, NodeRemoved):
            removed += 1
            ids.append(rec.id)
        elif isinstance(rec, (EdgeRecord, EdgeRemoved)):
            edges += 1
        elif isinstance(rec, (ViewRecord, ViewRemoved)):
            views += 1
    text = (f"{added} nodes added, {updated} updated, {removed} removed, {edges} edge changes, "
            f"{views} view changes")
    return text, ids


_LISTED = 10  # lines per section of the summary: files, decisions, runs


def _first_line(text: str, width: int = 160) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= width else line[:width - 3].rstrip() + "..."


def _listed(lines: list[str], empty: str) -> str:
    """Markdown list lines (at most ``_LISTED``, then a count), or ``- empty``."""
    if not lines:
        return f"- {empty}"
    out = lines[:_LISTED]
    if len(lines) > _LISTED:
        out.append(f"{len(lines) - _LISTED} more")
    return "\n".join(f"- {_inert(x)}" for x in out)


def _changes(records: Sequence[KnowledgeRecord]) -> str:
    """The files the session snapshotted (``ctx add file``) or saw removed, as spec 002's example."""
    from ctxstore.model.code import FileRecord, FileRemoved

    seen: dict[str, str] = {}
    for rec in records:  # in order: a file created then modified stays "Created"
        if isinstance(rec, FileRecord):
            seen.setdefault(rec.path, "Modified" if rec.prev is not None else "Created")
        elif isinstance(rec, FileRemoved):
            seen[rec.path] = "Removed"
    return _listed([f"{verb} {path}" for path, verb in seen.items()], "no file snapshots")


def _decisions(records: Sequence[KnowledgeRecord]) -> str:
    """The decisions the session recorded (their first line), as spec 002's example."""
    latest: dict[str, str] = {}
    for rec in records:
        if isinstance(rec, NodeRecord) and rec.type == "decision":
            latest[rec.id] = _first_line(rec.summary or rec.content or "")
        elif isinstance(rec, NodeRemoved):
            latest.pop(rec.id, None)
    return _listed(list(latest.values()), "none recorded")


def _test_results(store: Store, records: Sequence[KnowledgeRecord]) -> str:
    """Each command run in the session: its first failure, then how it ended (spec 002's example)."""
    from ctxstore.code.runs import diagnostics_summary, run_status
    from ctxstore.errors import CtxError
    from ctxstore.model.build import CommandRunRecord, DiagnosticsSnapshot

    runs: dict[str, list[CommandRunRecord]] = {}
    for rec in records:
        if isinstance(rec, CommandRunRecord):
            runs.setdefault(rec.name, []).append(rec)

    def outcome(run: CommandRunRecord) -> str:
        status = run_status(run.exit_code)
        if status != "failed":
            return status
        try:
            diags = store.read_typed(run.snapshot, DiagnosticsSnapshot).diagnostics
        except CtxError:  # a damaged snapshot does not stop the compaction; verify names it
            return f"failed (exit {run.exit_code})"
        where = f": {_first_line(diags[0].message, 100)}" if diags else ""
        return f"failed (exit {run.exit_code}, {diagnostics_summary(diags)}){where}"

    lines: list[str] = []
    for name, seq in runs.items():
        failed = next((r for r in seq if run_status(r.exit_code) == "failed"), None)
        if failed is not None and failed is not seq[-1]:
            lines.append(f"{name}: initially {outcome(failed)}")
        lines.append(f"{name}: {'final: ' if len(seq) > 1 else ''}{outcome(seq[-1])}"
                     + (f" ({len(seq)} runs)" if len(seq) > 1 else ""))
    return _listed(lines, "no command runs")


def _has_summary(store: Store, session_id: str) -> bool:
    """True if some daily log already holds this session's summary (a re-run after a crash)."""
    needle = session_marker(session_id)
    for rel, path in iter_narrative_files(store):
        if rel.startswith("log/"):
            data = read_narrative_bytes(path)
            if data is not None and needle in data.decode("utf-8", "replace"):
                return True
    return False


def write_session_summary(store: Store, message: str) -> str | None:
    """Append the open session's summary to today's log, once per session.

    Args:
        store: The store (the caller holds its lock).
        message: The compaction's commit message (the summary's headline).

    Returns:
        The log's narrative-relative path; None when nothing is staged or the log already
        holds this session's summary.

    Raises:
        UnsafePath, StorageIOError: if the log cannot be written.
    """
    chain = stage_chain(store, store.staged_heads())
    if not chain:
        return None
    first = chain[0][1]
    session_id = first.session_id
    if _has_summary(store, session_id):
        return None
    records: list[KnowledgeRecord] = []
    for _, work in chain:
        for bid in work.change_batches:
            records.extend(store.read_typed(ObjectId(bid), ChangeBatch).records)
    counts, ids = _summary_counts(records)
    listed = ", ".join(ids[:MAX_LISTED_NODES]) or "none"
    if len(ids) > MAX_LISTED_NODES:
        listed += f" and {len(ids) - MAX_LISTED_NODES} more"
    task = first.message if first.step_kind == "session_start" else "(none)"
    ms = now_ms()
    rel = log_rel(ms)
    entry = render_template("session_summary.md", time=_hhmm(ms),
                                end=end_marker(session_id),
                                marker=session_marker(session_id),
                                message=_inert(demote_headings(message.strip(), 3)),
                                session=session_id,
                                task=_inert(re.sub(r"\s+", " ", task).strip()) or "(none)",
                                counts=counts, nodes=listed, files=_changes(records),
                                decisions=_decisions(records),
                                tests=_test_results(store, records))
    _write_text(store, rel, _appended(store, rel, log_header(ms), entry))
    return rel
