"""``ctx pack``: a prompt pack for any task text (spec 002 §12, §13.2.6 under its own name)."""

from __future__ import annotations

import json
import re
from typing import Any

import click

from ctxstore.cli._common import Env, output_option, pass_env, write_output

FORMATS = ("json", "yaml", "text", "markdown")


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

    Any text is accepted (a question, a commit message, code). Every item says why it
    was chosen: the task's words it matched, the symbols it defines, or the import path
    from a file that matched. The pack never exceeds the budget, and keeps
    [llm] max_response_tokens (at most a quarter of it) for the answer. Index the work
    tree first with `ctx index`. See docs/retrieval.md.

    \b
    Examples:
        ctx pack "What files are involved in the timeout handling?"
        ctx pack "Show me the Client struct" --budget 8000 --depth 1
        ctx pack "Recent decisions about error handling" --include-narrative --format markdown
        ctx pack "fix the retry loop" --format json --output pack.json
        ctx pack "how do we pin dependencies" --global
    """
    from ctxstore.cli._notices import user_store
    from ctxstore.knowledge.scopes import Stores
    from ctxstore.retrieval.pack import build_pack

    stores = Stores.open(env.session(), user_store() if use_global else None)
    try:
        pack = build_pack(env.session(), task, budget=budget, depth=depth,
                          include_narrative=include_narrative, graph=not no_graph, user=stores.user)
    finally:
        stores.close_user()
    chosen = fmt or _global_format(env)
    write_output(env, output, render(pack, chosen).encode("utf-8"))


def _global_format(env: Env) -> str:
    """The root group's --format when given on the command line, else json.

    The root option defaults to text, so its value alone cannot tell ``ctx --format text
    pack`` (text) from ``ctx pack`` (the pack's own default, json).
    """
    from click.core import ParameterSource

    source = click.get_current_context().find_root().get_parameter_source("fmt")
    given = source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
    return env.fmt if given and env.fmt in FORMATS else "json"


def render(pack: dict[str, Any], fmt: str) -> str:
    """The pack in one of ``FORMATS`` (each ending with a newline).

    Args:
        pack: The pack (``retrieval.pack.build_pack``).
        fmt: ``json``, ``yaml``, ``text`` or ``markdown``.

    Returns:
        The rendered text.
    """
    if fmt == "json":
        return json.dumps({"version": 1, **pack}, indent=2, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        return _yaml({"version": 1, **pack}, 0) + "\n"
    return _markdown(pack) if fmt == "markdown" else _text(pack)


def _yaml(value: Any, indent: int) -> str:
    """Block-style YAML; strings as double-quoted JSON strings (valid YAML scalars)."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{json.dumps(str(key))}:\n{_yaml(item, indent + 1)}")
            else:
                lines.append(f"{pad}{json.dumps(str(key))}: {_yaml(item, 0)}")
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return "[]"
        lines = []
        for item in value:
            if isinstance(item, (dict, list)) and item:
                body = _yaml(item, indent + 1).lstrip(" ")
                lines.append(f"{pad}- {body}")
            else:
                lines.append(f"{pad}- {_yaml(item, 0)}")
        return "\n".join(lines)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value))


def _why(item: dict[str, Any]) -> str:
    why = item.get("why", {})
    parts = []
    if why.get("defines"):
        parts.append("defines " + ", ".join(why["defines"]))
    if why.get("edge_path"):
        parts.append("via " + " ".join(why["edge_path"]))
    if why.get("matched_terms"):
        parts.append("matched " + ", ".join(why["matched_terms"]))
    if why.get("active_task"):
        parts.append("recent task")
    return "; ".join(parts) or "-"


def _budget_line(pack: dict[str, Any]) -> str:
    b = pack["token_budget"]
    return (f"{len(pack['retrieved'])} items, {b['used']} of {b['total']} tokens used, "
            f"{b['reserved_for_response']} reserved for the response")


def _text(pack: dict[str, Any]) -> str:
    lines = [f"Task: {pack['task']}", _budget_line(pack), ""]
    for item in pack["retrieved"]:
        lines.append(f"{item['relevance_score']:.3f}  {item['chunk_kind']:16} {item['title']}")
        lines.append(f"       why: {_why(item)}")
    if pack["recent_narrative"]:
        lines += ["", "Recent narrative:", pack["recent_narrative"]]
    return "\n".join(lines) + "\n"


def _markdown(pack: dict[str, Any]) -> str:
    lines = [f"# Task: {pack['task']}", "", f"_{_budget_line(pack)}_", ""]
    for item in pack["retrieved"]:
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", item["snippet"])),
                                     default=0))
        lines += [f"## {item['title']}", "", f"Why: {_why(item)}", "", fence, item["snippet"],
                  fence, ""]
    if pack["recent_narrative"]:
        lines += ["## Recent narrative", "", pack["recent_narrative"], ""]
    return "\n".join(lines)
