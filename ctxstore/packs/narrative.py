"""A pack's memory (spec 002 §12, step 4): nodes, the active and recent tasks, the recent log.

Nodes and narrative entries relevant to the task (``search.search``; decisions as
``Decision``), the nodes of the active task (started, not ended), the recently updated
tasks and the log of the last ``[retrieval] narrative_days`` days, and stale-memory flags of
the chosen nodes (``code.stale``). Node scores are put on the files' scale
(``scale_node_items``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ctxstore.packs.items import PackItem

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.read import NodeRow
    from ctxstore.search.tantivy_index import Served
    from ctxstore.session import Session

__all__ = ["node_extra", "node_items", "narrative_items", "scale_node_items", "stale_flags", "first_line"]

_NODE_HITS = 20
# At most this many nodes of the active task join a pack's narrative items.
_ACTIVE_TASK_NODES = 5


def node_items(session: Session, task: str, *, user: bool,
               served: Served | None | Literal["choose"] = "choose") -> list[PackItem]:
    """The nodes (and narrative entries) of one store that ranked search finds for the task.

    ``served``: the store's Tantivy index when the caller opened it (``search.search``).
    """
    from ctxstore.knowledge.recall import injectable
    from ctxstore.search.search import search

    items: list[PackItem] = []
    for hit in search(session, task, kinds=("node", "narrative"), limit=_NODE_HITS,
                      served=served):
        node = hit.node
        if node is None or not hit.matched or not injectable(node):
            continue
        kind = "Decision" if node.type == "decision" else "NarrativeExcerpt"
        why: dict[str, Any] = {"matched_terms": list(hit.matched)}
        title = f"{node.type.capitalize()}: {first_line(node.content)}"
        if user:  # the global layer (spec 003): labelled by store
            why["store"] = "user"
            title += " (user store ~/.ctx)"
        items.append(PackItem(title, node.id, node.content, hit.score, kind, why,
                              node_extra(node)))
    return items


def node_extra(node: NodeRow) -> dict[str, Any]:
    """A node item's own fields: its type and, when it records one, its provenance."""
    # Here, not at the top: a pack without memory items (code alone) never loads the
    # knowledge package's write operations (~20 ms of imports).
    from ctxstore.knowledge.nodes.provenance import provenance_json

    extra: dict[str, Any] = {"node_type": node.type}
    prov = provenance_json(node.metadata)
    if prov is not None:
        extra["provenance"] = prov
    return extra


def narrative_items(session: Session, task: str, days: int, now_ms: int,
                    active_task: str | None = None,
                    served: Served | None | Literal["choose"] = "choose"
                    ) -> tuple[list[PackItem], str]:
    """The project's node and narrative items relevant to the task, the active and recent tasks, the log.

    The active task is the one started (``<ctx:task action="start">``) and not ended: its
    nodes (``task:NAME``) carry ``why.active_task``. A task node merely added (``ctx add
    task``) and updated in the last ``days`` days is a recent task (``why.recent_task``).
    """
    from ctxstore.index.read import recent_nodes
    from ctxstore.knowledge.recall import injectable

    conn = session.index()
    items = node_items(session, task, user=False, served=served)
    log: list[str] = []
    matched = {item.object_id: item for item in items}

    def task_item(title: str, node: NodeRow, flag: str) -> None:
        # A node the search found too is one item, not two that spend the budget twice: the
        # task's title, both reasons, and the search's score (raised to the task's floor later).
        hit = matched.get(node.id)
        if hit is None:
            matched[node.id] = PackItem(title, node.id, node.content, 0.0, "NarrativeExcerpt",
                                        {flag: True}, node_extra(node))
            items.append(matched[node.id])
        else:
            if "active_task" not in hit.why:  # an active task's title says the most
                hit.title = title
            hit.why[flag] = True

    if active_task:
        for node in filter(injectable, _task_nodes(conn, active_task)):
            task_item(f"Active task {active_task}: {first_line(node.content)}", node,
                      "active_task")
    if days > 0:
        after = now_ms - days * 86_400_000
        for node in filter(injectable, recent_nodes(conn, ("task",), after_ms=after, limit=3)):
            task_item(f"Task: {first_line(node.content)}", node, "recent_task")
        for node in filter(injectable, recent_nodes(conn, ("observation", "decision"),
                                                    after_ms=after, by="created", limit=50)):
            stamp = time.strftime("%Y-%m-%d", time.gmtime(node.created_at / 1000))
            log.append(f"- {stamp} [{node.type}] {first_line(node.content)}")
    return items, "\n".join(log)


def _task_nodes(conn: sqlite3.Connection, name: str) -> list[NodeRow]:
    """The nodes of the started task ``name`` (tagged ``task:NAME``), last updated first, at most 5.

    None for a name that makes no task tag (a state written by hand).
    """
    from ctxstore.errors import CtxError
    from ctxstore.knowledge.tasks import task_tag
    from ctxstore.query.executor import run_query

    try:
        found = run_query(conn, f'tag:"{task_tag(name)}"', now=time.time())
    except CtxError:
        return []
    return sorted(found, key=lambda n: (-n.updated_at, n.id))[:_ACTIVE_TASK_NODES]


def first_line(text: str, width: int = 80) -> str:
    """A node's first line, cut to ``width`` characters with ``...``."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[:width - 3] + "..."


def stale_flags(session: Session, node_ids: Sequence[str]) -> dict[str, list[dict[str, object]]]:
    """Stale mentions of the chosen nodes (files they mention changed since), by node id."""
    from ctxstore.code.stale import stale_mentions

    found = stale_mentions(session, list(node_ids)) if node_ids else {}
    return {node: [m.to_json() for m in mentions] for node, mentions in found.items()}


def scale_node_items(items: list[PackItem], task: str) -> None:
    """Put node items on the files' scale, in place.

    Node scores are on their own scale: the best node ~ a top file, when it holds the task's
    words; one that holds one word of several counts that share (a decision naming "python"
    must not head a pack about renaming an extractor). A task's node stays at least 0.5.
    """
    from ctxstore.search.search import FULL_MATCH, search_terms

    scale = max((i.score for i in items), default=1.0) or 1.0
    full = min(FULL_MATCH, len(search_terms(task).terms)) or 1
    for item in items:
        held = len(item.why.get("matched_terms", ()))
        item.score = item.score / scale * min(1.0, held / full) if item.score else 0.5
        if "active_task" in item.why or "recent_task" in item.why:
            item.score = max(item.score, 0.5)  # a task's node found by search too
