"""Knowledge records and the change batches that carry them (DESIGN §4).

Knowledge is never updated in place: every change is a record in a ``change_batch``.
State is the replay of all reachable batches, where for each key the record with the
greatest ``(stamp, version id)`` wins, tombstones included. The version id of a record
is the BLAKE3 hash of its canonical encoding, so it is the same wherever the record is
copied (compaction copies the newest records into one curated batch).

Stamps are integer milliseconds since the epoch from the hybrid logical clock of
``ctxstore.clock``: a new version is stamped at least one past the version it replaces
(``prev``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import blake3

from ctxstore.ids import ObjectId
from ctxstore.model import codec
from ctxstore.model._schema import REF, ListOf, MapOf, Opt, Record, SchemaError, from_wire
from ctxstore.model.build import CargoRecord, CommandRunRecord
from ctxstore.model.code import FileRecord, FileRemoved
from ctxstore.model.codec import JsonValue
from ctxstore.model.registry import typed
from ctxstore.records import dataclass

__all__ = [
    "NodeRecord",
    "NodeRemoved",
    "EdgeRecord",
    "EdgeRemoved",
    "ViewRecord",
    "ViewRemoved",
    "PurgeRecord",
    "KnowledgeRecord",
    "ChangeBatch",
    "RECORD_KINDS",
    "record_key",
    "key_text",
    "record_stamp",
    "version_id",
    "record_to_wire",
    "record_from_wire",
]


def _nonempty(where: str, name: str, value: str) -> None:
    if not value:
        raise SchemaError(f"{where}.{name}: must not be empty")


@dataclass(frozen=True, slots=True)
class NodeRecord(Record):
    """A full version of a knowledge node."""

    id: str
    type: str
    content: str | None
    content_blob: ObjectId | None
    summary: str | None
    tags: tuple[str, ...]
    metadata: dict[str, JsonValue]
    status: str
    superseded_by: str | None
    created_at: int
    updated_at: int
    author: str | None
    prev: ObjectId | None

    KIND: ClassVar = "node"
    FIELDS: ClassVar = {
        "id": "str", "type": "str", "content": Opt("str"), "content_blob": Opt("oid"),
        "summary": Opt("str"), "tags": ListOf("str"), "metadata": MapOf("json"),
        "status": "str", "superseded_by": Opt("str"), "created_at": "int",
        "updated_at": "int", "author": Opt("str"), "prev": Opt("oid"),
    }

    def check(self, where: str) -> None:
        """Refuse an empty id or type, content not set exactly once, and unsorted or repeated tags.

        Raises:
            SchemaError: if a field breaks one of these rules; ``where`` names the record.
        """
        _nonempty(where, "id", self.id)
        _nonempty(where, "type", self.type)
        if (self.content is None) == (self.content_blob is None):
            raise SchemaError(f"{where}: exactly one of content and content_blob must be set")
        if list(self.tags) != sorted(set(self.tags)):
            raise SchemaError(f"{where}.tags: must be sorted and unique")


@dataclass(frozen=True, slots=True)
class NodeRemoved(Record):
    """A tombstone for a node."""

    id: str
    at: int
    prev: ObjectId | None

    KIND: ClassVar = "node_removed"
    FIELDS: ClassVar = {"id": "str", "at": "int", "prev": Opt("oid")}


@dataclass(frozen=True, slots=True)
class EdgeRecord(Record):
    """A directed, labelled edge between two typed endpoints ``(kind, key)``."""

    from_ref: tuple[str, str]
    to_ref: tuple[str, str]
    label: str
    weight: float | None
    metadata: dict[str, JsonValue]
    evidence: dict[str, JsonValue] | None
    created_at: int
    updated_at: int
    prev: ObjectId | None

    KIND: ClassVar = "edge"
    FIELDS: ClassVar = {
        "from_ref": REF, "to_ref": REF, "label": "str", "weight": Opt("num"),
        "metadata": MapOf("json"), "evidence": Opt(MapOf("json")), "created_at": "int",
        "updated_at": "int", "prev": Opt("oid"),
    }

    def check(self, where: str) -> None:
        """Refuse an empty label.

        Raises:
            SchemaError: if the label is empty; ``where`` names the record.
        """
        _nonempty(where, "label", self.label)


@dataclass(frozen=True, slots=True)
class EdgeRemoved(Record):
    """A tombstone for an edge."""

    from_ref: tuple[str, str]
    to_ref: tuple[str, str]
    label: str
    at: int
    prev: ObjectId | None

    KIND: ClassVar = "edge_removed"
    FIELDS: ClassVar = {"from_ref": REF, "to_ref": REF, "label": "str", "at": "int",
                        "prev": Opt("oid")}


@dataclass(frozen=True, slots=True)
class ViewRecord(Record):
    """A named query with a token budget."""

    name: str
    query: str
    budget: int
    description: str | None
    created_at: int
    updated_at: int
    prev: ObjectId | None

    KIND: ClassVar = "view"
    FIELDS: ClassVar = {"name": "str", "query": "str", "budget": "int",
                        "description": Opt("str"), "created_at": "int", "updated_at": "int",
                        "prev": Opt("oid")}

    def check(self, where: str) -> None:
        """Refuse an empty name.

        Raises:
            SchemaError: if the name is empty; ``where`` names the record.
        """
        _nonempty(where, "name", self.name)


@dataclass(frozen=True, slots=True)
class ViewRemoved(Record):
    """A tombstone for a view."""

    name: str
    at: int
    prev: ObjectId | None

    KIND: ClassVar = "view_removed"
    FIELDS: ClassVar = {"name": "str", "at": "int", "prev": Opt("oid")}


@dataclass(frozen=True, slots=True)
class PurgeRecord(Record):
    """What ``ctx purge`` removed from the history (docs/format.md, docs/security.md).

    Replay ignores every record whose version id is in ``versions``, wherever it comes
    from: a Git merge with a clone that still has the old history brings the old records
    back into reach, never into the state. ``objects`` names every object written again
    (content replaced, or a commit or batch naming one): ``ctx gc`` deletes the old ones
    whatever else would keep them. The record names ids only: hashes, never the content.
    """

    id: str
    versions: tuple[ObjectId, ...]
    objects: tuple[ObjectId, ...]
    at: int

    KIND: ClassVar = "purge"
    FIELDS: ClassVar = {"id": "str", "versions": ListOf("oid"), "objects": ListOf("oid"),
                        "at": "int"}

    @property
    def prev(self) -> ObjectId | None:
        """A purge replaces no earlier version of its key (each purge has a key of its own)."""
        return None

    def check(self, where: str) -> None:
        """Refuse an empty id.

        Raises:
            SchemaError: if the id is empty; ``where`` names the record.
        """
        _nonempty(where, "id", self.id)


KnowledgeRecord = (NodeRecord | NodeRemoved | EdgeRecord | EdgeRemoved | ViewRecord | ViewRemoved
                   | CargoRecord | CommandRunRecord | FileRecord | FileRemoved | PurgeRecord)
RECORD_KINDS: dict[str, type[Record]] = {
    cls.KIND: cls
    for cls in (NodeRecord, NodeRemoved, EdgeRecord, EdgeRemoved, ViewRecord, ViewRemoved,
                CargoRecord, CommandRunRecord, FileRecord, FileRemoved, PurgeRecord)
}


def record_key(rec: KnowledgeRecord) -> tuple[str, ...]:
    """Return the replay key of a record: records with equal keys compete."""
    if isinstance(rec, (NodeRecord, NodeRemoved)):
        return ("node", rec.id)
    if isinstance(rec, (EdgeRecord, EdgeRemoved)):
        return ("edge", *rec.from_ref, *rec.to_ref, rec.label)
    if isinstance(rec, (CargoRecord, CommandRunRecord)):  # model.build: cargo, command_run
        return rec.replay_key()
    if isinstance(rec, (FileRecord, FileRemoved)):  # model.code: file, file_removed
        return rec.replay_key()
    if isinstance(rec, PurgeRecord):
        return ("purge", rec.id)
    return ("view", rec.name)


def key_text(key: tuple[str, ...]) -> str:
    """The text form of a replay key, as the index stores it.

    Unit separator between parts: no part can contain it.
    """
    return "\x1f".join(key)


def record_stamp(rec: KnowledgeRecord) -> int:
    """Return the HLC stamp a record competes with."""
    if isinstance(rec, (NodeRemoved, EdgeRemoved, ViewRemoved, FileRemoved, PurgeRecord)):
        return rec.at
    return rec.updated_at


def record_to_wire(rec: KnowledgeRecord) -> dict[str, Any]:
    """Return the msgpack-ready map of a record, with its ``kind``."""
    wire: dict[str, Any] = rec.to_wire()
    wire["kind"] = rec.KIND
    return wire


def version_id(rec: KnowledgeRecord) -> bytes:
    """Return the 32-byte version id of a record (hash of its canonical encoding)."""
    return blake3.blake3(codec.encode(record_to_wire(rec))).digest()


def record_from_wire(value: Any, where: str) -> KnowledgeRecord:
    """A record from its wire map (``record_to_wire``'s form, with ``kind``).

    Raises:
        SchemaError: if the map is not a valid record; ``where`` names it.
    """
    return _record_from_wire(value, where)


def _record_from_wire(value: Any, where: str) -> KnowledgeRecord:
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise SchemaError(f"{where}: expected a record map with a kind")
    cls = RECORD_KINDS.get(value["kind"])
    if cls is None:
        raise SchemaError(f"{where}: unknown record kind {value['kind']!r}")
    body = {k: v for k, v in value.items() if k != "kind"}
    rec: KnowledgeRecord = cls.from_wire(body, where)
    return rec


@typed("change_batch", 1)
@dataclass(frozen=True, slots=True)
class ChangeBatch(Record):
    """The knowledge records written by one operation (at most one per key).

    Its records are a kinded union (each map carries ``kind``), so it overrides the
    generic ``to_wire`` / ``from_wire`` of ``Record``.
    """

    created_at: int
    author: str | None
    records: tuple[KnowledgeRecord, ...]

    # "record": one kinded knowledge record (RECORD_KINDS), decoded by from_wire below.
    FIELDS: ClassVar = {"created_at": "int", "author": Opt("str"), "records": ListOf("record")}

    def check(self, where: str) -> None:
        """Refuse two records for the same key in one batch.

        Raises:
            SchemaError: if two records share a key; ``where`` names the batch.
        """
        keys = [record_key(r) for r in self.records]
        if len(keys) != len(set(keys)):
            raise SchemaError(f"{where}.records: two records for one key")

    def to_wire(self) -> dict[str, Any]:
        """Return the payload map (without type/v)."""
        return {"created_at": self.created_at, "author": self.author,
                "records": [record_to_wire(r) for r in self.records]}

    @classmethod
    def from_wire(cls, value: dict[str, Any], where: str) -> ChangeBatch:
        """Build and validate a batch from its payload map."""
        unknown = set(value) - set(cls.FIELDS)
        missing = set(cls.FIELDS) - set(value)
        if unknown or missing:
            raise SchemaError(f"{where}: unknown {sorted(unknown)} / missing {sorted(missing)}")
        if not isinstance(value["records"], list):
            raise SchemaError(f"{where}.records: expected a list")
        batch = cls(
            created_at=from_wire(value["created_at"], "int", f"{where}.created_at"),
            author=from_wire(value["author"], Opt("str"), f"{where}.author"),
            records=tuple(_record_from_wire(r, f"{where}.records[{i}]")
                          for i, r in enumerate(value["records"])),
        )
        batch.check(where)
        return batch
