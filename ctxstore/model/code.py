"""Code records: file snapshots with their symbols and relations (spec 002 §7.2.1, §7.2.3, §9).

One typed object and the two change-batch records that point at it:

- ``file_version`` (``FileVersion``): one ingested file at one content: its path, the
  blob of its bytes, language, byte and line counts, and what the extractor found in it
  (symbols, and outgoing relations with their evidence and the endpoint ingestion
  resolved them to). One object per (path, content, resolution): re-indexing a file
  replaces its symbols and edges as a unit, so a vanished edge needs no tombstone.
- ``file`` (``FileRecord``) names the newest version of a path; ``file_removed``
  (``FileRemoved``) says the path left the work tree. Both are keyed by the path and
  compete last-writer-wins like node records, so two branches that indexed different
  files union through the ordinary replay.

It must not do I/O or import above ``model``.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import blake3
import msgpack

from ctxstore.ids import ObjectId
from ctxstore.model._schema import Opt, Record, SchemaError
from ctxstore.model.registry import typed
from ctxstore.records import dataclass

__all__ = ["CodeSymbol", "CodeRelation", "Detail", "FileVersion", "FileRecord", "FileRemoved",
           "CodeRecord", "file_id"]


def file_id(path: str) -> ObjectId:
    """The stable id of a file node: BLAKE3 of its repository-relative path (spec §7.2.1).

    Args:
        path: The repository-relative POSIX path.

    Returns:
        32 raw bytes.
    """
    return ObjectId(blake3.blake3(b"file\x1f" + path.encode("utf-8", "surrogatepass")).digest())


def _nonempty(where: str, name: str, value: str) -> None:
    if not value:
        raise SchemaError(f"{where}.{name}: must not be empty")


Detail = tuple[tuple[str, str], ...]


class CodeSymbol(NamedTuple):
    """A named definition in a file (``code.languages.Symbol`` as stored): one packed row."""

    qualname: str
    name: str
    kind: str
    parent: str | None
    visibility: str | None
    signature: str | None
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    detail: Detail


class CodeRelation(NamedTuple):
    """An outgoing relation of a file, its endpoints typed, its evidence kept (spec §9.1).

    ``from_kind``/``from_key`` and ``to_kind``/``to_key`` are endpoints as docs/code.md
    defines them (``item``, ``module``, ``file``); ``target`` is the name the extractor
    gave, kept even when ingestion resolved it to a file.
    """

    label: str
    from_kind: str
    from_key: str
    to_kind: str
    to_key: str
    target: str
    tool: str
    confidence: str
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    detail: Detail


# Per column: the types a stored value may have (None: an optional column).
_STR, _OPT, _INT = (str,), (str, type(None)), (int,)
_SYMBOL_COLUMNS = (_STR, _STR, _STR, _OPT, _OPT, _OPT, _INT, _INT, _INT, _INT)
_RELATION_COLUMNS = (_STR,) * 8 + (_INT,) * 4


def _pack(rows: tuple[CodeSymbol, ...] | tuple[CodeRelation, ...]) -> bytes:
    """Rows as one msgpack array of arrays (canonical: only strings, integers, nil, arrays)."""
    return msgpack.packb(rows, use_bin_type=True)


def _reject_ext(code: int, data: bytes) -> None:
    raise SchemaError(f"msgpack ext type {code} in a packed table")


def _unpack(data: object, columns: tuple[tuple[type, ...], ...], where: str) -> list[tuple[Any, ...]]:
    """Validate and decode a packed table; each row's last column is its detail pairs."""
    if not isinstance(data, bytes):
        raise SchemaError(f"{where}: expected packed rows (bytes)")
    try:
        rows = msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=True,
                               ext_hook=_reject_ext)
    except SchemaError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed msgpack is a schema error here
        raise SchemaError(f"{where}: malformed packed rows ({type(exc).__name__})") from None
    if not isinstance(rows, tuple):
        raise SchemaError(f"{where}: expected an array of rows")
    width = len(columns) + 1
    for i, row in enumerate(rows):
        if not isinstance(row, tuple) or len(row) != width:
            raise SchemaError(f"{where}[{i}]: expected a row of {width} values")
        for value, kinds in zip(row, columns, strict=False):
            if type(value) not in kinds:
                raise SchemaError(f"{where}[{i}]: unexpected {type(value).__name__} value")
        detail = row[-1]
        if not isinstance(detail, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 and all(type(x) is str for x in p)
                for p in detail):
            raise SchemaError(f"{where}[{i}]: detail must be (key, value) string pairs")
    if _pack(rows) != data:
        raise SchemaError(f"{where}: packed rows are not in canonical form")
    return list(rows)


@typed("file_version", 1)
@dataclass(frozen=True, slots=True)
class FileVersion(Record):
    """One file at one content, with what was extracted from it (spec §7.2.1 FileVersion).

    ``complete`` is False when the extraction is partial or empty (syntax error, binary,
    too large); ``note`` then says why. Symbols and relations are stored packed (one
    msgpack array of rows each: ``symbol_table``, ``relation_table``), which costs a
    tenth of one map per row to encode and decode; ``make`` packs, ``symbols`` and
    ``relations`` unpack.
    """

    path: str
    file_id: ObjectId
    blob_id: ObjectId
    language: str | None
    byte_count: int
    line_count: int
    complete: bool
    note: str | None
    symbol_table: Any
    relation_table: Any

    FIELDS: ClassVar = {"path": "str", "file_id": "oid", "blob_id": "oid",
                        "language": Opt("str"), "byte_count": "int", "line_count": "int",
                        "complete": "bool", "note": Opt("str"), "symbol_table": "json",
                        "relation_table": "json"}

    @classmethod
    def make(cls, *, path: str, blob_id: ObjectId, language: str | None, byte_count: int,
             line_count: int, complete: bool, note: str | None,
             symbols: tuple[CodeSymbol, ...], relations: tuple[CodeRelation, ...]
             ) -> FileVersion:
        """Build a version, packing its rows (the file id is the path's).

        Returns:
            The version.
        """
        return cls(path=path, file_id=file_id(path), blob_id=blob_id, language=language,
                   byte_count=byte_count, line_count=line_count, complete=complete, note=note,
                   symbol_table=_pack(symbols), relation_table=_pack(relations))

    @property
    def symbols(self) -> tuple[CodeSymbol, ...]:
        """The symbols, in order of appearance."""
        return tuple(CodeSymbol(*r) for r in _unpack(self.symbol_table, _SYMBOL_COLUMNS,
                                                     "file_version.symbol_table"))

    @property
    def relations(self) -> tuple[CodeRelation, ...]:
        """The outgoing relations, in order."""
        return tuple(CodeRelation(*r) for r in _unpack(self.relation_table, _RELATION_COLUMNS,
                                                       "file_version.relation_table"))

    def check(self, where: str) -> None:
        """Refuse an empty path, a file id that is not the path's, and malformed tables.

        Raises:
            SchemaError: if a field breaks one of these rules; ``where`` names the object.
        """
        _nonempty(where, "path", self.path)
        if self.file_id != file_id(self.path):
            raise SchemaError(f"{where}.file_id: is not the id of {self.path!r}")
        _unpack(self.symbol_table, _SYMBOL_COLUMNS, f"{where}.symbol_table")
        _unpack(self.relation_table, _RELATION_COLUMNS, f"{where}.relation_table")


@dataclass(frozen=True, slots=True)
class FileRecord(Record):
    """The newest ingested version of a path (replay key: the path)."""

    path: str
    version: ObjectId
    blob: ObjectId
    updated_at: int
    prev: ObjectId | None

    KIND: ClassVar = "file"
    FIELDS: ClassVar = {"path": "str", "version": "oid", "blob": "oid", "updated_at": "int",
                        "prev": Opt("oid")}

    def check(self, where: str) -> None:
        """Refuse an empty path.

        Raises:
            SchemaError: if it is empty; ``where`` names the record.
        """
        _nonempty(where, "path", self.path)

    def replay_key(self) -> tuple[str, ...]:
        """The key records of this kind compete for."""
        return ("file", self.path)


@dataclass(frozen=True, slots=True)
class FileRemoved(Record):
    """A tombstone: the path left the work tree (replay key: the path)."""

    path: str
    at: int
    prev: ObjectId | None

    KIND: ClassVar = "file_removed"
    FIELDS: ClassVar = {"path": "str", "at": "int", "prev": Opt("oid")}

    def check(self, where: str) -> None:
        """Refuse an empty path.

        Raises:
            SchemaError: if it is empty; ``where`` names the record.
        """
        _nonempty(where, "path", self.path)

    def replay_key(self) -> tuple[str, ...]:
        """The key records of this kind compete for."""
        return ("file", self.path)


CodeRecord = FileRecord | FileRemoved
