"""The session summary ctx writes into today's log at compaction (``ctx stage compact``)."""

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
from ctxstore.narrative.ingest import NarrativeChange, ingest_narrative_edits
from ctxstore.narrative.markdown import (
    demote_headings,
    end_marker,
    log_header,
    log_rel,
    render_template,
    session_marker,
)
from ctxstore.narrative.snapshot import iter_narrative_files, read_narrative_bytes
from ctxstore.objects import ObjectId
from ctxstore.replay import fold_records
from ctxstore.repo import Store, now_ms
from ctxstore.security.guard import guard
from ctxstore.staging import FoldResult, check_commit_message, commit_stage, stage_chain

__all__ = ["MAX_LISTED_NODES", "compact_session"]

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


def _has_summary(store: Store, session_id: str) -> bool:
    """True if some daily log already holds this session's summary (a re-run after a crash)."""
    needle = session_marker(session_id)
    for rel, path in iter_narrative_files(store):
        if rel.startswith("log/"):
            data = read_narrative_bytes(path)
            if data is not None and needle in data.decode("utf-8", "replace"):
                return True
    return False


def _write_summary(store: Store, message: str) -> str | None:
    """Append the open session's summary to today's log; returns its path (None: no session)."""
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
                                counts=counts, nodes=listed)
    _write_text(store, rel, _appended(store, rel, log_header(ms), entry))
    return rel


def compact_session(store: Store, message: str) -> tuple[FoldResult, list[NarrativeChange]]:
    """``ctx stage compact``.

    Ingest narrative edits, write the session summary into today's log, then fold the session into
    one canonical commit that snapshots that log.

    The log is written before the commit pointer moves. After a crash in between, running
    it again finds the summary (by its session marker) and only folds.

    Returns:
        What was folded, and what the narrative edits became (as ``commit_with_edits``).

    Raises:
        InvalidInput: for a blank message (nothing changes) or conflict markers (see
            ``ingest_narrative_edits``).
        StagingConflict, LockConflict, StorageIOError: if the commit cannot be made.
    """
    check_commit_message(message)  # before ingestion stages anything
    guard(store, "explicit", message, what="the commit message")  # committed with .ctx/
    with store.lock():
        edits = ingest_narrative_edits(store)
        _write_summary(store, message)
        return commit_stage(store, message, kind="compact"), edits
