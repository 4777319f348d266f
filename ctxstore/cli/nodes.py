"""Node commands: add, show, update, delete, list, summarize, supersede."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

import click

from ctxstore.cli._common import (
    Env,
    emit_json,
    format_option,
    node_json,
    parse_since,
    pass_env,
    plural,
    preview,
)
from ctxstore.cli._global import global_write_option
from ctxstore.cli._render import echo_stored, item_line, tags_text
from ctxstore.errors import InvalidInput

if TYPE_CHECKING:
    from ctxstore.history.commit import PostCommit
    from ctxstore.history.stage import StageResult
    from ctxstore.model.knowledge import NodeRecord

TYPE_HELP = ("fact, decision, pattern, observation, hypothesis, task, summary, source or "
             "open-question.")

allow_secret_option = click.option(
    "--allow-secret", is_flag=True,
    help="Store the text even if it holds a secret (a token, a key): it reaches Git with "
         ".ctx/. Without it such a write is refused (E025, docs/security.md).")


def _parse_meta(items: tuple[str, ...]) -> dict[str, str]:
    meta: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--meta needs key=value, got {item!r}")
        meta[key.strip()] = value
    return meta


def _read_stdin_text() -> str:
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("standard input is not UTF-8 text") from None


NARRATIVE_KINDS = ("note", "task", "decision")


def _refuse_body(body: str | None) -> None:
    """``--body`` is the text below a task's or decision's title; other kinds have none."""
    if body is not None:
        raise InvalidInput("--body is for `ctx add task` and `ctx add decision`")


def _added_doc(node: NodeRecord, staged: StageResult, **extra: Any) -> dict[str, Any]:
    """The ``--format json`` result of ``ctx add`` (``extra``: what a narrative kind adds)."""
    return {"id": node.id, "type": node.type, **extra, "tags": list(node.tags),
            "work_commit": staged.work_commit.hex()}


@click.command("add")
@click.option("--type", "node_type", default=None, metavar="TYPE", help=TYPE_HELP)
@click.option("--tag", "tags", multiple=True, metavar="NS:VALUE", help="A tag (repeatable).")
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Metadata (repeatable).")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the content from standard input.")
@click.option("--body", default=None, help="The text of a task or decision (Markdown).")
@click.option("--commit", "commit", is_flag=True,
              help="Then fold the staged work into a canonical commit (as `ctx commit`).")
@click.option("-m", "--message", default=None,
              help="The message of that commit (implies --commit).")
@click.argument("words", nargs=-1, metavar="[note|task|decision] TEXT")
@allow_secret_option
@global_write_option
@format_option
@pass_env
def add_command(env: Env, node_type: str | None, tags: tuple[str, ...], meta: tuple[str, ...],
                from_stdin: bool, body: str | None, commit: bool, message: str | None,
                words: tuple[str, ...], allow_secret: bool) -> None:
    """Add a knowledge node; prints its id. The write is durable when this returns.

    On a terminal the line reads `Added: ID` (and, for a note, task or decision, the task
    number and the Markdown file); piped (scripts: `id=$(ctx add ...)`) it is the bare id.

    With --type TYPE, TEXT becomes a node of that type. `note`, `task` and `decision`
    also write the narrative Markdown under .ctx/narrative/: an entry of today's log
    (an observation node), a task file (a task node, shown with its task number) or a
    section of decisions.md (a decision node).

    Text that holds a secret (an API key, a token, a private key, a password in a URL)
    is refused with the rule and the line named, and nothing is written; --allow-secret
    stores it anyway.

    \b
    Examples:
        ctx add --type fact --tag tier:reference "Database uses SQLite with WAL mode"
        echo "retries time out after 30 s" | ctx add --type observation --stdin
        ctx add note "Fixed the timeout bug by adding retry logic"
        ctx add task "Implement rate limiting" --body "Token bucket per client"
        ctx add decision "Retry with exponential backoff" --body "Jitter avoids retry storms"
        ctx add note "Switched the cache to LRU" -m "Cache notes"
        ctx add --global --type fact --tag tier:reference "I prefer pytest over unittest"
    """
    if message is not None:  # checked before the node is staged, not after
        from ctxstore.history.commit import check_message

        check_message(message)
    if node_type is None and words and words[0] in NARRATIVE_KINDS:
        doc, line = _add_narrative(env, words[0], words[1:], from_stdin, body, tags, meta,
                                   allow_secret)
    else:
        doc, line = _add_plain(env, node_type, tags, meta, from_stdin, body, words, allow_secret)
    after = _commit_after_add(env, doc, message) if commit or message is not None else None
    if env.fmt == "json":
        emit_json(doc)
    else:
        from ctxstore.cli._render import stdout_is_terminal

        click.echo(f"Added: {line}" if stdout_is_terminal() else doc["id"])
        for change in doc.get("evolves", ()):  # a proposal: superseding is the user's call
            click.echo(f"ctx: it {change['label'].lower()} the older {doc.get('type', 'node')} "
                       f"{change['node'][:12]}; if it replaces it: ctx supersede "
                       f"{change['node'][:12]} {doc['id'][:12]}", err=True)
        if doc.get("commit"):
            click.echo(f"committed {doc['commit']}")
        if after is not None and after.git_staged:
            click.echo("  git add .ctx")
    if after is not None:
        from ctxstore.cli.commit import echo_notices

        echo_notices(after.notices)


class AddGroup(click.Group):
    """`ctx add`: the node form (``add_command``), or a form of its own (``ADD_COMMANDS``).

    The first word picks: a name of ``ADD_COMMANDS`` (``cargo``, ``command``, ...) runs that
    command, imported only then; anything else (``note``, ``--type``, ``--help``) is the
    node form, parsed and run as ``add_command`` in this same context.
    """

    def __init__(self, node_command: click.Command) -> None:
        """Wrap the node form; the group takes its name and help."""
        super().__init__(node_command.name, help=node_command.help,
                         short_help=node_command.short_help)
        self.node_command = node_command
        # Introspection (root's check of undecodable arguments) sees the node form's options;
        # parsing a form of its own uses only --help (``get_params``).
        self.params = list(node_command.params)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The names of the forms of their own, sorted."""
        from ctxstore.cli.table import ADD_COMMANDS

        return sorted(ADD_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The form ``name``, importing its module only now; None if there is none."""
        import importlib

        from ctxstore.cli.table import ADD_COMMANDS

        spec = ADD_COMMANDS.get(name)
        if spec is None:
            return None
        command: click.Command = getattr(importlib.import_module(spec[0]), spec[1])
        return command

    def _node_form(self, args: list[str]) -> bool:
        from ctxstore.cli.table import ADD_COMMANDS

        return not args or args[0] not in ADD_COMMANDS

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        """Only ``--help``: the node form's options are parsed by ``add_command`` itself."""
        help_option = self.get_help_option(ctx)
        return [help_option] if help_option is not None else []

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse as the node form unless the first word names a form of its own."""
        if self._node_form(args):
            ctx.meta["ctx.add.node_form"] = True
            ctx.allow_interspersed_args = True  # a group's context stops at the first word
            return self.node_command.parse_args(ctx, args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the node form, or the form named."""
        if ctx.meta.pop("ctx.add.node_form", False):
            return self.node_command.invoke(ctx)
        return super().invoke(ctx)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The node form's help, then the forms of their own with their one-line help."""
        from ctxstore.cli.table import ADD_COMMANDS

        self.node_command.format_help(ctx, formatter)
        with formatter.section("Other forms (ctx add FORM --help)"):
            formatter.write_dl([(f"ctx add {name}", spec[2])
                                for name, spec in sorted(ADD_COMMANDS.items())])


add_group = AddGroup(add_command)


def _commit_after_add(env: Env, doc: dict[str, Any], message: str | None) -> PostCommit:
    """``ctx add --commit``: fold the session now (``history.commit``).

    The node is staged whatever happens. Sets ``commit`` and ``git_staged`` in ``doc``.
    """
    from ctxstore.errors import CtxError
    from ctxstore.history.commit import commit

    text = message or f"ctx add {doc.get('kind', doc['type'])}: {doc['id']}"
    try:
        res = commit(env.session(), text)
    except CtxError as exc:
        exc.message = f"added {doc['id']} (staged), but the commit failed: {exc.message}"
        raise
    doc["commit"] = res.fold.commit.hex() if res.fold.commit else None
    doc["git_staged"] = res.git_staged
    return res.after


def _add_plain(env: Env, node_type: str | None, tags: tuple[str, ...], meta: tuple[str, ...],
               from_stdin: bool, body: str | None, words: tuple[str, ...], allow_secret: bool
               ) -> tuple[dict[str, Any], str]:
    if node_type is None:
        raise InvalidInput("give --type TYPE CONTENT, or note, task or decision and the text",
                           hint='ctx add note "text"')
    _refuse_body(body)
    if len(words) > 1:
        raise InvalidInput("give the content as one argument (quote it)")
    text = _text_arg(words[0] if words else None, from_stdin, "content")
    from ctxstore.knowledge.nodes import add_node

    added = add_node(env.session(), node_type, text, tags=list(tags), metadata=_parse_meta(meta),
                     allow_secret=allow_secret)
    doc = _added_doc(added.node, added.staged)
    doc["evolves"] = [{"label": label, "node": old} for label, old in added.evolves]
    return doc, added.node.id


def _text_arg(arg: str | None, from_stdin: bool, what: str) -> str:
    if from_stdin == (arg is not None):
        raise InvalidInput(f"give the {what} as an argument or with --stdin (not both)")
    return _read_stdin_text() if from_stdin else arg  # type: ignore[return-value]


def _add_narrative(env: Env, kind: str, rest: tuple[str, ...], from_stdin: bool, body: str | None,
                   tags: tuple[str, ...], meta: tuple[str, ...], allow_secret: bool
                   ) -> tuple[dict[str, Any], str]:
    from ctxstore.narrative import entries as notes

    if len(rest) > 1:
        raise InvalidInput(f"give the {kind} text as one argument (quote it)")
    if kind == "note":
        _refuse_body(body)
        entry = notes.add_note(env.session(), _text_arg(rest[0] if rest else None, from_stdin, "note"),
                               tags=tags, metadata=_parse_meta(meta), allow_secret=allow_secret)
    else:
        if from_stdin and body is not None:
            raise InvalidInput("give the body with --body or --stdin (not both)")
        if not rest:
            raise InvalidInput(f"the {kind} needs a title", hint=f'ctx add {kind} "TITLE"')
        text = _read_stdin_text() if from_stdin else body
        add = notes.add_task if kind == "task" else notes.add_decision
        entry = add(env.session(), rest[0], text, tags=tags, metadata=_parse_meta(meta),
                    allow_secret=allow_secret)
    node = entry.node
    doc = _added_doc(node, entry.added.staged, kind=kind, path=entry.path)
    if entry.task_number is not None:
        doc["task_number"] = entry.task_number
    number = f"  task {entry.task_number}" if entry.task_number else ""
    return doc, f"{node.id}{number}  narrative/{entry.path}"


def _print_node(env: Env, node, edges, history, stale=(), commits=()) -> None:  # type: ignore[no-untyped-def]
    from ctxstore.packs.compose import iso_ms

    if env.fmt == "json":
        doc = node_json(node)
        doc["stale_mentions"] = [m.to_json() for m in stale]  # code.stale
        # UpdatedIn (spec 002 §9): the canonical commits that changed it, newest first
        doc["updated_in"] = [{"commit": c.commit, "at": iso_ms(c.at_ms), "message": c.message}
                             for c in commits]
        if edges is not None:
            doc["edges"] = [{"from": e.from_key, "to": e.to_key, "type": e.label,
                             "direction": "out" if e.from_key == node.id else "in"} for e in edges]
            doc["edges"] += [{"from": node.id, "to": c.commit, "type": "UpdatedIn",
                              "direction": "out", "kind": "commit"} for c in commits]
        if history is not None:
            doc["history"] = history
        emit_json(doc)
        return
    if env.fmt == "markdown":
        from ctxstore.knowledge.show import short_ids

        echo_stored(item_line(node.type, short_ids(env.session(), [node.id])[node.id], node.content))
        return
    # Stored text (tags, summary, metadata, content, history) is printed inertly (_render).
    click.echo(f"{node.id}  {node.type}" + (f"  (superseded by {node.superseded_by})"
                                            if node.superseded_by else ""))
    if node.tags:
        echo_stored(f"tags:    {tags_text(node.tags)}")
    click.echo(f"created: {iso_ms(node.created_at)}  updated: {iso_ms(node.updated_at)}  "
               f"~{node.tokens} tokens")
    if node.summary:
        echo_stored(f"summary: {node.summary}")
    from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, describe, read_provenance

    prov = read_provenance(node.metadata)
    if prov is not None:
        echo_stored(f"from:    {describe(prov)}")
    for key, value in sorted(node.metadata.items()):
        if key != META_PROVENANCE or prov is None:
            echo_stored(f"meta:    {key}={value}")
    click.echo("")
    echo_stored(node.content.rstrip("\n"))
    for m in stale:  # code.stale: a mentioned file changed after the mention
        when = f"since {iso_ms(m.since_ms)}" if m.since_ms is not None else "file removed"
        click.echo(f"stale:   mentions {m.kind} {m.key}, which {m.reason} ({when})")
    if edges is not None:
        click.echo("")
        click.echo(f"edges ({len(edges)}):")
        for e in edges:
            if e.from_key == node.id:
                click.echo(f"  -> {e.label:<13} {e.to_kind}:{e.to_key}")
            else:
                click.echo(f"  <- {e.label:<13} {e.from_kind}:{e.from_key}")
    if (history is not None or edges is not None) and commits:
        click.echo("")
        click.echo(f"updated in ({len(commits)} commits, newest first):")
        for c in commits:
            echo_stored(f"  {iso_ms(c.at_ms)}  {c.commit[:12]}  {preview(c.message, 50)}")
    if history is not None:
        click.echo("")
        click.echo(f"history ({len(history)} versions, oldest first):")
        for h in history:
            rec = h["record"]
            what = "deleted" if h["kind"] == "node_removed" else preview(rec.get("content") or "<blob>", 50)
            echo_stored(f"  {iso_ms(h['stamp'])}  {h['version'][:12]}  {what}")


@click.command("show")
@click.argument("node_id")
@click.option("--with-edges", is_flag=True, help="Also list the node's edges.")
@click.option("--history", is_flag=True, help="Also list every version of the node.")
@format_option
@pass_env
def show_command(env: Env, node_id: str, with_edges: bool, history: bool) -> None:
    """Show a node by id or unique prefix (4+ characters).

    \b
    Examples:
        ctx show 01HQ1A2B --with-edges
        ctx show 01HQ1A2B --history --format json
    """
    from ctxstore.knowledge.show import show_node

    env.index()  # a large catch-up shows progress on a terminal
    view = show_node(env.session(), node_id, edges=with_edges, history=history)
    _print_node(env, view.node, list(view.edges) if view.edges is not None else None,
                list(view.versions) if view.versions is not None else None, list(view.stale),
                view.updated_in)


@click.command("update")
@click.argument("node_id")
@click.option("--content", default=None, help="New content.")
@click.option("--type", "node_type", default=None, help="New type: " + TYPE_HELP)
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE",
              help="Set metadata (repeatable; KEY= removes the key).")
@click.option("--summary", default=None, help="New summary (empty removes it).")
@allow_secret_option
@format_option
@pass_env
def update_command(env: Env, node_id: str, content: str | None, node_type: str | None,
                   meta: tuple[str, ...], summary: str | None, allow_secret: bool) -> None:
    """Write a new version of a node (the old one stays in its history).

    \b
    Examples:
        ctx update 01HQ1A2B --content "Database uses SQLite (WAL, synchronous=NORMAL)"
        ctx update 01HQ1A2B --type decision --meta rationale="fewer moving parts"
    """
    from ctxstore.knowledge.nodes import update_node

    res = update_node(env.session(), node_id, content=content, node_type=node_type,
                      metadata=_parse_meta(meta) if meta else None, summary=summary,
                      allow_secret=allow_secret)
    node = cast("NodeRecord", res.records[0])  # update_node stages the node's record first
    if env.fmt == "json":
        emit_json({"id": node.id, "updated": True})
    else:
        click.echo(f"updated {node.id}")


@click.command("delete")
@click.argument("node_id")
@click.option("--cascade", is_flag=True, help="Also delete nodes DERIVED_FROM this one.")
@format_option
@pass_env
def delete_command(env: Env, node_id: str, cascade: bool) -> None:
    """Delete a node and its edges (a tombstone: history keeps the old versions).

    \b
    Examples:
        ctx delete 01HQ1A2B
        ctx delete 01HQ1A2B --cascade
    """
    from ctxstore.knowledge.nodes import delete_node
    from ctxstore.model.knowledge import NodeRemoved

    res = delete_node(env.session(), node_id, cascade=cascade)
    removed = [r.id for r in res.records if isinstance(r, NodeRemoved)]
    edges = len(res.records) - len(removed)
    if env.fmt == "json":
        emit_json({"deleted": removed, "edges_removed": edges})
    else:
        click.echo(f"deleted {', '.join(removed)} ({plural(edges, 'edge')})")


@click.command("list")
@click.option("--type", "node_type", default=None, help="Only nodes of this type.")
@click.option("--tag", "tags", multiple=True, help="Only nodes with this tag (repeatable: all).")
@click.option("--since", default=None, metavar="TIME",
              help="Only nodes created since TIME: 1h, 7d, 2w ago, YYYY-MM-DD or "
                   "YYYY-MM-DDTHH:MM:SSZ (as `created:>` in a query).")
@click.option("--limit", type=click.IntRange(min=1, max=1_000_000_000), default=None,
              help="At most N nodes.")
@format_option
@pass_env
def list_command(env: Env, node_type: str | None, tags: tuple[str, ...], since: str | None,
                 limit: int | None) -> None:
    """List nodes, newest first.

    \b
    Examples:
        ctx list --type fact --tag tier:reference
        ctx list --since 1h --limit 20
    """
    from ctxstore.knowledge.nodes import list_nodes

    since_ms = int(parse_since(since) * 1000) if since else None
    nodes = list_nodes(env.index(), node_type=node_type, tags=tags, created_since_ms=since_ms,
                       limit=limit)
    _print_nodes(env, nodes)


def _print_nodes(env: Env, nodes, scores=None) -> None:  # type: ignore[no-untyped-def]
    if env.fmt == "json":
        docs = [node_json(n) for n in nodes]
        if scores is not None:
            for doc, score in zip(docs, scores, strict=True):
                doc["score"] = round(score, 4)
        emit_json({"count": len(nodes), "nodes": docs})
        return
    short = {}
    if env.fmt == "markdown":
        from ctxstore.knowledge.show import short_ids

        short = short_ids(env.session(), [n.id for n in nodes])
    for n in nodes:
        if env.fmt == "markdown":
            echo_stored(item_line(n.type, short[n.id], n.content))
            continue
        tags = f"  [{tags_text(n.tags)}]" if n.tags else ""
        mark = " (superseded)" if n.superseded_by else ""
        echo_stored(f"{n.id}  {n.type:<13} {preview(n.content)}{tags}{mark}")


@click.command("summarize")
@click.argument("node_ids", nargs=-1, required=True)
@click.option("--content", required=True, help="The summary text.")
@click.option("--archive-sources", is_flag=True, help="Move the sources to tier:off-context.")
@click.option("--tag", "tags", multiple=True, help="A tag for the summary (repeatable).")
@allow_secret_option
@format_option
@pass_env
def summarize_command(env: Env, node_ids: tuple[str, ...], content: str, archive_sources: bool,
                      tags: tuple[str, ...], allow_secret: bool) -> None:
    """Create a summary node DERIVED_FROM the given nodes.

    \b
    Example:
        ctx summarize 01HQ1A2B 01HQ1A2C --content "Parser done: AND/OR/NOT" --archive-sources
    """
    from ctxstore.knowledge.nodes import summarize_nodes

    summary, res = summarize_nodes(env.session(), list(node_ids), content,
                                   archive_sources=archive_sources, tags=list(tags),
                                   allow_secret=allow_secret)
    archived = [cast("NodeRecord", r).id for r in res.records[1:] if getattr(r, "KIND", "") == "node"]
    if env.fmt == "json":
        emit_json({"id": summary.id, "sources": len(node_ids), "archived": archived})
        return
    click.echo(f"Created summary: {summary.id}")
    for nid in archived:
        click.echo(f"Archived: {nid}")


@click.command("supersede")
@click.argument("old_id")
@click.argument("new_id")
@format_option
@pass_env
def supersede_command(env: Env, old_id: str, new_id: str) -> None:
    """Mark OLD_ID as superseded by NEW_ID (queries then leave OLD_ID out).

    \b
    Example:
        ctx supersede 01HQ1A2B 01HQ9Z8Y
    """
    from ctxstore.knowledge.nodes import supersede_node
    from ctxstore.knowledge.show import read_node

    res = supersede_node(env.session(), old_id, new_id)
    old, new = read_node(env.session(), old_id), read_node(env.session(), new_id)
    if env.fmt == "json":
        emit_json({"old": old.id, "new": new.id, "changed": res.changed})
    else:
        click.echo(f"{old.id} superseded by {new.id}" + ("" if res.changed else " (already)"))



