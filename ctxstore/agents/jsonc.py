"""JSON (with comments, where an agent allows them) edited as text: one member set or removed.

Agents keep their MCP servers in JSON files people edit by hand, some with comments (VS Code's
``mcp.json``, Gemini CLI's ``settings.json``). Rewriting such a file from parsed data would
drop the comments and the formatting, so ctx edits the text instead: it parses the file into
values and the byte spans of every object member, then inserts, replaces or deletes one member,
indented like its neighbours, and leaves every other byte as it was. The caller checks the
result by parsing it again.

Strict JSON (``comments=False``) is RFC 8259 without NaN or Infinity; with ``comments=True``
``//`` and ``/* */`` comments and trailing commas are accepted, as VS Code's parser accepts
them. Nesting deeper than ``MAX_DEPTH`` and lone surrogates (which could not be written back)
are refused, and so is a key that appears twice in one object (parsers differ on which
one counts, so no edit of such a file could be checked).
"""

from __future__ import annotations

import json
import re
from dataclasses import field
from typing import Any

from ctxstore.records import dataclass

__all__ = ["MAX_DEPTH", "JsonTextError", "ObjectSpan", "parse", "remove_member", "set_member"]

MAX_DEPTH = 200
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_WS = " \t\r\n"


class JsonTextError(ValueError):
    """The text is not such JSON; ``str()`` names the line and column."""


@dataclass(slots=True)
class Member:
    """One ``"key": value`` of an object, with the byte spans of its key and value."""

    key: str
    key_start: int
    value_start: int
    value_end: int
    node: ObjectSpan | None  # the value's own spans when it is an object


@dataclass(slots=True)
class ObjectSpan:
    """An object of the text: ``start`` at its ``{``, ``end`` just after its ``}``."""

    start: int
    end: int
    members: list[Member] = field(default_factory=list)

    def find(self, key: str) -> Member | None:
        """The member called ``key``.

        Raises:
            JsonTextError: if the object holds ``key`` more than once (which one counts
                differs between parsers, so ctx edits neither).
        """
        found = [m for m in self.members if m.key == key]
        if len(found) > 1:
            raise JsonTextError(f"the key {key!r} appears {len(found)} times in one object")
        return found[0] if found else None


class _Parser:
    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.comments = comments

    def fail(self, at: int, what: str) -> JsonTextError:
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return JsonTextError(f"{what} (line {line} column {column})")

    def skip(self, i: int) -> int:
        text, n = self.text, len(self.text)
        while i < n:
            c = text[i]
            if c in _WS:
                i += 1
            elif self.comments and text.startswith("//", i):
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
            elif self.comments and text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise self.fail(i, "a comment that is never closed")
                i = end + 2
            else:
                break
        return i

    def value(self, i: int, depth: int) -> tuple[Any, int, ObjectSpan | None]:
        if depth > MAX_DEPTH:
            raise self.fail(i, "nested too deeply")
        if i >= len(self.text):
            raise self.fail(i, "a value is missing")
        c = self.text[i]
        if c == "{":
            return self.obj(i, depth)
        if c == "[":
            items, end = self.array(i, depth)
            return items, end, None
        if c == '"':
            string, end = self.string(i)
            return string, end, None
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, i):
                return literal, i + len(word), None
        match = _NUMBER.match(self.text, i)
        if match is None:
            raise self.fail(i, "not a JSON value")
        try:
            return json.loads(match.group()), match.end(), None
        except (ValueError, RecursionError):  # a number: neither happens, but never a traceback
            raise self.fail(i, "not a JSON number") from None

    def string(self, i: int) -> tuple[str, int]:
        # Scanned by hand, in one pass: a regular expression over an unterminated string is
        # not linear in every engine.
        text, j, n = self.text, i + 1, len(self.text)
        while j < n and text[j] != '"':
            if text[j] < " ":
                raise self.fail(j, "a control character in a string")
            j += 2 if text[j] == "\\" else 1
        try:
            if j >= n:
                raise ValueError("unterminated")
            value = json.loads(text[i:j + 1])
        except (ValueError, RecursionError):
            raise self.fail(i, "a string that is not valid JSON") from None
        assert isinstance(value, str)
        return value, j + 1

    def obj(self, i: int, depth: int) -> tuple[dict[str, Any], int, ObjectSpan]:
        span = ObjectSpan(i, i)
        out: dict[str, Any] = {}
        i = self.skip(i + 1)
        while True:
            if i < len(self.text) and self.text[i] == "}" and (not span.members or self.comments):
                span.end = i + 1
                return out, i + 1, span
            if i >= len(self.text) or self.text[i] != '"':
                raise self.fail(i, "a key (a string in double quotes) is missing")
            key_start = i
            key, i = self.string(i)
            if key in out:  # which one counts differs between parsers: ctx edits neither
                raise self.fail(key_start, f"the key {key!r} appears twice in one object")
            i = self.skip(i)
            if i >= len(self.text) or self.text[i] != ":":
                raise self.fail(i, "':' is missing after a key")
            i = self.skip(i + 1)
            value, end, node = self.value(i, depth + 1)
            span.members.append(Member(key, key_start, i, end, node))
            out[key] = value
            i = self.skip(end)
            if i < len(self.text) and self.text[i] == ",":
                i = self.skip(i + 1)
            elif i < len(self.text) and self.text[i] == "}":
                span.end = i + 1
                return out, i + 1, span
            else:
                raise self.fail(i, "',' or '}' is missing")

    def array(self, i: int, depth: int) -> tuple[list[Any], int]:
        items: list[Any] = []
        i = self.skip(i + 1)
        while True:
            if i < len(self.text) and self.text[i] == "]" and (not items or self.comments):
                return items, i + 1
            value, end, _ = self.value(i, depth + 1)
            items.append(value)
            i = self.skip(end)
            if i < len(self.text) and self.text[i] == ",":
                i = self.skip(i + 1)
            elif i < len(self.text) and self.text[i] == "]":
                return items, i + 1
            else:
                raise self.fail(i, "',' or ']' is missing")


def parse(text: str, *, comments: bool) -> tuple[Any, ObjectSpan | None]:
    """The value of ``text`` and, when it is an object, the spans of its members.

    Raises:
        JsonTextError: if the text is not such JSON (position named), is nested too deeply,
            or holds a lone surrogate.
    """
    parser = _Parser(text, comments)
    start = parser.skip(0)
    value, end, node = parser.value(start, 0)
    if parser.skip(end) != len(text):
        raise parser.fail(parser.skip(end), "text after the value")
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise JsonTextError("a string holds a lone surrogate") from None
    return value, node


# -- editing ---------------------------------------------------------------------------------------


def _line_indent(text: str, at: int) -> str:
    """The spaces and tabs that start the line holding position ``at``."""
    start = text.rfind("\n", 0, at) + 1
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _unit(text: str, root: ObjectSpan) -> str:
    """The file's indentation step, from its first member on a line of its own (else 2 spaces)."""
    for member in root.members:
        if "\n" in text[root.start:member.key_start]:
            step = _line_indent(text, member.key_start)[len(_line_indent(text, root.start)):]
            if step:
                return step
    return "  "


def _render(value: Any, indent: str, unit: str) -> str:
    """``value`` as JSON whose lines after the first start with ``indent``."""
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _insert(text: str, obj: ObjectSpan, key: str, value: Any, unit: str) -> str:
    """``text`` with ``"key": value`` added as the last member of ``obj``."""
    name = json.dumps(key, ensure_ascii=False)
    if obj.members:
        last = obj.members[-1]
        if "\n" in text[obj.start:last.key_start]:  # members on lines of their own
            indent = _line_indent(text, last.key_start)
            added = f",\n{indent}{name}: {_render(value, indent, unit)}"
        else:
            added = f", {name}: {json.dumps(value, ensure_ascii=False)}"
        return text[:last.value_end] + added + text[last.value_end:]
    outer = _line_indent(text, obj.start)
    indent = outer + unit
    member = f"{name}: {_render(value, indent, unit)}"
    inner = text[obj.start + 1:obj.end - 1]
    if not inner.strip():
        return f"{text[:obj.start + 1]}\n{indent}{member}\n{outer}{text[obj.end - 1:]}"
    # Only comments inside: they stay, the member goes after them.
    close = line_start = obj.end - 1
    while text[line_start - 1] in " \t":
        line_start -= 1
    if text[line_start - 1] == "\n":  # the closing brace on a line of its own
        return f"{text[:line_start]}{indent}{member}\n{text[line_start:]}"
    return f"{text[:close]}\n{indent}{member}\n{outer}{text[close:]}"


def _delete(text: str, obj: ObjectSpan, member: Member) -> str:
    """``text`` without ``member`` of ``obj`` (the comma between it and a neighbour goes too)."""
    at = obj.members.index(member)
    if at > 0:
        return text[:obj.members[at - 1].value_end] + text[member.value_end:]
    if len(obj.members) > 1:
        return text[:member.key_start] + text[obj.members[1].key_start:]
    before = text[obj.start + 1:member.key_start]
    after = text[member.value_end:obj.end - 1]
    if not before.strip() and after.strip() in ("", ","):
        return text[:obj.start + 1] + text[obj.end - 1:]  # the member was all it held: {}
    return text[:member.key_start] + text[member.value_end:].removeprefix(",")


def _root(text: str, comments: bool) -> ObjectSpan:
    _, root = parse(text, comments=comments)
    if root is None:
        raise JsonTextError("the file must hold a JSON object")
    return root


def set_member(text: str, container: str, key: str, value: Any, *, comments: bool) -> str:
    """``text`` with ``container.key`` set to ``value``; everything else byte for byte.

    A missing ``container`` object is added as the last member of the top-level object; an
    existing ``key`` has its value replaced where it stands. Blank text becomes a new
    document.

    Raises:
        JsonTextError: if the text is not such JSON, the top level or ``container`` is not
            an object, or a key appears twice in one of them.
    """
    if not text.strip():
        return json.dumps({container: {key: value}}, indent=2, ensure_ascii=False) + "\n"
    root = _root(text, comments)
    unit = _unit(text, root)
    holder = root.find(container)
    if holder is None:
        return _insert(text, root, container, {key: value}, unit)
    if holder.node is None:
        raise JsonTextError(f"{container!r} is not an object")
    member = holder.node.find(key)
    if member is None:
        return _insert(text, holder.node, key, value, unit)
    indent = _line_indent(text, member.key_start)
    return text[:member.value_start] + _render(value, indent, unit) + text[member.value_end:]


def remove_member(text: str, container: str, key: str, *, comments: bool) -> str:
    """``text`` without ``container.key``, and without ``container`` if that leaves it empty.

    Unchanged when there is no such member.

    Raises:
        JsonTextError: as ``set_member``.
    """
    root = _root(text, comments)
    holder = root.find(container)
    if holder is None or holder.node is None:
        return text
    member = holder.node.find(key)
    if member is None:
        return text
    text = _delete(text, holder.node, member)
    root = _root(text, comments)
    holder = root.find(container)
    if holder is not None and holder.node is not None and not holder.node.members:
        text = _delete(text, root, holder)
    return text
