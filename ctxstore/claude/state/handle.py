"""An open hook state: ``HookState``, every read and write of its tables.

Pending results taken exactly once, commands claimed and recorded as run, the queue of
commands deferred under a held lock, small ``kv`` values per session, retrieval counts. Every
method turns SQLite's damage errors into ``StateDamaged``; opening, checking and repairing the
file is ``files``'s job.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from ctxstore.claude.state.schema import (
    CLAIM_STALE_SECONDS,
    EXECUTED_KEEP_DAYS,
    PROMPTS_PREFIX,
    SESSION_PREFIXES,
)
from ctxstore.sqlite import is_damage, is_missing_object

__all__ = ["HookState", "StateDamaged", "key_of"]

_F = TypeVar("_F", bound=Callable[..., Any])


class StateDamaged(Exception):
    """The state database is damaged.

    Not a database, malformed, a table missing, or something other than a regular file in its place.

    Internal to the hooks, which set the file aside and run again (``repair_state``).

    Attributes:
        reason: What is wrong, for the notice.
        ident: ``(st_dev, st_ino)`` of the damaged file, or None (so a repair never moves
            aside a fresh file another hook created meanwhile).
    """

    def __init__(self, reason: str, ident: tuple[int, int] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.ident = ident


def _now() -> int:
    return int(time.time())


def key_of(*parts: str) -> str:
    """A 32-hex-digit key for ``parts``: what the state and node metadata remember a command or a report by.

    BLAKE2b is built in; ``hashlib`` would load OpenSSL first (~3 ms on every hook that needs a
    key).
    """
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b
    return blake2b("\0".join(parts).encode("utf-8", "replace"), digest_size=16).hexdigest()


def _prompt_count(value: str | None) -> int:
    """The count of a ``prompts:`` value (``COUNT<TAB>TIME``); 0 for none or garbage."""
    head = (value or "").partition("\t")[0]
    return int(head) if head.isdigit() and len(head) < 19 else 0


def _is_damage(exc: sqlite3.Error) -> bool:
    """True for SQLite errors that mean a damaged file, not a busy or failing disk.

    Our tables are created by the migrations: one missing means a damaged file too.
    """
    return is_damage(exc) or is_missing_object(exc)


def _guarded(method: _F) -> _F:
    """Turn a damage error of SQLite inside ``method`` into ``StateDamaged``."""

    @functools.wraps(method)
    def run(self: HookState, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            if _is_damage(exc):
                raise StateDamaged(str(exc), self.ident) from exc
            raise

    return run  # type: ignore[return-value]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except OSError:
        return False
    return True


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``conn``, taken at once (``BEGIN IMMEDIATE``)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # a damaged file may refuse even this; the error above wins
            pass
        raise
    conn.execute("COMMIT")


class HookState:
    """An open state database (use as a context manager, or call ``close``).

    Every method raises ``StateDamaged`` when SQLite finds the file damaged.
    """

    def __init__(self, conn: sqlite3.Connection, ident: tuple[int, int] | None = None) -> None:
        self.conn = conn
        self.ident = ident

    def __enter__(self) -> HookState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (taken at once, so reads inside it are current)."""
        return _transaction(self.conn)

    # -- pending results ------------------------------------------------------------------
    @_guarded
    def add_pending(self, session: str, kind: str, value: str) -> None:
        """Queue a result for the next prompt of ``session``."""
        with self.write() as conn:
            conn.execute("INSERT INTO pending(session, kind, value, created_at) VALUES (?, ?, ?, ?)",
                         (session, kind, value, _now()))

    @_guarded
    def has_pending(self, session: str) -> bool:
        """True if results wait for ``session`` (a read; takes no write lock)."""
        row = self.conn.execute("SELECT 1 FROM pending WHERE session = ? LIMIT 1", (session,))
        return row.fetchone() is not None

    @_guarded
    def peek_pending(self, session: str) -> list[tuple[str, str]]:
        """``(kind, value)`` of every result waiting for ``session``, oldest first, left waiting."""
        return [(kind, value) for kind, value in self.conn.execute(
            "SELECT kind, value FROM pending WHERE session = ? ORDER BY seq", (session,))]

    @_guarded
    def take_pending(self, session: str) -> list[tuple[str, str]]:
        """Remove and return ``(kind, value)`` of every result waiting for ``session``, oldest first.

        Exactly once: the read and the delete are one transaction.
        """
        if not self.has_pending(session):
            return []
        with self.write() as conn:
            rows = conn.execute("SELECT seq, kind, value FROM pending WHERE session = ? ORDER BY seq",
                                (session,)).fetchall()
            conn.execute("DELETE FROM pending WHERE session = ?", (session,))
        return [(kind, value) for _, kind, value in rows]

    # -- executed commands ----------------------------------------------------------------
    @_guarded
    def unexecuted(self, keys: list[str]) -> set[str]:
        """The keys among ``keys`` that were neither executed nor queued yet.

        A read: use ``claim`` to decide who runs a command.
        """
        if not keys:
            return set()
        done: set[str] = set()
        for start in range(0, len(keys), 400):  # SQLite's limit on bound parameters
            part = keys[start:start + 400]
            marks = ",".join("?" * len(part))
            done.update(r[0] for r in self.conn.execute(
                f"SELECT key FROM executed WHERE key IN ({marks}) UNION "
                f"SELECT key FROM queue WHERE key IN ({marks})", [*part, *part]))
        return set(keys) - done

    @_guarded
    def mark_new(self, keys: list[str], session: str) -> set[str]:
        """Record ``keys`` as executed.

        Return those that were not recorded before (one transaction, so of two concurrent callers
        exactly one gets each key).
        """
        fresh: set[str] = set()
        with self.write() as conn:
            for key in dict.fromkeys(keys):
                cur = conn.execute("INSERT OR IGNORE INTO executed(key, session, at) VALUES (?, ?, ?)",
                                   (key, session, _now()))
                if cur.rowcount:
                    fresh.add(key)
        return fresh

    @_guarded
    def claim(self, key: str, session: str, *, aliases: Iterable[str] = (),
              queued: bool = False) -> bool:
        """Claim the command ``key`` for this process before running it.

        False if it must not run here: it (or one of its ``aliases``) was executed, another live
        process claimed it, or (unless ``queued``: the caller runs it from the queue) it waits in
        the queue. A claim whose process died, or older than ``CLAIM_STALE_SECONDS``, is taken over:
        a hook killed before it finished loses no command.
        """
        now = _now()
        names = [key, *aliases]
        marks = ",".join("?" * len(names))
        with self.write() as conn:
            if conn.execute(f"SELECT 1 FROM executed WHERE key IN ({marks}) LIMIT 1",
                            names).fetchone():
                return False
            if not queued and conn.execute("SELECT 1 FROM queue WHERE key = ?", (key,)).fetchone():
                return False
            row = conn.execute("SELECT pid, at FROM claims WHERE key = ?", (key,)).fetchone()
            if row is not None and now - row[1] < CLAIM_STALE_SECONDS and _pid_alive(row[0]):
                return False
            conn.execute("INSERT OR REPLACE INTO claims(key, session, pid, at) VALUES (?, ?, ?, ?)",
                         (key, session, os.getpid(), now))
        return True

    @_guarded
    def release(self, key: str) -> None:
        """Give up this process's claim on ``key`` without recording it as executed."""
        with self.write() as conn:
            conn.execute("DELETE FROM claims WHERE key = ? AND pid = ?", (key, os.getpid()))

    @_guarded
    def mark_executed(self, key: str, session: str, aliases: Iterable[str] = (), *,
                      pending: tuple[str, str, str] | None = None,
                      reply: tuple[str, int] | None = None) -> None:
        """Record that the command ``key`` ran (under every alias) and queue its result.

        The result waits for the next prompt (``pending`` = session, kind, text); the claim and the
        queue entry are dropped. A command run from a reply the transcript did not hold yet also
        records ``reply`` (its reply key, and when the reply was read, in milliseconds; the first
        record of a key stays). One transaction, so a result is never delivered without the record.
        """
        now = _now()
        with self.write() as conn:
            if pending is not None:
                conn.execute("INSERT INTO pending(session, kind, value, created_at) "
                             "VALUES (?, ?, ?, ?)", (*pending, now))
            if reply is not None:
                conn.execute("INSERT OR IGNORE INTO replies(key, session, read_ms) VALUES (?, ?, ?)",
                             (reply[0], session, reply[1]))
            conn.executemany("INSERT OR IGNORE INTO executed(key, session, at) VALUES (?, ?, ?)",
                             [(name, session, now) for name in dict.fromkeys([key, *aliases])])
            conn.execute("DELETE FROM queue WHERE key = ?", (key,))
            conn.execute("DELETE FROM claims WHERE key = ?", (key,))

    @_guarded
    def replies_read(self, keys: list[str]) -> dict[str, int]:
        """When each of ``keys`` was read, for those run from a reply not yet in the transcript."""
        found: dict[str, int] = {}
        for start in range(0, len(keys), 400):  # SQLite's limit on bound parameters
            part = keys[start:start + 400]
            marks = ",".join("?" * len(part))
            found.update(self.conn.execute(
                f"SELECT key, read_ms FROM replies WHERE key IN ({marks})", part))
        return found

    @_guarded
    def prune(self) -> None:
        """Forget what can no longer matter, so the file does not grow with every session.

        Executed keys and replies older than ``EXECUTED_KEEP_DAYS`` (their turns are long gone), claims
        whose process is long gone, and the sessions idle that long: their ``prompts:`` row
        and their values under ``SESSION_PREFIXES`` (a value whose session has no such row
        was written by an older ctx, which kept no time: it goes too). One transaction.
        """
        old = _now() - EXECUTED_KEEP_DAYS * 86400
        with self.write() as conn:
            conn.execute("DELETE FROM executed WHERE at < ?", (old,))
            conn.execute("DELETE FROM replies WHERE read_ms < ?", (old * 1000,))
            conn.execute("DELETE FROM claims WHERE at < ?", (_now() - 86400,))
            live: set[str] = set()
            for key, value in _keys_under(conn, PROMPTS_PREFIX):
                stamp = value.partition("\t")[2]
                if stamp.isdigit() and int(stamp) >= old:
                    live.add(key[len(PROMPTS_PREFIX):])
                else:
                    conn.execute("DELETE FROM kv WHERE key = ?", (key,))
            for prefix in SESSION_PREFIXES:
                for key, _ in _keys_under(conn, prefix):
                    if key[len(prefix):] not in live:
                        conn.execute("DELETE FROM kv WHERE key = ?", (key,))

    # -- deferred commands ----------------------------------------------------------------
    @_guarded
    def enqueue(self, key: str, session: str, command: dict[str, Any]) -> None:
        """Defer a command to the next hook, dropping this process's claim on it.

        A no-op if it is already queued or was executed meanwhile; one transaction.
        """
        names = [key, *command.get("aliases", ())]
        marks = ",".join("?" * len(names))
        with self.write() as conn:
            conn.execute("DELETE FROM claims WHERE key = ? AND pid = ?", (key, os.getpid()))
            if conn.execute(f"SELECT 1 FROM executed WHERE key IN ({marks}) LIMIT 1",
                            names).fetchone():
                return
            conn.execute("INSERT OR IGNORE INTO queue(key, session, command, created_at) "
                         "VALUES (?, ?, ?, ?)", (key, session, json.dumps(command), _now()))

    @_guarded
    def queued(self) -> list[tuple[str, dict[str, Any]]]:
        """Deferred commands as ``(session, command)``, oldest first.

        An entry that does not decode is skipped: it cannot be run.
        """
        out = []
        for session, text in self.conn.execute("SELECT session, command FROM queue ORDER BY seq"):
            try:
                command = json.loads(text)
            except (ValueError, RecursionError):
                continue
            if isinstance(command, dict) and isinstance(command.get("key"), str):
                out.append((session, command))
        return out

    @_guarded
    def has_queued(self) -> bool:
        """True if any command waits for the lock."""
        return self.conn.execute("SELECT 1 FROM queue LIMIT 1").fetchone() is not None

    # -- access counts --------------------------------------------------------------------
    @_guarded
    def record_access(self, node_ids: list[str]) -> None:
        """Count one retrieval of each node (duplicates in ``node_ids`` count once)."""
        now = _now()
        with self.write() as conn:
            conn.executemany("INSERT INTO access(node_id, count, last_at) VALUES (?, 1, ?) "
                             "ON CONFLICT(node_id) DO UPDATE SET count = count + 1, last_at = ?",
                             [(node_id, now, now) for node_id in dict.fromkeys(node_ids)])

    @_guarded
    def access_counts(self) -> dict[str, int]:
        """Retrievals per node id."""
        return dict(self.conn.execute("SELECT node_id, count FROM access"))

    # -- turns ------------------------------------------------------------------------------
    @_guarded
    def count_prompt(self, session: str) -> None:
        """Record that a prompt of ``session`` was submitted (the turn count moves on).

        A Stop with no other turn identity (no ``prompt_id``, no transcript) tells turns
        apart by this count (docs/hooks.md "Turn identity").
        """
        with self.write() as conn:
            _stamp_session(conn, session, 1)

    @_guarded
    def put_session(self, prefix: str, session: str, value: str) -> None:
        """Set a value of one session (``prefix`` one of ``SESSION_PREFIXES``).

        The session's ``prompts:`` row records the time (its count kept) in the same
        transaction, so ``prune`` keeps the value while the session is in use.
        """
        if prefix not in SESSION_PREFIXES:
            raise ValueError(f"not a session key prefix: {prefix!r}")
        with self.write() as conn:
            conn.execute("INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)",
                         (prefix + session, value))
            _stamp_session(conn, session, 0)

    @_guarded
    def prompt_count(self, session: str) -> int:
        """How many prompts of ``session`` were submitted (0 when none was seen)."""
        return _prompt_count(self.get(PROMPTS_PREFIX + session))

    # -- small values ---------------------------------------------------------------------
    @_guarded
    def get(self, key: str) -> str | None:
        """A value of the ``kv`` table, or None."""
        row = self.conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @_guarded
    def put(self, key: str, value: str | None) -> None:
        """Set (or, with None, delete) a ``kv`` value."""
        with self.write() as conn:
            if value is None:
                conn.execute("DELETE FROM kv WHERE key = ?", (key,))
            else:
                conn.execute("INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)", (key, value))

    @_guarded
    def take(self, key: str) -> str | None:
        """Remove and return a ``kv`` value (once: read and delete are one transaction)."""
        if self.get(key) is None:  # the common case: a read, no write lock
            return None
        with self.write() as conn:
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
            conn.execute("DELETE FROM kv WHERE key = ?", (key,))
        return row[0] if row else None


def _stamp_session(conn: sqlite3.Connection, session: str, prompts: int) -> None:
    """Set the session's ``prompts:`` row to its count plus ``prompts``, stamped now."""
    key = PROMPTS_PREFIX + session
    row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
    count = _prompt_count(row[0] if row else None) + prompts
    conn.execute("INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)", (key, f"{count}\t{_now()}"))


def _keys_under(conn: sqlite3.Connection, prefix: str) -> list[tuple[str, str]]:
    """The ``kv`` rows whose key starts with ``prefix``.

    A key range: ``LIKE`` would read ``_`` as a wildcard and ignore case.
    """
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    rows: list[tuple[str, str]] = conn.execute(
        "SELECT key, value FROM kv WHERE key >= ? AND key < ?", (prefix, end)).fetchall()
    return rows
