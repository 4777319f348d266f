"""Executing ``<ctx:*>`` commands against a store (spec 000 "Hook Subcommands", spec 001 §6–§8).

Each command is one call into the operations layer (``ctxstore.knowledge``) or the query
engine, run through the front end's ``Session``; this module only parses attributes and
renders results, and no knowledge behaviour lives here. It returns
an ``Outcome``: whether the store changed, an optional problem to report, and an optional
result to deliver with the next prompt (recall, status, expand). Commands are plain
dicts (name, attrs, content, raw, key) so that a command deferred under a held lock
replays exactly as it was parsed.

A ``remember`` or ``summarize`` passes the command's key (session, turn, tag text, n-th
identical tag; see ``claude.hooks.turn_commands``) as ``hook_key`` to ``knowledge.remember``
or ``knowledge.nodes.summarize_nodes``, which keep it in the written node's metadata and
write nothing when a node with that key exists, so neither runs twice even if the per-clone
state was lost or the hook was killed before recording it (RELIABILITY.md CO-11, TR-12), while the
same tag written again in a later turn is a new write. The other commands that write need
no key: each finds its own effect in the store and writes nothing again (``link``: the same
edge exists; ``supersede``: the node is marked and linked; ``forget``: it is archived;
``task``: no node is left to move; ``recall``: the node it restored is active), so a re-run
after such a kill changes nothing more (tests/crash/test_hook_kill_points.py). Content is
limited by config ``[claude] max_remember_chars`` (default ``knowledge.remember.MAX_CONTENT``).
Nodes written here have ``author: agent``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxstore.claude.inject import LINE_BREAK, frame
from ctxstore.claude.state import HookState, key_of
from ctxstore.errors import CtxError, IndexCorrupt, InvalidInput
from ctxstore.knowledge.nodes import forget_node, summarize_nodes, supersede_node, validate_tag
from ctxstore.knowledge.nodes.provenance import Origin, describe, read_provenance, relative_files
from ctxstore.knowledge.show import short_ids
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.session import Session
from ctxstore.sqlite import is_damage

if TYPE_CHECKING:
    from ctxstore.index.read import NodeRow

__all__ = ["Outcome", "CommandContext", "execute", "hook_key", "render_nodes"]

@dataclass(frozen=True)
class Outcome:
    """What one command did."""

    changed: bool = False
    problem: str | None = None
    pending: tuple[str, str] | None = None  # (kind, text) for the next prompt


@dataclass
class CommandContext:
    """What a command runs against.

    Attributes:
        db: The front end's open ``Session``: the store commands write to and the index
            reads use.
        state: The per-clone hook state.
        session: The agent session the command comes from.
    """

    db: Session
    state: HookState
    session: str

    @property
    def store(self) -> Store:
        """The store commands write to (``db.store``)."""
        return self.db.store

    def index(self) -> sqlite3.Connection:
        """The session's index connection, in sync with the store."""
        return self.db.index()


def hook_key(session: str, raw: str) -> str:
    """The identity of a tag written in a session (stored with the nodes it creates)."""
    return key_of(session, raw)


def _current_task(ctx: CommandContext) -> str | None:
    """The current task (``knowledge.tasks``, its one owner)."""
    from ctxstore.knowledge.tasks import current_task

    return current_task(ctx.db)


def _tags(text: str | None) -> list[str]:
    return [validate_tag(t) for t in (text or "").split(",") if t.strip()]


def render_nodes(db: Session, nodes: list[NodeRow]) -> str:
    """``- [type:short] content`` items with their tags (spec 001 §17), short ids of ``db``."""
    from ctxstore.knowledge.recall import history_note, newer_versions

    newer = newer_versions(db.index(), [n.id for n in nodes])
    short = short_ids(db, [*(n.id for n in nodes), *(m.id for m in newer.values())])
    out = []
    for n in nodes:
        out.append(f"- [{n.type}:{short[n.id]}] " + n.content.strip().replace("\n", "\n  ") + "\n")
        if n.tags:
            out.append(f"  - Tags: {', '.join(n.tags)}\n")
        if (prov := read_provenance(n.metadata)) is not None:
            out.append(f"  - From: {describe(prov, short=True)}\n")
        if n.id in newer:  # a newer node refines or contradicts it: shown as history
            out.append(f"  - {history_note(newer[n.id], short[newer[n.id].id])}\n")
    return "".join(out)


def _content_limit(ctx: CommandContext) -> int:
    """The longest content an agent may write (config ``[claude] max_remember_chars``)."""
    from ctxstore.knowledge.remember import MAX_CONTENT

    value = ctx.db.config.values.get("claude", {}).get("max_remember_chars", MAX_CONTENT)
    return value if isinstance(value, int) and not isinstance(value, bool) else MAX_CONTENT


def _over_limit(content: str, limit: int) -> None:
    if len(content) > limit:
        raise InvalidInput(f"content of {len(content)} characters is over the limit of {limit} "
                           "(config [claude] max_remember_chars)")


def _files(cmd: dict[str, Any]) -> list[str]:
    """The files the command's turn touched (``on_stop``), as recorded with a queued command."""
    files = cmd.get("files")
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []


def _remember(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    from ctxstore.knowledge.remember import remember

    attrs = cmd["attrs"]
    limit = _content_limit(ctx)
    _over_limit(cmd["content"], limit)
    # The command's key names the tag in its turn: the same tag in a later turn is a new write.
    key = cmd.get("key") or hook_key(ctx.session, cmd["raw"])
    from ctxstore.knowledge.scopes import session_for_scope

    with session_for_scope(ctx.db, attrs.get("scope")) as db:  # scope="global": ~/.ctx
        res = remember(db, cmd["content"], type=attrs.get("type"), tags=_tags(attrs.get("tags")),
                       session=ctx.session, hook_key=key, current_task=_current_task(ctx),
                       max_content=limit, files=_files(cmd))
    problem = f"{res.warning} in <ctx:remember>" if res.warning else None
    return Outcome(changed=res.changed, problem=problem)


def _recall_global(ctx: CommandContext, cmd: dict[str, Any]) -> bool:
    """Whether a recall reads the user store too (``global="false"``; else the config)."""
    from ctxstore.knowledge.scopes import recall_global_default

    said = (cmd["attrs"].get("global") or "").strip().lower()
    if said in ("true", "false"):
        return said == "true"
    if said:
        raise InvalidInput(f'global must be "true" or "false", got {said!r}')
    return recall_global_default(ctx.store)


def _recall(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    from ctxstore.knowledge.recall import parse_recall_limit
    from ctxstore.knowledge.scopes import Stores, default_user_store
    from ctxstore.lifecycle.policy import recall_restoring

    query = (cmd["attrs"].get("query") or cmd["content"]).strip()
    if not query:
        raise InvalidInput("<ctx:recall> needs a query")
    limit = parse_recall_limit(cmd["attrs"].get("limit"))
    # The project store, then the user store ~/.ctx (spec 003 global layer), each labelled.
    problem = None
    try:
        stores = Stores.open(ctx.db, default_user_store() if _recall_global(ctx, cmd) else None)
    except CtxError as exc:  # a damaged ~/.ctx must not cost the project's results
        stores, problem = Stores(ctx.db), f"<ctx:recall> read this project only: ~/.ctx: {exc.message}"
    try:
        recalled = recall_restoring(stores, query, limit=limit, now=time.time())
        restored, hits, runs = recalled.restored, recalled.hits, recalled.runs
        ctx.state.record_access([h.node.id for h in hits if h.scope == "project"])
        nodes = [h.node for h in hits if h.scope == "project"]
        mine = [h.node for h in hits if h.scope == "user"]
        theirs = render_nodes(stores.user, mine) if stores.user and mine else ""
    finally:
        stores.close_user()
    shown = LINE_BREAK.sub(" ", query)  # the model's text must not start a line of the frame
    body = f"## Recall Results\n\nQuery: `{shown}`\n\n"
    body += f"Found {len(nodes)} nodes:\n\n" + render_nodes(ctx.db, nodes) if nodes \
        else "No matching nodes found.\n"
    if theirs:
        body += f"\nFrom the user store (~/.ctx), {len(mine)} nodes:\n\n" + theirs
    if runs:  # stored runs of commands the query asks about ("why did the tests fail")
        from ctxstore.knowledge.recall import run_item

        body += f"\nCommand runs, {len(runs)}:\n\n" + "".join(run_item(r) + "\n" for r in runs)
    from ctxstore.memory.context import recall_section  # past sessions: a section of its own

    body += recall_section(ctx.store.root, query)
    note = "[... {n} more results omitted; narrow the query]"
    return Outcome(changed=restored > 0, problem=problem,
                   pending=("recall", frame("recall results", body, limit=4_000, note=note)))


def _status(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    from ctxstore.knowledge.status import store_status

    st = store_status(ctx.store, ctx.index(), kind="project")
    lines = ["## ctx Status", "", f"Nodes: {st.nodes} (estimated {st.tokens:,} tokens)"]
    lines += [f"  {t}: {c}" for t, c in st.by_type.items()]
    lines += [f"Edges: {st.edges}", f"Tags: {st.tags} unique", f"Superseded: {st.superseded}",
              "Tiers:"]
    lines += [f"  {tier}: {c} nodes ({tok:,} tokens)" for tier, (c, tok) in st.tiers.items()]
    lines.append(f"Current task: {_current_task(ctx) or 'none'}")
    if st.staged_work_commits:
        lines.append(f"Staged: {st.staged_records} records not yet committed")
    return Outcome(pending=("status", frame("status", "\n".join(lines) + "\n", limit=3_000)))


def _summarize(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    attrs = cmd["attrs"]
    refs = [r.strip() for r in (attrs.get("nodes") or "").split(",") if r.strip()]
    limit = _content_limit(ctx)
    _over_limit(cmd["content"], limit)
    # Keyed as a remember is: a Stop killed after the write and run again writes it once.
    key = cmd.get("key") or hook_key(ctx.session, cmd["raw"])
    _, res = summarize_nodes(ctx.db, refs, cmd["content"],
                             archive_sources=(attrs.get("archive") or "").lower() == "true",
                             tags=_tags(attrs.get("tags")), max_content=limit, hook_key=key,
                             channel="summaries",  # capture: a secret in it is redacted
                             origin=Origin("conversation", ctx.session,
                                           relative_files(ctx.store.worktree, _files(cmd))))
    return Outcome(changed=res.changed)


def _link(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    from ctxstore.knowledge.edges import link_nodes

    attrs = cmd["attrs"]
    if not attrs.get("from") or not attrs.get("to"):
        raise InvalidInput("<ctx:link> needs from= and to=")
    res = link_nodes(ctx.db, attrs["from"], attrs["to"], attrs.get("type") or "RELATES_TO")
    return Outcome(changed=res.changed)


def _supersede(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    attrs = cmd["attrs"]
    if not attrs.get("old") or not attrs.get("new"):
        raise InvalidInput("<ctx:supersede> needs old= and new=")
    return Outcome(changed=supersede_node(ctx.db, attrs["old"], attrs["new"]).changed)


def _forget(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    ref = cmd["attrs"].get("id") or cmd["attrs"].get("node")
    if not ref:
        raise InvalidInput("<ctx:forget> needs id=")
    return Outcome(changed=forget_node(ctx.db, ref).changed)


def _expand(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    from ctxstore.knowledge.recall import expand_summary

    ref = cmd["attrs"].get("node")
    if not ref:
        raise InvalidInput("<ctx:expand> needs node=")
    conn = ctx.index()
    found = expand_summary(conn, ref)
    summary, sources = found.summary, found.sources
    ctx.state.record_access([summary.id, *(n.id for n in sources)])
    short = short_ids(ctx.db, [summary.id])[summary.id]
    body = f"## Expanded summary [summary:{short}]\n\n"
    body += render_nodes(ctx.db, sources) if sources else "It has no source nodes left.\n"
    return Outcome(pending=("expand", frame("expanded summary", body, limit=4_000)))


def _task(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    from ctxstore.history.tasks import task_end, task_start
    from ctxstore.knowledge.tasks import task_tag

    attrs = cmd["attrs"]
    name, action = (attrs.get("name") or "").strip(), (attrs.get("action") or "").strip()
    if action not in ("start", "end"):
        raise InvalidInput('<ctx:task> needs action="start" or action="end"')
    if not name:
        raise InvalidInput("<ctx:task> needs name=")
    task_tag(name)  # a bad name is refused before anything is read
    if action == "start":  # compaction at a task switch, then the start (spec 002 §15.2)
        return Outcome(changed=task_start(ctx.db, name).task.changed)
    res = task_end(ctx.db, name).task
    pending = None
    if (attrs.get("summarize") or "").lower() == "true" and res.nodes:
        nodes = list(res.nodes)
        short = short_ids(ctx.db, [n.id for n in nodes])
        # What end_task did to each node: decisions to tier:reference, the rest off-context.
        groups = [(tier, [n for n in nodes if res.tiers.get(n.id) == tier])
                  for tier in ("reference", "off-context")]
        said = [f"{len(g)} {'decision' if tier == 'reference' else 'node'}{'' if len(g) == 1 else 's'} "
                f"moved to tier:{tier}" for tier, g in groups if g]
        body = (f"## Task {name} ended\n\n{'; '.join(said)}. To keep a summary, write a "
                f"summarize command with nodes=\"{','.join(short[n.id] for n in nodes)}\".\n")
        for tier, group in groups:
            if group:
                body += f"\ntier:{tier}:\n" + render_nodes(ctx.db, group)
        pending = ("task", frame("ended task", body, limit=4_000))
    return Outcome(changed=res.changed, pending=pending)


_HANDLERS: dict[str, Callable[[CommandContext, dict[str, Any]], Outcome]] = {
    "remember": _remember, "recall": _recall, "status": _status, "summarize": _summarize,
    "link": _link, "supersede": _supersede, "forget": _forget, "expand": _expand, "task": _task,
}


# Commands whose failure in SQLite means "this query cannot run", not "the index is broken".
_QUERYING = frozenset({"recall", "task"})


def _sqlite_failure(name: str, exc: sqlite3.Error) -> CtxError:
    """The typed error for a SQLite error met while running ``<ctx:name>``."""
    if is_damage(exc):
        return IndexCorrupt(str(exc))
    if name in _QUERYING:
        return InvalidInput(f"the query could not run: {exc}", hint="simplify the query")
    return InvalidInput(f"SQLite could not run it: {exc}")


def execute(ctx: CommandContext, cmd: dict[str, Any]) -> Outcome:
    """Run one command.

    A query that passes the parser but that SQLite cannot run (too deeply nested, too
    many terms, a string it cannot tokenize) and any other SQLite error of the index
    become a typed error of this one command, so the caller reports it and goes on.

    Raises:
        LockConflict: if another process holds the writer lock (the caller defers).
        StoreCorrupt: if the store is damaged.
        IndexCorrupt: if SQLite finds the index damaged.
        StateDamaged: if SQLite finds ``local/state.sqlite`` damaged (the hook replaces it).
        CtxError: any other library error (bad input, unknown node, query syntax, a query
            SQLite cannot run, ...), which the caller reports.
    """
    name = cmd["name"]
    try:
        return _HANDLERS[name](ctx, cmd)
    except sqlite3.Error as exc:
        raise _sqlite_failure(name, exc) from exc
    except RecursionError:
        raise InvalidInput("the query is nested too deeply to run", hint="simplify the query") from None
