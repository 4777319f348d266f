"""``ctx pack``: a prompt pack for any task text (spec 002 §12, §13.2.6 under its own name)."""

from __future__ import annotations

import sys

import click

from ctxstore.cli._common import Env, output_option, pass_env, write_output
from ctxstore.packs.render import FORMATS


@click.command("pack")
@click.argument("task")
@click.option("--budget", type=click.IntRange(min=1), default=None, metavar="TOKENS",
              help="Token budget, the response reserve included ([retrieval] default_budget).")
@click.option("--depth", type=click.IntRange(min=0, max=16), default=None, metavar="N",
              help="Graph expansion depth ([retrieval] default_depth, 2).")
@output_option("the pack")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="json, yaml, text or markdown (default: the global --format, else json).")
@click.option("--include-narrative/--no-narrative", default=None,
              help="Add decisions, tasks, notes and the recent log ([retrieval] include_narrative).")
@click.option("--no-graph", is_flag=True, help="Skip graph expansion over imports.")
@click.option("--global/--no-global", "use_global", default=False,
              help="Also take relevant memory from the user store ~/.ctx (labelled; off by default).")
@pass_env
def pack_command(env: Env, task: str, budget: int | None, depth: int | None, output: str | None,
                 fmt: str | None, include_narrative: bool | None, no_graph: bool,
                 use_global: bool) -> None:
    """Build a prompt pack: the files, symbols and memory most relevant to TASK.

    Any text is accepted (a question, a commit message, code; - reads it from standard
    input). Every item says why it
    was chosen: the task's words it matched, the symbols it defines, or the import path
    from a file that matched. The pack never exceeds the budget (text and markdown: all
    they print, the echoed task included, cut to half the room if longer), and keeps
    [llm] max_response_tokens (at most a quarter of it) for the answer. A task with no
    searchable word gives an empty pack and a note on stderr; so does a budget too small
    for any item found, the note naming the smallest that holds one. Index the work tree first
    with `ctx index`: without it, or when a file in the pack changed since, a note on
    stderr says so. See docs/retrieval.md.

    \b
    Examples:
        ctx pack "What files are involved in the timeout handling?"
        ctx pack "Show me the Client struct" --budget 8000 --depth 1
        ctx pack "Recent decisions about error handling" --include-narrative --format markdown
        ctx pack "fix the retry loop" --format json --output pack.json
        ctx pack "how do we pin dependencies" --global
        git log -1 --format=%B | ctx pack - --format markdown
    """
    from ctxstore.cli._notices import user_store
    from ctxstore.knowledge.scopes import Stores
    from ctxstore.packs.pack import PackRequest, make_pack, pack_notes
    from ctxstore.packs.render import render_pack
    from ctxstore.packs.seed import has_search_terms

    if task == "-":  # a pasted log or diff longer than a command line takes
        task = _stdin_task()
    chosen = fmt or _global_format(env)
    stores = Stores.open(env.session(), user_store() if use_global else None)
    try:
        result = make_pack(env.session(),
                           PackRequest(task, budget=budget, depth=depth,
                                       include_narrative=include_narrative, graph=not no_graph,
                                       fmt=chosen, active_task=_active_task(env)),
                           user=stores.user)
    finally:
        stores.close_user()
    pack = result.pack.to_json()
    if not has_search_terms(task):  # a valid, empty pack, and why it is empty
        click.echo("ctx: note: the task has no searchable words: no files or memory were "
                   "ranked", err=True)
    write_output(env, output, render_pack(pack, chosen).encode("utf-8"))
    # a budget that holds none of the items found; no index yet; files changed since
    for note in pack_notes(env.session(), pack, smallest_budget=result.smallest_budget):
        click.echo(f"ctx: note: {note}", err=True)


def _active_task(env: Env) -> str | None:
    """The task the hooks started in this clone and did not end (its nodes join the pack)."""
    from ctxstore.claude.state import read_current_task

    return read_current_task(env.session().root)


# The most a task read from standard input may hold (a long log is ranked by its rarest
# words; more text than this is no task).
MAX_STDIN_TASK = 4 << 20


def _stdin_task() -> str:
    """The task read from standard input (``ctx pack -``), UTF-8, at most ``MAX_STDIN_TASK``."""
    from ctxstore.errors import InvalidInput

    raw: bytes = sys.stdin.buffer.read(MAX_STDIN_TASK + 1)
    if len(raw) > MAX_STDIN_TASK:
        raise InvalidInput(f"the task on standard input is over {MAX_STDIN_TASK >> 20} MiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("the task on standard input is not UTF-8 text") from None


def _global_format(env: Env) -> str:
    """The root group's --format when given on the command line, else json.

    The root option defaults to text, so its value alone cannot tell ``ctx --format text
    pack`` (text) from ``ctx pack`` (the pack's own default, json).
    """
    from click.core import ParameterSource

    source = click.get_current_context().find_root().get_parameter_source("fmt")
    given = source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
    return env.fmt if given and env.fmt in FORMATS else "json"
