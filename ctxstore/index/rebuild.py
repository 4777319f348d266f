"""The resumable full build of the index: ``ctx rebuild``, a new index, an outdated one.

A full build applies every commit reachable from a *target* (the pointers when it started)
in a fixed order (``apply.plan_sync`` from nothing: by stamp, each commit's batches, each
batch's records in order) and commits to SQLite every ``BUILD_SLICE_RECORDS`` records. The
``meta`` row ``build_state`` says the index is partial and holds what a later run needs to go
on: the target, the batch being applied and how many of its records are in, and how many
records every run applied so far. Whole batches and commits are in ``applied_batches`` and
``applied`` as usual. A run killed part way (Ctrl-C, ``kill -9``, a machine that slept)
leaves the last slice's state; the next run recomputes the same order and skips what is in,
so the finished index is the one a clean build gives, rowids included. The last slice
writes ``synced`` (the target) and deletes ``build_state`` in one transaction: a reader never
sees a partial index as complete (no ``synced`` row until then).

One process builds at a time: it holds ``index/rebuild.lock`` (a flock: it dies with the
process). Readers that must not wait (hooks) probe it (``building_pid``). This module must not
print; the apply layer is imported only when a build runs.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctxstore import fsio
from ctxstore.errors import InvalidInput
from ctxstore.ids import parse_object_id
from ctxstore.index.meta import BUILD_STATE, clone_id, parse_snapshot

if TYPE_CHECKING:
    from ctxstore.repo import Store

__all__ = ["BUILD_SLICE_RECORDS", "BUILD_STATE", "REBUILD_LOCK", "BuildCounts", "BuildState",
           "build_index", "building_pid", "is_building", "parse_build_state", "read_build_state",
           "rebuild_lock", "start_build"]

REBUILD_LOCK = "rebuild.lock"  # beside index.sqlite, held while a build runs
# Records applied between two commits of a build: what a kill can cost (about 3 s of work at
# 15 ms a file), against a commit's cost (WAL, synchronous=NORMAL: no fsync).
BUILD_SLICE_RECORDS = 200
# (BUILD_STATE, the meta key present while the index is partial, is the package's: every open
# checks it without loading this module.)

# Folders whose rebuild lock this process holds (a build nested in a repair takes it once).
_held: dict[str, int] = {}


class BuildState(NamedTuple):
    """The ``build_state`` row of a partial index.

    Attributes:
        target: The pointer snapshot the build applies (``index.pointer_snapshot``).
        batch: The change batch being applied when the last slice committed, or None.
        offset: How many of that batch's records are applied.
        records: Records applied by every run of this build so far.
    """

    target: dict[str, list[str]]
    batch: bytes | None
    offset: int
    records: int

    def text(self) -> str:
        """The row's value: JSON, keys sorted."""
        return json.dumps({"target": self.target, "batch": self.batch.hex() if self.batch else None,
                           "offset": self.offset, "records": self.records}, sort_keys=True)


class BuildCounts(NamedTuple):
    """What a run of ``build_index`` did: records applied now, and records an earlier run had."""

    applied: int
    resumed: int


def parse_build_state(text: object) -> BuildState | None:
    """A ``build_state`` value as ``BuildState.text`` wrote it, or None if it is not one.

    Args:
        text: The value read from ``meta`` (anything: the file is untrusted).

    Returns:
        The state, or None.
    """
    if not isinstance(text, str) or len(text) > 1 << 20:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or set(value) != {"target", "batch", "offset", "records"}:
        return None
    target = parse_snapshot(json.dumps(value["target"]))
    batch, offset, records = value["batch"], value["offset"], value["records"]
    if target is None or not (batch is None or isinstance(batch, str)) \
            or not _count(offset) or not _count(records):
        return None
    try:
        return BuildState(target, parse_object_id(batch) if batch is not None else None,
                          offset, records)
    except InvalidInput:
        return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_build_state(conn: sqlite3.Connection) -> BuildState | None:
    """The state of a partial index, or None when no build is under way in it.

    Args:
        conn: An index connection.

    Returns:
        The parsed row (``inspect_index`` refuses an index whose row does not parse).
    """
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (BUILD_STATE,)).fetchone()
    return None if row is None else parse_build_state(row[0])


def building_pid(folder: Path) -> int | None:
    """The process building the index in ``folder`` (0 when its pid is unknown), or None.

    Args:
        folder: The index folder (``index_dir``).

    Returns:
        None when no process holds ``rebuild.lock``.

    Raises:
        UnsafePath: (E020) if the lock file is a symlink or not a regular file.
    """
    path = folder / REBUILD_LOCK
    if str(folder) in _held or not fsio.lock_is_held(path):
        return None
    return fsio.read_lock_pid(path) or 0


def is_building(folder: Path) -> bool:
    """True while this process holds the rebuild lock of ``folder`` (``rebuild_lock``)."""
    return str(folder) in _held


@contextmanager
def rebuild_lock(folder: Path | None, *, timeout: float) -> Iterator[None]:
    """Hold ``folder/rebuild.lock`` for the block; again in the same process costs nothing.

    Args:
        folder: The index folder; None for an index in memory (nothing to lock).
        timeout: Seconds to wait for another process's build.

    Raises:
        LockConflict: (E006) if another process still builds after ``timeout``.
        UnsafePath: (E020) if the lock file is a symlink or not a regular file.
    """
    key = str(folder)
    if folder is None or key in _held:
        if folder is not None:
            _held[key] += 1
        try:
            yield
        finally:
            if folder is not None:
                _held[key] -= 1
        return
    with fsio.hold_lock(folder / REBUILD_LOCK, timeout=timeout):
        _held[key] = 1
        try:
            yield
        finally:
            del _held[key]


def start_build(conn: sqlite3.Connection, target: dict[str, list[str]], owner: str) -> None:
    """Empty the index and mark it partial, building towards ``target`` (one transaction).

    Args:
        conn: The index connection (no transaction open; the caller holds the rebuild lock).
        target: The pointer snapshot to build.
        owner: ``clone_id`` of the store: a partial index of another copy is never resumed.
    """
    from ctxstore.index.apply import clear_index
    from ctxstore.index.codedb import begin

    begin(conn, "main")  # the code tables (another file) stay free for `ctx index`
    try:
        clear_index(conn)
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                     (BUILD_STATE, BuildState(target, None, 0, 0).text()))
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('clone', ?)", (owner,))
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the original error matters; the transaction dies with the connection


class _OutOfTime(Exception):
    """A build's time budget ran out at a slice boundary (its work so far is committed)."""


def build_index(store: Store, conn: sqlite3.Connection,
                progress: Callable[[int, int], None] | None = None, *,
                budget: float | None = None) -> BuildCounts | None:
    """Apply what the partial index lacks of its target, in slices, then mark it complete.

    Args:
        store: The store (commits, batches and the objects records name are read).
        conn: The index connection, marked partial by ``start_build`` (no transaction open;
            the caller holds the rebuild lock).
        progress: Called with (records applied, records to apply) by this run.
        budget: Seconds this run may take: past them it stops after the slice it is in,
            leaving the index partial (None: no limit).

    Returns:
        The records this run applied, and those it found applied by an earlier run; None
        when the budget ran out first.

    Raises:
        CtxError: (E001-E005) if the store is damaged on the way.
        IndexCorrupt: (E007) if SQLite finds the index file damaged.
    """
    state = read_build_state(conn)
    assert state is not None, "build_index needs a partial index (start_build)"
    deadline = None if budget is None else time.monotonic() + budget
    try:
        return _Build(store, conn, state, progress, deadline).run()
    except _OutOfTime:
        return None
    except BaseException:
        _rollback(conn)  # the slices committed so far stay: the next run goes on from them
        raise


class _Build:
    """One run of a build: the plan, what is already in, and the slice being filled."""

    def __init__(self, store: Store, conn: sqlite3.Connection, state: BuildState,
                 progress: Callable[[int, int], None] | None, deadline: float | None) -> None:
        from ctxstore.index.apply import plan_sync
        from ctxstore.index.heads import FoldReads

        self.store, self.conn, self.state, self.progress = store, conn, state, progress
        self.deadline = deadline
        self.plan = plan_sync(store, conn, None, _target_heads(store, state.target)).commits
        self.applied = {bytes(r[0]) for r in conn.execute("SELECT oid FROM applied")}
        self.batches = {bytes(r[0]) for r in conn.execute("SELECT oid FROM applied_batches")}
        self.reads = FoldReads(store)  # shared by every batch of the run
        self.in_slice = self.done = self.total = 0

    def run(self) -> BuildCounts:
        from ctxstore.index.codedb import begin
        from ctxstore.index.heads import record_commit_graph

        if self.progress is not None:
            self.total = self._remaining()
        begin(self.conn, "main")
        record_commit_graph(self.conn, self.plan)
        for oid, commit in self.plan:
            if oid in self.applied:
                continue
            for bid in commit.change_batches:
                if bid not in self.batches:
                    self._apply_batch(oid, bid, commit)
            self.conn.execute("INSERT OR IGNORE INTO applied(oid, kind) VALUES (?, ?)",
                              (oid, type(commit).TYPE))
        self._finish()
        return BuildCounts(self.done, self.state.records)

    def _records(self, bid: bytes) -> list[object]:
        from ctxstore.ids import ObjectId
        from ctxstore.replay import read_batch_unless_purged

        batch = read_batch_unless_purged(self.store, ObjectId(bid))  # None: removed by a purge
        return list(batch.records) if batch is not None else []

    def _remaining(self) -> int:
        """Records still to apply (the batches are read twice: once here to count)."""
        seen = set(self.batches)
        total = 0
        for oid, commit in self.plan:
            for bid in commit.change_batches if oid not in self.applied else ():
                if bid not in seen:
                    seen.add(bid)
                    total += len(self._records(bid)) - self._offset(bid)
        return total

    def _offset(self, bid: bytes) -> int:
        return self.state.offset if bid == self.state.batch else 0

    def _apply_batch(self, oid: bytes, bid: bytes, commit: object) -> None:
        from ctxstore.index.apply import apply_records
        from ctxstore.model import Commit

        # UpdatedIn: the node versions a canonical commit carries, as apply_commits records them
        canonical = commit.timestamp_unix * 1000 if isinstance(commit, Commit) else None

        records = self._records(bid)
        pos = self._offset(bid)
        while pos < len(records):
            step = records[pos:pos + BUILD_SLICE_RECORDS - self.in_slice]
            apply_records(self.store, self.conn, step, bid, commit=oid,  # type: ignore[arg-type]
                          reads=self.reads, canonical=canonical)
            pos += len(step)
            self.in_slice += len(step)
            self.done += len(step)
            if self.in_slice >= BUILD_SLICE_RECORDS:
                self._commit_slice(bid, pos)
            if self.progress is not None:
                self.progress(self.done, self.total)
        self.conn.execute("INSERT INTO applied_batches(oid) VALUES (?)", (bid,))
        self.batches.add(bid)

    def _commit_slice(self, bid: bytes, pos: int) -> None:
        """Make the slice durable with the cursor that says where it ends, and open the next."""
        state = self.state._replace(batch=bid, offset=pos, records=self.state.records + self.done)
        self.conn.execute("UPDATE meta SET value = ? WHERE key = ?", (state.text(), BUILD_STATE))
        self.conn.execute("COMMIT")
        self.in_slice = 0
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _OutOfTime
        from ctxstore.index.codedb import begin

        begin(self.conn, "main")

    def _finish(self) -> None:
        """The last slice: the target becomes ``synced`` and the partial mark goes, together."""
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('synced', ?)",
                          (json.dumps(self.state.target, sort_keys=True),))
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('clone', ?)",
                          (clone_id(self.store.root) or "",))
        self.conn.execute("DELETE FROM meta WHERE key = ?", (BUILD_STATE,))
        self.conn.execute("COMMIT")
        if self.progress is not None and self.done < self.total:
            self.progress(self.total, self.total)


def _target_heads(store: Store, target: dict[str, list[str]]) -> list[bytes]:
    """The commits a snapshot's state is the replay of: HEAD's heads and STAGE's work heads.

    STAGE's canonical commit (a fold's) is no part of the state (``replay.state_heads``).
    """
    from ctxstore.ids import ObjectId

    stage = store.work_heads([ObjectId(bytes.fromhex(h)) for h in target["stage"]])
    return [bytes.fromhex(h) for h in target["main"]] + [bytes(h) for h in stage]

