"""Reading the index: the SELECTs of nodes, tags, edges, views and versions, as plain records.

Owns the read API of the derived index: nodes, tags, edges, views and versions as records,
the hook-key lookup of idempotent agent writes, the commits that changed a node
(``UpdatedIn``), and the few special selections of narrative ingest, CLAUDE.md and
composition; counts are ``index.counts``, the import planner's lookups ``index.lookups``.
Rows are built by column name (``sqlite3.Row``), never by position, so a column added to the
schema cannot shift a field.
Every function takes a connection from ``open_index`` (already in sync); none writes, syncs
or opens the index. Other modules run no SQL on the index (``tests/test_layering.py``);
``query/`` compiles the query language, and ``index/compare.py`` reads raw tables as a
verifier.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ctxstore.errors import AmbiguousPrefix, IndexCorrupt, InvalidInput, NodeNotFound
from ctxstore.records import dataclass, field

__all__ = ["json_cell", "NodeRow", "EdgeRow", "ViewRow", "NODE_FIELDS", "NODE_COLUMNS",
           "node_from_row", "load_tags", "resolve_node_id", "read_node", "find_node",
           "nodes_by_ids", "list_nodes", "active_nodes_of_types", "nodes_with_metadata",
           "edges_of", "all_edges", "out_edges_of", "evolving_edges_to", "node_degrees", "tag_counts",
           "read_views", "find_view", "node_versions", "short_id_lookup", "short_ids",
           "all_node_ids", "find_node_by_hook_key", "updated_in"]

# The columns of a node row, in the order ``NODE_COLUMNS`` selects them.
NODE_FIELDS = ("id", "type", "content", "content_blob", "summary", "status", "superseded_by",
               "created_at", "updated_at", "author", "metadata", "tokens", "version")
NODE_COLUMNS = ", ".join(NODE_FIELDS)
_ULID_CHARS = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
# SQLite's default limit on host parameters is far above this; 500 keeps statements short.
_CHUNK = 500


def _rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
    """Run a SELECT whose rows are ``sqlite3.Row`` (read by column name)."""
    cur = conn.cursor()
    cur.row_factory = sqlite3.Row
    return cur.execute(sql, params)


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


def json_cell(text: str, what: str) -> Any:
    """The JSON an index cell holds (ctx writes only JSON there).

    Raises:
        IndexCorrupt: (E007) if the cell holds something else: the index was damaged.
    """
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        raise IndexCorrupt(f"a {what} cell holds no JSON ({type(exc).__name__})") from None


def node_from_row(row: sqlite3.Row | Sequence[Any]) -> NodeRow:
    """Build a NodeRow from a row of ``NODE_COLUMNS`` (tags not loaded).

    Args:
        row: A ``sqlite3.Row`` (read by name), or a plain tuple whose first columns are
            ``NODE_FIELDS`` in order (``query/`` selects them so, extra columns after).

    Returns:
        The node, without tags.
    """
    col = row if isinstance(row, sqlite3.Row) else dict(zip(NODE_FIELDS, row, strict=True))
    raw = col["metadata"]
    meta = {} if raw == "{}" else json_cell(raw, "node metadata")  # most nodes carry no metadata
    return NodeRow(id=col["id"], type=col["type"], content=col["content"],
                   content_blob=col["content_blob"], summary=col["summary"],
                   status=col["status"], superseded_by=col["superseded_by"],
                   created_at=col["created_at"], updated_at=col["updated_at"],
                   author=col["author"], metadata=meta, tokens=col["tokens"],
                   version=col["version"])


def load_tags(conn: sqlite3.Connection, nodes: list[NodeRow]) -> list[NodeRow]:
    """Fill in the tags of ``nodes`` (sorted per node) and return the same list."""
    if not nodes:
        return nodes
    by_id = {n.id: n for n in nodes}
    ids = list(by_id)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in _rows(conn, f"SELECT node_id, tag FROM tags WHERE node_id IN ({marks})"
                               " ORDER BY tag", chunk):
            by_id[row["node_id"]].tags.append(row["tag"])
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
    rows: list[str] = [r["id"] for r in _rows(
        conn, "SELECT id FROM nodes WHERE id >= ? AND id < ? ORDER BY id LIMIT 11",
        (prefix, prefix + "\U0010ffff"))]
    if not rows:
        raise NodeNotFound(f"no node with id prefix {prefix}")
    if len(rows) > 1:
        raise AmbiguousPrefix(prefix, rows)
    return rows[0]


def find_node(conn: sqlite3.Connection, node_id: str) -> NodeRow | None:
    """The live node with this exact id, or None."""
    row = _rows(conn, f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
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
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for row in _rows(conn, f"SELECT {NODE_COLUMNS} FROM nodes WHERE id IN ({marks})", chunk):
            found[row["id"]] = node_from_row(row)
    nodes = [found[i] for i in ids if i in found]
    return load_tags(conn, nodes)


def list_nodes(conn: sqlite3.Connection, *, node_type: str | None = None,
               tags: Sequence[str] = (), created_since_ms: int | None = None,
               limit: int | None = None) -> list[NodeRow]:
    """Live nodes, newest first, filtered (``ctx list``).

    Args:
        conn: A synced index connection.
        node_type: Only nodes of this type.
        tags: Only nodes carrying every one of these tags.
        created_since_ms: Only nodes created at or after this time (ms since the epoch).
        limit: At most this many nodes; None for all.

    Returns:
        The nodes with their tags, newest first (ties by id, descending).
    """
    where: list[str] = ["1"]
    args: list[Any] = []
    if node_type:
        where.append("n.type = ?")
        args.append(node_type)
    for tag in tags:
        where.append("EXISTS (SELECT 1 FROM tags t WHERE t.node_id = n.id AND t.tag = ?)")
        args.append(tag)
    if created_since_ms is not None:
        where.append("n.created_at >= ?")
        args.append(created_since_ms)
    sql = (f"SELECT {NODE_COLUMNS} FROM nodes n WHERE {' AND '.join(where)}"
           " ORDER BY n.created_at DESC, n.id DESC")
    if limit:
        sql += " LIMIT ?"
        args.append(int(limit))
    return load_tags(conn, [node_from_row(r) for r in _rows(conn, sql, args)])


def recent_nodes(conn: sqlite3.Connection, types: Sequence[str], *, after_ms: int,
                 by: str = "updated", limit: int) -> list[NodeRow]:
    """Live nodes of some types written after a time, last updated first.

    What ``type:A OR type:B AND updated:>Nd`` (or ``created:``) selects, in the query
    language's order, without its parser.

    Args:
        conn: A synced index connection.
        types: The node types wanted.
        after_ms: Only nodes whose time is later than this (ms since the epoch).
        by: ``"updated"`` or ``"created"``: which time.
        limit: At most this many nodes.

    Returns:
        The nodes with their tags, by ``updated_at`` descending, then id; superseded
        nodes left out.
    """
    if not types:
        return []
    column = {"updated": "updated_at", "created": "created_at"}[by]
    # The unary + keeps the filters off their indexes: walking nodes_updated newest first
    # stops at the limit, where the type or superseded index read every live node and sorted.
    rows = _rows(conn, f"SELECT {NODE_COLUMNS} FROM nodes n WHERE +n.superseded_by IS NULL"
                       f" AND +n.type IN ({','.join('?' * len(types))}) AND +n.{column} > ?"
                       " ORDER BY n.updated_at DESC, n.id LIMIT ?",
                 [*types, after_ms, limit]).fetchall()
    return load_tags(conn, [node_from_row(r) for r in rows])


def active_nodes_of_types(conn: sqlite3.Connection, types: Sequence[str]) -> list[NodeRow]:
    """Live nodes of these types that are active and not superseded (CLAUDE.md).

    Args:
        conn: A synced index connection.
        types: The node types wanted.

    Returns:
        The nodes with their tags, in index order.
    """
    if not types:
        return []
    rows = _rows(conn, f"SELECT {NODE_COLUMNS} FROM nodes WHERE superseded_by IS NULL"
                       f" AND status = 'active' AND type IN ({','.join('?' * len(types))})",
                 list(types)).fetchall()
    return load_tags(conn, [node_from_row(r) for r in rows])


def nodes_with_metadata(conn: sqlite3.Connection, path: str) -> list[NodeRow]:
    """Live nodes whose metadata has a value at ``path`` (narrative ingest's entry link).

    Args:
        conn: A synced index connection.
        path: A JSON path below ``$`` (``narrative.entry``), from code, never from input.

    Returns:
        The nodes with their tags, by id.
    """
    rows = _rows(conn, f"SELECT {NODE_COLUMNS} FROM nodes WHERE json_extract(metadata, ?)"
                       " IS NOT NULL ORDER BY id", (f"$.{path}",))
    return load_tags(conn, [node_from_row(r) for r in rows])


def _edge(row: sqlite3.Row) -> EdgeRow:
    evidence = row["evidence"]
    return EdgeRow(from_kind=row["from_kind"], from_key=row["from_key"], to_kind=row["to_kind"],
                   to_key=row["to_key"], label=row["label"], weight=row["weight"],
                   metadata=json_cell(row["metadata"], "edge metadata"),
                   evidence=json_cell(evidence, "edge evidence") if evidence else None,
                   created_at=row["created_at"], updated_at=row["updated_at"])


_EDGE_COLS = ("from_kind, from_key, to_kind, to_key, label, weight, metadata, evidence,"
              " created_at, updated_at")


def edges_of(conn: sqlite3.Connection, node_id: str, direction: str = "both",
             label: str | None = None) -> list[EdgeRow]:
    """Edges touching a node: ``out`` (from it), ``in`` (to it) or ``both``."""
    out: list[EdgeRow] = []
    extra, args = ("AND label = ?", [label]) if label else ("", [])
    if direction in ("out", "both"):
        out += [_edge(r) for r in _rows(
            conn, f"SELECT {_EDGE_COLS} FROM edges WHERE from_kind='node' AND from_key=? {extra}"
            " ORDER BY label, to_key", [node_id, *args])]
    if direction in ("in", "both"):
        out += [_edge(r) for r in _rows(
            conn, f"SELECT {_EDGE_COLS} FROM edges WHERE to_kind='node' AND to_key=? {extra}"
            " ORDER BY label, from_key", [node_id, *args])]
    return out


def all_edges(conn: sqlite3.Connection) -> list[EdgeRow]:
    """Every live edge."""
    return [_edge(r) for r in _rows(conn, f"SELECT {_EDGE_COLS} FROM edges "
                                          "ORDER BY from_key, label, to_key")]


def out_edges_of(conn: sqlite3.Connection, ids: Sequence[str], labels: Sequence[str]
                 ) -> dict[tuple[str, str], list[str]]:
    """The node-to-node edges with these labels leaving a batch of nodes, in one query.

    Args:
        conn: A synced index connection.
        ids: The source node ids.
        labels: The edge labels wanted.

    Returns:
        ``(source id, label)`` to the target ids, each list by target id.
    """
    out: dict[tuple[str, str], list[str]] = {}
    if not ids or not labels:
        return out
    marks = ",".join("?" * len(ids))
    for row in _rows(
            conn, f"SELECT from_key, to_key, label FROM edges WHERE from_kind = 'node' AND"
            f" from_key IN ({marks}) AND to_kind = 'node' AND label IN"
            f" ({','.join('?' * len(labels))}) ORDER BY label, to_key", [*ids, *labels]):
        out.setdefault((row["from_key"], row["label"]), []).append(row["to_key"])
    return out


def evolving_edges_to(conn: sqlite3.Connection, ids: Sequence[str]
                      ) -> list[tuple[str, str, str, str]]:
    """The ``REFINES`` / ``CONTRADICTS`` edges a newer node wrote to these (``metadata.evolves``).

    Only from active nodes of the same type as the node pointed at (``knowledge.evolution``).

    Args:
        conn: A synced index connection.
        ids: The older nodes.

    Returns:
        ``(older id, newer id, type, label)``, the newer nodes oldest first.
    """
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return [(row[0], row[1], row[2], row[3]) for row in conn.execute(
        "SELECT e.to_key, n.id, n.type, e.label FROM edges e"
        " JOIN nodes n ON n.id = e.from_key JOIN nodes o ON o.id = e.to_key"
        " WHERE e.from_kind = 'node' AND e.to_kind = 'node'"
        " AND e.label IN ('REFINES', 'CONTRADICTS')"
        f" AND e.to_key IN ({marks}) AND n.status = 'active' AND n.type = o.type"
        " AND json_extract(e.metadata, '$.evolves') = 1"
        " ORDER BY n.created_at, n.id", list(ids))]


def node_degrees(conn: sqlite3.Connection) -> dict[str, int]:
    """The edge degree (in + out) of every node some edge touches.

    Args:
        conn: A synced index connection.

    Returns:
        Node id to its number of edges.
    """
    return {row["key"]: int(row["n"]) for row in _rows(
        conn, "SELECT key, sum(n) AS n FROM (SELECT from_key AS key, count(*) AS n FROM edges"
        " WHERE from_kind = 'node' GROUP BY from_key UNION ALL SELECT to_key, count(*)"
        " FROM edges WHERE to_kind = 'node' GROUP BY to_key) GROUP BY key")}


def tag_counts(conn: sqlite3.Connection, prefix: str | None = None) -> list[tuple[str, int]]:
    """Tags of live nodes with their node counts, optionally by prefix."""
    if prefix:
        rows = _rows(conn, "SELECT tag, count(*) AS n FROM tags WHERE tag >= ? AND tag < ? "
                           "GROUP BY tag ORDER BY tag", (prefix, prefix + "\U0010ffff"))
    else:
        rows = _rows(conn, "SELECT tag, count(*) AS n FROM tags GROUP BY tag ORDER BY tag")
    return [(r["tag"], r["n"]) for r in rows]


_VIEW_COLS = "name, query, budget, description, created_at, updated_at"


def _view(row: sqlite3.Row) -> ViewRow:
    return ViewRow(name=row["name"], query=row["query"], budget=row["budget"],
                   description=row["description"], created_at=row["created_at"],
                   updated_at=row["updated_at"])


def read_views(conn: sqlite3.Connection) -> list[ViewRow]:
    """Saved views by name."""
    return [_view(r) for r in _rows(conn, f"SELECT {_VIEW_COLS} FROM views ORDER BY name")]


def find_view(conn: sqlite3.Connection, name: str) -> ViewRow | None:
    """A saved view, or None."""
    row = _rows(conn, f"SELECT {_VIEW_COLS} FROM views WHERE name = ?", (name,)).fetchone()
    return _view(row) if row else None


def node_versions(conn: sqlite3.Connection, node_id: str) -> list[dict[str, Any]]:
    """Every version of a node the index has seen, oldest first (tombstones included)."""
    # The object model is imported where it is used: the hot reads (search, hooks) skip it.
    from ctxstore.model import codec
    from ctxstore.model.knowledge import key_text

    rows = _rows(conn, "SELECT version, stamp, kind, record FROM versions WHERE key = ? "
                       "ORDER BY stamp, version", (key_text(("node", node_id)),))
    return [{"version": r["version"].hex(), "stamp": r["stamp"], "kind": r["kind"],
             "record": codec.decode(r["record"])} for r in rows]


# Up to this many lookups, each asks the index for the two ids beside it (two indexed
# queries); after that every id is read once and bisected (compose shows hundreds of nodes,
# a hook a few: reading 10,000 ids for those cost ~11 ms).
_SHORT_ID_QUERIES = 64


def all_node_ids(conn: sqlite3.Connection) -> list[str]:
    """Every live node id, sorted.

    Args:
        conn: A synced index connection.

    Returns:
        The ids in ascending order.
    """
    return [str(r["id"]) for r in _rows(conn, "SELECT id FROM nodes ORDER BY id")]


def short_id_lookup(conn: sqlite3.Connection, minimum: int = 8) -> Callable[[str], str]:
    """A function giving the shortest unique prefix of a live node's id.

    The prefix has at least ``minimum`` characters and no other live node shares it, so a short id
    shown to people or models can be typed back. It depends only on the ids just before and
    just after the node's in sorted order: the first lookups ask the index for those two, and
    a caller that looks up many reads every id once and bisects.
    """
    every: list[str] | None = None
    asked = 0

    def neighbours(node_id: str) -> tuple[str | None, str | None]:
        nonlocal every, asked
        asked += 1
        if every is None and asked > _SHORT_ID_QUERIES:
            every = all_node_ids(conn)
        if every is None:
            before = _rows(conn, "SELECT id FROM nodes WHERE id < ? ORDER BY id DESC LIMIT 1",
                           (node_id,)).fetchone()
            after = _rows(conn, "SELECT id FROM nodes WHERE id > ? ORDER BY id LIMIT 1",
                          (node_id,)).fetchone()
            return (str(before["id"]) if before else None, str(after["id"]) if after else None)
        i = bisect.bisect_left(every, node_id)
        j = i + 1 if i < len(every) and every[i] == node_id else i
        return (every[i - 1] if i > 0 else None, every[j] if j < len(every) else None)

    def lookup(node_id: str) -> str:
        longest = 0
        for other in neighbours(node_id):
            if other is None:
                continue
            common = 0
            for x, y in zip(node_id, other, strict=False):  # ids of any length: compare the common prefix
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


# -- idempotent agent writes (RELIABILITY CO-11, TR-12) --------------------------------------

def find_node_by_hook_key(conn: sqlite3.Connection, key: str) -> str | None:
    """The id of a live node whose metadata records ``hook_key`` = ``key``.

    An indexed lookup: ``index.apply`` copies a node's ``metadata.hook_key`` into the
    ``nodes.hook_key`` column (partial index ``nodes_hook_key``). The key is an opaque
    string here (``claude.state.key_of`` makes it).

    Args:
        conn: A synced index connection (``ctxstore.index.open_index``).
        key: The hook key, as the adapter computed it.

    Returns:
        The node id, or None when no live node has that key.
    """
    row = _rows(conn, "SELECT id FROM nodes WHERE hook_key = ? LIMIT 1", (key,)).fetchone()
    return None if row is None else str(row["id"])


def updated_in(conn: sqlite3.Connection, node_id: str) -> list[tuple[bytes, int]]:
    """The canonical commits that changed a node (spec 002 §9 ``UpdatedIn``), newest first.

    Args:
        conn: A synced index connection.
        node_id: The node's full id.

    Returns:
        ``(commit id, commit time in ms)`` pairs, each commit once, newest first (a commit's
        time has whole seconds: within one, the commit further from the root first).
    """
    return [(bytes(oid), int(stamp)) for oid, stamp in conn.execute(
        "SELECT u.commit_oid, max(u.stamp) FROM updated_in u"
        " LEFT JOIN commit_graph c ON c.oid = u.commit_oid WHERE u.node_id = ?"
        " GROUP BY u.commit_oid ORDER BY 2 DESC, max(coalesce(c.gen, 0)) DESC, 1 DESC",
        (node_id,))]
