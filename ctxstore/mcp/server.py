"""``ctx mcp``: a stdio MCP server whose tools are the operations layer (issue 16).

One long-lived process works on one ``Session``: every read goes through
``Session.index()``, which catches the index up with HEAD and STAGE first, so the server
sees what other processes (a hook, ``ctx add``) wrote since its last call. Each tool is one
call into ``knowledge/``, ``packs/``, ``retrieval/`` or ``memory/`` plus the shaping of its
result as JSON; no knowledge behaviour lives here. ``ToolBox`` holds the tools as plain
methods (usable and testable without the SDK); ``build_server`` registers them with the
official ``mcp`` SDK, imported only here and only when the server is built.

Errors: a ``CtxError`` (a bad id, a bad query, a held lock) becomes an MCP tool error whose
text is the one-line ``error[E0xx]: ...``; arguments of the wrong type are refused by the
SDK's schema check as tool errors too; anything unexpected is a tool error the SDK reports
without its details. The process never dies of a bad call. Every result is made inert on
the way out (``tagtext.escape_tree``): an agent echoing it can never issue a ``<ctx:*>``
command. Tool bodies are synchronous and run on the event loop's thread (declared
``async``), so SQLite connections stay on the thread that opened them and calls never
interleave. Nothing here prints: stdout is the
JSON-RPC channel.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxstore.errors import CtxError, InvalidInput, OutOfMemory
from ctxstore.knowledge.scopes import Scope, Stores, parse_scope, recall_global_default, scoped_json
from ctxstore.session import Session
from ctxstore.tagtext import escape_tags, escape_tree

__all__ = ["SERVER_NAME", "ToolBox", "build_server", "serve"]

SERVER_NAME = "ctx"
_MAX_LIMIT = 100
_MAX_DEPTH = 16  # as ``ctx pack --depth``
_PACK_VERSION = 1  # the ``version`` of ``ctx pack --format json``
_INSTRUCTIONS = (
    "ctx is this project's persistent memory (facts, decisions, patterns, tasks), kept in "
    "the repository's .ctx/ store and, for knowledge that holds in every project, the user "
    "store ~/.ctx. Use recall before answering questions about past work; remember what a "
    "later session should know (with a tier:pinned, tier:reference or tier:working tag).")


def _limit(value: int) -> int:
    if not 0 < value <= _MAX_LIMIT:
        raise InvalidInput(f"limit must be 1..{_MAX_LIMIT}, got {value}")
    return value


def _compacted(compaction: Any) -> str | None:
    """The commit of an automatic compaction, as hex (None when none was made)."""
    commit = compaction.fold.commit if compaction is not None else None
    return commit.hex() if commit is not None else None


def _node_doc(node: Any, scope: Scope) -> dict[str, Any]:
    from ctxstore.packs.compose import iso_ms, tier_of

    return {"store": scope, "id": node.id, "type": node.type, "content": node.content,
            "summary": node.summary, "tags": list(node.tags), "tier": tier_of(node),
            "status": node.status, "superseded_by": node.superseded_by,
            "metadata": node.metadata, "created_at": iso_ms(node.created_at),
            "updated_at": iso_ms(node.updated_at)}


class ToolBox:
    """The server's tools over one project session (and the user store, when global).

    Args:
        db: The project's open session (the caller closes it).
        user_store: The user store's directory (``~/.ctx``), or None for no global layer.
        clock: Wall-clock seconds.
    """

    def __init__(self, db: Session, *, user_store: Path | None,
                 clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.user_store = user_store
        self.clock = clock
        self._user: Session | None = None
        self._session_id = f"mcp-{int(clock() * 1000)}"

    # -- stores -------------------------------------------------------------------------

    def _user_session(self, *, create: bool) -> Session | None:
        """The user store's session, opened once (created on a global write)."""
        from ctxstore.knowledge.scopes import open_user_store

        if self.user_store is None:
            if create:
                raise InvalidInput("this server has no user store (started with --no-global)")
            return None
        if self._user is None:
            if self.user_store.resolve() == self.db.root.resolve():
                return self.db
            self._user = open_user_store(self.user_store, create=create)
        return self._user

    def _stores(self, include_global: bool) -> Stores:
        user = self._user_session(create=False) if include_global else None
        # The user store may be the project's own (~/.ctx used as a project): read it once.
        return Stores(self.db, None if user is self.db else user)

    def _session_for(self, scope: Scope, *, create: bool = False) -> Session:
        if scope == "project":
            return self.db
        user = self._user_session(create=create)
        if user is None:
            raise InvalidInput("there is no user store (~/.ctx) yet")
        return user

    def close(self) -> None:
        """Close the user store's session, if one was opened (the project's is the caller's)."""
        if self._user is not None and self._user is not self.db:
            self._user.close()
        self._user = None

    # -- tools --------------------------------------------------------------------------

    def remember(self, content: str, type: str = "observation", tags: list[str] | None = None,
                 scope: str = "project") -> dict[str, Any]:
        """Store a memory (``knowledge.remember``); ``scope: "global"`` writes to ``~/.ctx``.

        Args:
            content: The text to keep.
            type: fact, decision, pattern, observation, hypothesis, task, open-question, ...
            tags: ``namespace:value`` tags; give a tier (``tier:reference``, ...).
            scope: ``project`` (default) or ``global``.

        Returns:
            ``{"id", "store", "type", "tags", "written"}``.

        Raises:
            InvalidInput: (E011) for bad content, type, tag or scope.
            LockConflict, StorageIOError: if it cannot be written.
        """
        from ctxstore.ids import new_ulid
        from ctxstore.knowledge.remember import remember

        where = parse_scope(scope)
        db = self._session_for(where, create=True)
        res = remember(db, content, type=type, tags=list(tags or ()), session=self._session_id,
                       hook_key=f"mcp:{new_ulid()}", current_task=self._task(), source="mcp")
        node_id = res.node.id if res.node is not None else res.existing
        doc: dict[str, Any] = {"id": node_id, "store": where, "written": res.changed,
                               "type": res.node.type if res.node else type,
                               "tags": list(res.node.tags) if res.node else list(tags or ())}
        if res.warning:
            doc["warning"] = res.warning
        return doc

    def recall(self, query: str, limit: int = 20, include_global: bool | None = None
               ) -> dict[str, Any]:
        """Recall memories by query (``knowledge.scopes.recall_scoped``).

        Text is ranked by relevance, a query of filters only (``type:task``) by decayed
        confidence. An archived memory recalled is restored and returned as ``active``.

        Args:
            query: The query language or free text (``retry AND type:decision``).
            limit: At most this many nodes (1..100).
            include_global: Also the user store; the config's ``recall_global`` when None.

        Returns:
            ``{"query", "count", "nodes": [{"store", "id", "type", "content", "tags", ...}]}``,
            and ``runs`` when the query asks about stored command runs ("why did the tests
            fail"): each command's best run, its diagnostics and what came next.

        Raises:
            InvalidInput: (E011) for a blank query or a bad limit.
        """
        from ctxstore.knowledge.recall import run_json
        from ctxstore.lifecycle.policy import recall_restoring

        wide = recall_global_default(self.db.store) if include_global is None else include_global
        stores = self._stores(wide)
        recalled = recall_restoring(stores, query, limit=_limit(limit), now=self.clock())
        out: dict[str, Any] = {"query": query, "count": len(recalled.hits),
                               "nodes": scoped_json(recalled.hits)}
        if recalled.runs:
            out["runs"] = [{"kind": "run", **run_json(r)} for r in recalled.runs]
        return out

    def search(self, text: str, limit: int = 20, include_global: bool = False) -> dict[str, Any]:
        """Ranked search for any text over memories and past command runs, best first.

        As ``ctx search`` (``knowledge.scopes.search_scoped_hits``): a run the text asks about
        ("why did the tests fail") comes back with what its command did next.

        Args:
            text: Any text: a question, code, punctuation; any word may match, results holding
                every word rank higher, "quoted phrases" match as phrases.
            limit: At most this many results (1..100).
            include_global: Also the user store.

        Returns:
            ``{"text", "count", "nodes": [... "score", "matched"]}``, and ``runs`` when found:
            ``{"kind": "run", "store", "score", "matched", "name", "status", "then", ...}``.

        Raises:
            InvalidInput: (E011) for a bad limit.
        """
        from ctxstore.knowledge.recall import run_json
        from ctxstore.knowledge.scopes import search_scoped_hits

        found = search_scoped_hits(self._stores(include_global), text, limit=_limit(limit))
        out: dict[str, Any] = {"text": text, "count": len(found.nodes),
                               "nodes": scoped_json(found.nodes)}
        if found.runs:
            out["runs"] = [{"kind": "run", "store": r.scope, "score": round(r.score, 4),
                            "matched": list(r.matched), **run_json(r.run)} for r in found.runs]
        return out

    def pack(self, task: str, budget: int | None = None, depth: int | None = None,
             include_narrative: bool = True) -> dict[str, Any]:
        """A prompt pack: the files, symbols and memory most relevant to a task (``build_pack``).

        Args:
            task: Any text (a question, a commit message, code).
            budget: Total tokens, the response reserve included (``[retrieval]
                default_budget`` when None).
            depth: Import-graph expansion depth, 0..16 (``[retrieval] default_depth``).
            include_narrative: Add decisions, tasks, notes and the recent log.

        Returns:
            The pack as ``ctx pack --format json`` writes it (spec 002 §12.4: ``retrieved``,
            ``graph_context``, ``token_budget``, ...); when items were found but the budget
            held none of them, plus ``note`` naming the smallest budget that holds one (what
            ``ctx pack`` says on stderr).

        Raises:
            InvalidInput: (E011) for a bad budget or depth.
            IndexCorrupt: (E007) if the index cannot answer.
        """
        from ctxstore.packs.pack import PackRequest, budget_note, make_pack

        if budget is not None and budget < 1:
            raise InvalidInput(f"budget must be a positive number, got {budget}")
        if depth is not None and not 0 <= depth <= _MAX_DEPTH:
            raise InvalidInput(f"depth must be 0..{_MAX_DEPTH}, got {depth}")
        result = make_pack(self.db, PackRequest(task, budget=budget, depth=depth,
                                                include_narrative=include_narrative,
                                                active_task=self._task()))
        pack = result.pack.to_json()
        doc: dict[str, Any] = {"version": _PACK_VERSION, **pack}
        if result.smallest_budget is not None:  # an empty pack the client can fix by asking again
            doc["note"] = budget_note(pack, result.smallest_budget, argument="budget:")
        return doc

    def memory_search(self, text: str, since: str | None = None, until: str | None = None,
                      session: str | None = None, intent: str | None = None, limit: int = 10
                      ) -> dict[str, Any]:
        """Search past Claude Code sessions (transcript memory); time words rank that time first.

        Off (``[memory] enabled = false``) or not yet built, it searches nothing: the result
        is empty and ``note`` says why.

        Args:
            text: What to look for; may hold time words ("decisions about the cache last week").
            since: Only turns from this time on ("last week", ``7d``, ``2026-03-01``).
            until: Only turns before this time.
            session: Only this session (an id or a unique prefix).
            intent: Only turns holding an idea of this intent (decision, conclusion, question,
                problem, solution, todo, context).
            limit: At most this many turns (1..100).

        Returns:
            ``ctx memory search --format json``: ``{"query", "since", "until", "results"}``,
            plus ``note`` when nothing was searched, or when vectors are on but cannot be
            loaded (searched by words only; the note names the missing extra).

        Raises:
            InvalidInput: (E011) for a bad time, session, intent or limit.
            MemoryDamaged: (E023) if the memory database is damaged.
        """
        from ctxstore.memory.search import MemoryQuery, result_json, search_transcripts
        from ctxstore.memory.settings import MISSING_NOTE, OFF_NOTE

        answer = search_transcripts(self.db.root,
                                    MemoryQuery(text, since, until, session, intent, _limit(limit)),
                                    now_ms=int(self.clock() * 1000), agent=True,
                                    names=("since", "until", "session"))
        if answer.off or answer.missing:
            note = OFF_NOTE if answer.off else MISSING_NOTE
            return {"query": text, "since": None, "until": None, "results": [], "note": note}
        return result_json(answer.result, answer.note)

    def compose(self, query: str | None = None, budget: int | None = None,
                include_global: bool = False) -> dict[str, Any]:
        """Compose context within a token budget (``packs.compose.compose_view``).

        Args:
            query: The query selecting nodes; the default view's when None.
            budget: The token budget; the view's when None.
            include_global: Fill what the project leaves from the user store.

        Returns:
            ``{"text", "tokens", "budget", "nodes": [{"id", "store"}]}``.

        Raises:
            InvalidInput: (E011) for a bad query or budget; BudgetExceeded (E010) for a
                budget below the frame.
        """
        from ctxstore.packs.compose import compose_view

        comp = compose_view(self.db, query=query, budget=budget,
                            user=self._stores(include_global).user,
                            now_ms=int(self.clock() * 1000))
        return {"text": comp.text, "tokens": comp.tokens, "budget": comp.budget,
                "nodes": [{"id": i, "store": s} for i, s in comp.labels.items()]}

    def show(self, id: str, store: str = "project") -> dict[str, Any]:
        """A node with its edges (``knowledge.show.show_node``).

        Args:
            id: The node's id or a unique prefix.
            store: ``project`` or ``global``.

        Returns:
            The node's fields, ``store`` and ``edges``.

        Raises:
            NodeNotFound: (E019), AmbiguousPrefix (E016), InvalidInput (E011).
        """
        from ctxstore.knowledge.show import show_node

        where = parse_scope(store)
        view = show_node(self._session_for(where), id, edges=True)
        doc = _node_doc(view.node, where)
        doc["edges"] = [{"from": e.from_key, "to": e.to_key, "type": e.label}
                        for e in view.edges or ()]
        return doc

    def link(self, source: str, target: str, type: str = "RELATES_TO") -> dict[str, Any]:
        """Link two project nodes (``knowledge.edges.link_nodes``).

        Args:
            source: The edge's source node (id or unique prefix).
            target: Its target node.
            type: DERIVED_FROM, DEPENDS_ON, SUPERSEDES, RELATES_TO or CHILD_OF.

        Returns:
            ``{"from", "to", "type", "written"}``.

        Raises:
            NodeNotFound, AmbiguousPrefix, InvalidInput: for a bad node or type.
        """
        from ctxstore.knowledge.edges import link_nodes
        from ctxstore.knowledge.show import read_node
        from ctxstore.model.knowledge import EdgeRecord

        res = link_nodes(self.db, source, target, type)
        edges = [r for r in res.records if isinstance(r, EdgeRecord)]
        if edges:
            return {"from": edges[0].from_ref[1], "to": edges[0].to_ref[1], "type": edges[0].label,
                    "written": True}
        # the edge existed: the full ids, as a written one gives them
        return {"from": read_node(self.db, source).id, "to": read_node(self.db, target).id,
                "type": type.upper(), "written": False}

    def forget(self, id: str, store: str = "project") -> dict[str, Any]:
        """Forget a node: archived and off-context, history kept (``knowledge.nodes.forget_node``).

        Args:
            id: The node's id or a unique prefix.
            store: ``project`` or ``global``.

        Returns:
            ``{"id", "store", "written"}`` (``written`` False when it was already archived).

        Raises:
            NodeNotFound: (E019), AmbiguousPrefix (E016), InvalidInput (E011).
        """
        from ctxstore.knowledge.nodes import forget_node
        from ctxstore.knowledge.show import read_node

        where = parse_scope(store)
        db = self._session_for(where)
        res = forget_node(db, id)
        # already archived (nothing written): the full id all the same, from the index
        node_id = getattr(res.records[0], "id", None) if res.records else read_node(db, id).id
        return {"id": node_id, "store": where, "written": res.changed}

    def _task(self) -> str | None:
        """The current task of this clone (``knowledge.tasks``: the hooks' too)."""
        from ctxstore.knowledge.tasks import current_task

        return current_task(self.db)

    def task_start(self, name: str) -> dict[str, Any]:
        """Start a task (``history.tasks.task_start``); later working memories join it.

        As ``<ctx:task action="start">``: the task becomes this clone's current task, and a
        session of another task is compacted first (spec 002 §15.2).

        Args:
            name: The task's name.

        Returns:
            ``{"task", "action", "nodes", "compacted"}``: the working nodes that joined, and
            the commit of the compaction it triggered (None when none ran).

        Raises:
            InvalidInput: (E011) for an empty or invalid name.
        """
        from ctxstore.history.tasks import task_start

        res = task_start(self.db, name)
        return {"task": res.task.name, "action": "start", "nodes": [n.id for n in res.task.nodes],
                "compacted": _compacted(res.compaction)}

    def task_end(self, name: str) -> dict[str, Any]:
        """End a task (``history.tasks.task_end``): decisions to reference, the rest off-context.

        As ``<ctx:task action="end">``: the current task is cleared, and the staging session
        is compacted (spec 002 §15.2).

        Args:
            name: The task's name.

        Returns:
            ``{"task", "action", "nodes", "compacted"}``: the nodes that left the working
            tier, and the commit of the compaction (None when none ran).

        Raises:
            InvalidInput: (E011) for an empty or invalid name.
        """
        from ctxstore.history.tasks import task_end

        res = task_end(self.db, name)
        return {"task": res.task.name, "action": "end", "nodes": [n.id for n in res.task.nodes],
                "compacted": _compacted(res.compaction)}

    def status(self) -> dict[str, Any]:
        """What the project store holds (``knowledge.status.store_status``).

        Returns:
            Counts of nodes, types, edges, tags and tiers, staged work and the current task.
        """
        from ctxstore.knowledge.status import store_status

        st = store_status(self.db.store, self.db.index(), kind="project")
        return {"path": st.path, "nodes": st.nodes, "tokens": st.tokens, "by_type": st.by_type,
                "edges": st.edges, "tags": st.tags,
                "tiers": {t: {"nodes": c, "tokens": k} for t, (c, k) in st.tiers.items()},
                "superseded": st.superseded, "staged_records": st.staged_records,
                "head": st.head, "current_task": self._task(),
                "user_store": str(self.user_store) if self.user_store else None}

    # -- resources ----------------------------------------------------------------------

    def default_view(self) -> str:
        """The default view composed (the context a session starts with), as Markdown.

        Returns:
            The composed Markdown.
        """
        return str(self.compose()["text"])

    def node_resource(self, node_id: str) -> str:
        """A project node as JSON text.

        Args:
            node_id: The node's id or unique prefix.

        Returns:
            ``show`` as JSON.

        Raises:
            NodeNotFound, AmbiguousPrefix, InvalidInput: for a bad id.
        """
        import json

        return json.dumps(self.show(node_id), ensure_ascii=False, indent=2)


TOOL_NAMES = ("remember", "recall", "search", "pack", "memory_search", "compose", "show", "link",
              "forget", "task_start", "task_end", "status")


def _sdk() -> tuple[Any, type[Exception], type[Exception]]:
    """The SDK's server class and its tool and resource error types (v2 first, then v1).

    Raises:
        InvalidInput: (E011) if the ``mcp`` package is not installed.
    """
    import importlib

    # mcp 2.x names the server MCPServer; 1.x called it FastMCP (same decorators).
    for package, attr in (("mcp.server.mcpserver", "MCPServer"), ("mcp.server.fastmcp", "FastMCP")):
        try:
            server = importlib.import_module(package)
            errors = importlib.import_module(package + ".exceptions")
        except ImportError:
            continue
        return getattr(server, attr), errors.ToolError, errors.ResourceError
    raise InvalidInput("ctx mcp needs the MCP SDK (package mcp), which is missing from this "
                       "installation", hint="reinstall ctx: pipx reinstall ctxstore "
                       "(or pip install 'mcp>=1.0,<3' in its environment)")


def _guarded(method: Callable[..., Any], error: type[Exception]) -> Callable[..., Any]:
    """``method`` with a ``CtxError`` turned into the SDK's tool/resource error (one line).

    What it returns goes to an agent: every ``<ctx:`` in it (node content, file names, code,
    transcript text) is escaped, as the hooks and the read commands escape it.
    """
    import functools

    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return escape_tree(method(*args, **kwargs))
        except MemoryError as exc:  # the server goes on; the call is a tool error naming it
            raise error(_one_line(OutOfMemory(f"running {method.__name__}"))) from exc
        except CtxError as exc:
            raise error(escape_tags(_one_line(exc))) from exc

    return call


def _one_line(exc: CtxError) -> str:
    text = f"error[{exc.code}]: {exc.message}"
    if exc.hint:
        text += f" (hint: {exc.hint})"
    return text.replace("\n", " ")


def build_server(tools: ToolBox) -> Any:
    """The SDK server with every tool and resource of ``tools`` registered.

    Args:
        tools: The tool box (its session open).

    Returns:
        An ``MCPServer`` (``FastMCP`` with mcp 1.x); ``run("stdio")`` serves it.

    Raises:
        InvalidInput: (E011) if the ``mcp`` package is not installed.
    """
    server_cls, tool_error, resource_error = _sdk()
    import inspect

    import ctxstore

    # The server names its version in ``initialize`` (mcp 2.x takes it; 1.x names the SDK's).
    versioned = "version" in inspect.signature(server_cls).parameters
    server = server_cls(SERVER_NAME, instructions=_INSTRUCTIONS,
                        **({"version": ctxstore.__version__} if versioned else {}))
    for name in TOOL_NAMES:
        method = getattr(tools, name)
        doc = (method.__doc__ or "").strip().split("\n\n", 1)[0]
        server.tool(name=name, description=doc)(_guarded(method, tool_error))
    server.resource("ctx://view/default", name="default-view", mime_type="text/markdown",
                    description="The default view: the context a session starts with.")(
        _guarded(tools.default_view, resource_error))
    server.resource("ctx://node/{node_id}", name="node", mime_type="application/json",
                    description="One node of the project store, with its edges.")(
        _guarded(tools.node_resource, resource_error))
    return server


def serve(db: Session, *, user_store: Path | None, fast_start: bool = True) -> None:
    """Serve ``db`` over stdio until the client closes the connection.

    The wire's front (``mcp.front``) starts reading first: with ``fast_start`` it answers
    ``initialize``, ``ping`` and ``tools/list`` as the SDK would while the SDK is imported
    (0.6-3 s), so a client connecting in the background lists ctx's tools at once.

    Args:
        db: The project's open session (the caller closes it).
        user_store: The user store's directory, or None for no global layer.
        fast_start: Answer the handshake before the SDK is loaded; False lets the SDK answer
            everything (``ctx mcp --no-fast-start``).

    Raises:
        InvalidInput: (E011) if the ``mcp`` package is not installed.
    """
    from importlib.util import find_spec

    import ctxstore
    from ctxstore.mcp.front import Front, load_description
    from ctxstore.mcp.wire import serve_stdio, wire_descriptors

    if find_spec("mcp") is None:  # said before a client is told anything
        _sdk()
    tools = ToolBox(db, user_store=user_store)
    try:
        with wire_descriptors() as (wire_in, wire_out):
            front = Front(wire_in, wire_out, load_description() if fast_start else None,
                          ctxstore.__version__)
            front.start()
            # the SDK's stdio transport, every request answered
            serve_stdio(build_server(tools), front)
    finally:
        tools.close()
