"""The index's connection: damage and busy errors turned into ``IndexCorrupt`` / ``IndexBusy``.

``IndexConnection`` is what ``open_index`` returns: every cursor it makes turns SQLite's
damage codes (and a text cell that is not UTF-8) into ``IndexCorrupt`` (E007), leaving a
damage marker so that the next open rebuilds, and a writer that outlasted the busy timeout
into ``IndexBusy``. The repairs an open made are on it (``IndexConnection.repairs``). Also
the names of the index files and the marker's helpers, which the open and the rebuild share.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxstore import fsio
from ctxstore import sqlite as db
from ctxstore.errors import IndexBusy, IndexCorrupt, UnsafePath
from ctxstore.index.codedb import CODE_DAMAGE_MARKER
from ctxstore.index.meta import NOT_THIS_COPY

if TYPE_CHECKING:
    from ctxstore.repo import Store

__all__ = ["INDEX_FILE", "INDEX_COMPANIONS", "DAMAGE_MARKER", "OUTDATED_SCHEMA", "IndexRepair",
           "IndexConnection", "index_dir", "is_damage", "mark_code_damaged", "mark_damaged"]

INDEX_FILE = "index.sqlite"
INDEX_COMPANIONS = db.COMPANIONS
# Left by a query that met damage the open-time checks did not see: the next open rebuilds.
DAMAGE_MARKER = "index.sqlite-damaged"
# The same for this clone's code index (``codedb.CODE_DAMAGE_MARKER``): the next open drops
# it, and ``ctx index`` makes it again.
# What SQLite says when a SQL function raised: the only one ctx registers is the code
# index's ``ctx_chunk_text``, which raises only for a stored text that does not decompress.
_FUNCTION_RAISED = "user-defined function raised exception"

# The file itself is damaged whenever it is met (``db.DAMAGED``); while opening and catching
# up, a missing table or column, a broken constraint or a type mismatch also means the file is
# not what ctx wrote (hand edits, another schema).
_DAMAGED_ON_OPEN = db.DAMAGED | db.NOT_OURS
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


class IndexRepair(NamedTuple):
    """A damaged index that ``open_index`` dropped and rebuilt from the objects.

    ``code``: the code index (``code.sqlite``, from the work tree), which was dropped and is
    rebuilt by ``ctx index``, not from the objects; ``foreign``: it was dropped (the code
    index) or rebuilt (``index.sqlite``) because it was made for another copy of the store
    (``index.meta.owner_problem``), not for damage.
    """

    path: str
    reason: str
    in_memory: bool = False
    code: bool = False
    foreign: bool = False

    def message(self) -> str:
        """The one-line notice, e.g. ``index was damaged (file is not a database); rebuilt from the store``.

        Front ends prefix ``ctx: ``.
        """
        if self.code:
            what = "the code index was written by another version of ctx" \
                if self.reason.startswith("code schema version") \
                else f"the code index {NOT_THIS_COPY}" if self.foreign \
                else "the code index was damaged"
            return f"{what} ({self.reason}); it was dropped: run `ctx index` to rebuild it"
        # An index an older ctx wrote is not damage: its schema is simply out of date.
        what = f"the index {NOT_THIS_COPY}" if self.foreign \
            else "index was written by another version of ctx" \
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
    folder = getattr(conn, "index_folder", None)
    if isinstance(exc, sqlite3.OperationalError) and str(exc) == _FUNCTION_RAISED:
        if folder is not None:
            _write_marker(folder, "a file's stored text does not decompress", CODE_DAMAGE_MARKER)
        raise IndexCorrupt("a file's stored text does not decompress (the next command drops "
                           "it)", in_code_index=True) from exc
    if not is_damage(exc) and not _undecodable(exc):
        return
    opening = getattr(conn, "opening", False)
    if is_damage(exc) and _code_damaged(conn):  # `ctx rebuild` would leave it as it is
        if folder is not None and not opening:
            _write_marker(folder, str(exc), CODE_DAMAGE_MARKER)
        raise IndexCorrupt(f"{exc} (the next command drops it)", in_code_index=True) from exc
    if folder is not None and not opening:
        _write_marker(folder, str(exc))
    raise IndexCorrupt(f"{exc} (the next command rebuilds it from the store)") from exc


def _code_damaged(conn: sqlite3.Connection) -> bool:
    """Whether the attached code index fails SQLite's ``quick_check``.

    Damage a query meets may be in either file, and only the code index is made again by
    ``ctx index`` (``ctx rebuild`` leaves it as it is). On the error path only: about 1-2 ms
    per MiB of the code index.
    """
    try:
        rows = sqlite3.Connection.execute(conn, "PRAGMA code.quick_check(1)").fetchall()
    except sqlite3.DatabaseError as exc:  # not attached (yet): the main file's; unreadable: this
        return is_damage(exc)
    return [str(row[0]) for row in rows] != ["ok"]


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
        repairs: The repairs this open made, main index first: the index was damaged and
            rebuilt, and (or) this clone's code index was damaged and dropped. One open can
            make both, and each must reach the user.
        repaired: The first of ``repairs``, or None.
        in_memory: True when the index lives in memory (``index/`` cannot be written).
        index_folder: The folder of the index file (None in memory).
        opening: True while ``open_index`` checks the file (damage met then is repaired
            at once, so no marker is left).
    """

    repairs: list[IndexRepair]
    in_memory: bool = False
    index_folder: Path | None = None
    opening: bool = False

    def __init__(self, database: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        self.repairs = []
        if database == ":memory:":
            self.in_memory = True
        else:  # set before the first statement runs: damage met then is told apart
            self.index_folder = Path(database).parent
            self.opening = True

    @property
    def repaired(self) -> IndexRepair | None:
        """The first repair this open made (``repairs``), or None."""
        return self.repairs[0] if self.repairs else None

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

def _read_marker(folder: Path, name: str = DAMAGE_MARKER) -> str | None:
    try:
        text = fsio.read_regular(folder / name, 400)
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


def mark_code_damaged(conn: sqlite3.Connection, reason: str) -> None:
    """Leave the code index's damage marker, so the next open drops ``code.sqlite``.

    For damage in a value ctx decodes in Python (a file's term list, ``index.postings``): the
    reader that met it raises ``IndexCorrupt`` naming the code index.
    """
    folder = getattr(conn, "index_folder", None)
    if folder is not None:
        _write_marker(folder, reason, CODE_DAMAGE_MARKER)


def _write_marker(folder: Path, reason: str, name: str = DAMAGE_MARKER) -> None:
    """Leave the damage marker ``name`` in ``folder``; best effort, the caller's error is what counts.

    By descriptor (PS-10): the folder is opened ``O_NOFOLLOW`` from its parent (the store, or
    the temporary directory of a comparison), so an ``index/`` swapped for a link is refused.
    """
    try:
        with fsio.open_dir(folder.parent) as parent:
            parent.replace_atomic(folder / name, reason.encode("utf-8", "replace")[:200])
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
