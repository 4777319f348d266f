"""The derived index: SQLite (WAL) with FTS5, kept equal to the replay of HEAD + STAGE.

``open_index(store)`` returns a connection that is current: it compares the pointers
the index last synced to with the pointers on disk and, when they moved, applies the
commits it has not applied yet (or rebuilds, when history was rewound or replaced).
Readers never take the store lock; concurrent catch-ups serialise on SQLite's write
lock and re-check inside it. The index is derived: deleting ``.ctx/index/`` loses
nothing, and a corrupt or outdated file is dropped and rebuilt.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import IndexCorrupt
from ctxstore.index.apply import apply_commits, clear_index, plan_sync
from ctxstore.index.schema import INDEX_SCHEMA_VERSION, SCHEMA
from ctxstore.repo import Store

__all__ = ["INDEX_FILE", "index_dir", "open_index", "sync_index", "rebuild_index",
           "pointer_snapshot"]

INDEX_FILE = "index.sqlite"


def index_dir(store: Store) -> Path:
    """The folder holding the index files (``INDEX_FILE`` and its WAL/SHM companions)."""
    return store.root / "index"


def pointer_snapshot(store: Store) -> dict[str, list[str]]:
    """The heads of HEAD's ref and STAGE as hex lists (what the index syncs to)."""
    main = store.read_head()
    stage = store.read_stage()
    return {"ref": [store.head_ref()], "main": [h.hex() for h in main.heads],
            "stage": [h.hex() for h in stage.heads] if stage else []}


def _connect(path: Path | str) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0,
                           check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    if str(path) != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # derived data: a lost tail is rebuilt
    return conn


def _prepare(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, INDEX_SCHEMA_VERSION):
        raise IndexCorrupt(f"index schema v{version}, this ctx uses v{INDEX_SCHEMA_VERSION}")
    if version == 0:
        conn.executescript(SCHEMA)
        conn.execute(f"PRAGMA user_version = {INDEX_SCHEMA_VERSION}")


def _drop_files(folder: Path) -> None:
    for name in (INDEX_FILE, INDEX_FILE + "-wal", INDEX_FILE + "-shm"):
        try:
            fsio.unlink(folder / name)
        except FileNotFoundError:
            pass


def open_index(store: Store, *, sync: bool = True) -> sqlite3.Connection:
    """Open the index, creating or rebuilding it as needed, and bring it up to date.

    A store whose ``index/`` cannot be written (read-only checkout) gets an in-memory
    index built from the objects, so reads still work.

    Raises:
        CtxError: (E001-E005) if the store itself is damaged on the way.
    """
    folder = index_dir(store)
    path = folder / INDEX_FILE
    conn: sqlite3.Connection | None = None
    for attempt in range(2):
        try:
            fsio.ensure_dir(folder)
            conn = _connect(path)
            _prepare(conn)
            conn.execute("SELECT count(*) FROM meta").fetchone()
            break
        except (sqlite3.DatabaseError, IndexCorrupt, OSError) as exc:
            if conn is not None:
                conn.close()
                conn = None
            readonly = isinstance(exc, OSError) or "readonly" in str(exc) \
                or "unable to open" in str(exc)
            if readonly or attempt == 1:
                conn = _connect(":memory:")
                _prepare(conn)
                break
            _drop_files(folder)  # corrupt or outdated: derived, so start over
    assert conn is not None
    if sync:
        try:
            sync_index(store, conn)
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc):
                raise
            conn.close()
            conn = _connect(":memory:")
            _prepare(conn)
            sync_index(store, conn)
    return conn


def sync_index(store: Store, conn: sqlite3.Connection) -> bool:
    """Apply whatever HEAD and STAGE have that the index has not. Returns True if it
    changed anything."""
    snap = json.dumps(pointer_snapshot(store), sort_keys=True)
    row = conn.execute("SELECT value FROM meta WHERE key = 'synced'").fetchone()
    if row is not None and row[0] == snap:
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read inside the write lock: another process may have caught up meanwhile,
        # and the pointers may have moved again.
        snap = json.dumps(pointer_snapshot(store), sort_keys=True)
        row = conn.execute("SELECT value FROM meta WHERE key = 'synced'").fetchone()
        if row is not None and row[0] == snap:
            conn.execute("COMMIT")
            return False
        old = json.loads(row[0]) if row is not None else None
        new = json.loads(snap)
        heads = [bytes.fromhex(h) for h in new["main"] + new["stage"]]
        plan = plan_sync(store, conn, old, heads)
        if plan.rebuild:
            clear_index(conn)
            plan = plan_sync(store, conn, None, heads)
        apply_commits(store, conn, plan.commits)
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('synced', ?)", (snap,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def rebuild_index(store: Store, *, full: bool = False) -> sqlite3.Connection:
    """Recreate the index from the objects. ``full`` deletes the files first;
    otherwise the tables are cleared and refilled in one transaction."""
    if full:
        _drop_files(index_dir(store))
        conn = open_index(store, sync=False)
    else:
        conn = open_index(store, sync=False)
        conn.execute("BEGIN IMMEDIATE")
        clear_index(conn)
        conn.execute("COMMIT")
    sync_index(store, conn)
    return conn

