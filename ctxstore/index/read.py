"""Reading the index: nodes, tags, edges, views and versions as plain records.

Every function takes a connection from ``open_index`` (already in sync).
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxstore.errors import AmbiguousPrefix, InvalidInput, NodeNotFound
from ctxstore.model import codec
from ctxstore.model.knowledge import key_text

__all__ = ["NodeRow", "EdgeRow", "ViewRow", "NODE_COLUMNS", "node_from_row", "load_tags",
           "resolve_node_id", "read_node", "find_node", "nodes_by_ids", "edges_of", "all_edges",
           "tag_counts", "read_views", "find_view", "node_versions", "short_id_lookup", "short_ids"]

NODE_COLUMNS = ("id, type, content, content_blob, summary, status, superseded_by, created_at,"
                " updated_at, author, metadata, tokens, version")
_ULID_CHARS = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


@dataclass
class NodeRow:
    """A live node as the index holds it."""

    id: str
    type: str
    content: str
    content_blob: bytes | None
    summary: str | None
    status: str
    superseded_by: str | None
    created_at: int
    updated_at: int
    author: str | None
    metadata: dict[str, Any]
    tokens: int
    version: bytes
    tags: list[str] = field(default_factory=list)


@dataclass
class EdgeRow:
    """A live edge."""

    from_kind: str
    from_key: str
    to_kind: str
    to_key: str
    label: str
    weight: float | None
    metadata: dict[str, Any]
    evidence: dict[str, Any] | None
    created_at: int
    updated_at: int


@dataclass
class ViewRow:
    """A saved view."""

    name: str
    query: str
    budget: int
    description: str | None
    created_at: int
    updated_at: int
    builtin: bool = False


def node_from_row(row: tuple[Any, ...]) -> NodeRow:
    """Build a NodeRow from a ``SELECT NODE_COLUMNS`` row (tags not loaded)."""
    meta = {} if row[10] == "{}" else json.loads(row[10])  # most nodes carry no metadata
    return NodeRow(*row[:10], meta, row[11], row[12])  # type: ignore[arg-type]


def load_tags(conn: sqlite3.Connection, nodes: list[NodeRow]) -> list[NodeRow]:
    """Fill in the tags of ``nodes`` (sorted per node) and return the same list."""
    if not nodes:
        return nodes
    by_id = {n.id: n for n in nodes}
    ids = list(by_id)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for node_id, tag in conn.execute(
                f"SELECT node_id, tag FROM tags WHERE node_id IN ({marks}) ORDER BY tag", chunk):
            by_id[node_id].tags.append(tag)
    return nodes


def resolve_node_id(conn: sqlite3.Connection, text: str) -> str:
    """Resolve a full ULID or a unique prefix of at least 4 characters.

    Raises:
        InvalidInput: if ``text`` is not a ULID or prefix.
        NodeNotFound: if no live node matches.
        AmbiguousPrefix: if several do (the candidates are listed).
    """
    prefix = text.strip().upper()
    if len(prefix) < 4 or len(prefix) > 26 or not set(prefix) <= _ULID_CHARS:
        raise InvalidInput(f"not a node id: {text!r} (want a ULID or a prefix of 4+ characters)")
    if len(prefix) == 26:
        if conn.execute("SELECT 1 FROM nodes WHERE id = ?", (prefix,)).fetchone():
            return prefix
        raise NodeNotFound(f"no node {prefix}")
    rows = [r[0] for r in conn.execute(
        "SELECT id FROM nodes WHERE id >= ? AND id < ? ORDER BY id LIMIT 11",
        (prefix, prefix + "\U0010ffff"))]
    if not rows:
        raise NodeNotFound(f"no node with id prefix {prefix}")
    if len(rows) > 1:
        raise AmbiguousPrefix(prefix, rows)
    return rows[0]


def find_node(conn: sqlite3.Connection, node_id: str) -> NodeRow | None:
    """The live node with this exact id, or None."""
    row = conn.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
    return load_tags(conn, [node_from_row(row)])[0] if row else None


def read_node(conn: sqlite3.Connection, text: str) -> NodeRow:
    """The live node named by a ULID or unique prefix.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: see ``resolve_node_id``.
    """
    node = find_node(conn, resolve_node_id(conn, text))
    assert node is not None
    return node


def nodes_by_ids(conn: sqlite3.Connection, ids: list[str]) -> list[NodeRow]:
    """Live nodes for these ids, in the given order (missing ids skipped)."""
    found: dict[str, NodeRow] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE id IN ({marks})", chunk):
            found[row[0]] = node_from_row(row)
    nodes = [found[i] for i in ids if i in found]
    return load_tags(conn, nodes)


def _edge(row: tuple[Any, ...]) -> EdgeRow:
    return EdgeRow(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]),
                   json.loads(row[7]) if row[7] else None, row[8], row[9])


_EDGE_COLS = ("from_kind, from_key, to_kind, to_key, label, weight, metadata, evidence,"
              " created_at, updated_at")


def edges_of(conn: sqlite3.Connection, node_id: str, direction: str = "both",
             label: str | None = None) -> list[EdgeRow]:
    """Edges touching a node: ``out`` (from it), ``in`` (to it) or ``both``."""
    out: list[EdgeRow] = []
    extra, args = ("AND label = ?", [label]) if label else ("", [])
    if direction in ("out", "both"):
        out += [_edge(r) for r in conn.execute(
            f"SELECT {_EDGE_COLS} FROM edges WHERE from_kind='node' AND from_key=? {extra}"
            " ORDER BY label, to_key", [node_id, *args])]
    if direction in ("in", "both"):
        out += [_edge(r) for r in conn.execute(
            f"SELECT {_EDGE_COLS} FROM edges WHERE to_kind='node' AND to_key=? {extra}"
            " ORDER BY label, from_key", [node_id, *args])]
    return out


def all_edges(conn: sqlite3.Connection) -> list[EdgeRow]:
    """Every live edge."""
    return [_edge(r) for r in conn.execute(f"SELECT {_EDGE_COLS} FROM edges "
                                           "ORDER BY from_key, label, to_key")]


def tag_counts(conn: sqlite3.Connection, prefix: str | None = None) -> list[tuple[str, int]]:
    """Tags of live nodes with their node counts, optionally by prefix."""
    if prefix:
        rows = conn.execute("SELECT tag, count(*) FROM tags WHERE tag >= ? AND tag < ? "
                            "GROUP BY tag ORDER BY tag", (prefix, prefix + "\U0010ffff"))
    else:
        rows = conn.execute("SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY tag")
    return [(r[0], r[1]) for r in rows]


def read_views(conn: sqlite3.Connection) -> list[ViewRow]:
    """Saved views by name."""
    return [ViewRow(*r) for r in conn.execute(
        "SELECT name, query, budget, description, created_at, updated_at FROM views ORDER BY name")]


def find_view(conn: sqlite3.Connection, name: str) -> ViewRow | None:
    """A saved view, or None."""
    row = conn.execute("SELECT name, query, budget, description, created_at, updated_at "
                       "FROM views WHERE name = ?", (name,)).fetchone()
    return ViewRow(*row) if row else None


def node_versions(conn: sqlite3.Connection, node_id: str) -> list[dict[str, Any]]:
    """Every version of a node the index has seen, oldest first (tombstones included)."""
    rows = conn.execute("SELECT version, stamp, kind, record FROM versions WHERE key = ? "
                        "ORDER BY stamp, version", (key_text(("node", node_id)),))
    out = []
    for version, stamp, kind, record in rows:
        out.append({"version": version.hex(), "stamp": stamp, "kind": kind,
                    "record": codec.decode(record)})
    return out


def short_id_lookup(conn: sqlite3.Connection, minimum: int = 8) -> Callable[[str], str]:
    """A function giving the shortest prefix (at least ``minimum`` characters) of an id that
    no other live node shares, so a short id shown to people or models can be typed back.
    The ids are read once; each lookup is a binary search."""
    every = [r[0] for r in conn.execute("SELECT id FROM nodes ORDER BY id")]

    def lookup(node_id: str) -> str:
        i = bisect.bisect_left(every, node_id)
        longest = 0
        after = i + 1 if i < len(every) and every[i] == node_id else i
        for j in (i - 1, after):
            if 0 <= j < len(every):
                other = every[j]
                common = 0
                for x, y in zip(node_id, other):
                    if x != y:
                        break
                    common += 1
                longest = max(longest, common)
        return node_id[:max(minimum, longest + 1)]

    return lookup


def short_ids(conn: sqlite3.Connection, ids: list[str], minimum: int = 8) -> dict[str, str]:
    """``short_id_lookup`` for a list of ids."""
    lookup = short_id_lookup(conn, minimum)
    return {i: lookup(i) for i in ids}

