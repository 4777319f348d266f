"""The SELECTs behind the derived structures (``graph.scc``, ``search.tantivy_index``), ``ctx debug index``.

The relationship graph is the union of knowledge edges (``edges``), code edges
(``code_edges``, this clone's work tree: ``index.codedb``) and the edges of build records
(``build_edges``: Cargo, command runs), all between typed endpoints ``(kind, key)``; the
adjacency of ``ctx debug index`` adds ``UpdatedIn`` (``updated_in_edges``: a node to the
canonical commits that changed it; ``file_updated_in_edges``: a file to the commits that first
recorded each of its versions) and ``HasVersion`` (``has_version_edges``: a file to each
content the history recorded of it), all derived from history, which the SCC graph leaves
out. ``lookup`` answers ``ctx debug index KEY`` from the spec 002 §10.2 indexes as SQLite holds them: the path
index (``files``), the name index (``symbols.name``, ``packages.name``, node types),
the stable-key index (``symbols.qualname``) and the adjacency index (both edge tables,
forward and backward). SQL stays in ``index/``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import field
from typing import Any

from ctxstore.index.codedb import key_hash
from ctxstore.records import dataclass

__all__ = ["graph_size", "GraphEdge", "IndexLookup", "graph_edges", "lookup", "classify_key",
           "chunk_documents", "node_documents"]

# (from_kind, from_key, to_kind, to_key, label)
GraphEdge = tuple[str, str, str, str, str]

_ADJACENCY = (
    "SELECT 'knowledge', from_kind, from_key, to_kind, to_key, label FROM edges"
    " WHERE {side}_kind = ? AND {side}_key = ?"
    " UNION ALL SELECT 'code:' || path, from_kind, from_key, to_kind, to_key, label FROM code_edges"
    " WHERE {side}_hash = ? AND {side}_kind = ? AND {side}_key = ?"
    " UNION ALL SELECT 'code:' || path, from_kind, from_key, to_kind, to_key, label FROM build_edges"
    " WHERE {side}_kind = ? AND {side}_key = ?"
    " UNION ALL SELECT 'history', from_kind, from_key, to_kind, to_key, label FROM updated_in_edges"
    " WHERE {side}_kind = ? AND {side}_key = ?"
    " UNION ALL SELECT 'history', from_kind, from_key, to_kind, to_key, label FROM has_version_edges"
    " WHERE {side}_kind = ? AND {side}_key = ?"
    " UNION ALL SELECT 'history', from_kind, from_key, to_kind, to_key, label"
    " FROM file_updated_in_edges WHERE {side}_kind = ? AND {side}_key = ? ORDER BY 6, 3, 5 LIMIT ?")


def graph_size(conn: sqlite3.Connection) -> int:
    """How many rows the graph ``graph_edges`` reads has (every edge table, counted)."""
    row = conn.execute("SELECT (SELECT count(*) FROM edges) + (SELECT count(*) FROM code_edges)"
                       " + (SELECT count(*) FROM build_edges)").fetchone()
    return int(row[0])


def graph_edges(conn: sqlite3.Connection) -> list[GraphEdge]:
    """Every edge of the relationship graph at the index's HEAD, knowledge and code, deduplicated.

    Code edges whose endpoints are incomplete (NULL) are left out.

    Args:
        conn: A synced index connection.

    Returns:
        The distinct ``(from_kind, from_key, to_kind, to_key, label)`` rows, sorted.
    """
    rows = conn.execute(
        "SELECT from_kind, from_key, to_kind, to_key, label FROM edges"
        " UNION SELECT from_kind, from_key, to_kind, to_key, label FROM code_edges"
        " WHERE from_kind IS NOT NULL AND from_key IS NOT NULL"
        " AND to_kind IS NOT NULL AND to_key IS NOT NULL"
        " UNION SELECT from_kind, from_key, to_kind, to_key, label FROM build_edges"
        " WHERE from_kind IS NOT NULL AND from_key IS NOT NULL"
        " AND to_kind IS NOT NULL AND to_key IS NOT NULL ORDER BY 1, 2, 3, 4, 5").fetchall()
    return [(str(a), str(b), str(c), str(d), str(e)) for a, b, c, d, e in rows]


@dataclass
class IndexLookup:
    """What each index holds for one endpoint (``ctx debug index``)."""

    kind: str
    key: str
    path: dict[str, Any] | None = None
    names: list[dict[str, Any]] = field(default_factory=list)
    stable: list[dict[str, Any]] = field(default_factory=list)
    forward: list[dict[str, Any]] = field(default_factory=list)
    backward: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The lookup as a JSON-ready map."""
        return {"kind": self.kind, "key": self.key, "path_index": self.path,
                "name_index": self.names, "stable_key_index": self.stable,
                "adjacency": {"forward": self.forward, "backward": self.backward}}


def _dicts(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def _symbols(conn: sqlite3.Connection, column: str, value: str, kind: str | None,
             limit: int) -> list[dict[str, Any]]:
    extra, args = (" AND kind = ?", [kind]) if kind else ("", [])
    args_: list[object] = list(args)
    if column == "qualname":  # found by the key's hash, then its text
        extra, args_ = f" AND qualname_hash = ?{extra}", [key_hash(value), *args]
    return _dicts(conn.execute(
        "SELECT path, qualname, name, kind, start_line, end_line FROM symbols"  # noqa: S608
        f" WHERE {column} = ?{extra} ORDER BY path, start_line LIMIT ?", [value, *args_, limit]))


def _names(conn: sqlite3.Connection, namespace: str, name: str, limit: int) -> list[dict[str, Any]]:
    """The name index (spec §10.2.2) for one ``(namespace, name)``."""
    if namespace in ("module", "item"):
        rows = _symbols(conn, "name", name, None, limit)
        return [r for r in rows if (r["kind"] == "module") == (namespace == "module")]
    if namespace == "package":
        return _dicts(conn.execute(
            "SELECT workspace, package_id, name, version, manifest_path FROM packages"
            " WHERE name = ? ORDER BY workspace, package_id LIMIT ?", (name, limit)))
    return _dicts(conn.execute(
        "SELECT id, type, status, substr(content, 1, 80) AS content FROM nodes WHERE type = ?"
        " AND (id = ? OR json_extract(metadata, '$.task_number') = ?) ORDER BY id LIMIT ?",
        (namespace, name, name, limit)))


def _adjacent(conn: sqlite3.Connection, side: str, kind: str, key: str, limit: int
              ) -> list[dict[str, Any]]:
    sql = _ADJACENCY.format(side=side)
    # code_edges finds the key by its hash, then its text
    rows = conn.execute(sql, (kind, key, key_hash(key), *(kind, key) * 5, limit)).fetchall()
    other = ("to_kind", "to_key") if side == "from" else ("from_kind", "from_key")
    out = []
    for source, fk, fkey, tk, tkey, label in rows:
        ends = {"from_kind": fk, "from_key": fkey, "to_kind": tk, "to_key": tkey}
        out.append({"label": label, "kind": ends[other[0]], "key": ends[other[1]],
                    "source": source})
    return out


def lookup(conn: sqlite3.Connection, kind: str, key: str, *, limit: int = 200) -> IndexLookup:
    """What the indexes hold for the endpoint ``(kind, key)``.

    Args:
        conn: A synced index connection.
        kind: ``file``, ``module``, ``item``, ``node``, ``name:<namespace>`` (a name index
            query) or another endpoint kind.
        key: The path, qualified name, node id or name.
        limit: At most this many rows per index.

    Returns:
        The lookup; empty lists where an index holds nothing.
    """
    out = IndexLookup(kind, key)
    if kind.startswith("name:"):
        out.names = _names(conn, kind.removeprefix("name:"), key, limit)
        return out
    if kind == "file":
        rows = _dicts(conn.execute(
            "SELECT path, hex(version) AS version, hex(blob) AS blob, language, byte_count,"
            " line_count, complete, note FROM files WHERE path = ?", (key,)))
        out.path = rows[0] if rows else None
    if kind in ("module", "item"):
        out.stable = _symbols(conn, "qualname", key, None, limit)
        bare = key.replace("::", ".").rsplit(".", 1)[-1]
        out.names = _names(conn, kind, bare, limit)
    out.forward = _adjacent(conn, "from", kind, key, limit)
    out.backward = _adjacent(conn, "to", kind, key, limit)
    return out


def chunk_documents(conn: sqlite3.Connection) -> Iterator[tuple[int, str, str | None, str]]:
    """Every file chunk: ``(rowid, path, qualname, text)`` in rowid order."""
    for rowid, path, qualname, text in conn.execute(
            "SELECT rowid, path, qualname, text FROM chunks ORDER BY rowid"):
        yield int(rowid), str(path), qualname if isinstance(qualname, str) else None, str(text)


def node_documents(conn: sqlite3.Connection) -> Iterator[tuple[int, str, str, str]]:
    """Every live node's text: ``(rowid, id, type, content + summary)`` in rowid order."""
    for rowid, node_id, node_type, content, summary in conn.execute(
            "SELECT rowid, id, type, content, summary FROM nodes ORDER BY rowid"):
        yield int(rowid), str(node_id), str(node_type), \
            str(content) + ("\n" + str(summary) if summary else "")


def classify_key(conn: sqlite3.Connection, key: str) -> tuple[str, str] | None:
    """The endpoint a bare KEY of ``ctx debug index`` names, if a code index knows it.

    An indexed path, a symbol's qualified name, or an endpoint some edge points at.

    Args:
        conn: A synced index connection.
        key: The text given.

    Returns:
        ``(kind, key)`` or None (the caller then tries a node id).
    """
    if conn.execute("SELECT 1 FROM files WHERE path = ?", (key,)).fetchone() or conn.execute(
            "SELECT 1 FROM file_versions WHERE path = ? LIMIT 1", (key,)).fetchone():
        return "file", key
    row = conn.execute("SELECT kind FROM symbols WHERE qualname_hash = ctx_key_hash(?1)"
                       " AND qualname = ?1 LIMIT 1", (key,)).fetchone()
    if row:
        return ("module" if row[0] == "module" else "item"), key
    for kind in ("module", "item", "file"):
        if conn.execute("SELECT 1 FROM code_edges WHERE to_kind = ? AND to_key = ?2"
                        " AND to_hash = ctx_key_hash(?2) LIMIT 1", (kind, key)).fetchone() or conn.execute(
                "SELECT 1 FROM build_edges WHERE to_kind = ? AND to_key = ? LIMIT 1",
                (kind, key)).fetchone() or conn.execute(
                "SELECT 1 FROM edges WHERE to_kind = ? AND to_key = ? LIMIT 1",
                (kind, key)).fetchone():
            return kind, key
    return None
