"""Per-clone hook state in ``.ctx/local/state.sqlite`` (never the derived index).

It holds what the hooks pass to each other and what must not happen twice:
- ``pending``: results waiting for the next prompt of a session (recall, status,
  expand, notices), delivered exactly once: taking them deletes them in the same
  write transaction, so two concurrent prompt-submits cannot both deliver one;
- ``executed``: keys of the commands already run, so a repeated Stop does nothing;
- ``claims``: commands being run right now, each claimed by one process (pid, time) in
  a write transaction before it runs, so identical Stop hooks running at once (ctx
  installed at user and project level) run each command once; a claim whose process
  died is taken over, so a killed hook loses no command;
- ``replies``: for each command run from Stop's ``last_assistant_message`` (a reply the
  transcript did not hold yet), the reply's key and when it was read: a transcript line
  with that reply, created before then, is the reply that ran (claude/hooks/on_stop.py);
- ``queue``: commands deferred because another process held the writer lock;
- ``kv``: small values (the cached default view,
  the notice that a damaged state was replaced, the count of prompts per session that
  tells turns apart when nothing else does, what each session was shown and its last
  prompts); a session's values go once it has been idle ``EXECUTED_KEEP_DAYS`` (``prune``);
- ``access``: how often each node was retrieved by ``<ctx:recall>`` or ``<ctx:expand>``
  and when last (spec 003's access tracking, an input of the CLAUDE.md ranking).

This file cannot be rebuilt from the objects, so its schema has ordered migrations
recorded in ``schema_version`` (spec 001 §15). A damaged file (not a database, malformed
pages, a table missing, a directory, a FIFO or a symbolic link in its place) is moved
aside to ``state.sqlite.damaged-<time>-<pid>`` and recreated, with a one-time notice:
losing it loses pending results, and ``executed`` is backed by the ``hook_key`` stored
with every node a ``remember`` creates (RELIABILITY.md CO-11, TR-12). A link is moved,
never followed; ``local/`` itself must be a real directory (a symbolic link there is
refused). Session ids are only ever column values, never file names (HK-05).
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ctxstore.errors import UnsafePath
from ctxstore.sqlite import (
    COMPANIONS,
    Migration,
    connect,
    irregular_files,
    is_damage,
    is_missing_object,
    migrate,
)

__all__ = ["STATE_FILE", "EXECUTED_KEEP_DAYS", "CLAIM_STALE_SECONDS", "NOTICE_KEY", "TASK_KEY",
           "PROMPTS_PREFIX", "SESSION_PREFIXES", "HookState", "StateDamaged", "key_of",
           "open_state", "peek_state", "state_path", "repair_state", "read_access_counts"]

STATE_FILE = "state.sqlite"
EXECUTED_KEEP_DAYS = 90
# A claim older than this is taken over even if its pid is alive (the pid may have been
# reused); Claude Code kills a hook after 600 s by default.
CLAIM_STALE_SECONDS = 900
NOTICE_KEY = "notice"
# kv key where an older ctx kept the current task; ``knowledge.tasks`` owns it now
# (``local/current-task``), and ``open_state`` moves a value found here there once.
TASK_KEY = "current_task"
# kv keys ``prompts:<session>``: how many prompts of a session were submitted, and when the
# session last wrote anything here (a prompt, or a value under ``SESSION_PREFIXES``).
PROMPTS_PREFIX = "prompts:"
# kv keys ``<prefix><session>`` of one session's values (claude.hooks: what it was shown, its
# last prompts), written by ``put_session`` and pruned with the session. ``compacted:`` marks,
# written by older versions' PreCompact and read by nothing, are pruned the same way.
SESSION_PREFIXES = ("injected:", "recent_prompts:", "compacted:")
_LOCK_FILE = "state.lock"
_SIDE_FILES = ("", *COMPANIONS)
_TABLES = frozenset({"schema_version", "pending", "executed", "queue", "kv", "access", "claims",
                     "replies"})
_MIGRATIONS = [
    Migration(1, """
        CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
                              kind TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL);
        CREATE INDEX pending_session ON pending(session);
        CREATE TABLE executed (key TEXT PRIMARY KEY, session TEXT NOT NULL, at INTEGER NOT NULL);
        CREATE TABLE queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,
                            session TEXT NOT NULL, command TEXT NOT NULL,
                            created_at INTEGER NOT NULL);
        CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """),
    Migration(2, """
        CREATE TABLE access (node_id TEXT PRIMARY KEY, count INTEGER NOT NULL,
                             last_at INTEGER NOT NULL) WITHOUT ROWID;
    """),
    Migration(3, """
        CREATE TABLE claims (key TEXT PRIMARY KEY, session TEXT NOT NULL, pid INTEGER NOT NULL,
                             at INTEGER NOT NULL) WITHOUT ROWID;
    """),
    Migration(4, """
        CREATE TABLE replies (key TEXT PRIMARY KEY, session TEXT NOT NULL,
                              read_ms INTEGER NOT NULL) WITHOUT ROWID;
    """),
]

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


def state_path(store_root: Path) -> Path:
    """Where the hook state of the store at ``store_root`` lives."""
    return store_root / "local" / STATE_FILE


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


def _ident(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _check_files(path: Path) -> tuple[int, int] | None:
    """The state file and its WAL and shared-memory files must be regular files (or absent).

    SQLite would follow a link out of the store, and block or fail on the rest.

    Returns:
        ``(st_dev, st_ino)`` of the state file, or None when it does not exist.

    Raises:
        StateDamaged: naming the first that is not.
    """
    ident = _ident(path)
    for entry, st in irregular_files(path):
        from ctxstore.fsio import file_kind

        raise StateDamaged(f"{entry.name} is {file_kind(st.st_mode)}", ident)
    return ident


def _open_checked(path: Path) -> HookState:
    """Open, migrate and check the tables of the state at ``path``.

    Raises:
        StateDamaged: if it is damaged.
        sqlite3.OperationalError: if it cannot be opened or stays locked (not damage).
    """
    ident = _check_files(path)
    try:
        conn = connect(path, busy_seconds=5.0)
    except sqlite3.Error as exc:
        if _is_damage(exc):
            raise StateDamaged(str(exc), ident) from exc
        raise
    try:
        migrate(conn, _MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if missing := sorted(_TABLES - tables):
            raise StateDamaged(f"table {missing[0]} is missing", ident)
    except sqlite3.Error as exc:
        conn.close()
        if _is_damage(exc):
            raise StateDamaged(str(exc), ident) from exc
        raise
    except BaseException:
        conn.close()
        raise
    return HookState(conn, ident or _ident(path))


def _check_local(store_root: Path, *, create: bool) -> tuple[bool, str | None]:
    """Make sure ``local/`` is a real directory (creating it if ``create``).

    Returns:
        Whether it exists now (False when it did not and must not be created), and a
        notice when something other than a directory stood in its place and was moved
        aside.

    Raises:
        UnsafePath: (E020) if ``local/`` is a symbolic link.
        OSError: if it cannot be created.
    """
    local = store_root / "local"
    try:
        st = os.lstat(local)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):  # the common case: no fsio import (~ms)
        return True, None
    from ctxstore import fsio

    if st is None:
        if not create:
            return False, None
        with fsio.open_dir(store_root) as store_dir:
            store_dir.ensure_dir(local)
        return True, None
    if stat.S_ISLNK(st.st_mode):  # refused, never followed: it may lead out of the store
        fsio.check_under(store_root, local)
    # Anything else in place of the folder (a file, a FIFO) is damage, moved aside.
    moved = _move_aside(local)
    with fsio.open_dir(store_root) as store_dir:
        store_dir.ensure_dir(local)
    return True, (f"the hook state folder .ctx/local was {fsio.file_kind(st.st_mode)}; moved "
                  f"aside to .ctx/{moved} and started fresh")


def _move_aside(path: Path) -> str:
    """Rename ``path`` to a unique ``<name>.damaged-<time>-<pid>`` beside it; return the new name.

    The entry itself is renamed: a link is never followed.
    """
    from ctxstore import fsio

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for n in range(100):
        target = path.with_name(f"{path.name}.damaged-{stamp}-{os.getpid()}" + (f"-{n}" if n else ""))
        if _ident(target) is None:
            fsio.replace(path, target)
            return target.name
    raise FileExistsError(str(path))  # pragma: no cover - 100 names taken in one second


def repair_state(store_root: Path, damage: StateDamaged) -> str | None:
    """Move a damaged state aside and record a one-time notice in the fresh state.

    The WAL and shared-memory files move with it. Returns the notice, or None if another hook
    already replaced the file.

    Runs under ``local/state.lock`` so that two hooks finding the same damage move it
    once, and never move aside the fresh file the other one created.

    Raises:
        UnsafePath: (E020) if ``local/`` or the lock file is a symbolic link.
        LockConflict: if another hook holds the repair lock for seconds.
        OSError: if the files cannot be renamed.
    """
    from ctxstore import fsio

    path = state_path(store_root)
    _check_local(store_root, create=True)  # the hooks opened it: it exists unless removed since
    with fsio.hold_lock(path.parent / _LOCK_FILE, timeout=5.0):
        if damage.ident is not None and _ident(path) not in (damage.ident, None):
            try:  # replaced since: only repair it if the new one is damaged too
                _open_checked(path).close()
                return None
            except StateDamaged as again:
                damage = again
        moved = None
        for suffix in _SIDE_FILES:
            side = Path(str(path) + suffix)
            if _ident(side) is not None:
                name = _move_aside(side)
                moved = moved or name
        where = f"; moved aside to local/{moved}" if moved else ""
        notice = (f"the hook state .ctx/local/{STATE_FILE} was damaged ({damage.reason}){where} "
                  "and started fresh (pending results and deferred commands in it are lost)")
        state = _open_checked(path)
    with state:
        old = state.get(NOTICE_KEY)
        state.put(NOTICE_KEY, f"{old}; {notice}" if old else notice)
    return notice


def open_state(store_root: Path, *, create: bool) -> HookState | None:
    """Open the state of the store at ``store_root``.

    None if it does not exist and ``create`` is false (so a read-only hook creates nothing). A
    damaged state is moved aside and replaced by a new, empty one that holds a one-time notice
    (``NOTICE_KEY``).

    Raises:
        UnsafePath: (E020) if ``local/`` is a symbolic link.
        OSError: if ``local/`` cannot be created.
        sqlite3.OperationalError: if the file cannot be opened or stays locked.
        StateDamaged: if the file is damaged again right after it was replaced.
    """
    exists, notice = _check_local(store_root, create=create)
    if not exists:
        return None
    path = state_path(store_root)
    if not create and notice is None and _ident(path) is None:
        return None
    try:
        state = _open_checked(path)
    except StateDamaged as damage:
        repair_state(store_root, damage)
        state = _open_checked(path)
    if notice is not None:
        with _closing_on_error(state):
            state.put(NOTICE_KEY, notice)
    with _closing_on_error(state):
        _adopt_legacy_task(store_root, state)
    return state


def _adopt_legacy_task(store_root: Path, state: HookState) -> None:
    """Move the current task an older ctx kept here (kv ``TASK_KEY``) to its one owner.

    The current task is ``knowledge.tasks``'s (``local/current-task``), read alike by the
    hooks, the MCP server and ``ctx pack``; a task an older hook started is moved there once
    (unless a task is current there already), then dropped from the state.
    """
    legacy = state.get(TASK_KEY)
    if legacy is None:
        return
    from ctxstore.errors import InvalidInput
    from ctxstore.knowledge.tasks import read_current_task, set_current_task

    if read_current_task(store_root) is None:
        try:
            set_current_task(store_root, legacy)
        except InvalidInput:
            pass  # not a task name: nothing to carry over
    state.put(TASK_KEY, None)


# What a read-only reader of the state needs (an older schema still has them).
_PEEK_TABLES = frozenset({"pending", "queue", "kv"})


def peek_state(store_root: Path) -> HookState | None:
    """The state opened read-only, for a preview that must change nothing.

    Nothing is created, migrated or repaired: None when there is no state, when it is not a
    regular file, lacks a table a reader needs or cannot be opened (then the next hook replaces
    or creates it, and starts with an empty state).
    """
    path = state_path(store_root)
    try:
        if not stat.S_ISDIR(os.lstat(path.parent).st_mode):
            return None
        ident = _check_files(path)
    except (OSError, StateDamaged):
        return None
    if ident is None:
        return None
    try:
        conn = connect(path, busy_seconds=5.0, read_only=True)
    except (sqlite3.Error, UnsafePath):
        return None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        tables = set()
    if not _PEEK_TABLES <= tables:
        conn.close()
        return None
    return HookState(conn, ident)


def read_access_counts(store_root: Path) -> dict[str, int]:
    """The hooks' retrieval counts per node id in this clone (none without a state file).

    Raises:
        As ``open_state`` (never creates the state).
    """
    state = open_state(store_root, create=False)
    if state is None:
        return {}
    with state:
        return state.access_counts()


@contextmanager
def _closing_on_error(state: HookState) -> Iterator[None]:
    try:
        yield
    except BaseException:
        state.close()
        raise
