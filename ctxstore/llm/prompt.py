"""Prompt composition from a prompt pack (spec 002 §14.2), within a token budget.

Owns reading the §12.4 pack JSON (from ``ctx pack``, a file or stdin) into a ``Pack``,
with a note per item it cannot use instead of an error, and turning it into the prompt:
system prefix, task, retrieved context, recent notes, response instruction. Items that
do not fit the budget are left out whole, in pack order (the pack is ranked). It does no
I/O: the caller passes the bytes in.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import field

from ctxstore.errors import InvalidInput
from ctxstore.model.codec import JsonValue
from ctxstore.records import dataclass
from ctxstore.tokens import estimate_tokens

__all__ = ["MAX_PACK_BYTES", "RESPONSE_INSTRUCTION", "SYSTEM_PREFIX", "Pack", "PackItem", "Prompt",
           "compose_prompt", "parse_pack"]

MAX_PACK_BYTES = 16 << 20
SYSTEM_PREFIX = ("You are a careful software engineer working in this repository. Use the "
                 "retrieved context below; when you rely on a file or a symbol, name it exactly "
                 "(path or qualified name). Say so when the context is not enough.\n\n")
RESPONSE_INSTRUCTION = ("## Response\n\nAnswer the task. Start with a one-line summary, then the "
                        "details.\n")
# Title prefixes that name a file or a symbol (ctx pack writes "File: path", "Symbol: name").
_PATH_PREFIXES = ("File: ", "file: ", "Chunk: ")
_SYMBOL_PREFIXES = ("Symbol: ", "Item: ", "Function: ", "Class: ", "Method: ", "symbol: ")


@dataclass(frozen=True, slots=True)
class PackItem:
    """One retrieved item of a pack.

    Attributes:
        title: Its heading (``File: src/app.py``).
        snippet: Its text.
        path: The repository path it is from, if it names one.
        symbol: The qualified symbol it is, if it names one.
        node_id: The knowledge node it is, if it names one.
    """

    title: str
    snippet: str
    path: str | None = None
    symbol: str | None = None
    node_id: str | None = None


@dataclass(frozen=True, slots=True)
class Pack:
    """A prompt pack as ``ctx llm`` uses it.

    Attributes:
        task: The task statement.
        items: The retrieved items, in pack order.
        recent_narrative: Recent notes (may be empty).
        budget: The prompt's token budget from ``token_budget`` (total less the response
            reserve), or None when the pack gives none.
        symbols: Qualified names the pack's graph context names (seed and expanded nodes;
            ``symbol:NAME`` as ``ctx pack`` writes them, or a bare name).
        paths: Paths the graph context names (``file:PATH``).
        notes: One line per item that could not be used.
    """

    task: str
    items: tuple[PackItem, ...]
    recent_narrative: str
    budget: int | None
    symbols: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _str(value: JsonValue) -> str | None:
    """A JSON string as valid Unicode (a lone surrogate, valid JSON, becomes ``?``)."""
    return value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else None


def _item(raw: JsonValue, number: int) -> PackItem | str:
    """A ``PackItem``, or a note saying why item ``number`` is skipped."""
    if not isinstance(raw, dict):
        return f"retrieved[{number}]: not an object, skipped"
    title, snippet = _str(raw.get("title")), _str(raw.get("snippet"))
    if title is None or snippet is None:
        return f"retrieved[{number}]: no title or snippet text, skipped"
    path = _str(raw.get("path"))
    symbol = _str(raw.get("symbol")) or _str(raw.get("qualname"))
    for prefix in _PATH_PREFIXES:
        if path is None and title.startswith(prefix):
            path = title[len(prefix):].strip().split(" ", 1)[0].split(":", 1)[0] or None
    for prefix in _SYMBOL_PREFIXES:
        if symbol is None and title.startswith(prefix):
            symbol = title[len(prefix):].strip().split(" ", 1)[0] or None
    return PackItem(title=title, snippet=snippet, path=path, symbol=symbol,
                    node_id=_str(raw.get("node_id")))


def _budget(raw: JsonValue) -> int | None:
    if not isinstance(raw, dict):
        return None
    total, reserved = raw.get("total"), raw.get("reserved_for_response", 0)
    if not isinstance(total, int) or isinstance(total, bool) or not isinstance(reserved, int):
        return None
    return max(0, total - max(0, reserved))


def parse_pack(data: bytes, where: str) -> Pack:
    """Read a §12.4 prompt pack.

    Args:
        data: The JSON bytes.
        where: What to call the input in messages (``--pack FILE``, ``stdin``).

    Returns:
        The pack; items that cannot be used are left out with a note each.

    Raises:
        InvalidInput: if it is too large, not JSON, not an object or has no task.
    """
    if len(data) > MAX_PACK_BYTES:
        raise InvalidInput(f"{where}: prompt pack is larger than {MAX_PACK_BYTES} bytes")
    if not data.strip():
        raise InvalidInput(f"{where}: no prompt pack (empty input)",
                           hint="pipe `ctx pack TEXT --format json`, or use --pack or --query")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidInput(f"{where}: prompt pack is not JSON",
                           hint="use `ctx pack TEXT --format json`") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("task"), str) or not raw["task"].strip():
        raise InvalidInput(f"{where}: not a prompt pack (a JSON object with a \"task\" text)")
    retrieved = raw.get("retrieved", [])
    entries = retrieved if isinstance(retrieved, list) else []
    parsed = [_item(r, n) for n, r in enumerate(entries)]
    notes = [p for p in parsed if isinstance(p, str)]
    if not isinstance(retrieved, list):
        notes.append("retrieved: not a list, ignored")
    graph = raw.get("graph_context")
    symbols: list[str] = []
    paths: list[str] = []
    if isinstance(graph, dict):
        for key in ("seed_nodes", "expanded_nodes"):
            names = graph.get(key)
            for raw_name in names if isinstance(names, list) else []:
                name = _str(raw_name)
                if not name:
                    continue
                if name.startswith("file:"):
                    paths.append(name[5:])
                else:
                    symbols.append(name.removeprefix("symbol:"))
    return Pack(task=(_str(raw["task"]) or "").strip(),
                items=tuple(p for p in parsed if isinstance(p, PackItem)),
                recent_narrative=_str(raw.get("recent_narrative")) or "",
                budget=_budget(raw.get("token_budget")), symbols=tuple(dict.fromkeys(symbols)),
                paths=tuple(dict.fromkeys(p for p in paths if p)), notes=tuple(notes))


@dataclass(frozen=True, slots=True)
class Prompt:
    """A composed prompt.

    Attributes:
        system: The system prefix.
        body: Task, context, notes and instruction (``system + body`` is the whole prompt).
        prefix_hash: SHA-256 of the part that stays the same for the same pack (system, task
            and retrieved context): the key of llama.cpp prompt-cache reuse.
        tokens: The estimated tokens of the whole prompt.
        included: Titles of the items in the prompt.
        skipped: Titles of the items left out for the budget.
    """

    system: str
    body: str
    prefix_hash: str
    tokens: int
    included: tuple[str, ...] = ()
    skipped: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        """The whole prompt, as one string."""
        return self.system + self.body


def _fence(text: str) -> str:
    """A code fence longer than any backtick run in ``text``, so a snippet cannot close it."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _section(item: PackItem) -> str:
    fence = _fence(item.snippet)
    return f"### {item.title}\n\n{fence}\n{item.snippet.rstrip()}\n{fence}\n\n"


def compose_prompt(pack: Pack, budget: int) -> Prompt:
    """Turn a pack into a prompt of at most ``budget`` estimated tokens (§14.2).

    Args:
        pack: The pack.
        budget: The token budget of the prompt (the pack's own is used when smaller).

    Returns:
        The prompt; items that do not fit are skipped whole, recent notes are cut to fit.

    Raises:
        InvalidInput: if even the task and instructions do not fit the budget.
    """
    limit = min(budget, pack.budget) if pack.budget is not None else budget
    head = f"## Task\n\n{pack.task}\n\n## Retrieved Context\n\n"
    used = estimate_tokens(SYSTEM_PREFIX + head + RESPONSE_INSTRUCTION)
    if used > limit:
        raise InvalidInput(f"the task alone needs about {used} tokens, over the budget of {limit}")
    parts, included, skipped = [head], [], []
    for item in pack.items:
        section = _section(item)
        cost = estimate_tokens(section)
        if used + cost > limit:
            skipped.append(item.title)
            continue
        parts.append(section)
        included.append(item.title)
        used += cost
    prefix = SYSTEM_PREFIX + "".join(parts)
    notes = pack.recent_narrative.strip()
    if notes:
        room = (limit - used - estimate_tokens("## Recent Notes\n\n\n\n") - 1) * 4
        if room >= 200:  # a sliver of notes helps no one
            cut = notes if len(notes) <= room else notes[:room - 2].rstrip() + " …"
            section = f"## Recent Notes\n\n{cut}\n\n"
            parts.append(section)
    parts.append(RESPONSE_INSTRUCTION)
    body = "".join(parts)
    return Prompt(system=SYSTEM_PREFIX, body=body,
                  prefix_hash=hashlib.sha256(prefix.encode("utf-8")).hexdigest(),
                  tokens=estimate_tokens(SYSTEM_PREFIX + body), included=tuple(included),
                  skipped=tuple(skipped))
