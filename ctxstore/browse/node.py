"""The node page: a node with its history, edges, evidence and stale mentions, or an endpoint.

A code endpoint (``file:PATH``, ``module:NAME``, ``item:NAME``, ...) shows what links to it.

What ``ctx show --history --with-edges`` and ``ctx debug index`` read, as one record. Nothing
here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from ctxstore.code.stale import stale_mentions
from ctxstore.errors import InvalidInput
from ctxstore.index import read as index_read
from ctxstore.index.derived import lookup
from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Provenance, read_provenance
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["EdgeLine", "NodeVersion", "StaleLine", "NodePage", "EndpointPage", "read_node_page",
           "ENDPOINT_KINDS"]

# Endpoint kinds of the code graph (a knowledge node is ``node``; DESIGN §4).
ENDPOINT_KINDS = ("file", "module", "item", "package", "target", "crate", "diagnostic", "node")
_PREVIEW = 120
_LIMIT = 500  # edges of an endpoint shown per direction


@dataclass(frozen=True, slots=True)
class EdgeLine:
    """One edge, seen from the page's node or endpoint.

    Attributes:
        direction: ``out`` (from it) or ``in`` (to it).
        label: The edge type (``DERIVED_FROM``, ``Mentions``, ``Imports``, ...).
        kind: The other end's kind (``node``, ``file``, ...).
        key: The other end's key (a node id for ``node``).
        other_type: The other end's node type, when it is a live node.
        other_title: The first line of the other node's content, when it is a live node.
        evidence: The edge's evidence (tool, commit, span, blob, confidence), as text pairs.
        weight: The edge's weight, if it has one.
        source: ``knowledge`` for an edge of the knowledge graph, ``code:PATH`` for one that
            indexing the file PATH found.
    """

    direction: Literal["in", "out"]
    label: str
    kind: str
    key: str
    other_type: str | None = None
    other_title: str | None = None
    evidence: tuple[tuple[str, str], ...] = ()
    weight: float | None = None
    source: str = "knowledge"


@dataclass(frozen=True, slots=True)
class NodeVersion:
    """One version of a node, as its history holds it.

    Attributes:
        version: The version's object id (hex).
        at_ms: Its time (the replay stamp).
        removed: True for a tombstone (the node was deleted).
        type: The node type of that version.
        content: Its content (None for a tombstone or content kept as a blob).
        summary: Its summary.
        tags: Its tags.
    """

    version: str
    at_ms: int
    removed: bool
    type: str | None
    content: str | None
    summary: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StaleLine:
    """A mention of code that changed since (``code.stale``).

    Attributes:
        kind: The mentioned endpoint's kind.
        key: Its key.
        path: The file it lies in (None when no longer indexed).
        since_ms: When the newer version was recorded (None: removed).
        reason: ``changed`` or ``removed``.
    """

    kind: str
    key: str
    path: str | None
    since_ms: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class NodePage:
    """A knowledge node's page.

    Attributes:
        id: The node id.
        short_id: Its shortest unique prefix (what ``ctx show`` takes back).
        type: Its node type.
        content: Its content.
        summary: Its summary.
        tags: Its tags.
        metadata: Its metadata, as text pairs.
        status: Its status.
        superseded_by: The node that superseded it.
        created_ms: When it was created.
        updated_ms: When it was last updated.
        author: Who wrote it, if recorded.
        tokens: Its estimated tokens.
        edges: Its edges, out first.
        versions: Every version, oldest first.
        stale: Its mentions of code that changed since.
        provenance: Where it came from (``knowledge.nodes.provenance``) as text pairs:
            source, session, Git (branch and commit, ``detached HEAD`` or ``not in Git``),
            files; empty when it records none (then it is not in ``metadata`` either).
    """

    id: str
    short_id: str
    type: str
    content: str
    summary: str | None
    tags: tuple[str, ...]
    metadata: tuple[tuple[str, str], ...]
    status: str
    superseded_by: str | None
    created_ms: int
    updated_ms: int
    author: str | None
    tokens: int
    edges: tuple[EdgeLine, ...]
    versions: tuple[NodeVersion, ...]
    stale: tuple[StaleLine, ...]
    provenance: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class EndpointPage:
    """A code endpoint's page (a file, module, item, ...).

    Attributes:
        kind: The endpoint's kind.
        key: Its key.
        path: For a file: path, language, lines and bytes as text pairs (empty when the
            file is not indexed).
        edges: Its edges in the code and knowledge graphs, out first.
        mentioned_by: The knowledge nodes with an edge to it (decisions naming a file).
    """

    kind: str
    key: str
    path: tuple[tuple[str, str], ...]
    edges: tuple[EdgeLine, ...]
    mentioned_by: tuple[EdgeLine, ...]


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def _pairs(values: Mapping[str, object] | None) -> tuple[tuple[str, str], ...]:
    if not isinstance(values, Mapping):
        return ()
    return tuple((str(k), _text(v)) for k, v in sorted(values.items(), key=lambda kv: str(kv[0]))
                 if v is not None)


def _first_line(text: str) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= _PREVIEW else line[: _PREVIEW - 1] + "…"


def read_node_page(db: Session, ref: str) -> NodePage | EndpointPage:
    """The page of a node (an id or unique prefix) or of a code endpoint (``kind:key``).

    Args:
        db: The open session.
        ref: A node id or a prefix of 4 or more characters, or ``kind:key`` with a kind of
            ``ENDPOINT_KINDS`` (``node:ID`` is the node's page).

    Returns:
        The node's page, or the endpoint's.

    Raises:
        NodeNotFound: (E019), AmbiguousPrefix (E016), InvalidInput (E011) for a bad id or an
            unknown endpoint kind.
    """
    kind, sep, key = ref.partition(":")
    if sep and kind != "node":
        if kind not in ENDPOINT_KINDS or not key:
            raise InvalidInput(f"{ref!r} is neither a node id nor kind:key",
                               hint=f"kinds: {', '.join(ENDPOINT_KINDS)}")
        return _endpoint_page(db, kind, key)
    return _node_page(db, key if sep else ref)


def _node_page(db: Session, ref: str) -> NodePage:
    conn = db.index()
    node = index_read.read_node(conn, ref)
    edges = []
    for e in index_read.edges_of(conn, node.id):
        out = e.from_kind == "node" and e.from_key == node.id
        kind, key = (e.to_kind, e.to_key) if out else (e.from_kind, e.from_key)
        other = index_read.find_node(conn, key) if kind == "node" else None
        edges.append(EdgeLine("out" if out else "in", e.label, kind, key,
                              other.type if other else None,
                              _first_line(other.content) if other else None,
                              _pairs(e.evidence), e.weight))
    edges.sort(key=lambda x: (x.direction != "out", x.label, x.kind, x.key))
    versions = []
    for v in index_read.node_versions(conn, node.id):
        rec = v["record"] if isinstance(v["record"], Mapping) else {}
        removed = v["kind"] == "node_removed"
        content = rec.get("content")
        summary = rec.get("summary")
        tags = rec.get("tags")
        versions.append(NodeVersion(
            str(v["version"]), int(v["stamp"]), removed,
            None if removed else str(rec.get("type")) if rec.get("type") is not None else None,
            content if isinstance(content, str) else None,
            summary if isinstance(summary, str) else None,
            tuple(str(t) for t in tags) if isinstance(tags, (list, tuple)) else ()))
    stale = tuple(StaleLine(m.kind, m.key, m.path, m.since_ms, m.reason)
                  for m in stale_mentions(conn, [node.id]).get(node.id, []))
    short = index_read.short_ids(conn, [node.id])[node.id]
    prov = read_provenance(node.metadata)
    metadata = {k: v for k, v in node.metadata.items() if k != META_PROVENANCE or prov is None}
    return NodePage(node.id, short, node.type, node.content, node.summary, tuple(node.tags),
                    _pairs(metadata), node.status, node.superseded_by, node.created_at,
                    node.updated_at, node.author, node.tokens, tuple(edges), tuple(versions),
                    stale, _provenance_pairs(prov) if prov is not None else ())


def _provenance_pairs(prov: Provenance) -> tuple[tuple[str, str], ...]:
    git = {"branch": f"branch {prov.branch} at commit {prov.commit}",
           "detached": f"detached HEAD at commit {prov.commit}",
           "none": "not in Git (no commit)"}[prov.git_state]
    pairs = [("source", prov.source), ("session", prov.session or "none"), ("git", git)]
    if prov.files:
        pairs.append(("files", ", ".join(prov.files)))
    return tuple(pairs)


def _endpoint_page(db: Session, kind: str, key: str) -> EndpointPage:
    conn = db.index()
    found = lookup(conn, kind, key, limit=_LIMIT)
    edges: list[EdgeLine] = []
    mentioned: list[EdgeLine] = []
    for direction, rows in (("out", found.forward), ("in", found.backward)):
        for row in rows:
            other_kind, other_key = str(row["kind"]), str(row["key"])
            other = index_read.find_node(conn, other_key) if other_kind == "node" else None
            line = EdgeLine("out" if direction == "out" else "in", str(row["label"]),
                            other_kind, other_key, other.type if other else None,
                            _first_line(other.content) if other else None,
                            source=str(row["source"]))
            (mentioned if other is not None and direction == "in" else edges).append(line)
    path = _pairs({k: v for k, v in found.path.items() if k in ("path", "language", "line_count",
                                                                 "byte_count", "note")}
                  ) if found.path else ()
    return EndpointPage(kind, key, path, tuple(edges), tuple(mentioned))
