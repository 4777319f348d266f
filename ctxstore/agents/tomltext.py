"""A TOML table edited as text: one ``[a.b]`` table set or removed, every other byte kept.

Codex CLI keeps its MCP servers as ``[mcp_servers.<name>]`` tables in ``config.toml``, a file
people edit and comment by hand. ``tomllib`` reads TOML but cannot write it, so ctx edits the
text: a scanner finds where each statement (a table header, a ``key = value`` pair, however
many lines its value spans) starts and ends, ctx adds its table at the end of the file or
replaces its own keys inside its table, and the result is parsed again with ``tomllib`` and
must equal the intended data exactly, or nothing is written. A table ctx did not write in
this form (an inline table, dotted keys) is refused, never guessed at.
"""

from __future__ import annotations

import copy
import json
import tomllib
from typing import Any

from ctxstore.records import dataclass

__all__ = ["TomlEditRefused", "Statement", "remove_table", "render_value", "set_table",
           "statements"]

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class TomlEditRefused(ValueError):
    """The edit cannot be made as text without changing the file's meaning (``str()`` says why)."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement: its kind, where it starts (a line start) and ends (its last line's end).

    ``key`` holds the header's dotted key (``header``, ``array-header``) or the pair's key.
    """

    kind: str  # "header", "array-header" or "pair"
    start: int
    end: int
    key: tuple[str, ...]


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)

    def fail(self, at: int) -> TomlEditRefused:
        line = self.text.count("\n", 0, at) + 1
        return TomlEditRefused(f"cannot read line {line} as TOML")

    def spaces(self, i: int) -> int:
        while i < self.n and self.text[i] in " \t":
            i += 1
        return i

    def line_end(self, i: int) -> int:
        end = self.text.find("\n", i)
        return self.n if end < 0 else end

    def key(self, i: int) -> tuple[tuple[str, ...], int]:
        """A dotted key at ``i``: its parts and the position after it."""
        parts: list[str] = []
        while True:
            i = self.spaces(i)
            if i < self.n and self.text[i] == '"':
                part, i = self.basic(i)
            elif i < self.n and self.text[i] == "'":
                end = self.text.find("'", i + 1)
                if end < 0 or "\n" in self.text[i:end]:
                    raise self.fail(i)
                part, i = self.text[i + 1:end], end + 1
            else:
                start = i
                while i < self.n and self.text[i] in _BARE:
                    i += 1
                if i == start:
                    raise self.fail(i)
                part = self.text[start:i]
            parts.append(part)
            i = self.spaces(i)
            if i < self.n and self.text[i] == ".":
                i += 1
                continue
            return tuple(parts), i

    def basic(self, i: int) -> tuple[str, int]:
        """A one-line basic string at ``i`` (its JSON-like escapes read as JSON reads them)."""
        j = i + 1
        while j < self.n and self.text[j] != '"':
            if self.text[j] == "\n":
                raise self.fail(i)
            j += 2 if self.text[j] == "\\" else 1
        if j >= self.n:
            raise self.fail(i)
        try:
            return json.loads(self.text[i:j + 1]), j + 1
        except (ValueError, RecursionError):
            return self.text[i + 1:j], j + 1  # a TOML-only escape: the raw text names it

    def value(self, i: int) -> int:
        """The position after the value starting at ``i`` (arrays and strings span lines)."""
        text = self.text
        for quote in ('"""', "'''"):
            if text.startswith(quote, i):
                j = i + 3
                while True:
                    j = text.find(quote, j)
                    if j < 0:
                        raise self.fail(i)
                    if quote == '"""' and _escaped(text, j):
                        j += 1
                        continue
                    # Up to two quotes of the closing run belong to the string.
                    while text.startswith(quote[0], j + 3):
                        j += 1
                    return j + 3
        if text.startswith('"', i):
            return self.basic(i)[1]
        if text.startswith("'", i):
            end = text.find("'", i + 1)
            if end < 0 or "\n" in text[i:end]:
                raise self.fail(i)
            return end + 1
        if i < self.n and text[i] in "[{":
            close = "]" if text[i] == "[" else "}"
            j = i + 1
            while True:
                j = self.skip_blank(j)
                if j >= self.n:
                    raise self.fail(i)
                if text[j] == close:
                    return j + 1
                if text[j] == ",":
                    j += 1
                    continue
                if close == "}":
                    _, j = self.key(j)
                    if j >= self.n or text[j] != "=":
                        raise self.fail(j)
                    j = self.spaces(j + 1)
                j = self.value(j)
        j = i
        while j < self.n and text[j] not in " \t\r\n,]}#":
            j += 1
        if j == i:
            raise self.fail(i)
        return j

    def skip_blank(self, i: int) -> int:
        """Spaces, newlines and comments (inside an array)."""
        while i < self.n:
            if self.text[i] in " \t\r\n":
                i += 1
            elif self.text[i] == "#":
                i = self.line_end(i)
            else:
                break
        return i


def _escaped(text: str, at: int) -> bool:
    """Whether the character at ``at`` follows an odd run of backslashes."""
    count = 0
    while at - count - 1 >= 0 and text[at - count - 1] == "\\":
        count += 1
    return count % 2 == 1


def statements(text: str) -> list[Statement]:
    """Every header and key/value pair of ``text``, in order.

    Raises:
        TomlEditRefused: if a line cannot be read (the caller has checked the file with
            ``tomllib``, so this only happens for TOML the scanner does not know).
    """
    scan = _Scanner(text)
    found: list[Statement] = []
    i = 0
    while i < scan.n:
        start = i
        i = scan.spaces(i)
        if i >= scan.n or text[i] in "\r\n#":
            i = scan.line_end(i) + 1
            continue
        if text[i] == "[":
            array = text.startswith("[[", i)
            key, j = scan.key(i + (2 if array else 1))
            closing = "]]" if array else "]"
            if not text.startswith(closing, j):
                raise scan.fail(j)
            end = scan.line_end(j)
            found.append(Statement("array-header" if array else "header", start, end, key))
            i = end + 1
            continue
        key, j = scan.key(i)
        if j >= scan.n or text[j] != "=":
            raise scan.fail(j)
        j = scan.value(scan.spaces(j + 1))
        end = scan.line_end(j)
        found.append(Statement("pair", start, end, key))
        i = end + 1
    return found


def render_value(value: str | list[str]) -> str:
    """A string or a list of strings as TOML (basic strings: JSON's escapes are TOML's)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in value) + "]"


def _get(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _table_block(found: list[Statement], path: tuple[str, ...], size: int) -> tuple[int, int] | None:
    """The text span of the ``[path]`` table and the sub-tables right after it; None if none."""
    for at, stmt in enumerate(found):
        if stmt.kind == "header" and stmt.key == path:
            end = size
            for later in found[at + 1:]:
                if later.kind != "pair" and later.key[:len(path)] != path:
                    end = later.start
                    break
            return stmt.start, end
    return None


def _load(text: str) -> dict[str, Any]:
    """``text`` parsed as TOML.

    Raises:
        TomlEditRefused: if it is not TOML.
    """
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise TomlEditRefused(f"not valid TOML ({exc})") from None


def _find_table(text: str, data: dict[str, Any], path: tuple[str, ...]
                ) -> tuple[list[Statement], tuple[int, int] | None]:
    """The statements of ``text`` and the span of its ``[path]`` table (None: it has none).

    Raises:
        TomlEditRefused: if ``path`` is defined in a form ctx does not edit.
    """
    found = statements(text)
    block = _table_block(found, path, len(text))
    if block is None and _get(data, path) is not None:
        raise TomlEditRefused(f"{'.'.join(path)} is written in a form ctx does not edit "
                              "(an inline table or dotted keys)")
    return found, block


def _checked(new: str, want: dict[str, Any]) -> str:
    try:
        got = tomllib.loads(new)
    except (tomllib.TOMLDecodeError, RecursionError):
        got = None
    if got != want:
        raise TomlEditRefused("the edit would change more than ctx's table")
    return new


def set_table(text: str, path: tuple[str, ...], values: dict[str, str | list[str]]) -> str:
    """``text`` with the keys ``values`` set in the ``[path]`` table; everything else kept.

    An existing ``[path]`` table has those keys replaced where they stand (or added below its
    header); other keys in it stay. Without one, the table is added at the end of the file.

    Raises:
        TomlEditRefused: if ``text`` is not TOML, ``path`` is defined in another form (an
            inline table, dotted keys), or the edit would change anything else.
    """
    data = _load(text)
    want = copy.deepcopy(data)
    holder = want
    for part in path[:-1]:
        holder = holder.setdefault(part, {})
        if not isinstance(holder, dict):
            raise TomlEditRefused(f"{'.'.join(path[:-1])} is not a table")
    table = holder.setdefault(path[-1], {})
    if not isinstance(table, dict):
        raise TomlEditRefused(f"{'.'.join(path)} is not a table")
    table.update(values)
    found, block = _find_table(text, data, path)
    if block is None:
        lines = [f"[{'.'.join(path)}]", *(f"{k} = {render_value(v)}" for k, v in values.items())]
        # A blank line between the file and the table (none for an empty file).
        lead = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
        return _checked(text + lead + "\n".join(lines) + "\n", want)
    start, end = block
    new = text
    header_end = next(s.end for s in found if s.start == start)
    for key in reversed(list(values)):  # from the end, so earlier spans stay valid
        line = f"{key} = {render_value(values[key])}"
        pair = next((s for s in found if s.kind == "pair" and start <= s.start < end
                     and s.key == (key,) and _owner(found, s) == start), None)
        if pair is None:
            new = new[:header_end + 1] + line + "\n" + new[header_end + 1:]
        else:
            old = new[pair.start:pair.end]
            indent = old[:len(old) - len(old.lstrip(" \t"))]
            new = new[:pair.start] + indent + line + new[pair.end:]
    return _checked(new, want)


def _owner(found: list[Statement], pair: Statement) -> int:
    """The start of the header a pair belongs to (-1: the top level)."""
    owner = -1
    for stmt in found:
        if stmt.start >= pair.start:
            break
        if stmt.kind != "pair":
            owner = stmt.start
    return owner


def remove_table(text: str, path: tuple[str, ...]) -> str:
    """``text`` without the ``[path]`` table (and its sub-tables); unchanged if there is none.

    A parent table left empty by it and not written as a header of its own disappears with
    it, as TOML defines.

    Raises:
        TomlEditRefused: if ``text`` is not TOML, ``path`` is defined in another form, or the
            edit would change anything else.
    """
    data = _load(text)
    _, block = _find_table(text, data, path)
    if block is None:
        return text
    start, end = block
    new = text[:start] + text[end:]
    if end == len(text) and new.endswith("\n\n"):
        new = new[:-1]  # the blank line ctx put before its table
    want = copy.deepcopy(data)
    holder = _get(want, path[:-1])
    assert isinstance(holder, dict)
    del holder[path[-1]]
    got = None
    try:
        got = tomllib.loads(new)
    except (tomllib.TOMLDecodeError, RecursionError):
        pass
    if got is not None and not holder and _get(got, path[:-1]) is None:
        # The parent existed only through ``[path]``'s header: gone with it.
        parent = _get(want, path[:-2]) if len(path) > 2 else want
        assert isinstance(parent, dict)
        del parent[path[-2]]
    return _checked(new, want)
