"""Identifier-aware retrieval tokens, shared by the index (``file_terms``) and retrieval.

Runs of ``[A-Za-z0-9_]``; an identifier gives its lower-cased whole form plus its camelCase
and snake_case parts; one-character tokens, pure numbers and a small English stop list are
dropped. No stemming (it was measured to hurt on code, docs/retrieval.md). The index stores
these tokens per file (``index.code``), so ``ctx pack`` ranks over the same terms as the
in-process ranker: whole ``snake_case`` names included, which FTS5's ``unicode61`` splits.
Also which paths are tests, benchmarks or examples (the ranking's test prior, which
``index.retrieval``'s ``corpus_cache`` keeps).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import PurePosixPath

__all__ = ["STOP_WORDS", "tokenize", "term_set", "held_terms", "path_tokens", "term_counts",
           "is_test_path", "cached_is_test_path"]

STOP_WORDS = frozenset("""a an and are as at be but by for from has have if in into is it its
no not of on or so such that the their then there these this to was were will
with we you i me my our your he she they them do does did can could should would
been being than too very just also only any all some each which who what when
where why how""".split())

_WORD = re.compile(r"[A-Za-z0-9_]+")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_TEST_DIRS = frozenset({"tests", "test", "testing", "benches", "bench", "benchmarks", "examples",
                        "example", "__tests__"})


@lru_cache(maxsize=1 << 16)
def _split(word: str) -> tuple[str, ...]:
    """The identifier's kept tokens: its lower-cased whole form and camel/snake parts."""
    parts: list[str] = []
    for piece in word.split("_"):
        if piece:
            parts.extend(_CAMEL.findall(piece))
    whole = word.lower().strip("_")
    tokens = (whole,) if len(parts) <= 1 else \
        (whole, *dict.fromkeys(p.lower() for p in parts if p.lower() != whole))
    return tuple(t for t in tokens if len(t) > 1 and not t.isdigit() and t not in STOP_WORDS)


def tokenize(text: str) -> list[str]:
    """Split text into retrieval tokens, identifiers into their parts.

    Args:
        text: Any text: code, prose, a commit message.

    Returns:
        The tokens in order (``get_pager_file`` gives ``get_pager_file, get, pager, file``).
    """
    out: list[str] = []
    for word in _WORD.findall(text):
        out.extend(_split(word))
    return out


def term_set(text: str) -> set[str]:
    """The distinct tokens of ``text`` (``tokenize`` as a set, computed per distinct word).

    Args:
        text: Any text.

    Returns:
        The tokens.
    """
    return set().union(*map(_split, set(_WORD.findall(text))))


def held_terms(text: str, terms: Iterable[str]) -> list[str]:
    """The ``terms`` that ``tokenize(text)`` holds, in their order (``term_set`` without the set).

    Only the words in which a term occurs as a substring are split: a chunk of code costs
    what its few candidate words cost, not a pass over every word.

    Args:
        text: Any text.
        terms: Tokens (``tokenize`` output: lower-case ``[a-z0-9_]`` runs).

    Returns:
        The terms ``term_set(text)`` contains, duplicates kept.
    """
    lowered = text.translate(_ASCII_LOWER)  # ASCII only: positions stay those of ``text``
    out: list[str] = []
    for term in terms:
        if not term or not _WORD_CHARS.issuperset(term):
            continue  # a character no word has: no token holds it
        at = lowered.find(term)
        while at >= 0:
            start = at
            while start and text[start - 1] in _WORD_CHARS:
                start -= 1
            word = _WORD.match(text, start)
            assert word is not None  # text[at] is a word character
            if term in _split(word.group()):
                out.append(term)
                break
            at = lowered.find(term, word.end())  # the rest of this word splits the same
    return out


def term_counts(text: str) -> Counter[str]:
    """How often each token of ``text`` occurs (``tokenize`` counted, per distinct word).

    Args:
        text: Any text.

    Returns:
        Token -> occurrences.
    """
    out: Counter[str] = Counter()
    for word, n in Counter(_WORD.findall(text)).items():
        for token in _split(word):
            out[token] += n
    return out


def path_tokens(path: str) -> list[str]:
    """Tokens of a path's directories and file stem (the extension left out).

    Plural stems also give their singular (``exceptions`` gives ``exception``).

    Args:
        path: A repository-relative POSIX path.

    Returns:
        The tokens, e.g. ``crates/ignore/src/default_types.rs`` gives
        ``crates, ignore, src, default_types, default, types, type``.
    """
    pure = PurePosixPath(path)
    tokens = tokenize(" ".join([*pure.parts[:-1], pure.stem]))
    return tokens + [t[:-1] for t in tokens if len(t) > 3 and t.endswith("s") and not t.endswith("ss")]


def is_test_path(path: str) -> bool:
    """Whether a path is a test, benchmark or example file by common conventions.

    Args:
        path: A repository-relative POSIX path.

    Returns:
        True under ``tests/``, ``test/``, ``testing/``, ``benches/``, ``examples/``, or
        named ``test_*``, ``*_test.*``, ``*.test.*``, ``*.spec.*``, ``conftest.py``,
        ``tests.rs``.
    """
    folder, _, name = path.rpartition("/")
    return _test_folder(folder) or _test_name(name)


def cached_is_test_path() -> Callable[[str], bool]:
    """``is_test_path`` that judges each folder once (ranking asks for thousands of files)."""
    folders: dict[str, bool] = {}

    def check(path: str) -> bool:
        folder, _, name = path.rpartition("/")
        under = folders.get(folder)
        if under is None:
            under = folders[folder] = _test_folder(folder)
        return under or _test_name(name)
    return check


def _test_folder(folder: str) -> bool:
    return bool(folder) and any(part in _TEST_DIRS for part in folder.lower().split("/"))


def _test_name(name: str) -> bool:
    name = name.lower()
    stem = name.split(".", 1)[0]
    return (stem.startswith("test_") or stem.endswith("_test") or stem == "tests"
            or ".test." in name or ".spec." in name or name == "conftest.py")
