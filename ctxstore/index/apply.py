"""Applying commits to the index: which commits are new, and last-writer-wins per key.

The index holds, for every key, the winning record among all change batches it has
applied, exactly as ``ctxstore.replay`` computes it, plus every version seen (for
history). Applying more batches can only be done incrementally while the set of
reachable batches grows; when a head the index had synced to is no longer reachable
(an abort, a Git checkout of another branch, an amend), ``plan_sync`` asks for a
rebuild, except when that head's session was folded into a commit being applied (the
fold carries the same winning records).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import field

from ctxstore.errors import CommitOrphan, ObjectNotFound
from ctxstore.index.build import BUILD_TABLES, apply_build_record
from ctxstore.index.heads import FoldReads, record_commit_graph, update_node_heads
from ctxstore.model import Commit, TypedObject, WorkCommit, codec
from ctxstore.model.build import CargoRecord, CommandRunRecord
from ctxstore.model.code import FileRecord, FileRemoved
from ctxstore.model.knowledge import (
    EdgeRecord,
    EdgeRemoved,
    KnowledgeRecord,
    NodeRecord,
    NodeRemoved,
    PurgeRecord,
    ViewRecord,
    ViewRemoved,
    key_text,
    record_from_wire,
    record_key,
    record_stamp,
    record_to_wire,
    version_id,
)
from ctxstore.objects import ObjectId
from ctxstore.records import dataclass
from ctxstore.replay import purged_descendants, read_batch_unless_purged
from ctxstore.repo import Store
from ctxstore.search.fts5 import Fts5Engine
from ctxstore.tokens import estimate_tokens

__all__ = ["SyncPlan", "plan_sync", "apply_commits", "apply_records", "clear_index"]

_PROGRESS_STEP = 500  # records applied between two progress calls
_TABLES = ("applied", "applied_batches", "purged", "winners", "nodes", "tags", "edges", "views",
           "versions", "nodes_fts", "commit_graph", "commit_parents", "node_heads", "updated_in",
           "file_versions", *BUILD_TABLES, "runs", "runs_fts")  # index.runs


@dataclass
class SyncPlan:
    """Commits to apply (oldest first), or a request to rebuild."""

    commits: list[tuple[bytes, Commit | WorkCommit]] = field(default_factory=list)
    rebuild: bool = False


def clear_index(conn: sqlite3.Connection) -> None:
    """Empty every table (inside the caller's transaction)."""
    for table in _TABLES:
        conn.execute(f"DELETE FROM {table}")
    conn.execute("DELETE FROM meta WHERE key = 'synced'")


def _missing_head(store: Store, oid: bytes) -> ObjectNotFound:
    """E001 for a head no object area holds, naming the pointer that names it.

    Only on the error path: the pointers are read again to tell HEAD's ref from STAGE.
    """
    from ctxstore.errors import CtxError
    from ctxstore.repo import pointer_target_missing

    try:
        pointer = store.read_head()
    except CtxError:
        return ObjectNotFound(oid)
    return pointer_target_missing(pointer.name if oid in pointer.heads else "STAGE", oid)


def plan_sync(store: Store, conn: sqlite3.Connection, old: dict[str, list[str]] | None,
              heads: list[bytes]) -> SyncPlan:
    """Find the commits reachable from ``heads`` that the index has not applied."""
    applied = {row[0] for row in conn.execute("SELECT oid FROM applied")} if old else set()
    new: dict[bytes, Commit | WorkCommit] = {}
    frontier: set[bytes] = set()
    stack = list(heads)
    while stack:
        oid = stack.pop()
        if oid in new or oid in frontier:
            continue
        if oid in applied:
            frontier.add(oid)
            continue
        try:
            obj: TypedObject = store.read_typed(ObjectId(oid))
        except ObjectNotFound:
            if oid in heads:  # a pointer names it: E001 (the pointer is the problem)
                raise _missing_head(store, oid) from None
            raise CommitOrphan(oid) from None  # a parent or base: the history is broken
        if not isinstance(obj, (Commit, WorkCommit)):
            from ctxstore.errors import DeserializationFailed

            raise DeserializationFailed(oid, detail=f"is a {type(obj).TYPE}, not a commit")
        new[oid] = obj
        stack.extend(obj.parents)
        if isinstance(obj, WorkCommit):
            stack.append(obj.base)
    plan = SyncPlan(commits=sorted(new.items(), key=lambda kv: _stamp(kv[1])))
    if old is None:
        return plan
    # Any fold counts here, an amend of a merge (several parents) included: the question
    # is only whether the session's records arrive with a commit being applied.
    folded = {c.session_id for c in new.values() if isinstance(c, Commit) and c.is_fold}
    for hexid in old.get("main", []) + old.get("stage", []):
        oid = bytes.fromhex(hexid)
        if oid in frontier or oid in new:
            continue
        try:
            obj = store.read_typed(ObjectId(oid))
        except Exception:  # noqa: BLE001 - an unreadable old head: start over
            plan.rebuild = True
            return plan
        if isinstance(obj, WorkCommit) and obj.session_id in folded:
            continue
        if isinstance(obj, Commit) and _reaches(store, frontier | set(new), oid):
            continue
        plan.rebuild = True
        return plan
    return plan


def _reaches(store: Store, starts: Iterable[bytes], target: bytes) -> bool:
    # Rare path (an old head that is not on the frontier): walk canonical history.
    return any(oid == target for oid, _ in store.iter_history([ObjectId(s) for s in starts],
                                                              follow_base=True))


def _stamp(obj: Commit | WorkCommit) -> int:
    return obj.timestamp_unix * 1000 if isinstance(obj, Commit) else obj.created_at


def apply_commits(store: Store, conn: sqlite3.Connection,
                  commits: list[tuple[bytes, Commit | WorkCommit]],
                  progress: Callable[[int, int], None] | None = None) -> None:
    """Apply every change batch of ``commits`` not applied yet, and record them.

    ``progress``, when given, is called with (records applied, records to apply): the batches
    are read first to count them.
    """
    record_commit_graph(conn, commits)
    reads = FoldReads(store)  # shared by every batch of this apply (see FoldReads)
    total = done = 0
    if progress is not None:  # count the records to apply first (the batches are read twice)
        seen: set[bytes] = set()
        for _, obj in commits:
            for bid in obj.change_batches:
                if bid in seen or conn.execute("SELECT 1 FROM applied_batches WHERE oid = ?",
                                               (bid,)).fetchone():
                    continue
                seen.add(bid)
                counted = read_batch_unless_purged(store, ObjectId(bid))
                total += len(counted.records) if counted is not None else 0
    for oid, obj in commits:
        for bid in obj.change_batches:
            if conn.execute("SELECT 1 FROM applied_batches WHERE oid = ?", (bid,)).fetchone():
                continue
            batch = read_batch_unless_purged(store, ObjectId(bid))
            if batch is None:  # removed by `ctx purge` (a merged clone's old history)
                conn.execute("INSERT INTO applied_batches(oid) VALUES (?)", (bid,))
                continue
            # UpdatedIn: the node versions a canonical commit carries (not a staged step's)
            canonical = obj.timestamp_unix * 1000 if isinstance(obj, Commit) else None
            if progress is None:
                apply_records(store, conn, batch.records, bid, commit=oid, reads=reads,
                              canonical=canonical)
            else:
                # In steps, so that the bar moves during one large batch (an import).
                for start in range(0, len(batch.records), _PROGRESS_STEP):
                    chunk = batch.records[start:start + _PROGRESS_STEP]
                    apply_records(store, conn, chunk, bid, commit=oid, reads=reads,
                                  canonical=canonical)
                    done += len(chunk)
                    progress(done, total)
            conn.execute("INSERT INTO applied_batches(oid) VALUES (?)", (bid,))
        conn.execute("INSERT OR IGNORE INTO applied(oid, kind) VALUES (?, ?)",
                     (oid, type(obj).TYPE))
    if progress is not None and done < total:
        progress(total, total)


def apply_records(store: Store, conn: sqlite3.Connection, records: Iterable[KnowledgeRecord],
                  batch: bytes, *, commit: bytes, reads: FoldReads,
                  canonical: int | None = None) -> None:
    """Let each record compete for its key; update the tables for every winner.

    ``canonical``: the time (ms) of ``commit`` when it is a canonical commit; each node
    version it carries is then recorded in ``updated_in`` (spec 002 §9 ``UpdatedIn``).

    ``commit`` is the (work) commit carrying ``batch``: node versions are placed in the
    commit graph by it, for concurrent-edit detection (``ctxstore.index.heads``), which
    reads fold and session records through ``reads``. A ``file`` or ``file_removed`` record
    (a ``ctx add file`` snapshot, or an older ctx's ``ctx index``) is history here: it wins
    its key and is kept in ``versions``, and the code tables, which this clone derives from
    its own work tree (``index.codedb``), are left alone.

    A record whose version a ``purge`` record named is never applied, in whatever order the
    two arrive; a purge applied after the versions it names takes them out (``_apply_purge``).
    """
    purged = {bytes(row[0]) for row in conn.execute("SELECT version FROM purged")}
    for rec in records:
        key = key_text(record_key(rec))
        version = version_id(rec)
        if version in purged or (rec.prev is not None and bytes(rec.prev) in purged):
            # Purged, or an edit built on a purged version (it carries that content along):
            # its own descendants are skipped in turn (replay.purged_descendants).
            if version not in purged:
                conn.execute("INSERT OR IGNORE INTO purged(version) VALUES (?)", (version,))
                purged.add(version)
            continue
        if isinstance(rec, PurgeRecord):
            purged.update(_apply_purge(store, conn, rec))
        stamp = record_stamp(rec)
        cur = conn.execute(
            "INSERT OR IGNORE INTO versions(key, version, stamp, kind, batch, record) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (key, version, stamp, rec.KIND, batch, codec.encode(record_to_wire(rec))))
        if isinstance(rec, CommandRunRecord) and cur.rowcount == 1:
            # Every run, not only the winner: searchable. Imported here: the hooks apply
            # batches on their start-up path, and one module more is over their budget.
            from ctxstore.index.runs import apply_run

            apply_run(store, conn, rec, version)
        if isinstance(rec, (NodeRecord, NodeRemoved)) and canonical is not None:
            conn.execute("INSERT OR IGNORE INTO updated_in(node_id, commit_oid, stamp, version)"
                         " VALUES (?, ?, ?, ?)", (rec.id, commit, canonical, version))
        if canonical is not None and isinstance(rec, (FileRecord, EdgeRecord)):
            _record_file_version(conn, rec, commit, canonical, version)
        if isinstance(rec, (NodeRecord, NodeRemoved)):
            update_node_heads(reads, conn, rec.id, version, commit, rec.prev, stamp,
                              known=cur.rowcount == 0)
        row = conn.execute("SELECT stamp, version FROM winners WHERE key = ?", (key,)).fetchone()
        if row is not None and (row[0], row[1]) >= (stamp, version):
            continue
        live = not isinstance(rec, (NodeRemoved, EdgeRemoved, ViewRemoved, FileRemoved))
        conn.execute("INSERT OR REPLACE INTO winners(key, stamp, version, live) VALUES (?, ?, ?, ?)",
                     (key, stamp, version, int(live)))
        _apply_winner(store, conn, rec, version)


def _record_file_version(conn: sqlite3.Connection, rec: FileRecord | EdgeRecord, commit: bytes,
                         stamp: int, version: bytes) -> None:
    """HasVersion / UpdatedIn of files: the content of a path a canonical commit recorded.

    A ``file`` record (a ``ctx add file`` snapshot) records its blob and FileVersion; a
    ``Mentions`` edge to a file records the blob its evidence names (what the file held
    when the mention was made). Other records say nothing of a file's content.
    """
    if isinstance(rec, FileRecord):
        conn.execute("INSERT OR IGNORE INTO file_versions(path, content, commit_oid, version, stamp,"
                     " file_version) VALUES (?, ?, ?, ?, ?, ?)",
                     (rec.path, bytes(rec.blob), commit, version, stamp, bytes(rec.version)))
        return
    if rec.label != "Mentions" or rec.to_ref[0] != "file":
        return
    blob = rec.evidence.get("blob") if isinstance(rec.evidence, dict) else None
    if isinstance(blob, str) and len(blob) == 64 and all(c in "0123456789abcdef" for c in blob):
        conn.execute("INSERT OR IGNORE INTO file_versions(path, content, commit_oid, version, stamp,"
                     " file_version) VALUES (?, ?, ?, ?, ?, NULL)",
                     (rec.to_ref[1], bytes.fromhex(blob), commit, version, stamp))


_REMOVALS = (NodeRemoved, EdgeRemoved, ViewRemoved, FileRemoved)


def _apply_purge(store: Store, conn: sqlite3.Connection, rec: PurgeRecord) -> set[bytes]:
    """Take the versions a purge names out of the index, and keep them out.

    Each such version, and each applied version built on one (``prev``), leaves the
    history (``versions``, ``node_heads``); where it was its key's winner, the best version
    left wins instead (the purge's own replacement, which ``ctx purge`` writes before the
    purge record), or the key goes when none is left.

    Returns:
        Every version now purged.
    """
    # The versions named, and those applied already that were built on one of them. Every
    # applied version is looked at, not only those of the keys a named version was applied
    # to: in a full rebuild a named version may never be applied (its batch was purged from
    # this clone) while an edit built on it, from a clone with the old history, was.
    named = {bytes(v) for v in rec.versions}
    links = [(bytes(row[0]), codec.decode(row[1]).get("prev"))
             for row in conn.execute("SELECT version, record FROM versions")]
    doomed = purged_descendants(named, links)
    conn.executemany("INSERT OR IGNORE INTO purged(version) VALUES (?)",
                     [(v,) for v in sorted(doomed)])
    for version in sorted(doomed):
        keys = [row[0] for row in conn.execute("SELECT key FROM versions WHERE version = ?",
                                               (version,))]
        conn.execute("DELETE FROM node_heads WHERE version = ?", (version,))
        from ctxstore.index.runs import forget_run  # as apply_run, off the hooks' path

        forget_run(conn, version)
        conn.execute("DELETE FROM updated_in WHERE version = ?", (version,))
        conn.execute("DELETE FROM file_versions WHERE version = ?", (version,))
        for key in keys:
            conn.execute("DELETE FROM versions WHERE key = ? AND version = ?", (key, version))
            win = conn.execute("SELECT version FROM winners WHERE key = ?", (key,)).fetchone()
            if win is None or bytes(win[0]) != version:
                continue
            best = conn.execute("SELECT version, stamp, record FROM versions WHERE key = ? "
                                "ORDER BY stamp DESC, version DESC LIMIT 1", (key,)).fetchone()
            if best is None:
                conn.execute("DELETE FROM winners WHERE key = ?", (key,))
                _forget_key(conn, key)
                continue
            again = record_from_wire(codec.decode(best[2]), "index")
            conn.execute("UPDATE winners SET stamp = ?, version = ?, live = ? WHERE key = ?",
                         (best[1], best[0], int(not isinstance(again, _REMOVALS)), key))
            _apply_winner(store, conn, again, bytes(best[0]))
    return doomed


def _forget_key(conn: sqlite3.Connection, key: str) -> None:
    """Remove the rows of a node, edge or view whose every version was purged."""
    parts = key.split("\x1f")
    if parts[0] == "node":
        row = conn.execute("SELECT rowid FROM nodes WHERE id = ?", (parts[1],)).fetchone()
        if row is not None:
            Fts5Engine(conn).delete_document(row[0])
            conn.execute("DELETE FROM nodes WHERE rowid = ?", (row[0],))
        conn.execute("DELETE FROM tags WHERE node_id = ?", (parts[1],))
    elif parts[0] == "edge" and len(parts) == 6:
        conn.execute("DELETE FROM edges WHERE from_kind=? AND from_key=? AND to_kind=? AND to_key=?"
                     " AND label=?", parts[1:])
    elif parts[0] == "view":
        conn.execute("DELETE FROM views WHERE name = ?", (parts[1],))


def _hook_key(rec: NodeRecord) -> str | None:
    # The agent write's identity (knowledge.remember), indexed for its one lookup.
    key = rec.metadata.get("hook_key")
    return key if isinstance(key, str) else None


def _apply_winner(store: Store, conn: sqlite3.Connection, rec: KnowledgeRecord,
                  version: bytes) -> None:
    fts = Fts5Engine(conn)
    if isinstance(rec, NodeRecord):
        content = rec.content if rec.content is not None else \
            store.read_blob(ObjectId(rec.content_blob)).decode("utf-8", "replace")  # type: ignore[arg-type]
        row = conn.execute("SELECT rowid FROM nodes WHERE id = ?", (rec.id,)).fetchone()
        values = (rec.type, content, rec.content_blob, rec.summary, rec.status, rec.superseded_by,
                  rec.created_at, rec.updated_at, rec.author,
                  json.dumps(rec.metadata, sort_keys=True), estimate_tokens(content.strip()), version,
                  _hook_key(rec))
        if row is None:
            cur = conn.execute(
                "INSERT INTO nodes(id, type, content, content_blob, summary, status, superseded_by,"
                " created_at, updated_at, author, metadata, tokens, version, hook_key)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (rec.id, *values))
            rowid = cur.lastrowid
            assert rowid is not None  # sqlite3 sets it after every INSERT
        else:
            rowid = row[0]
            conn.execute(
                "UPDATE nodes SET type=?, content=?, content_blob=?, summary=?, status=?,"
                " superseded_by=?, created_at=?, updated_at=?, author=?, metadata=?, tokens=?,"
                " version=?, hook_key=? WHERE rowid = ?", (*values, rowid))
            fts.delete_document(rowid)
        fts.index_document(rowid, {"content": content, "summary": rec.summary or ""})
        conn.execute("DELETE FROM tags WHERE node_id = ?", (rec.id,))
        conn.executemany("INSERT INTO tags(node_id, tag) VALUES (?, ?)",
                         [(rec.id, t) for t in rec.tags])
    elif isinstance(rec, NodeRemoved):
        row = conn.execute("SELECT rowid FROM nodes WHERE id = ?", (rec.id,)).fetchone()
        if row is not None:
            fts.delete_document(row[0])
            conn.execute("DELETE FROM nodes WHERE rowid = ?", (row[0],))
        conn.execute("DELETE FROM tags WHERE node_id = ?", (rec.id,))
    elif isinstance(rec, EdgeRecord):
        conn.execute(
            "INSERT OR REPLACE INTO edges(from_kind, from_key, to_kind, to_key, label, weight,"
            " metadata, evidence, created_at, updated_at, version)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*rec.from_ref, *rec.to_ref, rec.label, rec.weight,
             json.dumps(rec.metadata, sort_keys=True),
             json.dumps(codec.jsonable(rec.evidence), sort_keys=True) if rec.evidence is not None else None,
             rec.created_at, rec.updated_at, version))
    elif isinstance(rec, EdgeRemoved):
        conn.execute("DELETE FROM edges WHERE from_kind=? AND from_key=? AND to_kind=? AND to_key=?"
                     " AND label=?", (*rec.from_ref, *rec.to_ref, rec.label))
    elif isinstance(rec, ViewRecord):
        conn.execute("INSERT OR REPLACE INTO views(name, query, budget, description, created_at,"
                     " updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (rec.name, rec.query, rec.budget, rec.description, rec.created_at,
                      rec.updated_at, version))
    elif isinstance(rec, ViewRemoved):
        conn.execute("DELETE FROM views WHERE name = ?", (rec.name,))
    elif isinstance(rec, (CargoRecord, CommandRunRecord)):
        apply_build_record(store, conn, rec)  # index.build: the workspace's or command's rows

