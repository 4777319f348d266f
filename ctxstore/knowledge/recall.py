"""Reading memory back: recall by query and expansion of a summary into its sources.

What ``<ctx:recall>`` and ``<ctx:expand>`` (and later MCP recall) return, decided once
here so that every front end shows the same nodes. Reads only: no writes, no rendering
(front ends frame and escape the result), no SQL (that is ``index.read`` and ``query``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxstore.errors import InvalidInput
from ctxstore.index.read import NodeRow, edges_of, nodes_by_ids, read_node

if TYPE_CHECKING:
    import sqlite3

__all__ = ["RECALL_LIMIT", "MAX_RECALL_LIMIT", "Expansion", "parse_recall_limit", "recall_nodes",
           "expand_summary"]

RECALL_LIMIT = 20
MAX_RECALL_LIMIT = 100
# Archived nodes are dropped after the query, so ask for a few more than wanted.
_ARCHIVED_SLACK = 10


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
    """The live, non-archived nodes matching ``query`` (the query language), best first.

    Args:
        conn: An index connection that is current.
        query: The query text (``type:decision retry``); it must not be blank.
        limit: The most nodes to return.
        now: Seconds since the epoch, for relative times in the query.

    Returns:
        At most ``limit`` nodes; archived (forgotten) nodes are left out.

    Raises:
        InvalidInput: (E011) for a blank or malformed query.
        IndexCorrupt: (E007) if the index cannot answer.
    """
    from ctxstore.query.executor import run_query

    if not query.strip():
        raise InvalidInput("recall needs a query")
    found = run_query(conn, query.strip(), now=now, limit=limit + _ARCHIVED_SLACK)
    # A node the lifecycle archived for decay stays recallable: recalling it restores it at the
    # next lifecycle pass (spec 003, ``lifecycle.policy``); a forgotten node does not come back.
    return [n for n in found if n.status != "archived" or "lifecycle_archived" in n.metadata][:limit]


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
