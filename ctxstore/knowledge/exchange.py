"""Export and import: the JSON exchange format of spec 000 ("Import/Export").

Owns the export document (``export_document``) and the import, in its phases:
``parse_document`` (strict, bounded JSON), ``build_import_plan`` (every field checked and
turned into records, no store access), then ``stage_import_plan`` (what the store already
has, under the lock, and one change batch: one work commit, one durability barrier), so
an import is all-or-nothing (RELIABILITY IM-01..03). ``import_document`` runs the three.
File ingest as a ``source`` node is ``knowledge.sources``.

An import is hostile input: this module bounds its size and nesting, refuses NaN,
duplicate keys and lone surrogates, clamps timestamps from the future (DESIGN §4) and
never overwrites what the store holds. It must not read stdin, print or run SQL (reads
go through ``ctxstore.index``): the CLI reads and renders.

Document format (``"version": 1``, ``"format": "ctx-export"``)::

    {"version": 1, "format": "ctx-export",
     "nodes": [{"id", "type", "content", "summary", "tags", "metadata", "status",
                "superseded_by", "created_at", "updated_at", "author"}],
     "edges": [{"from", "to", "type", "weight", "metadata", "created_at", "updated_at"}],
     "views": [{"name", "query", "budget", "description", "created_at", "updated_at"}]}

Times are ISO-8601 UTC with milliseconds (``2026-11-22T20:37:31.123Z``), the store's
own resolution, so export -> import -> export gives the same document byte for byte.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ctxstore.clock import clamp_future, now_ms
from ctxstore.errors import InvalidInput
from ctxstore.ids import ObjectId, is_ulid
from ctxstore.index import open_index
from ctxstore.index.read import (
    all_edges,
    all_node_ids,
    edge_exists,
    find_view,
    latest_version,
    live_node_ids,
    nodes_by_ids,
    read_views,
)
from ctxstore.knowledge._files import read_regular_file
from ctxstore.knowledge.edges import normalize_edge_type
from ctxstore.knowledge.nodes import split_content, validate_tag, validate_type
from ctxstore.knowledge.views import validate_view_name
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord, NodeRecord, ViewRecord
from ctxstore.narrative.markdown import ENTRY_ROLES, parse_entries, role_of
from ctxstore.narrative.snapshot import read_narrative_bytes
from ctxstore.query.parser import parse_query
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.security.guard import guard, policy
from ctxstore.staging import StageResult, stage_records

if TYPE_CHECKING:
    import sqlite3

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "MAX_DOCUMENT_BYTES", "MAX_METADATA_DEPTH",
           "ImportReport", "ImportPlan", "export_document", "parse_document",
           "read_document_file", "build_import_plan", "stage_import_plan", "import_document"]

EXPORT_FORMAT = "ctx-export"
EXPORT_VERSION = 1
MAX_DOCUMENT_BYTES = 256 << 20
# Metadata is stored inside a change batch, whose canonical encoding allows 64 levels in
# all (codec.MAX_DEPTH); the batch, record and metadata map take a few of them.
MAX_METADATA_DEPTH = 32

_T = TypeVar("_T")
_STATUS = re.compile(r"[a-z][a-z_-]{0,31}")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})",
                  re.ASCII)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_SHOWN_IDS = 5

_NODE_FIELDS = ("id", "type", "content", "summary", "tags", "metadata", "status",
                "superseded_by", "created_at", "updated_at", "author")
_EDGE_FIELDS = ("from", "to", "type", "weight", "metadata", "created_at", "updated_at")
_VIEW_FIELDS = ("name", "query", "budget", "description", "created_at", "updated_at")
_TOP_FIELDS = ("version", "format", "nodes", "edges", "views")


# -- time -----------------------------------------------------------------------------------------

def _iso_ms(ms: int) -> str:
    # Integer arithmetic only: ms / 1000 as a float can land a millisecond off.
    moment = _EPOCH + dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond // 1000:03d}Z"


def _parse_time(value: Any, where: str) -> int:
    if not isinstance(value, str) or not _ISO.fullmatch(value):
        raise InvalidInput(f"{where}: invalid time {_short(value)} "
                           "(want ISO-8601 UTC, e.g. 2026-01-31T12:00:00.000Z)")
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{where}: invalid time {value!r}") from None
    ms = (moment - _EPOCH) // dt.timedelta(milliseconds=1)
    if ms < 0:
        raise InvalidInput(f"{where}: time {value!r} is before 1970")
    return ms


def _times(item: Mapping[str, Any], where: str, now: int) -> tuple[int, int]:
    """(created_at, updated_at) in ms; missing means now, the future is clamped to now."""
    created = now if item.get("created_at") is None \
        else _parse_time(item["created_at"], f"{where}.created_at")
    updated = created if item.get("updated_at") is None \
        else _parse_time(item["updated_at"], f"{where}.updated_at")
    # A stamp from the future would win every last-writer-wins merge forever (IM-02).
    updated = clamp_future(updated, now=now)
    created = min(created, updated)
    return created, updated


# -- value checks ---------------------------------------------------------------------------------

def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(value: Any, where: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: expected a string, got {_json_type(value)}")
    _check_unicode(value, where)
    return value


def _check_unicode(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{where}: not valid Unicode (lone surrogate)") from None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _check_json_value(value: Any, where: str, depth: int = 0) -> None:
    """Check a metadata value: what the canonical codec can store.

    Nested at most ``MAX_METADATA_DEPTH`` levels (recursion is bounded by that depth).
    """
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInput(f"{where}: nested deeper than {MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise InvalidInput(f"{where}: integer out of the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where}: NaN and Infinity are not allowed")
        return
    if isinstance(value, str):
        _check_unicode(value, where)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_value(item, f"{where}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{where}: object keys must be strings")
            _check_unicode(key, f"{where} key {_short(key)}")
            _check_json_value(item, f"{where}.{key}", depth + 1)
        return
    raise InvalidInput(f"{where}: not a JSON value ({type(value).__name__})")


def _metadata(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected an object, got {_json_type(value)}")
    _check_json_value(value, where)
    return dict(value)


def _object(value: Any, where: str, allowed: Sequence[str], required: Sequence[str]
            ) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected an object, got {_json_type(value)}")
    unknown = sorted(k for k in value if k not in allowed)
    if unknown:
        raise InvalidInput(f"{where}: unknown field {_short(unknown[0])}",
                           hint="fields: " + ", ".join(allowed))
    for name in required:
        if name not in value:
            raise InvalidInput(f"{where}: missing field {name!r}")
    return value


def _node_id(value: Any, where: str) -> str:
    if not is_ulid(value):
        raise InvalidInput(f"{where}: not a node id: {_short(value)} "
                           "(want a 26-character upper-case ULID)")
    return str(value)


def _relabel(exc: InvalidInput, where: str) -> InvalidInput:
    return InvalidInput(f"{where}: {exc.message}", hint=exc.hint)


def _checked(value: Any, where: str, check: Callable[[str], _T]) -> _T:
    """``check`` of a required string, its errors prefixed with ``where``."""
    text = _text(value, where)
    assert text is not None
    try:
        return check(text)
    except InvalidInput as exc:
        raise _relabel(exc, where) from None


# -- export ---------------------------------------------------------------------------------------

def export_document(conn: sqlite3.Connection, *, node_ids: list[str] | None = None
                    ) -> dict[str, Any]:
    """Build the export document of the whole store or of some nodes.

    Args:
        conn: A synced index connection (``ctxstore.index.open_index``).
        node_ids: Export only these live nodes (unknown ids are left out) and the edges
            between them; None exports every node, every node-to-node edge and every
            saved view.

    Returns:
        The document: ``version``, ``format``, and ``nodes`` (sorted by id), ``edges``
        (only those whose both ends are exported, sorted) and ``views`` (empty unless the
        export is complete), ready for ``json.dumps``.
    """
    if node_ids is None:
        ids = all_node_ids(conn)
    else:
        ids = sorted(set(node_ids))
    nodes = nodes_by_ids(conn, ids)
    exported = {n.id for n in nodes}
    node_docs = [{
        "id": n.id, "type": n.type, "content": n.content, "summary": n.summary,
        "tags": sorted(n.tags), "metadata": n.metadata, "status": n.status,
        "superseded_by": n.superseded_by, "created_at": _iso_ms(n.created_at),
        "updated_at": _iso_ms(n.updated_at), "author": n.author,
    } for n in nodes]
    edge_docs = [{
        "from": e.from_key, "to": e.to_key, "type": e.label, "weight": e.weight,
        "metadata": e.metadata, "created_at": _iso_ms(e.created_at),
        "updated_at": _iso_ms(e.updated_at),
    } for e in all_edges(conn)
        if e.from_kind == "node" and e.to_kind == "node"
        and e.from_key in exported and e.to_key in exported]
    edge_docs.sort(key=lambda d: (d["from"], d["to"], d["type"]))
    view_docs = [] if node_ids is not None else [{
        "name": v.name, "query": v.query, "budget": v.budget, "description": v.description,
        "created_at": _iso_ms(v.created_at), "updated_at": _iso_ms(v.updated_at),
    } for v in read_views(conn)]
    return {"version": EXPORT_VERSION, "format": EXPORT_FORMAT, "nodes": node_docs,
            "edges": edge_docs, "views": view_docs}


# -- parsing --------------------------------------------------------------------------------------

def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {_short(key)}")
            seen.add(key)
    return result


def parse_document(data: bytes | str) -> dict[str, Any]:
    """Parse the text of an export document (strict JSON, bounded).

    Args:
        data: UTF-8 bytes (no BOM) or text, at most ``MAX_DOCUMENT_BYTES``.

    Returns:
        The top-level JSON object (its fields are checked by ``import_document``).

    Raises:
        InvalidInput: for an oversized document, bytes that are not UTF-8, malformed JSON,
            nesting too deep to parse, NaN/Infinity, duplicate keys or a top level that is
            not an object.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise InvalidInput(f"import document is larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"import document is not UTF-8 text (byte {exc.start})") from None
    else:
        text = data
    if text.startswith("\ufeff"):
        raise InvalidInput("import document starts with a byte-order mark",
                           hint="save it as UTF-8 without a BOM")
    try:
        doc = json.loads(text, parse_constant=_reject_constant,
                         object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise InvalidInput("import document is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"import document is not valid JSON: {exc.msg} "
                           f"(line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # NaN/Infinity, duplicate keys, huge integer literals
        raise InvalidInput(f"import document is not valid: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"import document must be a JSON object, got {_json_type(doc)}")
    return doc


def read_document_file(path: Path) -> bytes:
    """Read an export document from a file, refusing more than ``MAX_DOCUMENT_BYTES``.

    Args:
        path: The file to read.

    Returns:
        Its bytes (parse them with ``parse_document``).

    Raises:
        InvalidInput: if the file is missing, a directory, not a regular file,
            unreadable or too large.
    """
    return read_regular_file(path, MAX_DOCUMENT_BYTES, "file")


# -- import ---------------------------------------------------------------------------------------

@dataclass
class ImportReport:
    """What ``import_document`` wrote and what it left alone.

    Attributes:
        nodes: Nodes imported.
        edges: Edges imported.
        views: Views imported.
        skipped: Ids of nodes skipped because the store already has them (``merge``).
        skipped_edges: Edges skipped because the store already has them (``merge``).
        skipped_views: Views skipped because the store already has them (``merge``).
        staged: The staged write, or None when there was nothing to write.
    """

    nodes: int = 0
    edges: int = 0
    views: int = 0
    skipped: list[str] = field(default_factory=list)
    skipped_edges: int = 0
    skipped_views: int = 0
    staged: StageResult | None = None


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """An export document checked and turned into records (``build_import_plan``).

    Attributes:
        nodes: Node records, in document order, stamped as the document says (clamped).
        blobs: For nodes whose content is kept as a blob, node id -> the blob's bytes.
        edges: Edge records, in document order.
        views: View records, in document order.
    """

    nodes: tuple[NodeRecord, ...]
    blobs: Mapping[str, bytes]
    edges: tuple[EdgeRecord, ...]
    views: tuple[ViewRecord, ...]


def _list(doc: Mapping[str, Any], name: str) -> list[Any]:
    value = doc.get(name, [])
    if not isinstance(value, list):
        raise InvalidInput(f"{name}: expected an array, got {_json_type(value)}")
    return value


def _build_node(item: Any, where: str, now: int) -> tuple[NodeRecord, list[bytes]]:
    obj = _object(item, where, _NODE_FIELDS, ("id", "type", "content"))
    node_id = _node_id(obj["id"], f"{where}.id")
    node_type = _checked(obj["type"], f"{where}.type", validate_type)
    inline, blob_id, blobs = _checked(obj["content"], f"{where}.content", split_content)
    raw_tags = obj.get("tags") or []
    if not isinstance(raw_tags, list):
        raise InvalidInput(f"{where}.tags: expected an array, got {_json_type(raw_tags)}")
    tags = {_checked(tag, f"{where}.tags[{i}]", validate_tag) for i, tag in enumerate(raw_tags)}
    status = obj.get("status")
    if status is None:
        status = "active"
    elif not isinstance(status, str) or not _STATUS.fullmatch(status):
        raise InvalidInput(f"{where}.status: invalid status {_short(status)}")
    superseded_by = obj.get("superseded_by")
    if superseded_by is not None:
        _node_id(superseded_by, f"{where}.superseded_by")
    created, updated = _times(obj, where, now)
    record = NodeRecord(
        id=node_id, type=node_type, content=inline, content_blob=blob_id,
        summary=_text(obj.get("summary"), f"{where}.summary", optional=True),
        tags=tuple(sorted(tags)), metadata=_metadata(obj.get("metadata"), f"{where}.metadata"),
        status=status, superseded_by=superseded_by, created_at=created, updated_at=updated,
        author=_text(obj.get("author"), f"{where}.author", optional=True), prev=None)
    return record, blobs


def _build_edge(item: Any, where: str, now: int) -> EdgeRecord:
    obj = _object(item, where, _EDGE_FIELDS, ("from", "to", "type"))
    src = _node_id(obj["from"], f"{where}.from")
    dst = _node_id(obj["to"], f"{where}.to")
    if src == dst:
        raise InvalidInput(f"{where}: an edge needs two different nodes")
    label = _checked(obj["type"], f"{where}.type", normalize_edge_type)
    weight = obj.get("weight")
    if weight is not None:
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise InvalidInput(f"{where}.weight: expected a number, got {_json_type(weight)}")
        if not math.isfinite(weight) or abs(weight) >= 1 << 63:
            raise InvalidInput(f"{where}.weight: out of range")
    created, updated = _times(obj, where, now)
    return EdgeRecord(from_ref=("node", src), to_ref=("node", dst), label=label, weight=weight,
                      metadata=_metadata(obj.get("metadata"), f"{where}.metadata"),
                      evidence={"tool": "import"}, created_at=created, updated_at=updated,
                      prev=None)


def _build_view(item: Any, where: str, now: int) -> ViewRecord:
    obj = _object(item, where, _VIEW_FIELDS, ("name", "query", "budget"))
    name = _checked(obj["name"], f"{where}.name", validate_view_name)

    def check_query(text: str) -> str:
        parse_query(text, now=now / 1000)
        return text

    query = _checked(obj["query"], f"{where}.query", check_query)
    budget = obj["budget"]
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget < 1 << 63:
        raise InvalidInput(f"{where}.budget: expected a positive integer, got {_short(budget)}")
    created, updated = _times(obj, where, now)
    return ViewRecord(name=name, query=query, budget=budget,
                      description=_text(obj.get("description"), f"{where}.description",
                                        optional=True),
                      created_at=created, updated_at=updated, prev=None)


def build_import_plan(doc: Mapping[str, JsonValue], *, now: int) -> ImportPlan:
    """Check every field of a parsed document and build its records (no store access).

    Args:
        doc: The document, as ``parse_document`` returns it.
        now: The wall clock in milliseconds: missing times become ``now`` and times
            after it are clamped to it.

    Returns:
        The records to import.

    Raises:
        InvalidInput: naming the first invalid item (e.g. ``nodes[3].type: unknown node
            type 'x'``), a duplicate id, edge or view, or an unsupported version/format.
        QuerySyntaxError: (E011) for a view whose query does not parse.
    """
    _object(doc, "document", _TOP_FIELDS, ("version", "format"))
    version = doc["version"]
    if isinstance(version, bool) or version != EXPORT_VERSION or not isinstance(version, int):
        newer = isinstance(version, int) and not isinstance(version, bool) \
            and version > EXPORT_VERSION
        raise InvalidInput(f"unsupported export version {_short(version)} (this ctx reads "
                           f"version {EXPORT_VERSION})",
                           hint="upgrade ctxstore" if newer else None)
    if doc["format"] != EXPORT_FORMAT:
        raise InvalidInput(f"not a ctx export: format is {_short(doc['format'])}, "
                           f"want {EXPORT_FORMAT!r}")
    nodes: list[NodeRecord] = []
    node_blobs: dict[str, bytes] = {}
    edges: list[EdgeRecord] = []
    views: list[ViewRecord] = []
    first_seen: dict[str, int] = {}
    for i, item in enumerate(_list(doc, "nodes")):
        record, blobs = _build_node(item, f"nodes[{i}]", now)
        if record.id in first_seen:
            raise InvalidInput(f"nodes[{i}].id: duplicate id {record.id} "
                               f"(also nodes[{first_seen[record.id]}])")
        first_seen[record.id] = i
        nodes.append(record)
        if blobs:
            node_blobs[record.id] = blobs[0]
    edge_keys: dict[tuple[str, str, str], int] = {}
    for i, item in enumerate(_list(doc, "edges")):
        edge = _build_edge(item, f"edges[{i}]", now)
        key = (edge.from_ref[1], edge.to_ref[1], edge.label)
        if key in edge_keys:
            raise InvalidInput(f"edges[{i}]: duplicate edge (also edges[{edge_keys[key]}])")
        edge_keys[key] = i
        edges.append(edge)
    view_names: dict[str, int] = {}
    for i, item in enumerate(_list(doc, "views")):
        view = _build_view(item, f"views[{i}]", now)
        if view.name in view_names:
            raise InvalidInput(f"views[{i}].name: duplicate view {view.name!r} "
                               f"(also views[{view_names[view.name]}])")
        view_names[view.name] = i
        views.append(view)
    return ImportPlan(tuple(nodes), node_blobs, tuple(edges), tuple(views))




# -- import: against the store --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Overlap:
    """What of a plan the store already has (live)."""

    nodes: frozenset[str]
    edges: tuple[EdgeRecord, ...]
    views: tuple[ViewRecord, ...]


def _find_overlap(conn: sqlite3.Connection, plan: ImportPlan) -> _Overlap:
    """What the store already has of ``plan``; refuses edges to nodes found nowhere."""
    existing = live_node_ids(conn, (n.id for n in plan.nodes))
    known = {n.id for n in plan.nodes} | existing
    outside = {e.from_ref[1] for e in plan.edges} | {e.to_ref[1] for e in plan.edges}
    known |= live_node_ids(conn, outside - known)
    for i, edge in enumerate(plan.edges):
        for end in (edge.from_ref[1], edge.to_ref[1]):
            if end not in known:
                raise InvalidInput(f"edges[{i}]: node {end} is neither in the document "
                                   "nor in the store")
    return _Overlap(
        nodes=frozenset(existing),
        edges=tuple(e for e in plan.edges if edge_exists(conn, e.from_ref, e.to_ref, e.label)),
        views=tuple(v for v in plan.views if find_view(conn, v.name) is not None))


def _collision(what: str, names: list[str]) -> InvalidInput:
    shown = ", ".join(names[:_SHOWN_IDS]) + (" ..." if len(names) > _SHOWN_IDS else "")
    return InvalidInput(f"{len(names)} {what} already in the store: {shown}",
                        hint="use --merge to skip them")


def _refuse_collisions(plan: ImportPlan, overlap: _Overlap) -> None:
    """Without ``merge``, anything the store already has fails the import."""
    if overlap.nodes:
        raise _collision("nodes are", [n.id for n in plan.nodes if n.id in overlap.nodes])
    if overlap.edges:
        raise _collision("edges are", [f"{e.from_ref[1]} -{e.label}-> {e.to_ref[1]}"
                                       for e in overlap.edges])
    if overlap.views:
        raise _collision("views are", [v.name for v in overlap.views])


def _after_history(conn: sqlite3.Connection, key: tuple[str, ...], stamp: int
                   ) -> tuple[int, ObjectId | None]:
    """Stamp and ``prev`` for a record whose key may have history.

    A deleted node, edge or view: the imported version must win replay over the
    tombstone, so it is stamped after it (hybrid clock), and names it as its predecessor.
    """
    latest = latest_version(conn, key)
    if latest is None:
        return stamp, None
    version, seen = latest
    return max(stamp, seen + 1), ObjectId(version)


def _new_records(conn: sqlite3.Connection, plan: ImportPlan, overlap: _Overlap,
                 report: ImportReport) -> tuple[list[KnowledgeRecord], list[bytes]]:
    """The records to stage and the blobs they need; counts them in ``report``.

    Only what the store lacks, each stamped after any history of its key.
    """
    skip_edges = {(e.from_ref, e.to_ref, e.label) for e in overlap.edges}
    skip_views = {v.name for v in overlap.views}
    records: list[KnowledgeRecord] = []
    blobs: list[bytes] = []
    for node in plan.nodes:
        if node.id in overlap.nodes:
            continue
        stamp, prev = _after_history(conn, ("node", node.id), node.updated_at)
        records.append(replace(node, updated_at=stamp, prev=prev))
        if node.id in plan.blobs:
            blobs.append(plan.blobs[node.id])
    report.nodes = len(records)
    for edge in plan.edges:
        if (edge.from_ref, edge.to_ref, edge.label) in skip_edges:
            continue
        stamp, prev = _after_history(
            conn, ("edge", *edge.from_ref, *edge.to_ref, edge.label), edge.updated_at)
        records.append(replace(edge, updated_at=stamp, prev=prev))
        report.edges += 1
    for view in plan.views:
        if view.name in skip_views:
            continue
        stamp, prev = _after_history(conn, ("view", view.name), view.updated_at)
        records.append(replace(view, updated_at=stamp, prev=prev))
        report.views += 1
    return records, blobs


# What ties a node to its narrative entry (narrative.entries META_PATH, META_HASH, META_KEY).
_NARRATIVE_TIES = ("narrative_path", "narrative_hash", "narrative_key")


def _untied_from_missing_entries(store: Store, records: list[KnowledgeRecord]
                                 ) -> list[KnowledgeRecord]:
    """Imported nodes, without ties to narrative entries this store does not have.

    A node exported from another project names an entry of that project's Markdown; here
    the next ``ctx commit`` would read the missing entry as one a person deleted and
    tombstone the node. It stays tied only where its entry is (by marker, or by file and
    heading for an entry a person wrote), or where the file cannot be read (then ingestion
    leaves its nodes alone as well).
    """
    texts: dict[str, str | None] = {}

    def entry_here(node: NodeRecord, rel: str) -> bool:
        parts = rel.split("/")
        if role_of(rel) not in ENTRY_ROLES or rel.startswith("/") or ".." in parts:
            return False
        if rel not in texts:
            path = store.root / "narrative" / rel
            if not path.exists() and not path.is_symlink():
                texts[rel] = ""
            else:
                data = read_narrative_bytes(path)
                texts[rel] = data.decode("utf-8", "replace") if data is not None else None
        text = texts[rel]
        if text is None:
            return True  # unreadable: nothing is ingested from it, nothing removed
        key = node.metadata.get("narrative_key")
        return any(e.marker == node.id or (e.marker is None and key is not None and e.key == key)
                   for e in parse_entries(rel, text))

    out: list[KnowledgeRecord] = []
    for rec in records:
        rel = rec.metadata.get("narrative_path") if isinstance(rec, NodeRecord) else None
        if isinstance(rec, NodeRecord) and isinstance(rel, str) and not entry_here(rec, rel):
            rec = replace(rec, metadata={k: v for k, v in rec.metadata.items()
                                         if k not in _NARRATIVE_TIES})
        out.append(rec)
    return out


def stage_import_plan(store: Store, plan: ImportPlan, *, merge: bool) -> ImportReport:
    """Stage what ``plan`` holds that the store lacks, as one change batch.

    Under the store lock: find what the store already has, refuse it (or, with
    ``merge``, skip it), stamp each record after any history of its key (a deleted node
    comes back after its tombstone), then stage everything in one call.

    Args:
        store: The store to write to.
        plan: The checked records (``build_import_plan``).
        merge: Skip nodes, edges and views the store already has instead of failing.

    Returns:
        The counts of what was imported and skipped; ``staged`` is None when there was
        nothing new to write (an idempotent re-import writes nothing).

    Raises:
        InvalidInput: for an edge to a node neither in the plan nor in the store, or
            (without ``merge``) items the store already has. The store is unchanged.
        LockConflict, StorageIOError: if the write cannot happen (the store is unchanged).
    """
    report = ImportReport()
    with store.lock():
        with closing(open_index(store)) as conn:
            overlap = _find_overlap(conn, plan)
            if not merge:
                _refuse_collisions(plan, overlap)
            report.skipped = [n.id for n in plan.nodes if n.id in overlap.nodes]
            report.skipped_edges, report.skipped_views = len(overlap.edges), len(overlap.views)
            records, blobs = _new_records(conn, plan, overlap, report)
        records = _untied_from_missing_entries(store, records)
        if records:
            # One call: one change batch, one work commit, one durability barrier.
            report.staged = stage_records(
                store, records, blobs=blobs,
                message=f"import {report.nodes} nodes, {report.edges} edges, "
                        f"{report.views} views")
    return report


def _guard_document(store: Store, doc: Mapping[str, Any], allow_secret: bool) -> None:
    """Refuse a document any string of which holds a secret, naming where (``nodes[3].content``).

    Raises:
        SecretRefused: (E025) for the first such string (unless ``allow_secret``).
    """
    pol = policy(store)

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str):
            guard(store, "explicit", value, what=where, allow_secret=allow_secret, policy_=pol)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{where}.{key}" if where else str(key))

    walk(doc, "")


def import_document(store: Store, doc: Mapping[str, JsonValue] | bytes | str, *, merge: bool,
                    allow_secret: bool = False) -> ImportReport:
    """Validate an export document completely, then stage it as one change batch.

    Nothing is written unless the whole document is valid. Timestamps from the future
    are clamped to now. Items the store already has are never overwritten: without
    ``merge`` they make the import fail; with ``merge`` they are skipped and reported.
    The phases are ``parse_document``, ``build_import_plan`` and ``stage_import_plan``.

    Args:
        store: The store to write to.
        doc: A parsed document, or its raw text/bytes (parsed with ``parse_document``).
        merge: Skip nodes, edges and views the store already has instead of failing.
        allow_secret: The user's ``--allow-secret``: import text that holds a secret.

    Returns:
        The counts of what was imported and skipped; ``staged`` is None when there was
        nothing new to write (an idempotent re-import writes nothing).

    Raises:
        SecretRefused: (E025) naming the first string that holds a secret
            (``nodes[3].content``, its rule and line). The store is unchanged.
        InvalidInput: naming the first invalid item (e.g. ``nodes[3].type: unknown node
            type 'x'``), an edge to a node neither in the document nor in the store, or
            (without ``merge``) items the store already has. The store is unchanged.
        LockConflict, StorageIOError: if the write cannot happen (the store is unchanged).
    """
    if isinstance(doc, (bytes, str)):
        doc = parse_document(doc)
    plan = build_import_plan(doc, now=now_ms())
    _guard_document(store, doc, allow_secret)  # an explicit write: nothing is staged before
    return stage_import_plan(store, plan, merge=merge)
