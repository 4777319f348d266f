"""Reading memory back: recall by query and expansion of a summary into its sources.

Recall returns nodes, and, for a query that asks about commands or their outcome ("why did
the tests fail"), the stored runs of commands search finds (``recall_runs``: each command's
best run, what it did next, its diagnostics), so a failure is remembered once it is fixed.

What ``<ctx:recall>`` and ``<ctx:expand>`` (and later MCP recall) return, decided once
here so that every front end shows the same nodes. Reads only: no writes, no rendering
(front ends frame and escape the result), no SQL (that is ``index.read`` and ``query``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from ctxstore.errors import AmbiguousPrefix, InvalidInput, NodeNotFound
from ctxstore.index.read import NodeRow, edges_of, evolving_edges_to, nodes_by_ids, read_node
from ctxstore.records import dataclass

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.runs import RunRow
    from ctxstore.query.executor import ScoreRow
    from ctxstore.search.search import RunHit

__all__ = ["RECALL_LIMIT", "MAX_RECALL_LIMIT", "RECALL_RUNS", "Expansion", "parse_recall_limit",
           "recall_nodes", "recall_runs", "run_lines", "run_head", "run_detail", "run_item",
           "run_json", "utc_minute", "recallable", "injectable",
           "by_decay", "free_text_nodes", "expand_summary", "Newer", "newer_versions",
           "history_note"]

RECALL_LIMIT = 20
RECALL_RUNS = 3  # command runs a recall shows at most (each command's best run)
_RUN_LINES = 5  # diagnostics listed per run
MAX_RECALL_LIMIT = 100
# Archived nodes are dropped after the query, so ask for a few more than wanted.
_ARCHIVED_SLACK = 10
_OPERATOR = re.compile(r"\b(?:AND|OR|NOT)\b")
_Row = TypeVar("_Row", "NodeRow", "ScoreRow")  # what ``by_decay`` orders


def parse_recall_limit(text: str | None) -> int:
    """The number of nodes a recall may return, from an optional ``limit`` attribute.

    Args:
        text: The attribute's text, or None for the default.

    Returns:
        ``RECALL_LIMIT`` when absent, else the number (1..``MAX_RECALL_LIMIT``).

    Raises:
        InvalidInput: (E011) if it is not a whole number in that range.
    """
    if text is None:
        return RECALL_LIMIT
    if not text.isdigit() or not 0 < int(text) <= MAX_RECALL_LIMIT:
        raise InvalidInput(f"limit must be 1..{MAX_RECALL_LIMIT}, got {text!r}")
    return int(text)


def recall_nodes(conn: sqlite3.Connection, query: str, *, limit: int, now: float) -> list[NodeRow]:
    """The live, non-archived nodes matching ``query``, best first.

    ``query`` is a query-language expression (``type:decision retry``) or free text: text the
    parser refuses (``why does read() fail?``, an unbalanced quote), and plain words with no
    field or operator (``how do we retry uploads``, where the language would require every
    word), are searched as free text, ranked (``search.search``), never an error. A query
    with text terms is ranked by relevance; one of filters only (``type:decision``,
    ``tag:area:db AND updated:>7d``) by decay (``by_decay``), as compose ranks a tier.

    Args:
        conn: An index connection that is current.
        query: The query or text; it must not be blank.
        limit: The most nodes to return.
        now: Seconds since the epoch, for relative times in the query and for decay.

    Returns:
        At most ``limit`` nodes; archived (forgotten) nodes are left out.

    Raises:
        InvalidInput: (E011) for a blank query.
        IndexCorrupt: (E007) if the index cannot answer.
    """
    from ctxstore.query.executor import QueryTooComplex, run_query, select_scorable
    from ctxstore.query.parser import QuerySyntaxError, parse_query

    text = query.strip()
    if not text:
        raise InvalidInput("recall needs a query")
    try:
        tree: object = parse_query(text, now=now)
    except QuerySyntaxError:
        tree = None
    if tree is None or _plain_words(tree, query):
        found = free_text_nodes(conn, query, limit=limit + _ARCHIVED_SLACK)
        return [n for n in found if recallable(n)][:limit]
    try:
        if _has_text(tree):
            found = run_query(conn, text, now=now, limit=limit + _ARCHIVED_SLACK)
        else:  # every match is scored (the best by decay may be the oldest), the best loaded
            rows = [r for r in select_scorable(conn, text, now=now) if recallable(r)]
            return nodes_by_ids(conn, [r.id for r in by_decay(rows, now_ms=int(now * 1000))[:limit]])
    except QueryTooComplex:
        raise  # over SQLite's limits: said as such (E011), as `ctx query` says it
    except (NodeNotFound, AmbiguousPrefix, InvalidInput):
        # ``from:``/``to:`` naming no node here (``decisions from:yesterday``, an id of the
        # other store, a short ambiguous prefix): words a person typed, searched as free
        # text rather than refused.
        found = free_text_nodes(conn, query, limit=limit + _ARCHIVED_SLACK)
    return [n for n in found if recallable(n)][:limit]


def _plain_words(tree: object, query: str) -> bool:
    """Whether a parsed query is only words and phrases, with no field and no operator."""
    from ctxstore.query.parser import And, Text

    if _OPERATOR.search(query):
        return False
    items = tree.items if isinstance(tree, And) else (tree,)
    return all(isinstance(item, Text) for item in items)


def _has_text(tree: object) -> bool:
    """Whether a parsed query has a text term outside ``NOT`` (what ranks it by relevance)."""
    from ctxstore.query.parser import And, Or, Text

    todo = [tree]
    while todo:
        item = todo.pop()
        if isinstance(item, Text):
            return True
        if isinstance(item, (And, Or)):
            todo.extend(item.items)
    return False


def by_decay(nodes: Sequence[_Row], *, now_ms: int) -> list[_Row]:
    """``nodes`` best first by ``model.scoring.order_score``, then newest first, then id.

    Args:
        nodes: The nodes.
        now_ms: The time to score at (ms since the epoch).

    Returns:
        A new list.
    """
    # Here, not at the top: free-text recall on the prompt hook never loads the model package.
    from ctxstore.model.scoring import order_score

    return sorted(nodes, key=lambda n: (-order_score(n, now_ms=now_ms), -n.updated_at, n.id))


def recallable(node: NodeRow | ScoreRow) -> bool:
    """Whether recall may return ``node``: not archived, or archived by decay only.

    A node the lifecycle archived for decay stays recallable: recalling it restores it at the
    next lifecycle pass (spec 003, ``lifecycle.policy``); a forgotten node does not come back.

    Args:
        node: The node's index row.

    Returns:
        True when recall may show it.
    """
    return node.status != "archived" or "lifecycle_archived" in node.metadata


def injectable(node: NodeRow) -> bool:
    """Whether a hook or a pack may put ``node`` in front of the model unasked.

    Never a node that is forgotten or archived (by a person, consolidation or the lifecycle),
    superseded, or ``tier:off-context``: those are shown only to a recall that asks for them
    (by id, or ``--include-archived``). A lifecycle-archived node stays ``recallable``.

    Args:
        node: The node's index row.

    Returns:
        True when it may be injected.
    """
    return (node.status != "archived" and node.superseded_by is None
            and "tier:off-context" not in node.tags)


def free_text_nodes(conn: sqlite3.Connection, text: str, *, limit: int) -> list[NodeRow]:
    """The nodes (knowledge and narrative) ranked search finds for ``text``, best first.

    Args:
        conn: An index connection that is current.
        text: Any text.
        limit: At most this many.

    Returns:
        The nodes; none when the text holds no word.
    """
    from ctxstore.search.search import search

    hits = search(conn, text, kinds=("node", "narrative"), limit=limit)
    return [h.node for h in hits if h.node is not None]


def recall_runs(conn: sqlite3.Connection, query: str, *, limit: int = RECALL_RUNS,
                now: float) -> list[RunHit]:
    """The stored runs of commands a recall asks about, best first (``search.search``, ``run``).

    Only free text is searched for runs (a query of fields, ``type:decision``, selects
    nodes), and only runs the text asks about (``RunHit.asked``: it names the command, its
    command line or its status, or says ``test``, ``build``, ``run``...): a question about a
    decision is not answered with old test output that happens to share a word.

    Args:
        conn: An index connection that is current.
        query: The recall's query or text.
        limit: At most this many runs (one per command).
        now: Seconds since the epoch (to parse the query).

    Returns:
        The runs, each with what its command did next.

    Raises:
        IndexCorrupt: (E007) if the index cannot answer.
    """
    from ctxstore.query.parser import QuerySyntaxError, parse_query
    from ctxstore.search.search import search

    try:
        tree: object = parse_query(query.strip(), now=now)
    except QuerySyntaxError:
        tree = None
    if tree is not None and not _plain_words(tree, query):
        return []
    hits = search(conn, query, kinds=("run",), limit=limit)
    return [h.run for h in hits if h.run is not None and h.run.asked]


def utc_minute(ms: int) -> str:
    """A time to the minute, in UTC.

    Args:
        ms: Milliseconds since the epoch.

    Returns:
        E.g. ``2026-11-29 12:05 UTC``.
    """
    import time

    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms / 1000))


def _iso(ms: int) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def run_lines(run: RunHit) -> list[str]:
    """A found run as text: a head line, then its command line and first diagnostics.

    Args:
        run: The run.

    Returns:
        E.g. ``tests failed at 2026-11-29 12:05 UTC (exit 1, 2 errors in test_calc.py) → passed
        at 2026-11-29 12:07 UTC``, then ``$ python -m pytest``, then ``error[FAILED]
        test_calc.py:5: ...`` lines.
    """
    return [run_head(run.row, run.then), *run_detail(run.row)]


def run_head(row: RunRow, then: tuple[str, int] | None) -> str:
    """A stored run in one line: its command, status, time, exit and summary, and what followed.

    Args:
        row: The run.
        then: ``(status, run_at)`` of the command's next run of another status, or None.

    Returns:
        E.g. ``tests failed at 2026-11-29 12:05 UTC (exit 1, 2 errors in test_calc.py) → passed
        at 2026-11-29 12:07 UTC``.
    """
    exit_text = "no exit status" if row.exit_code is None else f"exit {row.exit_code}"
    head = f"{row.name} {row.status} at {utc_minute(row.run_at)} ({exit_text}, {row.summary})"
    if then is not None:
        head += f" → {then[0]} at {utc_minute(then[1])}"
    return head


def run_detail(row: RunRow, limit: int = _RUN_LINES) -> list[str]:
    """A stored run's command line and first diagnostics (each message's first line).

    Args:
        row: The run.
        limit: Diagnostics listed at most.

    Returns:
        ``$ python -m pytest``, then ``error[FAILED] test_calc.py:5: ...`` lines, then
        ``... and N more`` past the first few.
    """
    lines = [f"$ {' '.join(row.argv)}"] if row.argv else []
    for diag in row.diagnostics[:limit]:
        where = f"{diag.path}:{diag.line}" if diag.path and diag.line else diag.path or "-"
        lines.append(f"{diag.severity}{f'[{diag.code}]' if diag.code else ''} {where}: "
                     f"{diag.message}")
    if row.diagnostic_count > limit:
        lines.append(f"... and {row.diagnostic_count - limit} more")
    return lines


def run_item(run: RunHit, label: str = "") -> str:
    """A found run as one Markdown list item: ``run_lines``' head, the rest as sub-items.

    Args:
        run: The run.
        label: Text before the head (``"command run: "``).

    Returns:
        The item, its lines joined by newlines.
    """
    head, *rest = run_lines(run)
    return "\n".join([f"- {label}{head}", *(f"  - {line}" for line in rest)])


def run_json(run: RunHit) -> dict[str, object]:
    """A found run as JSON (``ctx search``, ``ctx recall``, MCP ``recall``).

    Args:
        run: The run.

    Returns:
        ``{"name", "tool", "status", "exit_code", "run_at", "snapshot", "argv", "summary",
        "diagnostic_count", "diagnostics": [{"severity", "code", "path", "line", "message"}],
        "then": {"status", "run_at"} | None}``, times in UTC ISO-8601.
    """
    row = run.row
    return {"name": row.name, "tool": row.tool, "status": row.status, "exit_code": row.exit_code,
            "run_at": _iso(row.run_at), "snapshot": row.snapshot.hex(), "argv": list(row.argv),
            "summary": row.summary, "diagnostic_count": row.diagnostic_count,
            "diagnostics": [{"severity": d.severity, "code": d.code, "path": d.path,
                             "line": d.line, "message": d.message} for d in row.diagnostics],
            "then": None if run.then is None else {"status": run.then[0],
                                                   "run_at": _iso(run.then[1])}}


@dataclass(frozen=True, slots=True)
class Expansion:
    """A summary node and the live nodes it was derived from."""

    summary: NodeRow
    sources: list[NodeRow]


def expand_summary(conn: sqlite3.Connection, ref: str) -> Expansion:
    """The sources a summary node was written from (its ``DERIVED_FROM`` edges).

    Args:
        conn: An index connection that is current.
        ref: The summary's id or a unique prefix.

    Returns:
        The summary and its sources that still exist.

    Raises:
        NodeNotFound: (E019) if no live node has that id.
        AmbiguousPrefix: (E016) if the prefix matches several nodes.
        InvalidInput: (E011) if the node is not a summary.
    """
    summary = read_node(conn, ref)
    if summary.type != "summary":
        raise InvalidInput(f"expand needs a summary node, {summary.id} is a {summary.type}")
    ids = [e.to_key for e in edges_of(conn, summary.id, "out", "DERIVED_FROM") if e.to_kind == "node"]
    return Expansion(summary, nodes_by_ids(conn, ids))


# -- decisions that evolve (knowledge.evolution writes the edges) --------------------------

@dataclass(frozen=True, slots=True)
class Newer:
    """The newest node that refines or contradicts an older one (``newer_versions``)."""

    id: str
    type: str
    label: str


def newer_versions(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, Newer]:
    """For each of ``ids`` that a newer live node refines or contradicts, the newest such node.

    Reads the ``evolves`` edges (``REFINES`` / ``CONTRADICTS`` written with a node,
    ``knowledge.evolution``) pointing at these nodes, from active nodes of the same type.

    Args:
        conn: A synced index connection.
        ids: Node ids (a composition's, a pack's).

    Returns:
        Old id to its newest refining or contradicting node (absent: none).
    """
    out: dict[str, Newer] = {}
    for old, new, node_type, label in evolving_edges_to(conn, ids):  # oldest first: newest wins
        out[old] = Newer(new, node_type, label)
    return out


def history_note(newer: Newer, short: str) -> str:
    """The line that marks an older node as history, naming the newer one.

    Args:
        newer: The newest node that refines or contradicts it.
        short: The newer node's short id as the context shows ids.

    Returns:
        E.g. ``history: [decision:01AB] contradicts this (newer; ctx supersede confirms)``.
    """
    verb = "refines" if newer.label == "REFINES" else "contradicts"
    return f"history: [{newer.type}:{short}] {verb} this (newer; `ctx supersede` confirms)"
