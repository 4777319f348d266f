"""Opening ``memory.sqlite``: the file checks, migration (an older ctx's file adopted), read-only.

A damaged file is named (``MemoryDamaged``, E023), never wiped; a link or a FIFO in the place
of the file or its side files is refused before SQLite opens anything.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ctxstore.errors import MemoryDamaged, UnsupportedStoreVersion
from ctxstore.fsio import check_under, file_kind
from ctxstore.memory.db.handle import MemoryDB
from ctxstore.memory.db.schema import _LEGACY_TABLES, _MIGRATIONS, _TABLES, MEMORY_FILE, SCHEMA_VERSION
from ctxstore.sqlite import CANTOPEN, connect, irregular_files, is_damage, migrate, primary_code

__all__ = ["memory_path", "open_memory"]

def memory_path(ctx_dir: Path) -> Path:
    """Where the transcript memory of the store at ``ctx_dir`` lives."""
    return ctx_dir / "local" / MEMORY_FILE


def _check_files(path: Path) -> None:
    check_under(path.parent.parent, path.parent)  # local/ itself: a real directory
    for entry, st in irregular_files(path):
        raise MemoryDamaged(f".ctx/local/{entry.name} is {file_kind(st.st_mode)}",
                            hint="move it aside, then run `ctx memory backfill`")


def _damaged(reason: object) -> MemoryDamaged:
    return MemoryDamaged(f".ctx/local/{MEMORY_FILE} is damaged ({reason})",
                         hint="move it aside, then run `ctx memory backfill` to rebuild what "
                              "transcripts remain")


def open_memory(ctx_dir: Path, *, create: bool, busy_seconds: float = 10.0,
                durable: bool = True, read_only: bool = False) -> MemoryDB | None:
    """Open (creating it if ``create``) the transcript memory of the store at ``ctx_dir``.

    Args:
        ctx_dir: The store's ``.ctx`` directory.
        create: Create ``local/memory.sqlite`` when it does not exist.
        busy_seconds: How long to wait for another writer (a backfill) before giving up.
        durable: ``synchronous=FULL`` (every commit on disk before it returns); False for a
            backfill: ``NORMAL`` (still atomic: a batch and its cursor commit together, so a
            power loss only makes the last batches be read again), synced by ``checkpoint``.
        read_only: Open with SQLite's ``mode=ro`` and migrate nothing (the memory browser,
            ``ctx ui``): a file at an older schema is refused instead of upgraded.

    Returns:
        The database, or None when it does not exist and ``create`` is False.

    Raises:
        MemoryDamaged: (E023) the file is not a database, is malformed, lacks a table, or it or a
            side file is a link or special file.
        UnsupportedStoreVersion: (E014) a newer ctx wrote it; with ``read_only``, also a file
            an older ctx wrote that the next write of memory upgrades (its hint says so).
        UnsafePath: (E020) ``local/`` is a link or not a directory.
    """
    from ctxstore import fsio

    path = memory_path(ctx_dir)
    _check_files(path)
    if not path.exists():
        if not create or read_only:
            return None
        with fsio.open_dir(ctx_dir) as store_dir:
            store_dir.ensure_dir(path.parent)
    if read_only:
        return _open_read_only(path, busy_seconds)
    try:
        conn = connect(path, busy_seconds=busy_seconds, synchronous="FULL" if durable else "NORMAL")
    except sqlite3.Error as exc:
        if is_damage(exc) or primary_code(exc) == CANTOPEN:
            raise _damaged(exc) from exc
        raise
    return _checked(conn, _migrated)


def _migrated(conn: sqlite3.Connection) -> None:
    """Bring a writable memory file to this ctx's schema (its ordered migrations)."""
    version = migrate(conn, _MIGRATIONS, adopt=_legacy_version)
    if version > SCHEMA_VERSION:
        raise UnsupportedStoreVersion(f".ctx/local/{MEMORY_FILE} has schema {version}, newer "
                                      f"than this ctx ({SCHEMA_VERSION})", hint="upgrade ctx")


def _checked(conn: sqlite3.Connection, prepare: Callable[[sqlite3.Connection], None]
             ) -> MemoryDB:
    """``prepare`` the open file, check its tables, and hand it out; closed on any error.

    Raises:
        MemoryDamaged: if SQLite calls the file damaged.
    """
    try:
        prepare(conn)
        _check_tables(conn)
    except sqlite3.Error as exc:
        conn.close()
        if is_damage(exc):
            raise _damaged(exc) from exc
        raise
    except BaseException:
        conn.close()
        raise
    return MemoryDB(conn)


def _open_read_only(path: Path, busy_seconds: float) -> MemoryDB:
    """``open_memory(read_only=True)``: the file as it is, at this ctx's schema, or refused."""
    try:
        conn = connect(path, busy_seconds=busy_seconds, read_only=True)
    except sqlite3.Error as exc:
        if is_damage(exc) or primary_code(exc) == CANTOPEN:
            raise _damaged(exc) from exc
        raise
    def at_this_schema(conn: sqlite3.Connection) -> None:
        if "schema_version" in _tables(conn):
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
            version = int(row[0] or 0)
        else:  # made before versions were recorded (checked; the next write records them)
            _legacy_version(conn)
            version = 0
        if version != SCHEMA_VERSION:
            newer = version > SCHEMA_VERSION
            raise UnsupportedStoreVersion(
                f".ctx/local/{MEMORY_FILE} was written by {'a newer' if newer else 'an older'} "
                f"ctx (schema {version or 'unrecorded'}, this ctx reads {SCHEMA_VERSION}); it is "
                "read without a write only at this ctx's schema",
                hint="upgrade ctx" if newer else "any `ctx memory` command (stats) upgrades it")

    return _checked(conn, at_this_schema)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _check_tables(conn: sqlite3.Connection) -> None:
    if missing := sorted(_TABLES - _tables(conn)):
        raise _damaged(f"table {missing[0]} is missing")


def _legacy_version(conn: sqlite3.Connection) -> int:
    """The schema of a file made before ``schema_version``: ``meta.schema_version`` (0: empty).

    Raises:
        MemoryDamaged: (E023) a table or the version is missing.
    """
    tables = _tables(conn)
    if not tables:
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise _damaged("it holds no table")  # an index or a view alone: not ctx's
        return 0
    if missing := sorted(_LEGACY_TABLES - tables):
        raise _damaged(f"table {missing[0]} is missing")
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or not str(row[0]).isdigit() or len(str(row[0])) > 9:
        raise _damaged("no schema version")
    return int(row[0])
