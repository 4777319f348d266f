"""Keeping the index current: the pointers it synced to, the catch-up and the resumable build.

``sync_index`` applies whatever HEAD and STAGE have that the index has not (or rebuilds when
history was rewound); ``ensure_built`` builds an index never completed (new, or partial),
one process at a time under ``index/rebuild.lock``. ``is_current`` tells from the pointer
files alone whether a connection is in sync.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.errors import CtxError, IndexNotReady, LockConflict
from ctxstore.ids import ObjectId
from ctxstore.index import codedb
from ctxstore.index.connection import INDEX_FILE, IndexConnection, IndexRepair
from ctxstore.index.meta import clone_id, owner_problem, parse_snapshot

if TYPE_CHECKING:
    from ctxstore.index.rebuild import BuildCounts
    from ctxstore.refs import Pointer
    from ctxstore.repo import Store

# (records applied, records to apply): the index catch-up and rebuild report through it.
Progress = Callable[[int, int], None]

__all__ = ["NEW_INDEX_BUDGET", "pointer_snapshot", "is_current", "sync_index", "ensure_built"]

# Seconds a caller that may not rebuild (a hook) spends building a new index (a fresh clone,
# a deleted index/): a small store's is built in full; a large one is left partial and said so.
NEW_INDEX_BUDGET = 1.0

def pointer_snapshot(store: Store) -> dict[str, list[str]]:
    """The heads of HEAD's ref and STAGE as hex lists (what the index syncs to)."""
    return _snapshot(store.head_ref(), store.read_head(), store.read_stage())


def _snapshot(ref: str, main: Pointer, stage: Pointer | None) -> dict[str, list[str]]:
    return {"ref": [ref], "main": [h.hex() for h in main.heads],
            "stage": [h.hex() for h in stage.heads] if stage else []}


def _snapshot_text(root: Path) -> str | None:
    """``pointer_snapshot`` as ``sync_index`` records it, read from the pointer files alone.

    None when a pointer is missing or unreadable: opening the store reports that.
    """
    from ctxstore import refs

    try:
        ref = refs.read_head_target(root)
        main = refs.read_pointer(root, ref)
        stage = refs.read_pointer(root, "STAGE")
    except (CtxError, OSError):
        return None
    if main is None:
        return None
    return json.dumps(_snapshot(ref, main, stage), sort_keys=True)


def is_current(root: Path, conn: sqlite3.Connection) -> bool:
    """True when the index ``conn`` last synced to exactly the pointers now on disk.

    Reads the three pointer files (HEAD, its ref, STAGE) and the ``meta`` row: no store
    handle and no object model, so a read on an unchanged store skips importing them.

    Args:
        root: The store's ``.ctx`` directory (resolved).
        conn: An index connection.

    Returns:
        False when the pointers moved, or cannot be read (the caller then syncs through
        the store, which reports a damaged pointer).
    """
    snap = _snapshot_text(root)
    if snap is None:
        return False
    row = conn.execute("SELECT value FROM meta WHERE key = 'synced'").fetchone()
    return row is not None and row[0] == snap and _owner_row(conn) == clone_id(root)


def _owner_row(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'clone'").fetchone()
    return None if row is None else str(row[0])


def _note_foreign(conn: sqlite3.Connection, owner: str) -> None:
    """Record on ``conn`` that its rows are dropped because another copy made them, if so.

    The same identity check and notice as the code index's (``index.meta.owner_problem``):
    the caller then starts the file over from this copy's objects.
    """
    why = owner_problem(_owner_row(conn), owner)
    if why is not None and isinstance(conn, IndexConnection) and conn.index_folder is not None:
        conn.repairs.append(IndexRepair(str(conn.index_folder / INDEX_FILE), why, foreign=True))


def _not_ready(folder: Path, conn: sqlite3.Connection | None = None,
               outdated: str | None = None) -> IndexNotReady:
    """Why the index cannot be used without a full build.

    Another process builds it, or it is an older ctx's (``outdated``), partial, or not built.
    """
    from ctxstore.index.rebuild import building_pid, read_build_state

    pid = building_pid(folder)
    if pid is not None:
        return IndexNotReady("building", pid=pid or None)
    if outdated is not None:
        return IndexNotReady("outdated", detail=outdated)
    if conn is not None and read_build_state(conn) is not None:
        return IndexNotReady("partial")
    return IndexNotReady("missing")


def sync_index(store: Store, conn: sqlite3.Connection,
               target: dict[str, list[str]] | None = None,
               progress: Progress | None = None, *, rebuild: bool = True) -> bool:
    """Apply whatever HEAD and STAGE have that the index has not.

    Returns True if it changed anything. ``target`` syncs to those pointers instead (a
    ``pointer_snapshot`` recorded earlier: ``ctx debug verify --index`` replays what a file says it
    reflects). An index that was never completed (new, or partial) is first built, or its
    build resumed (``ensure_built``), unless ``rebuild`` is False.

    Raises:
        CtxError: (E001-E005) if the store is damaged on the way.
        IndexCorrupt: (E007) if SQLite finds the index file damaged.
        IndexNotReady: (E024) if a full build is needed and ``rebuild`` is False, or another
            process's build outlasts the store's lock timeout.
    """
    def current() -> str:
        return json.dumps(target if target is not None else pointer_snapshot(store), sort_keys=True)

    owner = clone_id(store.root)
    built = False
    if _synced_row(conn) is None:  # new or partial: built in slices, resumable
        built = ensure_built(store, conn, target=target, progress=progress,
                             rebuild=rebuild) is not None
    snap = current()
    if _synced_row(conn) == snap and _owner_row(conn) == owner:
        return built
    from ctxstore.index.apply import apply_commits, clear_index, plan_sync  # only to catch up

    codedb.begin(conn, "main")  # `ctx index` may be writing the code tables meanwhile
    try:
        # Re-read inside the write lock: another process may have caught up meanwhile,
        # and the pointers may have moved again.
        snap = current()
        row = conn.execute("SELECT value FROM meta WHERE key = 'synced'").fetchone()
        ours = _owner_row(conn) == owner
        if row is None:  # another process began a rebuild meanwhile: resume or wait for it
            conn.execute("ROLLBACK")
            return sync_index(store, conn, target, progress, rebuild=rebuild)
        if row[0] == snap and ours:
            conn.execute("COMMIT")
            return built
        # An index built for another copy of the store (clone_id) is not trusted: start clean.
        if not ours:
            _note_foreign(conn, owner or "")
        old = parse_snapshot(row[0]) if row is not None and ours else None
        new = json.loads(snap)
        # STAGE's canonical commit (a fold's) is no part of the state: after a `git checkout`
        # it is another branch's (``replay.state_heads``).
        stage = store.work_heads([ObjectId(bytes.fromhex(h)) for h in new["stage"]])
        heads = [bytes.fromhex(h) for h in new["main"]] + [bytes(h) for h in stage]
        if old is None:
            clear_index(conn)  # no trustworthy record of what was applied: start clean
        plan = plan_sync(store, conn, old, heads)
        if plan.rebuild:
            clear_index(conn)
            plan = plan_sync(store, conn, None, heads)
        apply_commits(store, conn, plan.commits, progress)
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('synced', ?)", (snap,))
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('clone', ?)", (owner or "",))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the original error matters; the transaction dies with the connection
        raise
    return True


def _synced_row(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'synced'").fetchone()
    return None if row is None else str(row[0])


def _building(folder: Path) -> bool:
    from ctxstore.index.rebuild import building_pid

    return building_pid(folder) is not None


@contextlib.contextmanager
def _rebuild_lock(store: Store, folder: Path | None) -> Iterator[None]:
    """``index.rebuild.rebuild_lock`` for the store's lock timeout; a timeout is ``IndexNotReady``."""
    from ctxstore.index.rebuild import rebuild_lock

    try:
        with rebuild_lock(folder, timeout=store.lock_timeout):
            yield
    except LockConflict as exc:
        raise IndexNotReady("building", pid=exc.pid,
                            detail=f"gave up after {exc.waited:.1f}s") from exc


def ensure_built(store: Store, conn: sqlite3.Connection, *,
                 target: dict[str, list[str]] | None = None, progress: Progress | None = None,
                 rebuild: bool = True, restart: bool = False) -> BuildCounts | None:
    """Build the index if it was never completed: a new one, or the rest of a partial one.

    Under ``index/rebuild.lock``: a second process waits for the first (up to the store's lock
    timeout) and then finds the index complete, or goes on from where a killed one stopped.

    Args:
        store: The store.
        conn: The index connection (no transaction open).
        target: The pointers a new build applies (default: the pointers now).
        progress: Called with (records applied, records to apply).
        rebuild: False: raise ``IndexNotReady`` instead of building a partial index or
            waiting for another process's build; a new index is built for at most
            ``NEW_INDEX_BUDGET`` seconds (a small store's, in full), then left partial.
        restart: Start a new build even if the index is complete or partial.

    Returns:
        What the build did, or None when the index was complete (and not ``restart``).

    Raises:
        IndexNotReady: (E024) as said under ``rebuild``; or another process builds for longer
            than the store's lock timeout.
        CtxError: (E001-E005) if the store is damaged on the way.
    """
    from ctxstore.index.rebuild import build_index, read_build_state, start_build

    folder: Path | None = getattr(conn, "index_folder", None)
    budget = None
    if not rebuild and folder is not None:
        if read_build_state(conn) is not None or _building(folder):
            raise _not_ready(folder, conn)
        budget = NEW_INDEX_BUDGET  # a new index: built here only if that is quick
    with _rebuild_lock(store, folder):
        if not restart and _synced_row(conn) is not None:
            return None  # another process completed it while this one waited
        owner = clone_id(store.root) or ""
        if not restart and read_build_state(conn) is not None:
            _note_foreign(conn, owner)
        if restart or read_build_state(conn) is None or _owner_row(conn) != owner:
            # A partial index of another copy of the store is not resumed: its rows are not trusted.
            start_build(conn, target if target is not None else pointer_snapshot(store), owner)
        counts = build_index(store, conn, progress, budget=budget)
    if counts is None:  # out of budget: partial, and said so
        assert folder is not None
        raise _not_ready(folder, conn)
    return counts
