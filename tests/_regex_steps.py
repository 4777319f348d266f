"""Counting the steps a backtracking regex engine takes, deterministically.

``tests/test_regex_linear.py`` must choose, among many adversarial inputs, the ones on which a
pattern costs the most. Python's ``re`` exposes no step count, and timing it on a short text
is noise on a loaded machine: a preempted run of a linear form looks slower than an
undisturbed quadratic one. This module runs a pattern, as ``re``'s parser reads it, on a
small backtracking matcher written in Python that counts its steps (one per character
consumed or compared, one per alternative or repetition tried, ``MATCH_STEPS`` per match
``finditer`` yields). It backtracks as ``re``
does (no memoisation), so a pattern and input on which ``re`` is quadratic are quadratic
here too, and the count is the same on every run and every machine.

It is a model for ranking inputs, not a second regex engine: it ignores ``re``'s constant
factor optimisations (literal prefix search, the minimum length check), which never change
how the cost grows with the input. ``Steps.cost`` stops counting at a cap, so a quadratic
input costs a bounded time to rank.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from re import _constants as c  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

Cont = Callable[[int], bool]
Node = Callable[[int, Cont], bool]
Pred = Callable[[str], bool]

# What ``finditer`` spends on a match found, in steps: a match object and a turn of the
# caller's loop cost about as much as comparing this many characters.
MATCH_STEPS = 30

_IGNORECASE = 2
_MULTILINE = 8
_DOTALL = 16
_ASCII = 256


class _Capped(Exception):
    """The step count reached the cap."""


class _Memo(dict[str, bool]):
    """A character test that remembers its answers (texts here use few characters)."""

    def __init__(self, test: Pred) -> None:
        super().__init__()
        self.test = test

    def __missing__(self, ch: str) -> bool:
        self[ch] = answer = self.test(ch)
        return answer


def _memo(test: Pred) -> Pred:
    return _Memo(test).__getitem__


def _is_word(ch: str, ascii_only: bool) -> bool:
    return ch == "_" or (ch.isalnum() and (ch.isascii() or not ascii_only))


def _category(code: Any, ascii_only: bool) -> Pred:
    if code in (c.CATEGORY_DIGIT, c.CATEGORY_NOT_DIGIT):
        def test(ch: str) -> bool:
            return ch.isdigit() and (ch.isascii() or not ascii_only)
    elif code in (c.CATEGORY_SPACE, c.CATEGORY_NOT_SPACE):
        def test(ch: str) -> bool:
            return ch in " \t\n\r\f\v" or (not ascii_only and ch.isspace())
    elif code in (c.CATEGORY_WORD, c.CATEGORY_NOT_WORD):
        def test(ch: str) -> bool:
            return _is_word(ch, ascii_only)
    elif code in (c.CATEGORY_LINEBREAK, c.CATEGORY_NOT_LINEBREAK):
        def test(ch: str) -> bool:
            return ch == "\n"
    else:
        raise ValueError(f"category {code}")
    if code in (c.CATEGORY_NOT_DIGIT, c.CATEGORY_NOT_SPACE, c.CATEGORY_NOT_WORD,
                c.CATEGORY_NOT_LINEBREAK):
        return lambda ch: not test(ch)
    return test


def _end(node: Node, pos: int) -> int | None:
    """Where the first match of ``node`` from ``pos`` ends (no backtracking into it), or None."""
    found: list[int] = []

    def record(end: int) -> bool:
        found.append(end)
        return True
    return found[0] if node(pos, record) else None


def _variants(ch: str, flags: int) -> tuple[str, ...]:
    return (ch, ch.lower(), ch.upper()) if flags & _IGNORECASE else (ch,)


class Steps:
    """One parsed pattern, ready to count its steps on texts."""

    def __init__(self, source: str, flags: int) -> None:
        parsed = _parser.parse(source, flags)
        self.text = ""
        self.steps = 0
        self.cap = 0
        self.groups: dict[int, tuple[int, int]] = {}
        self.ascii = bool(parsed.state.flags & _ASCII) or isinstance(source, bytes)
        self.root = self._seq(list(parsed), parsed.state.flags)
        starts, nullable = self._first(list(parsed), parsed.state.flags)
        # A start whose character no match can begin with costs one step, as in ``re``'s
        # search (which skips such starts by the pattern's first characters).
        self.starts = None if nullable or starts is None else _memo(
            lambda ch: any(test(ch) for test in starts))

    def cost(self, text: str, mode: str, cap: int) -> int:
        """Steps to run the pattern over ``text`` as ``mode`` (``finditer``, ``match`` or
        ``fullmatch``), at most ``cap``."""
        self.text, self.steps, self.cap = text, 0, cap
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 50_000))
        try:
            if mode == "finditer":
                self._finditer()
            else:
                self.groups = {}
                end = len(text)
                self.root(0, (lambda e: True) if mode == "match" else (lambda e: e == end))
        except (_Capped, RecursionError):
            return cap
        finally:
            sys.setrecursionlimit(limit)
        return self.steps

    def _finditer(self) -> None:
        pos, size, text, starts = 0, len(self.text), self.text, self.starts
        while pos <= size:
            if starts is not None and (pos == size or not starts(text[pos])):
                self._tick()
                pos += 1
                continue
            self.groups = {}
            end = _end(self.root, pos)
            if end is None:
                pos += 1
                continue
            self._tick(MATCH_STEPS)
            pos = end if end > pos else pos + 1

    def _tick(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.cap:
            raise _Capped

    def _first(self, items: list[tuple[Any, Any]], flags: int) -> tuple[list[Pred] | None, bool]:
        """Tests one of which the first character of any match passes (None: unknown), and
        whether the sequence can match the empty string."""
        starts: list[Pred] = []
        for op, arg in items:
            pred = self._pred(op, arg, flags)
            if pred is not None:
                return starts + [pred], False
            if op in (c.AT, c.ASSERT, c.ASSERT_NOT):
                continue  # zero-width: the next item decides
            if op is c.SUBPATTERN:
                sub, nullable = self._first(list(arg[3]), (flags | arg[1]) & ~arg[2])
            elif op is c.ATOMIC_GROUP:
                sub, nullable = self._first(list(arg), flags)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                sub, nullable = self._first(list(arg[2]), flags)
                nullable = nullable or arg[0] == 0
            elif op is c.BRANCH:
                sub, nullable = [], False
                for alt in arg[1]:
                    more, empty = self._first(list(alt), flags)
                    if more is None:
                        return None, True
                    sub += more
                    nullable = nullable or empty
            else:
                return None, True
            if sub is None:
                return None, True
            starts += sub
            if not nullable:
                return starts, False
        return starts, True

    # -- compiling the parse tree into matcher closures --------------------------------------

    def _seq(self, items: list[tuple[Any, Any]], flags: int) -> Node:
        nodes = [self._node(op, arg, flags) for op, arg in items]
        if not nodes:
            return lambda pos, k: k(pos)
        node = nodes[-1]
        for first in reversed(nodes[:-1]):
            node = self._then(first, node)
        return node

    @staticmethod
    def _then(first: Node, rest: Node) -> Node:
        return lambda pos, k: first(pos, lambda p: rest(p, k))

    def _pred(self, op: Any, arg: Any, flags: int) -> Pred | None:
        """The test of a node that consumes exactly one character, else None."""
        if op is c.LITERAL or op is c.NOT_LITERAL:
            chars = set(_variants(chr(arg), flags))
            if op is c.LITERAL:
                return lambda ch: ch in chars
            return lambda ch: ch not in chars
        if op is c.ANY:
            if flags & _DOTALL:
                return lambda ch: True
            return lambda ch: ch != "\n"
        if op is c.IN:
            return _memo(self._class(arg, flags))
        return None

    def _class(self, items: list[tuple[Any, Any]], flags: int) -> Pred:
        negate = bool(items) and items[0][0] is c.NEGATE
        tests: list[Pred] = []
        for op, arg in items[1:] if negate else items:
            if op is c.LITERAL:
                chars = set(_variants(chr(arg), flags))
                tests.append(lambda ch, chars=chars: ch in chars)  # type: ignore[misc]
            elif op is c.RANGE:
                lo, hi = chr(arg[0]), chr(arg[1])
                tests.append(lambda ch, lo=lo, hi=hi, f=flags:  # type: ignore[misc]
                             any(lo <= v <= hi for v in _variants(ch, f)))
            elif op is c.CATEGORY:
                tests.append(_category(arg, self.ascii))
            else:
                raise ValueError(f"class item {op}")
        if negate:
            return lambda ch: not any(t(ch) for t in tests)
        return lambda ch: any(t(ch) for t in tests)

    def _node(self, op: Any, arg: Any, flags: int) -> Node:
        pred = self._pred(op, arg, flags)
        if pred is not None:
            return self._one(pred)
        if op is c.BRANCH:
            return self._branch([self._seq(list(alt), flags) for alt in arg[1]])
        if op is c.SUBPATTERN:
            group, add, remove, sub = arg
            return self._group(group, self._seq(list(sub), (flags | add) & ~remove))
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            return self._repeat(op, arg, flags)
        if op is c.ATOMIC_GROUP:
            return self._atomic(self._seq(list(arg), flags))
        if op is c.AT:
            return self._at(arg, flags)
        if op is c.GROUPREF:
            return self._backref(arg, flags)
        if op is c.GROUPREF_EXISTS:
            group, yes, no = arg
            return self._exists(group, self._seq(list(yes), flags),
                                self._seq(list(no), flags) if no is not None else None)
        if op in (c.ASSERT, c.ASSERT_NOT):
            direction, sub = arg
            return self._assert(op is c.ASSERT, direction, sub.getwidth()[0],
                                self._seq(list(sub), flags))
        raise ValueError(f"op {op}")

    def _one(self, pred: Pred) -> Node:
        def node(pos: int, k: Cont) -> bool:
            self._tick()
            return pos < len(self.text) and pred(self.text[pos]) and k(pos + 1)
        return node

    def _branch(self, alts: list[Node]) -> Node:
        def node(pos: int, k: Cont) -> bool:
            for alt in alts:
                self._tick()
                if alt(pos, k):
                    return True
            return False
        return node

    def _group(self, group: int | None, sub: Node) -> Node:
        if group is None:
            return sub

        def node(pos: int, k: Cont) -> bool:
            def close(end: int) -> bool:
                before = self.groups.get(group)
                self.groups[group] = (pos, end)
                if k(end):
                    return True
                if before is None:
                    del self.groups[group]
                else:
                    self.groups[group] = before
                return False
            return sub(pos, close)
        return node

    def _atomic(self, sub: Node) -> Node:
        def node(pos: int, k: Cont) -> bool:
            end = _end(sub, pos)
            return end is not None and k(end)
        return node

    def _repeat(self, op: Any, arg: Any, flags: int) -> Node:
        low, high, items = arg
        high = sys.maxsize if high is c.MAXREPEAT else high
        sub = list(items)
        pred = self._pred(sub[0][0], sub[0][1], flags) if len(sub) == 1 else None
        if pred is not None:
            return self._repeat_one(op, low, high, pred)
        item = self._seq(sub, flags)
        if op is c.POSSESSIVE_REPEAT:
            once = self._atomic(item)

            def possessive(pos: int, k: Cont) -> bool:
                count, p = 0, pos
                while count < high:
                    end = _end(once, p)
                    if end is None or end == p:
                        break
                    count, p = count + 1, end
                return count >= low and k(p)
            return possessive
        greedy = op is c.MAX_REPEAT

        def node(pos: int, k: Cont) -> bool:
            def rep(count: int, p: int) -> bool:
                self._tick()

                def more(e: int) -> bool:
                    return (e != p or count < low) and rep(count + 1, e)
                if greedy:
                    return (count < high and item(p, more)) or (count >= low and k(p))
                return (count >= low and k(p)) or (count < high and item(p, more))
            return rep(0, pos)
        return node

    def _repeat_one(self, op: Any, low: int, high: int, pred: Pred) -> Node:
        def node(pos: int, k: Cont) -> bool:
            text = self.text
            limit = min(len(text), pos + high)
            if op is c.MIN_REPEAT:
                end = pos
                while end < pos + low:
                    self._tick()
                    if end >= limit or not pred(text[end]):
                        return False
                    end += 1
                while True:
                    self._tick()
                    if k(end):
                        return True
                    if end >= limit or not pred(text[end]):
                        return False
                    end += 1
            end = pos
            while end < limit and pred(text[end]):
                end += 1
            self._tick(end - pos + 1)
            if end - pos < low:
                return False
            if op is c.POSSESSIVE_REPEAT:
                return k(end)
            for e in range(end, pos + low - 1, -1):
                self._tick()
                if k(e):
                    return True
            return False
        return node

    def _at(self, code: Any, flags: int) -> Node:
        multiline = bool(flags & _MULTILINE)

        def holds(pos: int) -> bool:
            text = self.text
            if code is c.AT_BEGINNING_STRING or (code is c.AT_BEGINNING and not multiline):
                return pos == 0
            if code is c.AT_BEGINNING or code is c.AT_BEGINNING_LINE:
                return pos == 0 or text[pos - 1] == "\n"
            if code is c.AT_END_STRING:
                return pos == len(text)
            if code is c.AT_END and not multiline:
                return pos == len(text) or (pos == len(text) - 1 and text[pos] == "\n")
            if code is c.AT_END or code is c.AT_END_LINE:
                return pos == len(text) or text[pos] == "\n"
            before = pos > 0 and _is_word(text[pos - 1], self.ascii)
            after = pos < len(text) and _is_word(text[pos], self.ascii)
            if code is c.AT_BOUNDARY:
                return before != after
            if code is c.AT_NON_BOUNDARY:
                return before == after
            raise ValueError(f"at {code}")

        def node(pos: int, k: Cont) -> bool:
            self._tick()
            return holds(pos) and k(pos)
        return node

    def _backref(self, group: int, flags: int) -> Node:
        fold = bool(flags & _IGNORECASE)

        def node(pos: int, k: Cont) -> bool:
            span = self.groups.get(group)
            if span is None:
                self._tick()
                return False
            want = self.text[span[0]:span[1]]
            got = self.text[pos:pos + len(want)]
            self._tick(len(want) + 1)
            same = got.lower() == want.lower() if fold else got == want
            return same and k(pos + len(want))
        return node

    def _exists(self, group: int, yes: Node, no: Node | None) -> Node:
        def node(pos: int, k: Cont) -> bool:
            self._tick()
            if group in self.groups:
                return yes(pos, k)
            return no(pos, k) if no is not None else k(pos)
        return node

    def _assert(self, positive: bool, direction: int, width: int, sub: Node) -> Node:
        def node(pos: int, k: Cont) -> bool:
            self._tick()
            if direction > 0:
                found = sub(pos, lambda e: True)
            else:
                start = pos - width
                found = start >= 0 and sub(start, lambda e: e == pos)
            return found == positive and k(pos)
        return node
