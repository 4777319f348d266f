"""``ctx help --format json|markdown``: a command's help as data, or as Markdown.

Built from click's own objects (the command, its context and its parameters), so it says
what ``ctx COMMAND --help`` says: the usage line is the one the text help prints, the
options are the command's declared parameters (``--help`` aside). The root's command list
comes from ``COMMANDS`` (no command module is imported for it), a group's from the group.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from typing import Any

import click

__all__ = ["help_document", "help_markdown"]


def help_document(cmd: click.Command, ctx: click.Context) -> dict[str, Any]:
    """The help of ``cmd`` as a JSON-ready map (``ctx help --format json``).

    Args:
        cmd: The command (the root group for ``ctx help``).
        ctx: Its context (``info_name`` its name, parented to the root's).

    Returns:
        ``version``, ``name``, ``command`` (its full path), ``summary``, ``help``, ``usage``,
        ``arguments``, ``options`` and ``commands`` (empty for a command that is no group).
    """
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    return {
        "version": 1,
        "name": ctx.info_name or cmd.name or "",
        "command": ctx.command_path,
        "summary": _summary(cmd, ctx),
        "help": _plain(cmd.help or ""),
        "usage": _usage(cmd, ctx),
        "arguments": [_argument(p, ctx) for p in params if isinstance(p, click.Argument)],
        "options": [_option(p, ctx) for p in params if isinstance(p, click.Option)],
        "commands": _commands(cmd, ctx),
    }


def help_markdown(cmd: click.Command, ctx: click.Context) -> str:
    """The help of ``cmd`` as Markdown (``ctx help --format markdown``).

    A heading with the command, its usage in a code block, the help text (its examples, the
    ``\\b`` blocks of the docstring, as code blocks), then the arguments, options and commands
    as lists.

    Args:
        cmd: The command.
        ctx: Its context.

    Returns:
        The Markdown text, ending with a newline.
    """
    doc = help_document(cmd, ctx)
    parts = [f"# {doc['command']}\n", f"```\n{doc['usage']}\n```\n", *_prose(cmd.help or "")]
    if doc["arguments"]:
        parts.append("## Arguments\n\n" + "".join(
            f"- `{a['metavar']}` ({a['type']}{', required' if a['required'] else ''})\n"
            for a in doc["arguments"]))
    if doc["options"]:
        parts.append("## Options\n\n" + "".join(_option_item(o) for o in doc["options"]))
    if doc["commands"]:
        parts.append("## Commands\n\n" + "".join(
            f"- `{doc['command']} {c['name']}`: {c['summary']}\n" for c in doc["commands"]))
    return "\n".join(parts)


def _summary(cmd: click.Command, ctx: click.Context) -> str:
    from ctxstore.cli.table import COMMANDS

    parent = ctx.parent
    if parent is not None and parent.parent is None and ctx.info_name in COMMANDS:
        return COMMANDS[ctx.info_name][2]  # the line `ctx --help` shows for it
    return cmd.get_short_help_str(limit=1_000)


def _usage(cmd: click.Command, ctx: click.Context) -> str:
    """The usage the text help prints (``ctx add`` prints its node form's), on one line."""
    text = cmd.get_help(ctx)
    head = text.split("\n\n", 1)[0]
    return " ".join(head.split()).removeprefix("Usage: ")


def _plain(text: str) -> str:
    """A docstring as prose: indentation removed, click's ``\\b`` markers dropped."""
    lines = inspect.cleandoc(text).splitlines()
    return "\n".join(line for line in lines if line.strip() != "\b").strip()


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)  # a Path, an enum: as the help would print it


def _choices(param: click.Parameter) -> list[str] | None:
    if isinstance(param.type, click.Choice):
        return [str(c) for c in param.type.choices]
    return None


def _argument(param: click.Parameter, ctx: click.Context) -> dict[str, Any]:
    info = param.to_info_dict()
    return {"name": param.name, "metavar": param.make_metavar(ctx),
            "type": param.type.name, "required": param.required, "nargs": param.nargs,
            "default": _jsonable(info.get("default")), "choices": _choices(param)}


def _option(param: click.Option, ctx: click.Context) -> dict[str, Any]:
    info = param.to_info_dict()
    metavar = None if param.is_flag or param.count else param.make_metavar(ctx)
    # named as typed (`--global` is "global"), not by the function's parameter (use_global)
    name = max(param.opts, key=len).lstrip("-")
    return {"name": name, "flags": [*param.opts, *param.secondary_opts],
            "type": "flag" if param.is_flag else param.type.name, "metavar": metavar,
            "default": _jsonable(info.get("default")), "help": param.help or "",
            "required": param.required, "multiple": param.multiple,
            "choices": _choices(param), "envvar": _jsonable(param.envvar)}


def _commands(cmd: click.Command, ctx: click.Context) -> list[dict[str, str]]:
    """The subcommands of a group with their one-line help (the root's from ``COMMANDS``)."""
    if not isinstance(cmd, click.Group):
        return []
    if ctx.parent is None:
        from ctxstore.cli.table import COMMANDS

        return [{"name": name, "summary": COMMANDS[name][2]} for name in sorted(COMMANDS)]
    out = []
    for name in cmd.list_commands(ctx):
        sub = cmd.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            out.append({"name": name, "summary": sub.get_short_help_str(limit=1_000)})
    return out


def _option_item(opt: dict[str, Any]) -> str:
    flags = ", ".join(f"`{f}`" for f in opt["flags"])
    what = [opt["metavar"] or opt["type"]] if opt["type"] != "flag" else ["flag"]
    if opt["required"]:
        what.append("required")
    if opt["default"] not in (None, False, [], ""):
        what.append(f"default: {opt['default']}")
    line = f"- {flags} ({', '.join(what)})"
    return line + (f": {_one_line(opt['help'])}\n" if opt["help"] else "\n")


def _one_line(text: str) -> str:
    return " ".join(text.split())


_LABEL = re.compile(r"^\S.*:$")


def _prose(text: str) -> list[str]:
    """The help text as Markdown paragraphs; a ``\\b`` block becomes a label and a code block."""
    out = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        lines = para.splitlines()
        if not lines:
            continue
        if lines[0].strip() != "\b":
            out.append(_one_line(para) + "\n")
            continue
        body = lines[1:]
        if body and _LABEL.match(body[0]):
            out.append(f"**{body[0].rstrip(':')}:**\n")
            body = body[1:]
        if body:
            fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", "\n".join(body))),
                                         default=0))
            out.append(f"{fence}\n{textwrap.dedent(chr(10).join(body)).strip()}\n{fence}\n")
    return out
