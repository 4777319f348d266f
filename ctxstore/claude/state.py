"""Per-clone hook state in ``.ctx/local/state.sqlite`` (never the derived index).

It holds what the hooks pass to each other and what must not happen twice:
- ``pending``: results waiting for the next prompt of a session (recall, status,
  expand, notices), delivered exactly once: taking them deletes them in the same
  write transaction, so two concurrent prompt-submits cannot both deliver one;
- ``executed``: keys of the commands already run, so a repeated Stop does nothing;
- ``queue``: commands deferred because another process held the writer lock;
- ``kv``: small values (the current task, compaction marks, the cached default view);
- ``access``: how often each node was retrieved by ``<ctx:recall>`` or ``<ctx:expand>``
  and when last (spec 003's access tracking, an input of the CLAUDE.md ranking).

This file cannot be rebuilt from the objects, so its schema has ordered migrations
recorded in ``schema_version`` (spec 001 §15). A damaged file is set aside and
recreated: losing it loses pending results, and ``executed`` is backed by the
``hook_key`` stored with every node a command creates (RELIABILITY.md CO-11, TR-12).
Session ids are only ever column values, never file names (HK-05).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["STATE_FILE", "EXECUTED_KEEP_DAYS", "HookState", "key_of", "open_state", "state_path"]

STATE_FILE = "state.sqlite"
EXECUTED_KEEP_DAYS = 90
_MIGRATIONS: list[tuple[int, str]] = [
    (1, """
        CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
                              kind TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL);
        CREATE INDEX pending_session ON pending(session);
        CREATE TABLE executed (key TEXT PRIMARY KEY, session TEXT NOT NULL, at INTEGER NOT NULL);
        CREATE TABLE queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,
                            session TEXT NOT NULL, command TEXT NOT NULL,
                            created_at INTEGER NOT NULL);
        CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """),
    (2, """
        CREATE TABLE access (node_id TEXT PRIMARY KEY, count INTEGER NOT NULL,
                             last_at INTEGER NOT NULL) WITHOUT ROWID;
    """),
]


def state_path(store_root: Path) -> Path:
    """Where the hook state of the store at ``store_root`` lives."""
    return store_root / "local" / STATE_FILE


def _now() -> int:
    return int(time.time())


def key_of(*parts: str) -> str:
    """A 32-hex-digit key for ``parts``: what the state and node metadata remember a
    command or a report by. BLAKE2b is built in; ``hashlib`` would load OpenSSL first
    (~3 ms on every hook that needs a key)."""
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b
    return blake2b("\0".join(parts).encode("utf-8", "replace"), digest_size=16).hexdigest()


class HookState:
    """An open state database (use as a context manager, or call ``close``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> HookState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so reads inside it are current)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- pending results ------------------------------------------------------------------
    def add_pending(self, session: str, kind: str, value: str) -> None:
        """Queue a result for the next prompt of ``session``."""
        with self.write() as conn:
            conn.execute("INSERT INTO pending(session, kind, value, created_at) VALUES (?, ?, ?, ?)",
                         (session, kind, value, _now()))

    def has_pending(self, session: str) -> bool:
        """True if results wait for ``session`` (a read; takes no write lock)."""
        row = self.conn.execute("SELECT 1 FROM pending WHERE session = ? LIMIT 1", (session,))
        return row.fetchone() is not None

    def take_pending(self, session: str) -> list[tuple[str, str]]:
        """Remove and return ``(kind, value)`` of every result waiting for ``session``, oldest
        first. Exactly once: the read and the delete are one transaction."""
        if not self.has_pending(session):
            return []
        with self.write() as conn:
            rows = conn.execute("SELECT seq, kind, value FROM pending WHERE session = ? ORDER BY seq",
                                (session,)).fetchall()
            conn.execute("DELETE FROM pending WHERE session = ?", (session,))
        return [(kind, value) for _, kind, value in rows]

    # -- executed commands ----------------------------------------------------------------
    def unexecuted(self, keys: list[str]) -> set[str]:
        """The keys among ``keys`` that were neither executed nor queued yet."""
        if not keys:
            return set()
        marks = ",".join("?" * len(keys))
        done = {r[0] for r in self.conn.execute(
            f"SELECT key FROM executed WHERE key IN ({marks}) UNION "
            f"SELECT key FROM queue WHERE key IN ({marks})", [*keys, *keys])}
        return set(keys) - done

    def mark_executed(self, key: str, session: str) -> None:
        """Record that the command ``key`` ran (and drop it from the queue)."""
        with self.write() as conn:
            conn.execute("INSERT OR IGNORE INTO executed(key, session, at) VALUES (?, ?, ?)",
                         (key, session, _now()))
            conn.execute("DELETE FROM queue WHERE key = ?", (key,))

    def prune_executed(self) -> None:
        """Forget keys older than ``EXECUTED_KEEP_DAYS`` (their turns are long gone)."""
        with self.write() as conn:
            conn.execute("DELETE FROM executed WHERE at < ?", (_now() - EXECUTED_KEEP_DAYS * 86400,))

    # -- deferred commands ----------------------------------------------------------------
    def enqueue(self, key: str, session: str, command: dict[str, Any]) -> None:
        """Defer a command to the next hook (a no-op if it is already queued)."""
        with self.write() as conn:
            conn.execute("INSERT OR IGNORE INTO queue(key, session, command, created_at) "
                         "VALUES (?, ?, ?, ?)", (key, session, json.dumps(command), _now()))

    def queued(self) -> list[tuple[str, dict[str, Any]]]:
        """Deferred commands as ``(session, command)``, oldest first."""
        return [(session, json.loads(command)) for session, command
                in self.conn.execute("SELECT session, command FROM queue ORDER BY seq")]

    def has_queued(self) -> bool:
        """True if any command waits for the lock."""
        return self.conn.execute("SELECT 1 FROM queue LIMIT 1").fetchone() is not None

    # -- access counts --------------------------------------------------------------------
    def record_access(self, node_ids: list[str]) -> None:
        """Count one retrieval of each node (duplicates in ``node_ids`` count once)."""
        now = _now()
        with self.write() as conn:
            conn.executemany("INSERT INTO access(node_id, count, last_at) VALUES (?, 1, ?) "
                             "ON CONFLICT(node_id) DO UPDATE SET count = count + 1, last_at = ?",
                             [(node_id, now, now) for node_id in dict.fromkeys(node_ids)])

    def access_counts(self) -> dict[str, int]:
        """Retrievals per node id."""
        return dict(self.conn.execute("SELECT node_id, count FROM access"))

    # -- small values ---------------------------------------------------------------------
    def get(self, key: str) -> str | None:
        """A value of the ``kv`` table, or None."""
        row = self.conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: str | None) -> None:
        """Set (or, with None, delete) a ``kv`` value."""
        with self.write() as conn:
            if value is None:
                conn.execute("DELETE FROM kv WHERE key = ?", (key,))
            else:
                conn.execute("INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)", (key, value))


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version "
                 "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    current = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
    for version, sql in _MIGRATIONS:
        if version <= current:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check inside the lock: another hook may have migrated meanwhile.
            if conn.execute("SELECT 1 FROM schema_version WHERE version = ?", (version,)).fetchone():
                conn.execute("ROLLBACK")
                continue
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_version(version, applied_at) VALUES (?, ?)",
                         (version, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _discard(path: Path) -> None:
    from ctxstore import fsio

    for suffix in ("", "-wal", "-shm"):
        try:
            fsio.unlink(str(path) + suffix)
        except FileNotFoundError:
            pass


def open_state(store_root: Path, *, create: bool) -> HookState | None:
    """Open the state of the store at ``store_root``; None if it does not exist and
    ``create`` is false (so a read-only hook creates nothing). A damaged file is
    replaced by a new, empty one.

    Raises:
        OSError: if ``local/`` cannot be created.
        sqlite3.OperationalError: if the file cannot be opened or stays locked.
    """
    path = state_path(store_root)
    if not create and not path.is_file():
        return None
    if not path.parent.is_dir():
        from ctxstore import fsio  # imported here: it costs a prompt-submit ~5 ms

        fsio.ensure_dir(path.parent)
    for attempt in range(2):
        conn = _connect(path)
        try:
            _migrate(conn)
            return HookState(conn)
        except sqlite3.OperationalError:  # locked, read-only, ...: not damage
            conn.close()
            raise
        except sqlite3.DatabaseError:
            conn.close()
            if attempt:
                raise
            _discard(path)  # derived only in part; see the module docstring
    raise AssertionError("unreachable")  # pragma: no cover
