"""A prompt pack as typed records (spec 002 §12.4): its items, its graph context, its budget.

``Pack.to_json`` is the pack of ``ctx pack --format json`` and of the MCP ``pack`` tool
(docs/pack.schema.json), key for key; the renderings of ``render`` read that map.
"""

from __future__ import annotations

from typing import Any

from ctxstore.packs.render import PROMPT_FORMATS, item_cost
from ctxstore.records import dataclass
from ctxstore.tagtext import escape_tags, escape_tree

__all__ = ["CHUNK_KINDS", "PackItem", "GraphContext", "TokenBudget", "Pack", "PackResult"]

CHUNK_KINDS = ("FileContent", "NarrativeExcerpt", "Decision", "DiagnosticOutput",
               "SymbolDefinition")


@dataclass(slots=True)
class PackItem:
    """One item of a pack: a chunk of code, a node, a diagnostic.

    Attributes:
        title: What the snippet is, and where (``Symbol: QUALNAME (PATH:A-B)``, ...).
        object_id: The file version, node or diagnostic it comes from.
        snippet: Its text.
        score: Its relevance (``relevance_score``, rounded to four places in JSON).
        kind: One of ``CHUNK_KINDS``.
        why: Why it is there (matched terms, defined names, an edge path, a task).
        extra: The fields of its kind: ``path``, ``qualname``, ``start_line``, ``end_line``
            of code; ``node_type`` of a node; ``path`` of a diagnostic.
        stale_mentions: Files it mentions that changed since (a node's), or None.
    """

    title: str
    object_id: str
    snippet: str
    score: float
    kind: str
    why: dict[str, Any]
    extra: dict[str, Any]
    stale_mentions: list[dict[str, object]] | None = None

    def cost(self, fmt: str) -> int:
        """What the item costs in a pack of format ``fmt`` (``render.item_cost``).

        json and yaml charge the printed title and snippet only: the rest of the item is not
        escaped for that (a pack costs every candidate, hundreds of them at scale).
        """
        if fmt in PROMPT_FORMATS:
            return item_cost(self.to_json(), fmt)
        return item_cost({"title": escape_tags(self.title), "snippet": escape_tags(self.snippet)},
                         fmt)

    def to_json(self) -> dict[str, Any]:
        """The item as a pack's ``retrieved`` holds it.

        File names, code and node content are anyone's text: their ``<ctx:...>`` tags are
        escaped here, where the cost is counted, so what is charged is what is printed.
        """
        doc = {"title": escape_tags(self.title), "object_id": self.object_id,
               "snippet": escape_tags(self.snippet), "relevance_score": round(self.score, 4),
               "chunk_kind": self.kind, **escape_tree(self.extra), "why": escape_tree(self.why)}
        if self.stale_mentions is not None:
            doc["stale_mentions"] = escape_tree(self.stale_mentions)
        return doc


@dataclass(frozen=True, slots=True)
class GraphContext:
    """How the pack reached its files: seeds, expansion, whether the SCC view was used."""

    seed_nodes: list[str]
    expanded_nodes: list[str]
    expansion_depth: int
    scc_dag_used: bool


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """The pack's budget: the total, what it used, what it kept for the response."""

    total: int
    used: int
    reserved_for_response: int


@dataclass(frozen=True, slots=True)
class Pack:
    """A prompt pack (spec 002 §12.4, plus ``why`` on every item and ``ranked_files``).

    Attributes:
        task: The task as given.
        head_commit: The store's HEAD commit (hex), or empty.
        retrieved: The items, best first.
        graph_context: Seeds and expansion.
        recent_narrative: The recent log entries kept (whole entries), or empty.
        token_budget: The budget.
        ranked_files: Every file that matched, best first (at most ``pack.RANKED_FILES``).
    """

    task: str
    head_commit: str
    retrieved: list[PackItem]
    graph_context: GraphContext
    recent_narrative: str
    token_budget: TokenBudget
    ranked_files: list[str]

    def to_json(self) -> dict[str, Any]:
        """The pack as ``ctx pack --format json`` prints it (without its ``version``).

        ``escape_tree``: the parts not charged to the budget (paths, symbol names) are made
        inert too; what the items escaped is left as it is (the escape is idempotent).
        """
        g, b = self.graph_context, self.token_budget
        doc: dict[str, Any] = escape_tree({
            "task": self.task,
            "head_commit": self.head_commit,
            "retrieved": [item.to_json() for item in self.retrieved],
            "graph_context": {"seed_nodes": g.seed_nodes, "expanded_nodes": g.expanded_nodes,
                              "expansion_depth": g.expansion_depth,
                              "scc_dag_used": g.scc_dag_used},
            "recent_narrative": self.recent_narrative,
            "token_budget": {"total": b.total, "used": b.used,
                             "reserved_for_response": b.reserved_for_response},
            "ranked_files": self.ranked_files,
        })
        return doc


@dataclass(frozen=True, slots=True)
class PackResult:
    """A prompt pack and what a user should know of its budget that the pack does not say.

    Attributes:
        pack: The pack.
        smallest_budget: When items were found but the budget held none of them: the
            smallest budget that holds one (its room, after the response reserve, the
            header and the recent narrative, fits the cheapest item); else None.
    """

    pack: Pack
    smallest_budget: int | None
