"""Composing context: the default view and what session start injects, one owner for both.

``compose_view`` is ``ctx compose`` and the MCP server's ``compose`` tool (the default view,
or a query, within a budget; with the user store's nodes in what the project leaves when
global). ``compose_session_start`` is what the SessionStart hook injects (the default view
widened with recent untiered memory and the current task's nodes, within
``SESSION_START_TOKENS``), and what ``ctx compose --session-start`` previews. Front ends
render the result; none composes on its own.

Underneath: order nodes by tier and recency, fill a token budget, render. The output
formats are those of spec 001 §13: Markdown for injection into a prompt (a header comment
with counts, Pinned / Reference / Working Context / Other sections) and JSON for scripts.
A composed context never exceeds its budget: every node's rendered cost is counted before
it is added, and the final text is checked. Over the global layer (``compose_scoped``) the
project comes first: user-store knowledge takes only room the project did not need, under
its own heading.
"""

from __future__ import annotations

import datetime as dt
import functools
import sqlite3
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ctxstore.errors import BudgetExceeded, CtxError, InvalidInput, StoreCorrupt
from ctxstore.index.read import NodeRow, out_edges_of, short_id_lookup
from ctxstore.knowledge.recall import Newer, history_note, newer_versions
from ctxstore.model.scoring import order_score
from ctxstore.model.vocab import TIER_ORDER
from ctxstore.packs.session import SESSION_START_TOKENS
from ctxstore.records import dataclass
from ctxstore.tokens import estimate_tokens, tokens_for_length

if TYPE_CHECKING:
    from ctxstore.knowledge.scopes import Scope, Stores
    from ctxstore.session import Session

__all__ = ["TIER_ORDER", "TYPE_TITLES", "SESSION_START_TOKENS", "USER_HEADING", "Composition",
           "ScopedComposition", "SessionStartView", "tier_of", "order_nodes", "compose",
           "compose_query", "compose_scoped", "compose_view", "compose_session_start",
           "render_markdown", "render_json", "scoped_composition_json", "iso_ms",
           "estimate_tokens"]

_SECTION = {0: "Pinned", 1: "Reference", 2: "Working Context", 3: "Other", 4: "Off-context"}
TYPE_TITLES = {"fact": "Facts", "decision": "Decisions", "pattern": "Patterns",
               "observation": "Observations", "hypothesis": "Hypotheses", "task": "Tasks",
               "summary": "Summaries", "source": "Sources", "open-question": "Open Questions"}
PREVIEW_CHARS = 100
# Short ids: the first 8 characters (spec 001 §13), longer where another node shares them,
# so that what the model reads can be typed back into `ctx show`.
_BY_TYPE_SECTIONS = (1, 3, 4)  # sections grouped into ### type subsections


def iso_ms(ms: int) -> str:
    """UTC ISO-8601 text of a millisecond timestamp, to the second."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tier_of(node: NodeRow) -> str | None:
    """The node's tier (the highest-priority ``tier:`` tag), or None."""
    tiers = [t[5:] for t in node.tags if t.startswith("tier:") and t[5:] in TIER_ORDER]
    return min(tiers, key=lambda t: TIER_ORDER[t]) if tiers else None


def order_nodes(nodes: list[NodeRow]) -> list[NodeRow]:
    """Pinned first, then reference, working, untiered, off-context; newest first within."""
    return [n for _, n in _ranked(nodes)]


def _ranked(nodes: list[NodeRow], now_ms: int | None = None) -> list[tuple[int, NodeRow]]:
    # Within a tier: the lifecycle score (decay, priority; model.scoring), then newest first.
    ranked = [(TIER_ORDER[tier_of(n)], n) for n in nodes]
    ranked.sort(key=lambda rn: (rn[0], _score(rn[1], now_ms), -rn[1].updated_at, rn[1].id))
    return ranked


def _score(node: NodeRow | None, now_ms: int | None) -> float:
    """Sort key of ``order_score`` (negated: best first; 0 without a time or a row)."""
    return -order_score(node, now_ms=now_ms) if node is not None and now_ms is not None else 0.0


def _out_edges(conn: sqlite3.Connection, ids: list[str],
               labels: tuple[str, ...] = ("DEPENDS_ON", "DERIVED_FROM")) -> dict[tuple[str, str], list[str]]:
    # One query for the provenance edges of a batch of candidates, instead of one per node.
    return out_edges_of(conn, ids, labels)


@dataclass
class Composition:
    """The nodes chosen for a budget and their rendering."""

    nodes: list[NodeRow]
    text: str
    tokens: int
    budget: int
    skipped: int
    rendered_at: str
    edges: dict[str, dict[str, list[str]]]


def _indent(text: str) -> str:
    return text.strip().replace("\n", "\n  ")


def _item(node: NodeRow, section: int, deps: list[str], short: dict[str, str],
          history: str | None = None) -> str:
    if section == 0:
        content = node.content.strip()
        body = content if len(content) <= PREVIEW_CHARS else content[:PREVIEW_CHARS].rstrip() + "..."
        lines = [f"- [{node.type}:{short[node.id]}] {_indent(body)}"]
        if node.tags:
            lines.append(f"  - Tags: {', '.join(node.tags)}")
    else:
        lines = [f"- [{node.type}:{short[node.id]}] {_indent(node.content)}"]
    rationale = node.metadata.get("rationale")
    if node.type == "decision" and isinstance(rationale, str) and rationale.strip():
        lines.append(f"  - Rationale: {_indent(rationale)}")
    if deps:
        lines.append("  - Depends on: " + ", ".join(f"[{short[d]}]" for d in deps))
    if history is not None:  # a newer node refines or contradicts it (knowledge.evolution)
        lines.append(f"  - {history}")
    return "\n".join(lines) + "\n"


def _headers(section: int, node_type: str) -> tuple[str, str]:
    sub = f"### {TYPE_TITLES.get(node_type, node_type.title())}\n\n" \
        if section in _BY_TYPE_SECTIONS else ""
    return f"## {_SECTION[section]}\n\n", sub


def _frame(count: int, tokens: int, rendered_at: str) -> tuple[str, str]:
    return (f"<!-- ctx: {count} nodes, {tokens} tokens, rendered at {rendered_at} -->\n\n",
            "<!-- ctx:end -->\n")


def compose(conn: sqlite3.Connection, nodes: list[NodeRow], budget: int, *, now_ms: int,
            force_ids: frozenset[str] = frozenset()) -> Composition:
    """Choose nodes in priority order until the budget is used; render them.

    ``force_ids`` (expanded nodes) are placed as working context whatever their tier.

    Raises:
        BudgetExceeded: if the budget cannot hold even the header and footer.
    """
    by_id = {n.id: n for n in nodes}
    cands = [(rank, n.id, estimate_tokens(n.content.strip())) for rank, n in _ranked(nodes, now_ms)]
    return _compose(conn, cands, lambda ids: [by_id[i] for i in ids], budget, now_ms, force_ids)


def compose_query(conn: sqlite3.Connection, query: str, budget: int, *, now_ms: int,
                  force_ids: frozenset[str] = frozenset(),
                  keep: Callable[[NodeRow], bool] | None = None) -> Composition:
    """``compose`` over the nodes a query selects.

    ``keep``: when given, only the selected nodes it accepts are shown (the hooks pass
    ``knowledge.recall.injectable``); the others are neither shown nor counted as skipped.

    SQLite ranks and orders the candidates as light rows; full rows are loaded only for nodes that
    can still fit (a large view selects thousands of nodes; a budget holds hundreds, a session start
    a few dozen).

    Raises:
        QuerySyntaxError, BudgetExceeded: for a bad query or a budget below the frame.
    """
    from ctxstore.index.read import nodes_by_ids
    from ctxstore.query.executor import select_candidates

    ranks = {f"tier:{tier}": rank for tier, rank in TIER_ORDER.items() if tier is not None}
    cands = select_candidates(conn, query, now=now_ms / 1000, ranks=ranks, unranked=TIER_ORDER[None])
    return _compose(conn, cands, lambda ids: nodes_by_ids(conn, ids), budget, now_ms, force_ids,
                    keep)


# Full rows are loaded in chunks of candidates that can still fit: at most _CHUNK, and no
# more once their content alone would fill the room left (but at least _MIN_CHUNK, so the
# tail of a nearly full budget does not cost one query per node).
_CHUNK = 256
_MIN_CHUNK = 32


def _compose(conn: sqlite3.Connection, cands: list[tuple[int, str, int]],
             load: Callable[[list[str]], list[NodeRow]], budget: int, now_ms: int,
             force_ids: frozenset[str], keep: Callable[[NodeRow], bool] | None = None
             ) -> Composition:
    """Greedy fill over ``cands`` = ``(tier rank, id, content tokens)`` in priority order.

    Phases: check the budget holds the frame, then per chunk of candidates that can still
    fit load their rows and provenance edges and place each item, then render the chosen items.

    Raises:
        BudgetExceeded: if the budget cannot hold even the header and footer.
    """
    rendered_at = iso_ms(now_ms)
    _check_frame(budget, rendered_at)
    fill = _Fill(budget, force_ids, rendered_at,
                 functools.cache(short_id_lookup(conn)))  # a dependency is often shown many times
    # A lower bound of each item's cost: its stripped content (pinned items show a preview;
    # expanded nodes are shown in full as working context).
    bounds = [0 if c[0] == 0 and c[1] not in force_ids else c[2] for c in cands]
    pos = 0
    while pos < len(cands):
        chunk, pos = fill.next_chunk(bounds, pos)
        rows = {n.id: n for n in load([cands[i][1] for i in chunk])}
        if keep is not None:
            gone = {i for i, n in rows.items() if not keep(n)}
            chunk = [i for i in chunk if cands[i][1] not in gone]
            rows = {i: n for i, n in rows.items() if i not in gone}
        fill.out_edges.update(_out_edges(conn, list(rows)))
        fill.newer.update(newer_versions(conn, list(rows)))
        # Within a tier, by the lifecycle score (SQL ordered by recency; stable within a chunk).
        chunk.sort(key=lambda i: (cands[i][0], _score(rows.get(cands[i][1]), now_ms)))
        for i in chunk:
            fill.place(rows.get(cands[i][1]), cands[i][0], bounds[i])
    return fill.composition(rendered_at)


def _check_frame(budget: int, rendered_at: str) -> None:
    """Refuse a budget below the frame of an empty composition.

    Raises:
        BudgetExceeded: if ``budget`` is below it.
    """
    need = _stated_tokens(0, 0, rendered_at)
    if budget < need:
        raise BudgetExceeded(f"budget {budget} is below the {need} tokens the frame needs")


def _frame_length(count: int, tokens: int, rendered_at: str) -> int:
    head, foot = _frame(count, tokens, rendered_at)
    return len(head) + len(foot)


def _stated_tokens(count: int, body_chars: int, rendered_at: str) -> int:
    """The tokens a composition of ``count`` items and a body this long states and costs.

    The header states the total, which includes the header itself: the fixed point that
    ``_render`` reaches, found here from lengths alone (``tokens_for_length``).
    """
    stated = tokens = 0
    for _ in range(3):
        stated = tokens
        tokens = tokens_for_length(_frame_length(count, stated, rendered_at) + body_chars)
        if tokens == stated:
            break
    # What the text costs with the number it states (the same when the loop converged).
    return tokens_for_length(_frame_length(count, stated, rendered_at) + body_chars)


@dataclass
class _Fill:
    """The state of one greedy fill: the body's length so far and the items chosen.

    The text is assembled from pieces (the frame, section headers, items) whose lengths
    are known, and a text's estimate is its length's: an item is taken when the whole text
    with it, its frame stating the new count and total, still fits the budget. So the frame
    costs what it prints, not its widest numbers, and a node that fits with its frame is
    shown.
    """

    budget: int
    force_ids: frozenset[str]
    rendered_at: str
    short_of: Callable[[str], str]
    body_chars: int = 0
    skipped: int = 0
    chosen: list[tuple[int, NodeRow, str]] = field(default_factory=list)
    deps_of: dict[str, list[str]] = field(default_factory=dict)
    seen_headers: set[tuple[int, str]] = field(default_factory=set)
    out_edges: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    newer: dict[str, Newer] = field(default_factory=dict)

    def next_chunk(self, bounds: list[int], pos: int) -> tuple[list[int], int]:
        """The positions from ``pos`` on whose rows are worth loading now, and the next position.

        A candidate whose lower bound already exceeds the room left is skipped.
        """
        # Items' lower bounds against the room in tokens: an item holds its stripped content
        # (whose estimate the bound is) and more, and the frame only grows with each item.
        room = self.budget - self._tokens(len(self.chosen), self.body_chars)
        want = 0
        chunk: list[int] = []
        total = len(bounds)
        while pos < total and len(chunk) < _CHUNK and (want <= room or len(chunk) < _MIN_CHUNK):
            if bounds[pos] > room:  # cannot fit now, and `used` only grows
                self.skipped += 1
            else:
                chunk.append(pos)
                want += bounds[pos]
            pos += 1
        return chunk, pos

    def place(self, node: NodeRow | None, rank: int, bound: int) -> None:
        """Add ``node``'s item (and the headers it opens) if it still fits, else skip it."""
        if node is None or bound > self.budget - self._tokens(len(self.chosen), self.body_chars):
            self.skipped += 1
            return
        section = 2 if node.id in self.force_ids else rank
        deps = self.out_edges.get((node.id, "DEPENDS_ON"), [])
        short = {some: self.short_of(some) for some in (node.id, *deps)}
        newer = self.newer.get(node.id)
        history = history_note(newer, self.short_of(newer.id)) if newer is not None else None
        item = _item(node, section, deps, short, history)
        sec_head, sub_head = _headers(section, node.type)
        chars = len(item) + 1  # `_render` ends each item with a blank line
        new_headers = []
        if (section, "") not in self.seen_headers:
            new_headers.append((section, ""))
            chars += len(sec_head)
        if sub_head and (section, node.type) not in self.seen_headers:
            new_headers.append((section, node.type))
            chars += len(sub_head)
        if self._tokens(len(self.chosen) + 1, self.body_chars + chars) > self.budget:
            self.skipped += 1
            return
        self.body_chars += chars
        self.seen_headers.update(new_headers)
        self.deps_of[node.id] = deps
        self.chosen.append((section, node, item))

    def _tokens(self, count: int, body_chars: int) -> int:
        return _stated_tokens(count, body_chars, self.rendered_at)

    def composition(self, rendered_at: str) -> Composition:
        """The chosen items rendered, with their provenance edges."""
        text = _render(self.chosen, rendered_at)
        tokens = estimate_tokens(text)
        edges = {n.id: {"depends_on": self.deps_of[n.id],
                        "derived_from": self.out_edges.get((n.id, "DERIVED_FROM"), [])}
                 for _, n, _ in self.chosen}
        assert tokens <= self.budget, (tokens, self.budget)
        return Composition([n for _, n, _ in self.chosen], text, tokens, self.budget,
                           self.skipped, rendered_at, edges)


def _render(chosen: list[tuple[int, NodeRow, str]], rendered_at: str) -> str:
    body: list[str] = []
    order = sorted(range(len(chosen)), key=lambda i: (
        chosen[i][0], chosen[i][1].type if chosen[i][0] in _BY_TYPE_SECTIONS else "", i))
    current: tuple[int, str] | None = None
    for i in order:
        section, node, item = chosen[i]
        sec_head, sub_head = _headers(section, node.type)
        if current is None or current[0] != section:
            body.append(sec_head)
            current = (section, "")
        if sub_head and current[1] != node.type:
            body.append(sub_head)
            current = (section, node.type)
        body.append(item + "\n")
    text_body = "".join(body)
    tokens = 0
    for _ in range(3):  # the header states the total, which includes the header itself
        head, foot = _frame(len(chosen), tokens, rendered_at)
        text = head + text_body + foot
        if estimate_tokens(text) == tokens:
            break
        tokens = estimate_tokens(text)
    return text


def render_markdown(comp: Composition) -> str:
    """The Markdown form (spec 001 §13)."""
    return comp.text


def render_json(comp: Composition) -> dict[str, Any]:
    """The JSON form (spec 001 §13), with ``"version": 1``."""
    return {
        "version": 1,
        "meta": {"node_count": len(comp.nodes), "token_count": comp.tokens, "budget": comp.budget,
                 "skipped": comp.skipped, "rendered_at": comp.rendered_at},
        "nodes": [{"id": n.id, "type": n.type, "content": n.content, "tags": n.tags,
                   "tier": tier_of(n), "token_estimate": n.tokens,
                   "created_at": iso_ms(n.created_at), "updated_at": iso_ms(n.updated_at),
                   "edges": comp.edges[n.id]} for n in comp.nodes],
    }


# -- over the global layer ----------------------------------------------------------------------

USER_HEADING = "## From the user store (~/.ctx)\n\n"
_SLACK = 2  # joining two texts may round the estimate up by a token or two


@dataclass
class ScopedComposition:
    """A composition of the project store, with the user store's after it when global.

    Attributes:
        project: The project's composition.
        user: The user store's, composed in the budget the project left, or None.
        text: The Markdown of both (the user store's under ``USER_HEADING``).
        tokens: The estimated tokens of ``text``.
        budget: The budget both shared.
        labels: Each chosen node's store.
    """

    project: Composition
    user: Composition | None
    text: str
    tokens: int
    budget: int
    labels: dict[str, Scope] = field(default_factory=dict)


def compose_scoped(stores: Stores, query: str, budget: int, *, now_ms: int) -> ScopedComposition:
    """Compose the project's nodes, then fill what the budget has left from the user store.

    Args:
        stores: The stores to read (``Stores.open``).
        query: The query selecting nodes (docs/query.md).
        budget: The token budget for both.
        now_ms: Milliseconds since the epoch (the rendered-at stamp).

    Returns:
        Both compositions and their joint text.

    Raises:
        QuerySyntaxError: (E011) for a bad query.
        BudgetExceeded: (E010) for a budget below the project's frame.
    """
    project = compose_query(stores.project.index(), query, budget, now_ms=now_ms)
    labels: dict[str, Scope] = {n.id: "project" for n in project.nodes}
    text, tokens, user = project.text, project.tokens, None
    room = budget - tokens - estimate_tokens(USER_HEADING) - _SLACK
    if stores.user is not None and room > 0:
        try:
            user = compose_query(stores.user.index(), query, room, now_ms=now_ms)
        except BudgetExceeded:
            user = None  # no room for even the frame: the project filled the budget
    if user is not None and user.nodes:
        text = f"{text}\n{USER_HEADING}{user.text}"
        tokens = estimate_tokens(text)
        labels.update({n.id: "user" for n in user.nodes})
    else:
        user = None
    return ScopedComposition(project=project, user=user, text=text, tokens=tokens, budget=budget,
                             labels=labels)


def scoped_composition_json(comp: ScopedComposition) -> dict[str, Any]:
    """The JSON form: the project's (spec 001 §13) with each node's ``store``, plus ``global``.

    Args:
        comp: A scoped composition.

    Returns:
        ``render_json`` of the project's composition, every node labelled ``"store"``, and
        ``"global"``: the user store's (nodes labelled ``user``) or None.
    """
    doc = render_json(comp.project)
    for node in doc["nodes"]:
        node["store"] = "project"
    user = None
    if comp.user is not None:
        user = render_json(comp.user)
        user.pop("version", None)
        for node in user["nodes"]:
            node["store"] = "user"
    doc["global"] = user
    doc["meta"]["total_tokens"] = comp.tokens
    return doc


# -- the use cases ------------------------------------------------------------------------------

def compose_view(db: Session, *, view: str | None = None, query: str | None = None,
                 budget: int | None = None, default_budget: int | None = None,
                 user: Session | None = None, now_ms: int) -> ScopedComposition:
    """``ctx compose``, ``ctx view render`` and MCP ``compose``: a view (or ``query``) in a budget.

    Args:
        db: The project's open session.
        view: The saved view's name (``default`` when None).
        query: The query selecting nodes (docs/query.md); the view's when None.
        budget: The token budget; when None the view's own, or ``default_budget`` for a
            ``query`` given without one.
        default_budget: The budget of the built-in default view (when no default view is
            saved) and of a bare ``query`` (``CTX_DEFAULT_BUDGET``, ``[retrieval]
            default_budget``); the built-in default's when None.
        user: The user store's session, to fill what the project leaves (None: the project
            alone).
        now_ms: Milliseconds since the epoch (the rendered-at stamp).

    Returns:
        The project's composition, and the user store's when ``user`` gave any node.

    Raises:
        InvalidInput: (E011) for a budget below 1 or a bad query.
        NodeNotFound: (E019) if there is no view named ``view``.
        BudgetExceeded: (E010) for a budget below the frame.
    """
    from ctxstore.knowledge.scopes import Stores
    from ctxstore.knowledge.views import DEFAULT_VIEW_NAME, get_view

    if budget is not None and budget < 1:
        raise InvalidInput(f"budget must be a positive number, got {budget}")
    conn = db.index()
    name = view or DEFAULT_VIEW_NAME
    found = get_view(conn, name) if default_budget is None \
        else get_view(conn, name, default_budget=default_budget)
    chosen = budget or (default_budget if query and default_budget else found.budget)
    return compose_scoped(Stores(db, user), query or found.query, chosen, now_ms=now_ms)


@dataclass(frozen=True, slots=True)
class SessionStartView:
    """What session start injects from the store (``compose_session_start``).

    Attributes:
        text: The composed view (empty when it shows no node and leaves none out), with a
            line counting the nodes left out.
        timed: True when its query uses relative times (``created:>7d``): it then changes
            with the clock, not only with the store.
        problem: Why the saved default view was replaced by the built-in one, if it was.
        ids: The nodes shown.
    """

    text: str
    timed: bool
    problem: str | None
    ids: tuple[str, ...]


def compose_session_start(db: Session, *, task: str | None, now: float) -> SessionStartView:
    """The default view composed for session start, at most ``SESSION_START_TOKENS``.

    The view's query is widened with recent untiered memory and the current task's nodes
    (``packs.session.session_start_query``); nothing forgotten, superseded, off-context or
    archived is shown (``knowledge.recall.injectable``). A saved default view whose query cannot run
    (it passed an older parser, or came with a clone, but SQLite refuses it) or whose budget
    cannot hold the frame does not empty the session start: the built-in default composition
    is shown, and the problem said.

    Args:
        db: The open session (a hook's, opened with ``build=False``).
        task: The current task (``knowledge.tasks.read_current_task``), if any.
        now: The wall clock in seconds.

    Returns:
        The view, whether it depends on the clock, the problem met, and the ids shown.

    Raises:
        IndexNotReady: (E024) when the index needs a build the session may not run.
        StoreCorrupt: if the store is damaged.
        CtxError: if even the built-in composition fails.
    """
    from ctxstore.knowledge.recall import injectable
    from ctxstore.knowledge.views import DEFAULT_VIEW_NAME, DEFAULT_VIEW_QUERY, get_view
    from ctxstore.packs.session import session_start_query
    from ctxstore.query.parser import parse_query

    problem = None
    conn = db.index()  # IndexNotReady: the callers show the note instead of a view
    view = get_view(conn, DEFAULT_VIEW_NAME)
    days = db.config.get("retrieval", "narrative_days")
    query = session_start_query(view.query, days=days, task=task)
    budget = min(view.budget, SESSION_START_TOKENS)
    try:
        comp = compose_query(conn, query, budget, now_ms=int(now * 1000), keep=injectable)
    except StoreCorrupt:
        raise
    except (CtxError, sqlite3.Error, RecursionError) as exc:
        if view.query == DEFAULT_VIEW_QUERY and budget == SESSION_START_TOKENS:
            raise  # the built-in composition itself fails: nothing to fall back to
        why = exc.message if isinstance(exc, CtxError) else f"{type(exc).__name__}: {exc}"
        problem = (f"the saved default view could not be composed ({why}); showing the "
                   "built-in default view (fix it with `ctx view update default`)")
        query = session_start_query(DEFAULT_VIEW_QUERY, days=days, task=task)
        budget = SESSION_START_TOKENS
        comp = compose_query(conn, query, budget, now_ms=int(now * 1000), keep=injectable)
    # The parser resolves durations against `now`: two clocks give two trees only then.
    timed = parse_query(query, now=now) != parse_query(query, now=now + 7200)
    # No node shown and none left out: nothing to frame (an empty store with an active task
    # injects the task line alone, not a frame that says "0 nodes").
    text = comp.text if comp.nodes or comp.skipped else ""
    if comp.skipped:
        text += f"[... {comp.skipped} more nodes omitted; run `ctx compose` for all]\n"
    return SessionStartView(text, timed, problem, tuple(n.id for n in comp.nodes))
