"""``build_import_plan``: a parsed document checked field by field and turned into records.

No store access: what the store already holds is ``apply``'s concern.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ctxstore.errors import InvalidInput
from ctxstore.knowledge.edges import normalize_edge_type
from ctxstore.knowledge.exchange.document import (
    _EDGE_FIELDS,
    _NODE_FIELDS,
    _STATUS,
    _TOP_FIELDS,
    _VIEW_FIELDS,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    _checked,
    _json_type,
    _metadata,
    _node_id,
    _object,
    _short,
    _text,
    _times,
)
from ctxstore.knowledge.nodes import split_content, validate_tag, validate_type
from ctxstore.knowledge.views import validate_view_name
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import EdgeRecord, NodeRecord, ViewRecord
from ctxstore.query.parser import parse_query
from ctxstore.records import dataclass
from ctxstore.staging import StageResult

__all__ = ["ImportReport", "ImportPlan", "build_import_plan"]

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
