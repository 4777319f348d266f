"""Renderings of a prompt pack (json, yaml, text, markdown), piece by piece.

The text and markdown renderings are prompts: what they print is held to the pack's budget.
They are built as the concatenation of pieces (a header, one piece per item, the recent
narrative), and ``build_pack`` charges each piece what ``estimate_tokens`` says it costs; as
the estimate rounds each piece up, the whole never costs more than the sum of its pieces.
The header and the narrative are functions of the pack alone (its task, budget and
``recent_narrative``), so what the builder counted is what is printed.

This module renders; it does not choose items nor read the index.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ctxstore.tokens import estimate_tokens

__all__ = ["FORMATS", "PROMPT_FORMATS", "ITEM_OVERHEAD", "TASK_SHARE", "CUT_NOTE", "render_pack",
           "header", "header_cost", "task_echo", "item_piece", "item_cost", "narrative_piece",
           "narrative_cost"]

FORMATS = ("json", "yaml", "text", "markdown")
PROMPT_FORMATS = ("text", "markdown")  # printed whole within the budget
ITEM_OVERHEAD = 8   # tokens a json/yaml item is charged beyond its title and snippet
TASK_SHARE = 0.5    # the echoed task takes at most this share of the room
CUT_NOTE = " … (task cut to fit the budget)"


def render_pack(pack: dict[str, Any], fmt: str) -> str:
    """The pack in one of ``FORMATS`` (each ending with a newline, but an empty prompt).

    Args:
        pack: The pack (``packs.pack.build_pack``).
        fmt: ``json``, ``yaml``, ``text`` or ``markdown``.

    Returns:
        The rendered text.
    """
    if fmt == "json":
        return json.dumps({"version": 1, **pack}, indent=2, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        return _yaml({"version": 1, **pack}, 0) + "\n"
    budget = pack["token_budget"]
    head = header(pack["task"], fmt, total=budget["total"],
                  reserved=budget["reserved_for_response"], items=len(pack["retrieved"]),
                  used=budget["used"])
    return head + "".join(item_piece(item, fmt) for item in pack["retrieved"]) \
        + narrative_piece(pack["recent_narrative"], fmt)


def task_echo(task: str, room: int) -> str:
    """The task as a prompt echoes it: whole, or cut at a word to ``TASK_SHARE`` of the room.

    Args:
        task: The task text.
        room: The pack's room (total minus the response reserve).

    Returns:
        The task, or its beginning followed by ``CUT_NOTE``.
    """
    limit = int(room * TASK_SHARE)
    if estimate_tokens(task) <= limit:
        return task
    keep = task[:max(limit * 4 - len(CUT_NOTE), 0)]
    if len(keep) < len(task) and not task[len(keep)].isspace() and re.search(r"\s", keep):
        keep = re.sub(r"\S+$", "", keep)  # end at a word, never inside one
    return keep.rstrip() + CUT_NOTE


def _header(task: str, fmt: str, *, total: int, reserved: int, items: int, used: int,
            short: bool) -> str:
    """The full header (the echoed task and the budget line), or the short one (its counts)."""
    if short:
        line = f"{items} items, {used} of {total} tokens used"
        return f"_{line}_\n\n" if fmt == "markdown" else f"{line}\n\n"
    echo = task_echo(task, total - reserved)
    line = f"{items} items, {used} of {total} tokens used, {reserved} reserved for the response"
    if fmt == "markdown":
        return f"# Task: {echo}\n\n_{line}_\n\n"
    return f"Task: {echo}\n{line}\n\n"


def _header_form(task: str, fmt: str, *, total: int, reserved: int) -> tuple[bool | None, int]:
    """Which header a prompt rendering prints and what it is charged: (short?, tokens).

    The full header when it fits the room, else the short one, else none: ``(None, 0)``.
    The counts are charged at the width of ``total`` (neither exceeds it).
    """
    room = total - reserved
    for short in (False, True):
        cost = estimate_tokens(_header(task, fmt, total=total, reserved=reserved, items=total,
                                       used=total, short=short))
        if cost <= room:
            return short, cost
    return None, 0


def header_cost(task: str, fmt: str, *, total: int, reserved: int) -> int:
    """Tokens the header of a prompt rendering costs at most; 0 when it is left out.

    The header is the echoed task and the budget line. Its counts are not known before the
    items are chosen, so they are charged at the width of ``total`` (neither exceeds it).
    A header that does not fit the room gives way to a short one, the budget line's counts
    alone (``0 items, 8 of 25 tokens used``), so a small budget still says what it holds;
    when neither fits (a budget of a few tokens) there is none.

    Args:
        task: The task text.
        fmt: The format (0 for json and yaml: their ``used`` counts items and narrative only).
        total: The pack's total budget.
        reserved: Its response reserve.

    Returns:
        The tokens to charge.
    """
    if fmt not in PROMPT_FORMATS:
        return 0
    return _header_form(task, fmt, total=total, reserved=reserved)[1]


def header(task: str, fmt: str, *, total: int, reserved: int, items: int, used: int) -> str:
    """The header of a prompt rendering, full or short ("" when ``header_cost`` leaves it out).

    Args:
        task: The task text.
        fmt: ``text`` or ``markdown``.
        total: The pack's total budget.
        reserved: Its response reserve.
        items: How many items the pack holds.
        used: The tokens it used.

    Returns:
        The header text.
    """
    if fmt not in PROMPT_FORMATS:
        return ""
    short, _ = _header_form(task, fmt, total=total, reserved=reserved)
    if short is None:
        return ""
    return _header(task, fmt, total=total, reserved=reserved, items=items, used=used, short=short)


def _why(item: dict[str, Any]) -> str:
    why = item.get("why", {})
    parts = []
    if why.get("named"):
        parts.append("named " + ", ".join(why["named"]))
    if why.get("defines"):
        parts.append("defines " + ", ".join(why["defines"]))
    if why.get("edge_path"):
        parts.append("via " + " ".join(why["edge_path"]))
    if why.get("matched_terms"):
        parts.append("matched " + ", ".join(why["matched_terms"]))
    if why.get("active_task"):
        parts.append("active task")
    if why.get("recent_task"):
        parts.append("recent task")
    return "; ".join(parts) or "-"


def _from(item: dict[str, Any]) -> str | None:
    """A decision's short provenance (``explicit, branch main at 1a2b3c4d``), else None.

    Only decisions say where they came from in a prompt: which branch and commit a decision
    was taken at is what tells a reader whether it still stands; for other items the line
    would spend budget on little.
    """
    if item.get("chunk_kind") != "Decision":
        return None
    # Here, not at the top: the knowledge package (its write operations) costs a pack
    # ~20 ms of imports, and a pack without a decision never reads a provenance.
    from ctxstore.knowledge.nodes.provenance import describe, read_provenance

    prov = read_provenance(item)
    return describe(prov, short=True) if prov is not None else None


def item_piece(item: dict[str, Any], fmt: str) -> str:
    """One item as a prompt rendering prints it ("" for json and yaml).

    Args:
        item: An item of the pack's ``retrieved`` (its JSON form).
        fmt: The format.

    Returns:
        The item's lines, ending with a newline.
    """
    origin = _from(item)
    if fmt == "text":
        return (f"{item['relevance_score']:.3f}  {item['chunk_kind']:16} {item['title']}\n"
                f"       why: {_why(item)}\n" + (f"       from: {origin}\n" if origin else ""))
    if fmt == "markdown":
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", item["snippet"])),
                                     default=0))
        said = f"From: {origin}\n" if origin else ""
        return (f"## {item['title']}\n\nWhy: {_why(item)}\n{said}\n"
                f"{fence}\n{item['snippet']}\n{fence}\n\n")
    return ""


def item_cost(item: dict[str, Any], fmt: str) -> int:
    """Tokens an item is charged in a format.

    Its title and snippet plus ``ITEM_OVERHEAD``, or its printed piece in a prompt format
    when that costs more (a long ``why`` line, markdown's fences).

    Args:
        item: The item's JSON form.
        fmt: The format.

    Returns:
        The cost.
    """
    base = estimate_tokens(item["title"]) + estimate_tokens(item["snippet"]) + ITEM_OVERHEAD
    if fmt not in PROMPT_FORMATS:
        return base
    return max(base, estimate_tokens(item_piece(item, fmt)))


def narrative_piece(recent: str, fmt: str) -> str:
    """The recent narrative as a prompt rendering prints it ("" when none, or json/yaml).

    Args:
        recent: The pack's ``recent_narrative``.
        fmt: The format.

    Returns:
        The section, ending with a newline.
    """
    if not recent:
        return ""
    if fmt == "text":
        return f"\nRecent narrative:\n{recent}\n"
    if fmt == "markdown":
        return f"## Recent narrative\n\n{recent}\n"
    return ""


def narrative_cost(recent: str, fmt: str) -> int:
    """Tokens the recent narrative is charged: its text, or its printed section.

    Args:
        recent: The pack's ``recent_narrative``.
        fmt: The format.

    Returns:
        The cost (0 when there is none).
    """
    if not recent:
        return 0
    if fmt not in PROMPT_FORMATS:
        return estimate_tokens(recent)
    return estimate_tokens(narrative_piece(recent, fmt))


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
