"""Every SQLite database of a store: open it, classify its errors, migrate its schema.

A store has three, each a file with ``-wal``, ``-shm`` and ``-journal`` companions:

- ``index/index.sqlite``, the derived index (``index/``): it can be rebuilt from the objects, so
  its schema version is ``PRAGMA user_version`` and a mismatch means drop and rebuild, never
  migrate (STYLE §2.5);
- ``local/state.sqlite``, the hook state (``claude/state/``), and ``local/memory.sqlite``,
  transcript memory (``memory/db.py``): they cannot be rebuilt, so their schemas go through the
  ordered migrations of ``migrate``, each recorded in ``schema_version`` in the transaction that
  applies it (spec 001 §15).

What they share lives here: the containment check made before SQLite opens a file
(``irregular_files``: a link would lead SQLite out of the store, a FIFO would block it), the
connection settings (``connect``: WAL, a busy timeout, the ``synchronous`` level; or read-only,
changing nothing), the classification of errors by SQLite's result code, never by message text
(``classify``: damaged, busy, read-only), and ``migrate``. Each caller turns a class into its own
typed error: the index ``IndexCorrupt``/``IndexBusy``, transcript memory ``MemoryDamaged``, the
hook state a repair.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from ctxstore.errors import UnsafePath
from ctxstore.fsio import file_kind

__all__ = ["COMPANIONS", "DAMAGED", "NOT_OURS", "READ_ONLY", "BUSY", "CANTOPEN", "Migration",
           "classify", "connect", "irregular_files", "is_busy", "is_damage", "is_missing_object",
           "is_read_only", "migrate", "primary_code", "statements"]

COMPANIONS = ("-wal", "-shm", "-journal")

# SQLite's primary result codes (``sqlite3.Error.sqlite_errorcode & 0xff``).
_ERROR, _PERM, BUSY, _READONLY, _CORRUPT, CANTOPEN = 1, 3, 5, 8, 11, 14
_SCHEMA, _CONSTRAINT, _MISMATCH, _FORMAT, _RANGE, _NOTADB = 17, 19, 20, 24, 25, 26
# The file itself is damaged, whenever it is met: malformed pages, or not a database at all.
DAMAGED = frozenset({_CORRUPT, _NOTADB})
# A statement ctx wrote failing on a file ctx made: a missing table or column, a broken
# constraint, a type mismatch. Damage while a file is opened and checked (someone else's schema,
# hand edits); while a command runs, the command's own failure.
NOT_OURS = frozenset({_ERROR, _SCHEMA, _CONSTRAINT, _MISMATCH, _FORMAT, _RANGE})
# The file or its folder cannot be written (a read-only checkout).
READ_ONLY = frozenset({_PERM, _READONLY, CANTOPEN})

Kind = Literal["damaged", "busy", "read-only", "other"]


def primary_code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of ``exc`` (0 when it carries none)."""
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def is_damage(exc: sqlite3.Error) -> bool:
    """True for "this file is damaged": ``SQLITE_CORRUPT`` or ``SQLITE_NOTADB``."""
    return primary_code(exc) in DAMAGED


def is_busy(exc: sqlite3.Error) -> bool:
    """True for "database is locked": another connection kept its lock past the busy timeout."""
    return primary_code(exc) == BUSY


def is_read_only(exc: sqlite3.Error) -> bool:
    """True when the file or its folder cannot be written (``READONLY``, ``PERM``, ``CANTOPEN``)."""
    return primary_code(exc) in READ_ONLY


def is_missing_object(exc: sqlite3.Error) -> bool:
    """True for a table or column that does not exist (``SQLITE_ERROR``).

    In a database whose every table a migration made, one missing is damage. SQLite gives this
    condition no result code of its own, so here alone the message is read.
    """
    return primary_code(exc) == _ERROR and str(exc).startswith(("no such table", "no such column"))


def classify(exc: sqlite3.Error) -> Kind:
    """What ``exc`` says about the database: ``damaged``, ``busy``, ``read-only`` or ``other``."""
    code = primary_code(exc)
    if code in DAMAGED:
        return "damaged"
    if code == BUSY:
        return "busy"
    if code in READ_ONLY:
        return "read-only"
    return "other"


def irregular_files(path: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """The database ``path`` and its companions that exist and are not regular files.

    SQLite would follow a symbolic link out of the store (and convert the file it finds to WAL),
    and block or fail on a FIFO or a device: each must be refused before ``connect``.
    """
    for suffix in ("", *COMPANIONS):
        entry = Path(f"{path}{suffix}")
        try:
            st = os.lstat(entry)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not stat.S_ISREG(st.st_mode):
            yield entry, st


def connect(path: Path | str, *, busy_seconds: float, synchronous: str = "NORMAL",
            read_only: bool = False, factory: type[sqlite3.Connection] = sqlite3.Connection,
            check_same_thread: bool = True) -> sqlite3.Connection:
    """Open the database ``path`` in autocommit mode (``isolation_level=None``).

    Args:
        path: The database file, or ``:memory:``.
        busy_seconds: How long a statement waits for another connection's lock before it
            fails with ``SQLITE_BUSY`` (``is_busy``).
        synchronous: ``NORMAL`` (a power loss may lose the last commits, never half of one) or
            ``FULL`` (every commit on disk before it returns).
        read_only: Open with ``mode=ro``: nothing is created, converted or written.
        factory: The connection class (``sqlite3.connect``'s ``factory``).
        check_same_thread: As ``sqlite3.connect``.

    Returns:
        The connection, in WAL mode unless ``read_only`` or in memory.

    Raises:
        UnsafePath: (E020) if the file or a companion is a link or not a regular file (callers
            that report this as damage of their own check first with ``irregular_files``).
        sqlite3.Error: if SQLite cannot open it or set it up (``classify`` tells why); the
            connection is closed.
    """
    memory = str(path) == ":memory:"
    if not memory:
        for entry, st in irregular_files(Path(path)):
            raise UnsafePath(os.fspath(entry), detail=f"is {file_kind(st.st_mode)}, not a "
                                                      "regular file")
    target = Path(path).absolute().as_uri() + "?mode=ro" if read_only else str(path)
    conn = sqlite3.connect(target, uri=read_only, isolation_level=None, timeout=busy_seconds,
                           factory=factory, check_same_thread=check_same_thread)
    if memory or read_only:
        return conn
    if synchronous not in ("NORMAL", "FULL"):
        conn.close()
        raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
    try:
        conn.execute("PRAGMA journal_mode = WAL")  # reads the header: NOTADB shows here
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


class Migration(NamedTuple):
    """One step of a schema: its version (1, 2, ...) and what it runs.

    ``apply`` is SQL (statements separated by ``;``) or a function of the connection; either runs
    inside the migration's transaction and must not commit.
    """

    version: int
    apply: str | Callable[[sqlite3.Connection], object]


_VERSION_TABLE = ("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
                  "applied_at TEXT NOT NULL)")


def statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, one at a time (a ``;`` inside a string or trigger stays).

    ``executescript`` cannot run them: it commits the open transaction first.
    """
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                yield pending
            pending = ""
    if pending.strip(" \t\r\n;"):
        yield pending  # incomplete: SQLite names the error


def _transaction_begin(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")  # the write lock at once: reads inside are current


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:  # a damaged file may refuse even this; the error raised wins
        pass


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _recorded(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0])


def _has_version_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                        "name = 'schema_version'").fetchone() is not None


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration], *,
            adopt: Callable[[sqlite3.Connection], int] | None = None) -> int:
    """Apply, in order, the migrations ``conn`` has not recorded; return the version it is at.

    Each runs in one ``BEGIN IMMEDIATE`` transaction with its row in ``schema_version``
    (``version``, ``applied_at``): a migration that fails or is killed part-way leaves neither
    its changes nor its record, and the next open runs it again. Another process migrating the
    same file at the same time is seen inside the transaction (the record is read again once
    the lock is held), so each migration runs once.

    Args:
        conn: An autocommit connection (``connect``) outside any transaction.
        migrations: Versions 1, 2, ... in order.
        adopt: For a file made before it kept ``schema_version``: returns the version its schema
            is at (0 for an empty database). Called in the transaction that creates the table
            and records the versions up to it as applied; a version above the last migration
            (a newer program made the file) leaves the file untouched.

    Returns:
        The highest version recorded (or adopted). Above the last migration's when a newer
        program wrote the file: the caller decides whether it may use it.

    Raises:
        sqlite3.Error: as SQLite raised it (``classify`` tells damage from a busy file).
        Whatever ``adopt`` or a migration function raises.
    """
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations must be numbered 1, 2, ... in order, not {versions}")
    latest = versions[-1] if versions else 0
    if not _has_version_table(conn):
        _transaction_begin(conn)
        try:
            if not _has_version_table(conn):  # another process may have made it meanwhile
                adopted = adopt(conn) if adopt is not None else 0
                if adopted > latest:
                    _rollback(conn)
                    return adopted
                conn.execute(_VERSION_TABLE)
                conn.executemany("INSERT INTO schema_version(version, applied_at) VALUES (?, ?)",
                                 [(v, _now()) for v in range(1, adopted + 1)])
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")
    current = _recorded(conn)
    for migration in migrations:
        if migration.version <= current:
            continue
        _transaction_begin(conn)
        try:
            if _recorded(conn) < migration.version:  # not applied by another process meanwhile
                if isinstance(migration.apply, str):
                    for statement in statements(migration.apply):
                        conn.execute(statement)
                else:
                    migration.apply(conn)
                conn.execute("INSERT INTO schema_version(version, applied_at) VALUES (?, ?)",
                             (migration.version, _now()))
        except BaseException:
            _rollback(conn)
            raise
        conn.execute("COMMIT")
        current = migration.version
    return current
