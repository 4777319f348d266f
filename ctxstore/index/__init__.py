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
from the objects, and the repair is recorded on the connection (``IndexConnection.repaired``;
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
import errno
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxstore import fsio
from ctxstore import sqlite as db
from ctxstore.errors import CtxError, IndexBusy, IndexCorrupt, IndexNotReady, LockConflict, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.index import codedb
from ctxstore.index.meta import BUILD_STATE, clone_id, parse_snapshot
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
    from ctxstore.refs import Pointer
    from ctxstore.repo import Store

# (records applied, records to apply): the index catch-up and rebuild report through it.
Progress = Callable[[int, int], None]

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

INDEX_FILE = "index.sqlite"
INDEX_COMPANIONS = db.COMPANIONS
# Left by a query that met damage the open-time checks did not see: the next open rebuilds.
DAMAGE_MARKER = "index.sqlite-damaged"
# ``PRAGMA quick_check`` reads every page (about 1-2 ms per MiB): on every open only while
# that stays negligible. Larger files rely on SQLite's own checks as pages are read.
QUICK_CHECK_MAX_BYTES = 2 << 20

# The file itself is damaged whenever it is met (``db.DAMAGED``); while opening and catching
# up, a missing table or column, a broken constraint or a type mismatch also means the file is
# not what ctx wrote (hand edits, another schema).
_DAMAGED_ON_OPEN = db.DAMAGED | db.NOT_OURS
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


class IndexRepair(NamedTuple):
    """A damaged index that ``open_index`` dropped and rebuilt from the objects.

    ``code``: the code index (``code.sqlite``, from the work tree), which was dropped and is
    rebuilt by ``ctx index``, not from the objects.
    """

    path: str
    reason: str
    in_memory: bool = False
    code: bool = False

    def message(self) -> str:
        """The one-line notice, e.g. ``index was damaged (file is not a database); rebuilt from the store``.

        Front ends prefix ``ctx: ``.
        """
        if self.code:
            what = "the code index was written by another version of ctx" \
                if self.reason.startswith("code schema version") else "the code index was damaged"
            return f"{what} ({self.reason}); it was dropped: run `ctx index` to rebuild it"
        # An index an older ctx wrote is not damage: its schema is simply out of date.
        what = "index was written by another version of ctx" \
            if self.reason.startswith(OUTDATED_SCHEMA) else "index was damaged"
        if self.in_memory:
            return (f"{what} ({self.reason}); rebuilt from the store in memory "
                    f"({Path(self.path).parent} cannot be written)")
        return f"{what} ({self.reason}); rebuilt from the store"


OUTDATED_SCHEMA = "schema version"
is_damage = db.is_damage
_code = db.primary_code


def _undecodable(exc: sqlite3.DatabaseError) -> bool:
    """True for a text cell that is not UTF-8 (ctx writes only str), read back as text.

    SQLite stores any bytes in a TEXT cell and ``PRAGMA quick_check`` passes; Python's
    ``sqlite3`` then fails while fetching the row, with an error of its own (no SQLite result
    code): its message is the only sign, and it is the module's, not SQLite's.
    """
    return isinstance(exc, sqlite3.OperationalError) \
        and getattr(exc, "sqlite_errorcode", None) is None \
        and str(exc).startswith("Could not decode to UTF-8")


def _met_damage(conn: sqlite3.Connection, exc: sqlite3.DatabaseError) -> None:
    """Turn SQLite's damage codes (and a cell that is not UTF-8) into ``IndexCorrupt``.

    Any other error is left alone. The damage marker makes the next open rebuild the index.
    """
    if not is_damage(exc) and not _undecodable(exc):
        return
    folder = getattr(conn, "index_folder", None)
    if folder is not None and not getattr(conn, "opening", False):
        _write_marker(folder, str(exc))
    raise IndexCorrupt(f"{exc} (the next command rebuilds it from the store)") from exc


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a ``sqlite3.Cursor`` method so that damage errors become ``IndexCorrupt``."""
    def guarded(self: sqlite3.Cursor, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            _met_damage(self.connection, exc)
            _met_busy(self.connection, exc)
            raise
        except UnicodeDecodeError as exc:
            # SQLite's message about a damaged schema quotes its bytes, which Python then
            # cannot decode: the error arrives as this, never as a DatabaseError. Damage.
            damaged = sqlite3.DatabaseError(f"database disk image is malformed ({exc.reason} "
                                            "in SQLite's error message)")
            damaged.sqlite_errorcode = sqlite3.SQLITE_CORRUPT
            _met_damage(self.connection, damaged)
            raise damaged from exc
    return guarded


def _met_busy(conn: sqlite3.Connection, exc: sqlite3.DatabaseError) -> None:
    """Turn "database is locked" (another writer outlasted the busy timeout) into ``IndexBusy``.

    Not when the caller set the busy timeout to 0: it chose not to wait and handles the error
    (``index.retrieval.file_corpus`` skips writing its cache).
    """
    if not db.is_busy(exc):
        return
    waited_ms = sqlite3.Connection.execute(conn, "PRAGMA busy_timeout").fetchone()[0]
    if waited_ms:
        folder = getattr(conn, "index_folder", None)
        where = str(folder / INDEX_FILE) if folder is not None else "the index"
        raise IndexBusy(where, waited=waited_ms / 1000) from exc


class _GuardedCursor(sqlite3.Cursor):
    """A cursor that turns damage errors into ``IndexCorrupt`` (E007).

    Errors at execute time or while rows are read become E007 instead of an internal error.
    """

    execute = _guarded(sqlite3.Cursor.execute)
    executemany = _guarded(sqlite3.Cursor.executemany)
    executescript = _guarded(sqlite3.Cursor.executescript)
    __next__ = _guarded(sqlite3.Cursor.__next__)
    fetchone = _guarded(sqlite3.Cursor.fetchone)
    fetchmany = _guarded(sqlite3.Cursor.fetchmany)
    fetchall = _guarded(sqlite3.Cursor.fetchall)


class IndexConnection(sqlite3.Connection):
    """A connection to the index, as ``open_index`` returns it.

    Attributes:
        repaired: The repair this open made (the index was damaged and rebuilt), or None.
        in_memory: True when the index lives in memory (``index/`` cannot be written).
        index_folder: The folder of the index file (None in memory).
        opening: True while ``open_index`` checks the file (damage met then is repaired
            at once, so no marker is left).
    """

    repaired: IndexRepair | None = None
    in_memory: bool = False
    index_folder: Path | None = None
    opening: bool = False

    def __init__(self, database: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        if database == ":memory:":
            self.in_memory = True
        else:  # set before the first statement runs: damage met then is told apart
            self.index_folder = Path(database).parent
            self.opening = True

    # sqlite3's own methods, each through a guarded cursor.
    def cursor(self, factory: Any = None) -> Any:
        """A cursor of ``factory``, by default one that reports damage as ``IndexCorrupt``."""
        return super().cursor(factory or _GuardedCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        """``sqlite3.Connection.execute`` through a guarded cursor."""
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq: Any, /) -> Any:
        """``sqlite3.Connection.executemany`` through a guarded cursor."""
        return self.cursor().executemany(sql, seq)

    def executescript(self, script: str, /) -> Any:
        """``sqlite3.Connection.executescript`` through a guarded cursor."""
        return self.cursor().executescript(script)


def index_dir(store: Store) -> Path:
    """The folder holding the index files (``INDEX_FILE`` and its WAL/SHM companions)."""
    return store.root / "index"


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
                or not os.path.isfile(folder / INDEX_FILE):
            return None
        conn = _connect(folder / INDEX_FILE)
    except (OSError, CtxError, sqlite3.Error):
        return None
    try:
        if inspect_index(conn, create=False) is None and is_current(root, conn) \
                and not any(codedb.irregular_code_files(folder)):
            codedb.attach(conn, folder)
            if codedb.inspect_code(conn, create=False) is None:
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


# Seconds a caller that may not rebuild (a hook) spends building a new index (a fresh clone,
# a deleted index/): a small store's is built in full; a large one is left partial and said so.
NEW_INDEX_BUDGET = 1.0

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


def _read_marker(folder: Path) -> str | None:
    try:
        text = fsio.read_regular(folder / DAMAGE_MARKER, 400)
    except FileNotFoundError:
        return None
    except (OSError, UnsafePath):
        return "a damage marker was left"
    return text.decode("utf-8", "replace").strip()[:200] or "a damage marker was left"


def mark_damaged(conn: sqlite3.Connection, reason: str) -> None:
    """Leave the damage marker of the index ``conn`` reads, so the next open rebuilds it.

    For damage that SQLite does not see (a cell ctx wrote as JSON that holds something
    else): the reader that met it raised ``IndexCorrupt``; the session marks the index.
    """
    folder = getattr(conn, "index_folder", None)
    if folder is not None and not getattr(conn, "opening", False):
        _write_marker(folder, reason)


def _write_marker(folder: Path, reason: str) -> None:
    """Leave the damage marker in ``folder``; best effort, the caller's error is what counts.

    By descriptor (PS-10): the folder is opened ``O_NOFOLLOW`` from its parent (the store, or
    the temporary directory of a comparison), so an ``index/`` swapped for a link is refused.
    """
    try:
        with fsio.open_dir(folder.parent) as parent:
            parent.replace_atomic(folder / DAMAGE_MARKER, reason.encode("utf-8", "replace")[:200])
    except (OSError, UnsafePath):
        pass


def _drop_files(root: Path, folder: Path) -> None:
    """Delete the index file, its companions and the damage marker, through descriptors.

    Raises:
        UnsafePath: (E020) if ``index/`` is (or was swapped for) a link or not a directory.
        OSError: if a file cannot be removed.
    """
    with fsio.open_dir(root) as store_dir:
        for name in (INDEX_FILE, *(INDEX_FILE + s for s in INDEX_COMPANIONS), DAMAGE_MARKER):
            store_dir.unlink(folder / name)


def _readonly_os(exc: OSError) -> bool:
    return exc.errno in _READ_ONLY_ERRNOS


def _memory_index(store: Store, *, sync: bool, progress: Progress | None = None) -> IndexConnection:
    conn = _connect(":memory:")
    _create(conn)
    codedb.attach(conn, None)  # no code index: `ctx index` cannot write one here either
    codedb.inspect_code(conn)
    if sync:
        sync_index(store, conn, progress=progress)  # in memory: always built, nothing to resume
    return conn


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


def _open_code(store: Store, conn: IndexConnection, folder: Path) -> None:
    """Attach this clone's code index (``index.codedb``) to ``conn`` and check it.

    A damaged one, or one an older ctx wrote, is dropped and made again empty (``ctx index``
    rebuilds it from the work tree), and the repair is recorded. One the folder's permissions
    keep from being opened for writing is replaced by an empty one in memory.

    Raises:
        UnsafePath: (E020) if ``index/`` is (or was swapped for) a link.
        sqlite3.Error: for what is neither damage nor a read-only file.
    """
    try:
        codedb.attach(conn, folder)
        problem = codedb.inspect_code(conn)
    except sqlite3.DatabaseError as exc:
        if db.is_read_only(exc):
            _detach_code(conn)
            codedb.attach(conn, None)
            codedb.inspect_code(conn)
            return
        if not (is_damage(exc) or _code(exc) in _DAMAGED_ON_OPEN):
            raise
        problem = str(exc)
    if problem is None:
        return
    _detach_code(conn)
    with fsio.hold_lock(folder / codedb.CODE_LOCK, timeout=store.lock_timeout):
        codedb.drop_code_files(store.root, folder)
    codedb.attach(conn, folder)
    again = codedb.inspect_code(conn)
    if again is not None:
        raise IndexCorrupt(f"code index: {again}, right after making it again")
    repair = IndexRepair(str(folder / codedb.CODE_FILE), problem, code=True)
    if conn.repaired is None:
        conn.repaired = repair


def _detach_code(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.execute("DETACH DATABASE code")


def _try_open(store: Store, *, sync: bool, progress: Progress | None = None,
              rebuild: bool = True) -> tuple[IndexConnection | None, str | None]:
    """Open and check the file, and catch up.

    ``(conn, None)``, or ``(None, reason)`` when the file is damaged. A store that cannot be written
    gets a memory index. Without ``rebuild``, an index that needs a full build (an older ctx's,
    a new one, a partial one) raises ``IndexNotReady`` instead.
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
            conn.close()
        return None, str(exc.__cause__ or exc.message)
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
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
        conn.close()
        return None, damage
    conn.opening = False
    return conn, None


def open_index(store: Store, *, sync: bool = True, progress: Progress | None = None,
               rebuild: bool = True) -> IndexConnection:
    """Open the index, creating it, or rebuilding it when damaged, and bring it up to date.

    A damaged index is dropped and rebuilt from the objects; the repair is on the
    connection (``repaired``). A store whose ``index/`` cannot
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
    if found is None:
        conn, found = _try_open(store, sync=sync, progress=progress, rebuild=rebuild)
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
    conn.repaired = IndexRepair(str(folder / INDEX_FILE), found, in_memory=conn.in_memory)
    return conn


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
        if restart or read_build_state(conn) is None or _owner_row(conn) != owner:
            # A partial index of another copy of the store is not resumed: its rows are not trusted.
            start_build(conn, target if target is not None else pointer_snapshot(store), owner)
        counts = build_index(store, conn, progress, budget=budget)
    if counts is None:  # out of budget: partial, and said so
        assert folder is not None
        raise _not_ready(folder, conn)
    return counts


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
