"""Word-level scanning for the rule extractors (``memory.extract``, ``memory.entities``).

Distinct words, word boundaries, and phrases grouped by first word.

Speed (the hook runs this on every turn; goal >= 20 MB/s): Python's regex engine tries a
big alternation at every position, so nothing here does that. A text's distinct words come
from one C-level split; each cue and technology is grouped under its first word, and a
group's regex (which starts with that literal word, so the engine jumps between its
occurrences) runs only when the word occurs. Word boundaries are checked by hand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["WORD_EDGE", "words_of", "is_word_char", "bounded", "lowered", "Grouped",
           "split_phrase", "split_name"]

WORD_EDGE = ".,;:!?()[]{}<>\"'`*_~|"


def words_of(lowered: str) -> set[str]:
    """The distinct whitespace-separated words of ``lowered``, outer punctuation stripped."""
    return {w.strip(WORD_EDGE) for w in set(lowered.split())}


def is_word_char(ch: str) -> bool:
    """Whether ``ch`` is a letter, a digit or ``_``."""
    return ch.isalnum() or ch == "_"


def bounded(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` starts and ends on word boundaries."""
    if start > 0 and is_word_char(text[start - 1]) and is_word_char(text[start]):
        return False
    return not (end < len(text) and is_word_char(text[end]) and is_word_char(text[end - 1]))


def lowered(text: str) -> str:
    """``text.lower()`` when it keeps every offset (it can grow on a few scripts)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(ASCII_LOWER)


ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class Grouped:
    """Phrases grouped by first word; ``scan`` yields (phrase index, start, end).

    Each phrase is ``(first, rest)``: a literal first word (lowercase) and a regex for the
    rest. A group's regex starts with its literal, which the engine searches for quickly.
    """

    def __init__(self, phrases: Sequence[tuple[str, str]]) -> None:
        # Only the groups are made here; a group's regex is built and compiled on its first use,
        # so the import stays cheap for the hook (compiling every group took ~25 ms).
        self.phrases = phrases
        self.groups: dict[str, list[int]] = {}
        for i, (first, _) in enumerate(phrases):
            self.groups.setdefault(first, []).append(i)
        self.compiled: dict[str, re.Pattern[str]] = {}
        self.firsts = frozenset(self.groups)

    def _group(self, first: str) -> re.Pattern[str]:
        """The compiled regex of the group that starts with ``first`` (compiled once)."""
        pattern = self.compiled.get(first)
        if pattern is None:
            rests = sorted(self.groups[first], key=lambda i: -len(self.phrases[i][1]))
            pattern = self.compiled[first] = re.compile(
                re.escape(first) + "(?:" + "|".join(f"(?P<p{i}>{self.phrases[i][1]})" for i in rests) + ")")
        return pattern

    def scan(self, text: str, words: set[str] | None = None) -> list[tuple[int, int, int]]:
        """Matches in ``text``; ``words`` (its distinct words) gates whole-word groups."""
        present = (self.firsts.intersection(words) if words is not None
                   else [first for first in self.firsts if first in text])
        hits: list[tuple[int, int, int]] = []
        for first in present:
            for m in self._group(first).finditer(text):
                if bounded(text, m.start(), m.end()):
                    hits.append((int((m.lastgroup or "p0")[1:]), m.start(), m.end()))
        return hits


def split_phrase(phrase: str) -> tuple[str, str]:
    """A cue regex split into its literal first word and the rest."""
    m = re.match(r"[a-z]+", phrase)
    first = m.group(0) if m else phrase
    if phrase[len(first):len(first) + 1] in ("?", "*", "{"):
        first = first[:-1]  # "hangs?": the quantifier belongs to the last letter
    return first, phrase[len(first):]


def split_name(name: str) -> tuple[str, str]:
    """A technology's name split into its first word and the (escaped) rest."""
    low = name.lower()
    first = low.split(" ", 1)[0]
    return first, re.escape(low[len(first):])
