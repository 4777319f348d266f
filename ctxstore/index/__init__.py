"""The derived index: SQLite (WAL) with FTS5, kept equal to the replay of HEAD + STAGE.

``open_index(store)`` returns a connection that is current: it compares the pointers
the index last synced to with the pointers on disk and, when they moved, applies the
commits it has not applied yet (or rebuilds, when history was rewound or replaced).
Readers never take the store lock; concurrent catch-ups serialise on SQLite's write
lock and re-check inside it.

The index is derived: deleting ``.ctx/index/`` loses nothing. So a damaged file is
never an error for long. Opening checks, cheaply, what SQLite and the schema can tell
(the header, ``user_version``, the exact schema, the ``meta`` row, and ``PRAGMA
quick_check`` while the file is small); a failure drops the files and rebuilds them
from the objects, and the repair is recorded on the connection (``IndexConnection.repairs``;
the ``Session`` that opened it keeps it for its front end to report): library code never
prints and keeps no state between calls. Damage met
later, by a query (a large file skips ``quick_check``), raises ``IndexCorrupt`` (E007)
and leaves a marker so that the next open rebuilds.

Containment: the index files are opened only when ``index/`` is a real directory and
``index.sqlite`` and its ``-wal``/``-shm``/``-journal`` companions are regular files,
never symlinks (``UnsafePath``, E020), so a link committed to a clone cannot make
SQLite convert a foreign file to WAL or give it ctx's tables. A store whose ``index/``
cannot be written (a read-only checkout, told by SQLite's result code) gets an
in-memory index built from the objects.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore import fsio
from ctxstore import sqlite as db
from ctxstore.errors import CtxError, IndexCorrupt, UnsafePath
from ctxstore.index import codedb
from ctxstore.index.catchup import (
    NEW_INDEX_BUDGET,
    Progress,
    _building,
    _not_ready,
    _owner_row,
    _rebuild_lock,
    ensure_built,
    is_current,
    pointer_snapshot,
    sync_index,
)
from ctxstore.index.connection import (
    _DAMAGED_ON_OPEN,
    DAMAGE_MARKER,
    INDEX_COMPANIONS,
    INDEX_FILE,
    OUTDATED_SCHEMA,
    IndexConnection,
    IndexRepair,
    _code,
    _drop_files,
    _read_marker,
    _readonly_os,
    index_dir,
    is_damage,
    mark_damaged,
)
from ctxstore.index.meta import BUILD_STATE, clone_id, code_owner_problem, parse_snapshot
from ctxstore.index.schema import (
    EXPECTED_SCHEMA_DIGEST,
    INDEX_SCHEMA_VERSION,
    SCHEMA,
    SchemaRow,
    expected_schema,
    read_schema,
    schema_digest,
)

if TYPE_CHECKING:
    from ctxstore.index.rebuild import BuildCounts
    from ctxstore.repo import Store

__all__ = [
    "BUILD_STATE",
    "ensure_built",
    "NEW_INDEX_BUDGET",
    "DAMAGE_MARKER",
    "mark_damaged",
    "INDEX_COMPANIONS",
    "INDEX_FILE",
    "QUICK_CHECK_MAX_BYTES",
    "IndexConnection",
    "IndexRepair",
    "check_index_files",
    "index_dir",
    "inspect_index",
    "is_damage",
    "is_current",
    "open_current",
    "open_index",
    "parse_snapshot",
    "pointer_snapshot",
    "rebuild_index",
    "sync_index",
]

# ``PRAGMA quick_check`` reads every page (about 1-2 ms per MiB): on every open only while
# that stays negligible. Larger files rely on SQLite's own checks as pages are read.
QUICK_CHECK_MAX_BYTES = 2 << 20


def open_current(root: Path) -> IndexConnection | None:
    """The index of the store at ``root`` when it is intact and already in sync, else None.

    The fast path of a read: the same checks as ``open_index`` (file kinds, damage marker,
    ``inspect_index``) and ``is_current``, without the store handle or the object model.
    It never creates, repairs or syncs anything: whatever is not plainly in order (no
    index yet, a marker, damage, moved or unreadable pointers) returns None, and
    ``open_index`` then does what it always does.

    Args:
        root: The store's ``.ctx`` directory (resolved; ``repo.open_store`` checked it).

    Returns:
        The open connection (the caller closes it), or None.
    """
    folder = root / "index"
    try:
        fsio.check_under(root, folder)
        if not stat.S_ISDIR(os.lstat(folder).st_mode) or any(_irregular_files(folder)) \
                or os.path.lexists(folder / DAMAGE_MARKER) \
                or os.path.lexists(folder / codedb.CODE_DAMAGE_MARKER) \
                or not os.path.isfile(folder / INDEX_FILE):
            return None
        conn = _connect(folder / INDEX_FILE)
    except (OSError, CtxError, sqlite3.Error):
        return None
    try:
        if inspect_index(conn, create=False) is None and is_current(root, conn) \
                and not any(codedb.irregular_code_files(folder)):
            codedb.attach(conn, folder)
            if codedb.inspect_code(conn, create=False) is None \
                    and codedb.meta_value(conn, "clone") == (clone_id(root) or ""):
                conn.opening = False
                return conn
    except (OSError, CtxError, sqlite3.Error):
        pass
    conn.close()
    return None


def _irregular_files(folder: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """``index.sqlite`` and its companions that exist and are not regular files."""
    return db.irregular_files(folder / INDEX_FILE)


def check_index_files(store: Store) -> str | None:
    """Refuse index files that would lead SQLite out of the store, before any open.

    ``index/`` must be a real directory (or absent), ``index.sqlite`` and its companions
    regular files (or absent). An empty directory named ``index.sqlite`` is removed (a
    repair: the reason is returned); anything else is refused.

    Returns:
        A repair reason when something was removed, else None.

    Raises:
        UnsafePath: (E020) naming a symlink, a special file or a non-empty directory.
    """
    folder = index_dir(store)
    fsio.check_under(store.root, folder)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(os.fspath(folder), detail=f"is {fsio.file_kind(st.st_mode)}, not a directory")
    reason = None
    from ctxstore.index.codedb import irregular_code_files

    for path, st in [*_irregular_files(folder), *irregular_code_files(folder)]:
        if stat.S_ISDIR(st.st_mode) and path.name in (INDEX_FILE, "code.sqlite"):
            try:
                fsio.rmdir(path)  # only ever an empty one: nothing is lost
                reason = f"{path.name} was an empty directory"
                continue
            except OSError:
                pass
        raise UnsafePath(os.fspath(path),
                         detail=f"is {fsio.file_kind(st.st_mode)}, not a regular file")
    return reason


# Seconds a command waits for another process's write transaction on the index (a rebuild,
# a catch-up) before it gives up with ``IndexBusy``.
BUSY_TIMEOUT = 30.0


def _connect(path: Path | str) -> IndexConnection:
    # synchronous=NORMAL: derived data, a lost tail is rebuilt
    conn = db.connect(path, busy_seconds=BUSY_TIMEOUT, factory=IndexConnection,
                      check_same_thread=False)
    assert isinstance(conn, IndexConnection)
    return conn


def _create(conn: sqlite3.Connection) -> None:
    # One transaction: another process never sees the tables without the version (which
    # it would take for damage) nor the version without the tables.
    conn.executescript(f"BEGIN IMMEDIATE; {SCHEMA}; PRAGMA user_version = {INDEX_SCHEMA_VERSION}; COMMIT;")


def _schema_difference(found: frozenset[SchemaRow], want: frozenset[SchemaRow]) -> str:
    missing = {(r[0], r[1]) for r in want - found}
    extra = {(r[0], r[1]) for r in found - want}
    parts = [f"{kind} {name} has another definition" for kind, name in sorted(missing & extra)]
    parts += [f"{kind} {name} is missing" for kind, name in sorted(missing - extra)]
    parts += [f"unexpected {kind} {name}" for kind, name in sorted(extra - missing)]
    return ", ".join(parts[:3]) + (f" (+{len(parts) - 3} more)" if len(parts) > 3 else "")


def inspect_index(conn: sqlite3.Connection, *, quick_check_max: int | None = None,
                  create: bool = True) -> str | None:
    """The cheap checks of an index file: what is wrong with it, or None if nothing.

    An empty database is given the schema (when ``create``). Checks ``user_version``,
    the exact schema, the ``meta`` table, and runs ``PRAGMA quick_check`` when the
    database is at most ``quick_check_max`` bytes (default ``QUICK_CHECK_MAX_BYTES``).

    Raises:
        sqlite3.DatabaseError, IndexCorrupt: when SQLite cannot read the file at all
            (the caller treats the damage codes as damage).
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    schema = read_schema(conn)
    if version == 0 and not schema:
        if not create:
            return "the index is empty"
        _create(conn)
        return None
    if version != INDEX_SCHEMA_VERSION:
        if 0 < version < INDEX_SCHEMA_VERSION:  # an older ctx wrote it: not damage
            return f"{OUTDATED_SCHEMA} {version}, this ctx uses {INDEX_SCHEMA_VERSION}"
        return f"user_version {version}, this ctx uses schema {INDEX_SCHEMA_VERSION}"
    if schema_digest(schema) != EXPECTED_SCHEMA_DIGEST and schema != (want := expected_schema()):
        return _schema_difference(schema, want)
    rows = conn.execute("SELECT key, value FROM meta").fetchall()
    keys = {key for key, _ in rows}
    if "synced" in keys and BUILD_STATE in keys:
        return f"meta rows 'synced' and {BUILD_STATE!r} together"
    for key, value in rows:
        if key == "clone" and isinstance(value, str):
            continue
        if key == BUILD_STATE:
            from ctxstore.index.rebuild import parse_build_state

            if parse_build_state(value) is None:
                return f"meta row {BUILD_STATE!r} is not a build state"
            continue  # a partial index (index.rebuild): no 'synced' until it is complete
        if key != "synced":
            return f"unexpected meta row {str(key)[:40]!r}"
        if not isinstance(value, str) or parse_snapshot(value) is None:
            return "meta row 'synced' is not a pointer snapshot"
    if not keys & {"synced", BUILD_STATE} and conn.execute(
            "SELECT EXISTS (SELECT 1 FROM applied) OR EXISTS (SELECT 1 FROM nodes)"
            " OR EXISTS (SELECT 1 FROM winners)").fetchone()[0]:
        return "meta row 'synced' is missing"
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    if pages * size <= (QUICK_CHECK_MAX_BYTES if quick_check_max is None else quick_check_max):
        result = [str(r[0]) for r in conn.execute("PRAGMA quick_check(1)")]
        if result != ["ok"]:
            return f"quick_check: {result[0][:120]}"
    return None


def _memory_index(store: Store, *, sync: bool, progress: Progress | None = None) -> IndexConnection:
    conn = _connect(":memory:")
    _create(conn)
    codedb.attach(conn, None)  # no code index: `ctx index` cannot write one here either
    codedb.inspect_code(conn)
    if sync:
        sync_index(store, conn, progress=progress)  # in memory: always built, nothing to resume
    return conn


def _open_code(store: Store, conn: IndexConnection, folder: Path) -> None:
    """Attach this clone's code index (``index.codedb``) to ``conn`` and check it.

    A damaged one, one an older ctx wrote, or one made for another copy of the store
    (``index.meta.code_owner_problem``) is dropped and made again empty (``ctx index`` rebuilds
    it from the work tree), and the repair is recorded. One the folder's permissions keep from
    being opened for writing is replaced by an empty one in memory.

    Raises:
        UnsafePath: (E020) if ``index/`` is (or was swapped for) a link.
        sqlite3.Error: for what is neither damage nor a read-only file.
    """
    owner = clone_id(store.root) or ""
    foreign, held = None, True
    try:
        codedb.attach(conn, folder)
        problem = _read_marker(folder, codedb.CODE_DAMAGE_MARKER) or codedb.inspect_code(conn)
        if problem is None:
            foreign, held = code_owner_problem(conn, owner)
            problem = foreign
    except sqlite3.DatabaseError as exc:
        if db.is_read_only(exc):
            _detach_code(conn)
            codedb.attach(conn, None)
            codedb.inspect_code(conn)
            return
        if not (is_damage(exc) or _code(exc) in _DAMAGED_ON_OPEN):
            raise
        problem = str(exc)
    except IndexCorrupt as exc:  # the guarded cursor met the damage first: it is the code file's
        problem = str(exc.__cause__ or exc.message)
    if problem is None:
        return
    _detach_code(conn)
    with fsio.hold_lock(folder / codedb.CODE_LOCK, timeout=store.lock_timeout):
        codedb.drop_code_files(store.root, folder)
    codedb.attach(conn, folder)
    again = codedb.inspect_code(conn) or code_owner_problem(conn, owner)[0]
    if again is not None:
        raise IndexCorrupt(f"{again}, right after making it again (is the disk failing?)",
                           in_code_index=True)
    if foreign is not None and not held:
        return  # another copy's empty code index: nothing was lost, nothing to say
    conn.repairs.append(IndexRepair(str(folder / codedb.CODE_FILE), problem, code=True,
                                    foreign=foreign is not None))


def _detach_code(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.execute("DETACH DATABASE code")


def _try_open(store: Store, *, sync: bool, progress: Progress | None = None,
              rebuild: bool = True, carry: list[IndexRepair] | None = None
              ) -> tuple[IndexConnection | None, str | None]:
    """Open and check the file, and catch up.

    ``(conn, None)``, or ``(None, reason)`` when the file is damaged. A store that cannot be written
    gets a memory index. Without ``rebuild``, an index that needs a full build (an older ctx's,
    a new one, a partial one) raises ``IndexNotReady`` instead. The repairs a failed attempt
    made (the code index dropped before the main file's damage showed) go to ``carry``.
    """
    folder = index_dir(store)
    conn: IndexConnection | None = None
    try:
        with fsio.open_dir(store.root) as store_dir:
            store_dir.ensure_dir(folder)
        conn = _connect(folder / INDEX_FILE)
        damage = inspect_index(conn)
        if damage is not None and not rebuild and damage.startswith(OUTDATED_SCHEMA):
            raise _not_ready(folder, outdated=damage)
        if damage is None:
            _open_code(store, conn, folder)
        if damage is None and sync:
            sync_index(store, conn, progress=progress, rebuild=rebuild)
    except OSError as exc:
        if conn is not None:
            conn.close()
        if _readonly_os(exc):
            return _memory_index(store, sync=sync, progress=progress), None
        raise
    except IndexCorrupt as exc:
        if conn is not None:
            _close(conn, carry)
        if exc.in_code_index:  # the code index failed again right after it was made: not ours
            raise
        return None, str(exc.__cause__ or exc.message)
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            _close(conn, carry)
        if db.is_read_only(exc):
            return _memory_index(store, sync=sync, progress=progress), None
        if _code(exc) in _DAMAGED_ON_OPEN:
            return None, str(exc)
        raise
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    if damage is not None:
        _close(conn, carry)
        return None, damage
    conn.opening = False
    return conn, None


def _close(conn: IndexConnection, carry: list[IndexRepair] | None) -> None:
    """Close a connection given up on, keeping the repairs it made in ``carry``."""
    if carry is not None:
        carry.extend(conn.repairs)
    conn.close()


def open_index(store: Store, *, sync: bool = True, progress: Progress | None = None,
               rebuild: bool = True) -> IndexConnection:
    """Open the index, creating it, or rebuilding it when damaged, and bring it up to date.

    A damaged index is dropped and rebuilt from the objects; the repair is on the
    connection (``repairs``). A store whose ``index/`` cannot
    be written (read-only checkout) gets an in-memory index built from the objects. A full
    build (``index.rebuild``) goes on from where an interrupted one stopped.

    Args:
        store: The store.
        sync: Bring the index up to date with the pointers (else only open and check it).
        progress: Called with (records applied, records to apply) while records are applied.
        rebuild: Whether a full build may run here. False (a hook: it must answer at once)
            raises ``IndexNotReady`` for an index that needs one: written by an older ctx,
            left partial, or being built by another process; a new one is built for at most
            ``NEW_INDEX_BUDGET`` seconds. A damaged index is still repaired.

    Returns:
        The open connection (the caller closes it).

    Raises:
        UnsafePath: (E020) if an index file is a symlink or a special file.
        IndexCorrupt: (E007) if the index is damaged again right after a rebuild.
        IndexNotReady: (E024) as said under ``rebuild``, or when another process's build
            outlasts the store's lock timeout.
        CtxError: (E001-E005) if the store itself is damaged on the way.
    """
    folder = index_dir(store)
    found = check_index_files(store) or _read_marker(folder)
    carry: list[IndexRepair] = []
    if found is None:
        conn, found = _try_open(store, sync=sync, progress=progress, rebuild=rebuild,
                                carry=carry)
        if conn is not None:
            return conn
    assert found is not None
    if not rebuild and _building(folder):
        raise _not_ready(folder)  # the builder replaces it: never drop its files under it
    # Damaged: the index is derived, so drop it and build it again from the objects, one
    # process at a time (two would each delete the file the other has begun).
    try:
        with _rebuild_lock(store, folder):
            _drop_files(store.root, folder)
            conn, again = _try_open(store, sync=sync, progress=progress)
    except OSError as exc:
        if not _readonly_os(exc):
            raise
        conn, again = _memory_index(store, sync=sync, progress=progress), None
    if conn is None:
        raise IndexCorrupt(f"{again}, right after rebuilding it (is the disk failing?)")
    # Both repairs when one open made both: the main index's, then the code index's.
    conn.repairs[:0] = [IndexRepair(str(folder / INDEX_FILE), found, in_memory=conn.in_memory),
                        *carry]
    return conn


def rebuild_index(store: Store, *, full: bool = False, progress: Progress | None = None
                  ) -> tuple[IndexConnection, BuildCounts]:
    """Recreate the index from the objects, or finish the build an interrupted run left.

    ``full`` deletes the files first and always starts over. Otherwise a partial index (a
    rebuild killed part way) is completed from where it stopped, and a complete one is cleared
    and refilled. The build commits in slices (``index.rebuild``): readers see the index as
    partial, not as complete, until it ends.

    Returns:
        The connection (the caller closes it) and what the build did.

    Raises:
        UnsafePath: (E020) if an index file is a symlink or a special file.
        IndexNotReady: (E024) if another process builds for longer than the lock timeout.
        CtxError: (E001-E005) if the store is damaged on the way.
    """
    from ctxstore.index.rebuild import read_build_state

    folder = index_dir(store)
    if full:
        check_index_files(store)  # before deleting anything: never unlink through a link
        try:
            with fsio.open_dir(store.root) as store_dir:
                store_dir.ensure_dir(folder)
            with _rebuild_lock(store, folder):
                _drop_files(store.root, folder)
        except OSError as exc:
            if not _readonly_os(exc):
                raise
    conn = open_index(store, sync=False)
    try:
        with _rebuild_lock(store, conn.index_folder):
            resume = read_build_state(conn) is not None \
                and _owner_row(conn) == (clone_id(store.root) or "")
            counts = ensure_built(store, conn, progress=progress, restart=not resume)
        assert counts is not None  # a restart or a partial index: always a build
        sync_index(store, conn, progress=progress)
    except BaseException:
        conn.close()
        raise
    return conn, counts
