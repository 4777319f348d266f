"""Running queries against the derived index: the query language as SQL, and search.

``run_query`` compiles a parsed query into one SQL ``WHERE`` over ``nodes`` (tags,
edges and full-text matches as sub-queries). Full-text SQL comes from a
``FullTextEngine`` (``ctxstore.search.engine``; FTS5 by default): this module writes
no engine syntax. Superseded nodes are left out unless asked for.
Results are ranked by full-text relevance when the query has text terms, otherwise
by recency.

Every query the parser accepts runs: sub-queries nested deeper than ``SPILL_DEPTH``
become common table expressions (SQLite's parser has a fixed stack of about 100
entries, which ``NOT (a OR NOT (b ...`` fills at 16 levels written inline), and any
error SQLite still raises becomes a typed error: ``QueryTooComplex`` (E011) for a
query over one of SQLite's limits, ``IndexCorrupt`` (E007) for anything else.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from ctxstore.errors import IndexCorrupt, InvalidInput
from ctxstore.index.read import NODE_COLUMNS, NodeRow, load_tags, node_from_row, resolve_node_id
from ctxstore.query.parser import And, Compare, Field, Not, Or, Text, parse_query
from ctxstore.records import dataclass
from ctxstore.search.engine import FullTextEngine
from ctxstore.search.fts5 import default_engine, fts_literal
from ctxstore.search.tokenize import phrase

__all__ = ["QueryTooComplex", "SPILL_DEPTH", "ScoreRow", "compile_where", "run_query",
           "select_candidates", "select_scorable", "search_nodes", "fts_literal"]

_COMPARE_OPS = {">": ">", "<": "<", ">=": ">=", "<=": "<=", "=": "="}
_WORD = re.compile(r'"([^"]*)"|(\S+)')
# Levels of AND/OR/NOT written inline before a sub-query moves into a common table
# expression: about three parser-stack entries a level, well inside SQLite's 100.
SPILL_DEPTH = 8
# SQLite's messages for a statement over one of its limits (sqlite3.OperationalError).
_LIMIT_MESSAGES = ("parser stack overflow", "expression tree is too large", "too many sql variables",
                   "too many terms", "string or blob too big", "too complex", "too many columns")


class QueryTooComplex(InvalidInput):
    """E011: a query over one of SQLite's limits (the parser's limits normally stop it first).

    Attributes:
        detail: SQLite's message.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(f"query is too complex for the index ({detail})",
                         hint="use fewer terms or less nesting (see docs/query.md)")
        self.detail = detail


def _fetch(conn: sqlite3.Connection, sql: str, args: list[Any] | tuple[Any, ...]) -> list[Any]:
    """Run one SELECT built from a user's query; SQLite errors become typed errors.

    Raises:
        QueryTooComplex: (E011) SQLite refused the statement as over one of its limits.
        IndexCorrupt: (E007) any other SQLite error (a damaged or foreign index).
    """
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if any(m in text.lower() for m in _LIMIT_MESSAGES):
            raise QueryTooComplex(text) from exc
        raise IndexCorrupt(f"a query failed in SQLite ({text})") from exc
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"a query failed in SQLite ({exc})") from exc


def _with_clause(ctes: list[tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    if not ctes:
        return "", []
    return ("WITH " + ", ".join(sql for sql, _ in ctes) + " ",
            [a for _, cte_args in ctes for a in cte_args])


def compile_where(conn: sqlite3.Connection, node: Any, args: list[Any], texts: list[str],
                  ctes: list[tuple[str, list[Any]]] | None = None, depth: int = 0,
                  engine: FullTextEngine | None = None) -> str:
    """Compile an AST node to SQL over ``nodes n``.

    Appends parameters to ``args`` and full-text terms to ``texts`` (for ranking).

    With ``ctes`` given, an AND/OR/NOT deeper than ``SPILL_DEPTH`` becomes a common table
    expression ``qK(r)`` of matching rowids, appended to ``ctes`` as (SQL, parameters),
    inner ones first; the caller puts them in a ``WITH`` clause before everything else.
    Every leaf is true or false, never NULL (the columns it reads are NOT NULL), so
    ``n.rowid IN qK`` means exactly what the inline expression means, under NOT too.
    A text leaf is ``engine``'s match of that one phrase (default: FTS5 over ``conn``).

    Raises:
        NodeNotFound, AmbiguousPrefix, InvalidInput: for a ``from:``/``to:`` id that
            does not name exactly one node.
    """
    if isinstance(node, (And, Or, Not)) and ctes is not None and depth >= SPILL_DEPTH:
        sub_args: list[Any] = []
        body = compile_where(conn, node, sub_args, texts, ctes, 0, engine)
        name = f"q{len(ctes)}"
        ctes.append((f"{name}(r) AS (SELECT n.rowid FROM nodes n WHERE {body})", sub_args))
        return f"n.rowid IN {name}"
    if isinstance(node, And):
        return "(" + " AND ".join(compile_where(conn, i, args, texts, ctes, depth + 1, engine)
                                  for i in node.items) + ")"
    if isinstance(node, Or):
        return "(" + " OR ".join(compile_where(conn, i, args, texts, ctes, depth + 1, engine)
                                 for i in node.items) + ")"
    if isinstance(node, Not):
        return "(NOT " + compile_where(conn, node.item, args, [], ctes, depth + 1, engine) + ")"
    if isinstance(node, Text):
        words = phrase(node.text)  # its words' terms, as every index holds them
        texts.append(words)
        sub, sub_args = (engine or default_engine(conn)).sql_rowids([words])
        args.extend(sub_args)
        return f"n.rowid IN ({sub})"
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


def _filter(conn: sqlite3.Connection, text: str, *, now: float, args: list[Any], texts: list[str],
            include_superseded: bool, engine: FullTextEngine | None) -> tuple[str, list[Any], str]:
    """Compile a query into ``(WITH clause, its args, WHERE condition)``.

    ``args`` gets the condition's parameters and ``texts`` its positive text terms.
    """
    ctes: list[tuple[str, list[Any]]] = []
    where = compile_where(conn, parse_query(text, now=now), args, texts, ctes, engine=engine)
    with_sql, with_args = _with_clause(ctes)
    if not include_superseded:
        where += " AND n.superseded_by IS NULL"
    return with_sql, with_args, where


def run_query(conn: sqlite3.Connection, text: str, *, now: float,
              include_superseded: bool = False, limit: int | None = None,
              engine: FullTextEngine | None = None) -> list[NodeRow]:
    """Parse and run a query; return the matching live nodes (with tags).

    Raises:
        QuerySyntaxError: (E011) pointing at the position of a syntax error.
        NodeNotFound, AmbiguousPrefix: for a ``from:``/``to:`` id naming no single node.
        QueryTooComplex, IndexCorrupt: if SQLite refuses the statement (see ``_fetch``).
    """
    engine = engine or default_engine(conn)
    args: list[Any] = []
    texts: list[str] = []
    with_sql, with_args, where = _filter(conn, text, now=now, args=args, texts=texts,
                                         include_superseded=include_superseded, engine=engine)
    cols = ", ".join(f"n.{c.strip()}" for c in NODE_COLUMNS.split(","))
    if texts:
        # Rank by relevance of the positive text terms (the engine's score: lower first).
        scores, score_args = engine.sql_scores(texts, "any")
        sql = (f"SELECT {cols} FROM nodes n LEFT JOIN ({scores}) s ON s.r = n.rowid WHERE {where} "
               "ORDER BY coalesce(s.score, 0), n.updated_at DESC, n.id")
        args = [*score_args, *args]
    else:
        sql = f"SELECT {cols} FROM nodes n WHERE {where} ORDER BY n.updated_at DESC, n.id"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    rows = _fetch(conn, with_sql + sql, [*with_args, *args])
    return load_tags(conn, [node_from_row(r) for r in rows])


def select_candidates(conn: sqlite3.Connection, text: str, *, now: float, ranks: dict[str, int],
                      unranked: int, include_superseded: bool = False,
                      engine: FullTextEngine | None = None) -> list[tuple[int, str, int]]:
    """The nodes a query selects as light rows ``(rank, id, tokens)`` in priority order.

    Rank (the lowest ``ranks`` value among the node's tags, ``unranked`` when it has none of them),
    then newest first, then id. Ordering and ranking happen in SQLite, so a caller that loads full
    rows only for some nodes (compose) never builds or sorts thousands of Python rows.

    Raises:
        QuerySyntaxError, NodeNotFound, AmbiguousPrefix, QueryTooComplex, IndexCorrupt:
            as ``run_query``.
    """
    tags = sorted(ranks)
    args: list[Any] = [x for tag in tags for x in (tag, ranks[tag])]
    # One range seek per node over the (node_id, tag) key (an IN list costs a seek per tag:
    # ~5 ms more on 10,000 nodes); tags inside the range but not ranked give NULL.
    rank = (f"coalesce((SELECT min(CASE t.tag {' '.join(['WHEN ? THEN ?'] * len(tags))} END) "
            "FROM tags t WHERE t.node_id = n.id AND t.tag BETWEEN ? AND ?), ?)" if tags else "?")
    args += [tags[0], tags[-1], unranked] if tags else [unranked]
    with_sql, with_args, where = _filter(conn, text, now=now, args=args, texts=[],
                                         include_superseded=include_superseded, engine=engine)
    sql = (f"{with_sql}SELECT {rank} AS rank, n.id, n.tokens FROM nodes n WHERE {where} "
           "ORDER BY rank, n.updated_at DESC, n.id")
    return _fetch(conn, sql, [*with_args, *args])


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """What ranking a node by decay reads (``model.scoring.Scorable``), without its content.

    Attributes:
        id: The node id.
        type: The node type.
        status: ``active``, ``archived``, ...
        updated_at: Its last write (ms since the epoch).
        metadata: Its metadata.
        tags: Its tags.
    """

    id: str
    type: str
    status: str
    updated_at: int
    metadata: dict[str, Any]
    tags: tuple[str, ...]


def select_scorable(conn: sqlite3.Connection, text: str, *, now: float,
                    include_superseded: bool = False,
                    engine: FullTextEngine | None = None) -> list[ScoreRow]:
    """Every node a query selects, as a light row to rank in Python (recall of filters only).

    A fraction of ``run_query``'s cost per node (no content, no row object, tags in the same
    statement), so that thousands of matches can all be scored before a few are loaded.

    Returns:
        The rows, in no particular order.

    Raises:
        QuerySyntaxError, NodeNotFound, AmbiguousPrefix, QueryTooComplex, IndexCorrupt:
            as ``run_query``.
    """
    args: list[Any] = []
    with_sql, with_args, where = _filter(conn, text, now=now, args=args, texts=[],
                                         include_superseded=include_superseded, engine=engine)
    rows = _fetch(conn, f"{with_sql}SELECT n.id, n.type, n.status, n.updated_at, n.metadata, "
                  "(SELECT group_concat(t.tag, char(31)) FROM tags t WHERE t.node_id = n.id) "
                  f"FROM nodes n WHERE {where}", [*with_args, *args])
    return [ScoreRow(r[0], r[1], r[2], r[3], {} if r[4] == "{}" else json.loads(r[4]),
                     tuple(r[5].split("\x1f")) if r[5] else ()) for r in rows]


def search_nodes(conn: sqlite3.Connection, text: str, *, limit: int = 20,
                 include_superseded: bool = False,
                 engine: FullTextEngine | None = None) -> list[tuple[NodeRow, float]]:
    """Full-text search: every word (or "quoted phrase") must occur; ranked by BM25.

    Free text is never refused (DESIGN §8): a NUL separates words, as white space does
    (SQLite's full-text parser would end the string there).

    Returns:
        (node, score) pairs, best first; the score is BM25 negated (higher is better).

    Raises:
        QueryTooComplex, IndexCorrupt: if SQLite refuses the statement (see ``_fetch``).
    """
    text = text.replace("\0", " ")
    words = [m.group(1) if m.group(1) is not None else m.group(2) for m in _WORD.finditer(text)]
    terms = [phrase(w) for w in words if w.strip()]  # a word of no term matches nothing
    if not terms:
        return []
    scores, score_args = (engine or default_engine(conn)).sql_scores(terms, "all")
    cols = ", ".join(f"n.{c.strip()}" for c in NODE_COLUMNS.split(","))
    extra = "" if include_superseded else "AND n.superseded_by IS NULL"
    rows = _fetch(conn,
        f"SELECT {cols}, s.score FROM ({scores}) s JOIN nodes n ON n.rowid = s.r WHERE 1 {extra} "
        "ORDER BY s.score, n.updated_at DESC LIMIT ?", (*score_args, limit))
    nodes = load_tags(conn, [node_from_row(r[:-1]) for r in rows])
    return [(n, -r[-1]) for n, r in zip(nodes, rows, strict=True)]
