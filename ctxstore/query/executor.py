"""Running queries against the derived index: the query language as SQL, and search.

``run_query`` compiles a parsed query into one SQL ``WHERE`` over ``nodes`` (tags,
edges and FTS5 as sub-queries). Superseded nodes are left out unless asked for.
Results are ranked by full-text relevance when the query has text terms, otherwise
by recency.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ctxstore.index.read import NODE_COLUMNS, NodeRow, load_tags, node_from_row, resolve_node_id
from ctxstore.query.parser import And, Compare, Field, Not, Or, Text, parse_query

__all__ = ["compile_where", "run_query", "select_candidates", "search_nodes", "fts_literal"]

_COMPARE_OPS = {">": ">", "<": "<", ">=": ">=", "<=": "<=", "=": "="}
_WORD = re.compile(r'"([^"]*)"|(\S+)')


def fts_literal(text: str) -> str:
    """Quote ``text`` as one FTS5 string (a phrase of its tokens)."""
    return '"' + text.replace('"', '""') + '"'


def compile_where(conn: sqlite3.Connection, node: Any, args: list[Any], texts: list[str]) -> str:
    """Compile an AST node to SQL over ``nodes n``; appends parameters to ``args`` and
    full-text terms to ``texts`` (for ranking).

    Raises:
        NodeNotFound, AmbiguousPrefix, InvalidInput: for a ``from:``/``to:`` id that
            does not name exactly one node.
    """
    if isinstance(node, And):
        return "(" + " AND ".join(compile_where(conn, i, args, texts) for i in node.items) + ")"
    if isinstance(node, Or):
        return "(" + " OR ".join(compile_where(conn, i, args, texts) for i in node.items) + ")"
    if isinstance(node, Not):
        return "(NOT " + compile_where(conn, node.item, args, []) + ")"
    if isinstance(node, Text):
        texts.append(node.text)
        args.append(fts_literal(node.text))
        return "n.rowid IN (SELECT rowid FROM nodes_fts WHERE nodes_fts MATCH ?)"
    if isinstance(node, Compare):
        op = _COMPARE_OPS[node.op]
        if node.field in ("created", "updated"):
            args.append(int(node.value * 1000))
            return f"n.{node.field}_at {op} ?"
        args.append(node.value)
        return f"n.tokens {op} ?"
    assert isinstance(node, Field)
    name, value = node.name, node.value
    if name == "type":
        args.append(value)
        return "n.type = ?"
    if name == "tag":
        args.append(value)
        return "EXISTS (SELECT 1 FROM tags t WHERE t.node_id = n.id AND t.tag = ?)"
    if name == "has":
        if value == "summary":
            return "(n.summary IS NOT NULL AND n.summary != '')"
        return ("(EXISTS (SELECT 1 FROM edges e WHERE e.from_kind = 'node' AND e.from_key = n.id)"
                " OR EXISTS (SELECT 1 FROM edges e WHERE e.to_kind = 'node' AND e.to_key = n.id))")
    if name in ("from", "to"):
        other = resolve_node_id(conn, value)
        args.append(other)
        if name == "from":
            return ("EXISTS (SELECT 1 FROM edges e WHERE e.from_kind = 'node' AND e.from_key = ?"
                    " AND e.to_kind = 'node' AND e.to_key = n.id)")
        return ("EXISTS (SELECT 1 FROM edges e WHERE e.to_kind = 'node' AND e.to_key = ?"
                " AND e.from_kind = 'node' AND e.from_key = n.id)")
    if name == "id":
        args.extend([value.upper(), value.upper() + "\U0010ffff"])
        return "(n.id >= ? AND n.id < ?)"
    raise ValueError(f"unknown field {name}")  # pragma: no cover - the parser refuses it


def run_query(conn: sqlite3.Connection, text: str, *, now: float,
              include_superseded: bool = False, limit: int | None = None) -> list[NodeRow]:
    """Parse and run a query; return the matching live nodes (with tags).

    Raises:
        QuerySyntaxError: (E011) pointing at the position of a syntax error.
        NodeNotFound, AmbiguousPrefix: for a ``from:``/``to:`` id naming no single node.
    """
    ast = parse_query(text, now=now)
    args: list[Any] = []
    texts: list[str] = []
    where = compile_where(conn, ast, args, texts)
    if not include_superseded:
        where += " AND n.superseded_by IS NULL"
    cols = ", ".join(f"n.{c.strip()}" for c in NODE_COLUMNS.split(","))
    if texts:
        # Rank by relevance of the positive text terms (bm25: lower is better).
        match = " OR ".join(fts_literal(t) for t in texts)
        sql = (f"SELECT {cols} FROM nodes n LEFT JOIN (SELECT rowid AS r, bm25(nodes_fts) AS score "
               f"FROM nodes_fts WHERE nodes_fts MATCH ?) s ON s.r = n.rowid WHERE {where} "
               "ORDER BY coalesce(s.score, 0), n.updated_at DESC, n.id")
        args = [match, *args]
    else:
        sql = f"SELECT {cols} FROM nodes n WHERE {where} ORDER BY n.updated_at DESC, n.id"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    return load_tags(conn, [node_from_row(r) for r in conn.execute(sql, args)])


def select_candidates(conn: sqlite3.Connection, text: str, *, now: float, ranks: dict[str, int],
                      unranked: int, include_superseded: bool = False) -> list[tuple[int, str, int]]:
    """The nodes a query selects as light rows ``(rank, id, tokens)`` in priority order:
    rank (the lowest ``ranks`` value among the node's tags, ``unranked`` when it has none
    of them), then newest first, then id. Ordering and ranking happen in SQLite, so a
    caller that loads full rows only for some nodes (compose) never builds or sorts
    thousands of Python rows.

    Raises:
        QuerySyntaxError, NodeNotFound, AmbiguousPrefix: as ``run_query``.
    """
    tags = sorted(ranks)
    args: list[Any] = [x for tag in tags for x in (tag, ranks[tag])]
    # One range seek per node over the (node_id, tag) key (an IN list costs a seek per tag:
    # ~5 ms more on 10,000 nodes); tags inside the range but not ranked give NULL.
    rank = (f"coalesce((SELECT min(CASE t.tag {' '.join(['WHEN ? THEN ?'] * len(tags))} END) "
            "FROM tags t WHERE t.node_id = n.id AND t.tag BETWEEN ? AND ?), ?)" if tags else "?")
    args += [tags[0], tags[-1], unranked] if tags else [unranked]
    where = compile_where(conn, parse_query(text, now=now), args, [])
    if not include_superseded:
        where += " AND n.superseded_by IS NULL"
    sql = (f"SELECT {rank} AS rank, n.id, n.tokens FROM nodes n WHERE {where} "
           "ORDER BY rank, n.updated_at DESC, n.id")
    return conn.execute(sql, args).fetchall()


def search_nodes(conn: sqlite3.Connection, text: str, *, limit: int = 20,
                 include_superseded: bool = False) -> list[tuple[NodeRow, float]]:
    """Full-text search: every word (or "quoted phrase") must occur; ranked by BM25.

    Returns:
        (node, score) pairs, best first; the score is BM25 negated (higher is better).
    """
    terms = [m.group(1) if m.group(1) is not None else m.group(2) for m in _WORD.finditer(text)]
    terms = [t for t in terms if t.strip()]
    if not terms:
        return []
    match = " AND ".join(fts_literal(t) for t in terms)
    cols = ", ".join(f"n.{c.strip()}" for c in NODE_COLUMNS.split(","))
    extra = "" if include_superseded else "AND n.superseded_by IS NULL"
    rows = conn.execute(
        f"SELECT {cols}, s.score FROM (SELECT rowid AS r, bm25(nodes_fts) AS score FROM nodes_fts "
        f"WHERE nodes_fts MATCH ?) s JOIN nodes n ON n.rowid = s.r WHERE 1 {extra} "
        "ORDER BY s.score, n.updated_at DESC LIMIT ?", (match, limit)).fetchall()
    nodes = load_tags(conn, [node_from_row(r[:-1]) for r in rows])
    return [(n, -r[-1]) for n, r in zip(nodes, rows)]
