"""Import, export and file ingestion: the JSON exchange format of spec 000 ("Import/Export").

``export_document`` turns the index into one JSON-ready document; ``import_document``
validates such a document completely *before* writing anything and then stages every
record in one change batch (one work commit, one durability barrier), so an import is
all-or-nothing (RELIABILITY IM-01..03). ``ingest_file`` stores a text file as a
``source`` node.

An import is hostile input: this module bounds its size and nesting, refuses NaN,
duplicate keys and lone surrogates, clamps timestamps from the future (DESIGN §4) and
never overwrites what the store holds. It does not read stdin or print: the CLI does.

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
import errno
import hashlib
import json
import math
import os
import re
import sqlite3
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ctxstore.clock import clamp_future, now_ms
from ctxstore.edges import normalize_edge_type
from ctxstore.errors import InvalidInput
from ctxstore.ids import is_ulid
from ctxstore.index import open_index
from ctxstore.index.read import all_edges, nodes_by_ids, read_views
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord, NodeRecord, ViewRecord, key_text
from ctxstore.nodes import AddedNode, add_node, split_content, validate_tag, validate_type
from ctxstore.query.parser import parse_query
from ctxstore.repo import Store
from ctxstore.staging import StageResult, stage_records
from ctxstore.views import validate_view_name

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "MAX_DOCUMENT_BYTES", "MAX_INGEST_BYTES",
           "ImportReport", "export_document", "parse_document", "read_document_file",
           "import_document", "ingest_file"]

EXPORT_FORMAT = "ctx-export"
EXPORT_VERSION = 1
MAX_DOCUMENT_BYTES = 256 << 20
MAX_INGEST_BYTES = 16 << 20
# Metadata is stored inside a change batch, whose canonical encoding allows 64 levels in
# all (codec.MAX_DEPTH); the batch, record and metadata map take a few of them.
MAX_METADATA_DEPTH = 32

_STATUS = re.compile(r"[a-z][a-z_-]{0,31}")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})",
                  re.ASCII)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
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
    """Check a metadata value: what the canonical codec can store, nested at most
    ``MAX_METADATA_DEPTH`` levels (recursion is bounded by that depth)."""
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
    return value


def _relabel(exc: InvalidInput, where: str) -> InvalidInput:
    return InvalidInput(f"{where}: {exc.message}", hint=exc.hint)


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
        ids = [row[0] for row in conn.execute("SELECT id FROM nodes ORDER BY id")]
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


def _read_regular_file(path: Path, cap: int, what: str) -> bytes:
    """Read a regular file of at most ``cap`` bytes (never blocks on a FIFO or device)."""
    name = str(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except ValueError:
        raise InvalidInput(f"invalid {what} path {name!r}") from None
    except FileNotFoundError:
        raise InvalidInput(f"no such {what}: {name}") from None
    except IsADirectoryError:
        raise InvalidInput(f"{name} is a directory, not a file") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InvalidInput(f"{name} is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInput(f"{name} is not a regular file")
        if info.st_size > cap:
            raise InvalidInput(f"{what} {name} is larger than {cap >> 20} MiB")
        chunks: list[bytes] = []
        total = 0
        while total <= cap:  # the file may grow while we read it: stop at cap + 1
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise InvalidInput(f"{name} is a directory, not a file") from None
        raise InvalidInput(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > cap:
        raise InvalidInput(f"{what} {name} is larger than {cap >> 20} MiB")
    return b"".join(chunks)


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
    return _read_regular_file(path, MAX_DOCUMENT_BYTES, "file")


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


@dataclass
class _Plan:
    nodes: list[NodeRecord]
    blobs: dict[str, bytes]  # node id -> blob of its content, for content kept as a blob
    edges: list[EdgeRecord]
    views: list[ViewRecord]


def _list(doc: Mapping[str, Any], name: str) -> list[Any]:
    value = doc.get(name, [])
    if not isinstance(value, list):
        raise InvalidInput(f"{name}: expected an array, got {_json_type(value)}")
    return value


def _build_node(item: Any, where: str, now: int) -> tuple[NodeRecord, list[bytes]]:
    obj = _object(item, where, _NODE_FIELDS, ("id", "type", "content"))
    node_id = _node_id(obj["id"], f"{where}.id")
    node_type = _text(obj["type"], f"{where}.type")
    assert node_type is not None
    try:
        validate_type(node_type)
    except InvalidInput as exc:
        raise _relabel(exc, f"{where}.type") from None
    content = _text(obj["content"], f"{where}.content")
    assert content is not None
    try:
        inline, blob_id, blobs = split_content(content)
    except InvalidInput as exc:
        raise _relabel(exc, f"{where}.content") from None
    raw_tags = obj.get("tags") or []
    if not isinstance(raw_tags, list):
        raise InvalidInput(f"{where}.tags: expected an array, got {_json_type(raw_tags)}")
    tags: set[str] = set()
    for i, tag in enumerate(raw_tags):
        text = _text(tag, f"{where}.tags[{i}]")
        assert text is not None
        try:
            tags.add(validate_tag(text))
        except InvalidInput as exc:
            raise _relabel(exc, f"{where}.tags[{i}]") from None
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
    label = _text(obj["type"], f"{where}.type")
    assert label is not None
    try:
        label = normalize_edge_type(label)
    except InvalidInput as exc:
        raise _relabel(exc, f"{where}.type") from None
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
    name = _text(obj["name"], f"{where}.name")
    assert name is not None
    try:
        validate_view_name(name)
    except InvalidInput as exc:
        raise _relabel(exc, f"{where}.name") from None
    query = _text(obj["query"], f"{where}.query")
    assert query is not None
    try:
        parse_query(query, now=now / 1000)
    except InvalidInput as exc:
        raise _relabel(exc, f"{where}.query") from None
    budget = obj["budget"]
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget < 1 << 63:
        raise InvalidInput(f"{where}.budget: expected a positive integer, got {_short(budget)}")
    created, updated = _times(obj, where, now)
    return ViewRecord(name=name, query=query, budget=budget,
                      description=_text(obj.get("description"), f"{where}.description",
                                        optional=True),
                      created_at=created, updated_at=updated, prev=None)


def _build_plan(doc: Mapping[str, Any], now: int) -> _Plan:
    """Check every field of the document (no store access) and build the records."""
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
    plan = _Plan([], {}, [], [])
    first_seen: dict[str, int] = {}
    for i, item in enumerate(_list(doc, "nodes")):
        record, blobs = _build_node(item, f"nodes[{i}]", now)
        if record.id in first_seen:
            raise InvalidInput(f"nodes[{i}].id: duplicate id {record.id} "
                               f"(also nodes[{first_seen[record.id]}])")
        first_seen[record.id] = i
        plan.nodes.append(record)
        if blobs:
            plan.blobs[record.id] = blobs[0]
    edge_keys: dict[tuple[str, str, str], int] = {}
    for i, item in enumerate(_list(doc, "edges")):
        edge = _build_edge(item, f"edges[{i}]", now)
        key = (edge.from_ref[1], edge.to_ref[1], edge.label)
        if key in edge_keys:
            raise InvalidInput(f"edges[{i}]: duplicate edge (also edges[{edge_keys[key]}])")
        edge_keys[key] = i
        plan.edges.append(edge)
    view_names: dict[str, int] = {}
    for i, item in enumerate(_list(doc, "views")):
        view = _build_view(item, f"views[{i}]", now)
        if view.name in view_names:
            raise InvalidInput(f"views[{i}].name: duplicate view {view.name!r} "
                               f"(also views[{view_names[view.name]}])")
        view_names[view.name] = i
        plan.views.append(view)
    return plan


def _live_ids(conn: sqlite3.Connection, ids: Iterable[str]) -> set[str]:
    wanted = list(ids)
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        marks = ",".join("?" * len(chunk))
        found.update(r[0] for r in conn.execute(
            f"SELECT id FROM nodes WHERE id IN ({marks})", chunk))
    return found


def _edge_exists(conn: sqlite3.Connection, edge: EdgeRecord) -> bool:
    return conn.execute(
        "SELECT 1 FROM edges WHERE from_kind = ? AND from_key = ? AND to_kind = ? AND to_key = ?"
        " AND label = ?", (*edge.from_ref, *edge.to_ref, edge.label)).fetchone() is not None


def _after_history(conn: sqlite3.Connection, key: tuple[str, ...], stamp: int
                   ) -> tuple[int, bytes | None]:
    """Stamp and ``prev`` for a record whose key may have history (a deleted node, edge
    or view): the imported version must win replay over the tombstone, so it is stamped
    after it (hybrid clock), and names it as its predecessor."""
    row = conn.execute("SELECT version, stamp FROM versions WHERE key = ? "
                       "ORDER BY stamp DESC, version DESC LIMIT 1", (key_text(key),)).fetchone()
    if row is None:
        return stamp, None
    return max(stamp, row[1] + 1), bytes(row[0])


def _collision(what: str, names: list[str]) -> InvalidInput:
    shown = ", ".join(names[:_SHOWN_IDS]) + (" ..." if len(names) > _SHOWN_IDS else "")
    return InvalidInput(f"{len(names)} {what} already in the store: {shown}",
                        hint="use --merge to skip them")


def import_document(store: Store, doc: Mapping[str, Any] | bytes | str, *, merge: bool
                    ) -> ImportReport:
    """Validate an export document completely, then stage it as one change batch.

    Nothing is written unless the whole document is valid. Timestamps from the future
    are clamped to now. Items the store already has are never overwritten: without
    ``merge`` they make the import fail; with ``merge`` they are skipped and reported.

    Args:
        store: The store to write to.
        doc: A parsed document, or its raw text/bytes (parsed with ``parse_document``).
        merge: Skip nodes, edges and views the store already has instead of failing.

    Returns:
        The counts of what was imported and skipped; ``staged`` is None when there was
        nothing new to write (an idempotent re-import writes nothing).

    Raises:
        InvalidInput: naming the first invalid item (e.g. ``nodes[3].type: unknown node
            type 'x'``), an edge to a node neither in the document nor in the store, or
            (without ``merge``) items the store already has. The store is unchanged.
        LockConflict, StorageIOError: if the write cannot happen (the store is unchanged).
    """
    if isinstance(doc, (bytes, str)):
        doc = parse_document(doc)
    now = now_ms()
    plan = _build_plan(doc, now)
    report = ImportReport()
    with store.lock():
        conn = open_index(store)
        existing = _live_ids(conn, (n.id for n in plan.nodes))
        known = {n.id for n in plan.nodes} | existing
        outside = {e.from_ref[1] for e in plan.edges} | {e.to_ref[1] for e in plan.edges}
        known |= _live_ids(conn, outside - known)
        for i, edge in enumerate(plan.edges):
            for end in (edge.from_ref[1], edge.to_ref[1]):
                if end not in known:
                    raise InvalidInput(f"edges[{i}]: node {end} is neither in the document "
                                       "nor in the store")
        old_edges = [e for e in plan.edges if _edge_exists(conn, e)]
        old_views = [v for v in plan.views if conn.execute(
            "SELECT 1 FROM views WHERE name = ?", (v.name,)).fetchone() is not None]
        if not merge:
            if existing:
                raise _collision("nodes are", [n.id for n in plan.nodes if n.id in existing])
            if old_edges:
                raise _collision("edges are", [f"{e.from_ref[1]} -{e.label}-> {e.to_ref[1]}"
                                               for e in old_edges])
            if old_views:
                raise _collision("views are", [v.name for v in old_views])
        report.skipped = [n.id for n in plan.nodes if n.id in existing]
        report.skipped_edges, report.skipped_views = len(old_edges), len(old_views)
        skip_edges = {(e.from_ref, e.to_ref, e.label) for e in old_edges}
        skip_views = {v.name for v in old_views}

        records: list[KnowledgeRecord] = []
        blobs: list[bytes] = []
        for node in plan.nodes:
            if node.id in existing:
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
        if records:
            # One call: one change batch, one work commit, one durability barrier.
            report.staged = stage_records(
                store, records, blobs=blobs,
                message=f"import {report.nodes} nodes, {report.edges} edges, "
                        f"{report.views} views")
    return report


# -- ingest ---------------------------------------------------------------------------------------

def ingest_file(store: Store, path: Path, *, tags: Sequence[str] = ()) -> AddedNode:
    """Store a UTF-8 text file as a ``source`` node.

    The node's content is the file's text; its metadata records ``path`` (as given),
    ``bytes`` and ``sha256`` of the file. Symlinks are followed: the path the user gave
    is read, whatever it names, as long as it is a regular file.

    Args:
        store: The store to write to.
        path: The file to read (at most ``MAX_INGEST_BYTES``).
        tags: Tags for the new node.

    Returns:
        The node written.

    Raises:
        InvalidInput: if the file is missing, a directory, not a regular file,
            unreadable, too large, binary (contains NUL bytes), not UTF-8, or empty;
            or a tag is invalid.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    clean_tags = [validate_tag(t) for t in tags]
    data = _read_regular_file(path, MAX_INGEST_BYTES, "file")
    if b"\0" in data:
        raise InvalidInput(f"{path} is a binary file (it contains NUL bytes)",
                           hint="ingest text files only")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text (invalid byte at offset {exc.start})",
                           hint="ingest text files only") from None
    if not text.strip():
        raise InvalidInput(f"{path} is empty")
    metadata = {"path": str(path), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return add_node(store, "source", text, tags=clean_tags, metadata=metadata)
