"""``search.unicode61`` reproduces FTS5's ``unicode61`` tokenizer, checked against SQLite.

Run as a script, it prints the module's generated tables from the SQLite in use.
"""

from __future__ import annotations

import sqlite3
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.search import unicode61
from ctxstore.search.unicode61 import fold, words

_CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def _fts5() -> sqlite3.Connection:
    """A table tokenised as the index's are (schema.py: ``tokenize = 'unicode61'``)."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'unicode61')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    return conn


def _tokens(conn: sqlite3.Connection, texts: list[str]) -> list[list[str]]:
    """The tokens FTS5 stores for each text, in order."""
    conn.execute("DELETE FROM t")
    conn.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(texts, 1))
    found: list[list[str]] = [[] for _ in texts]
    for term, doc in conn.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        found[doc - 1].append(term)
    return found


def derive_tables() -> tuple[list[int], list[int], list[int], list[int]]:
    """The module's tables, read from SQLite: every code point between two letters.

    ``a?b`` is one token ``a?b`` for a token character (``?`` its fold), ``ab`` for a
    diacritic that is dropped, and ``a``, ``b`` for a separator.
    """
    conn = _fts5()
    texts = ["a" + chr(c) + "b" for c in _CODE_POINTS]
    separators: list[int] = []
    dropped, fold_from, fold_to = [], [], []
    for c, got in zip(_CODE_POINTS, _tokens(conn, texts), strict=True):
        if got == ["a", "b"]:
            if c >= 128:
                separators.append(c)
        elif got == ["ab"]:
            dropped.append(c)
        else:
            assert len(got) == 1 and len(got[0]) == 3, (c, got)
            if got[0][1] != chr(c) and c >= 128:
                fold_from.append(c)
                fold_to.append(ord(got[0][1]))
    ranges: list[int] = []
    for c in separators:
        if ranges and ranges[-1] == c - 1:
            ranges[-1] = c
        else:
            ranges += [c, c]
    return ranges, dropped, fold_from, fold_to


def _render(name: str, values: list[int]) -> str:
    lines = [f"{name} = ("]
    for at in range(0, len(values), 10):
        lines.append("    " + " ".join(f"0x{v:04x}," for v in values[at:at + 10]))
    return "\n".join([*lines, ")"])


@pytest.mark.slow
def test_unicode61_tables_are_sqlites() -> None:
    """The generated tables are what this SQLite's tokenizer does, code point by code point."""
    ranges, dropped, fold_from, fold_to = derive_tables()
    assert list(unicode61._SEPARATORS) == ranges
    assert list(unicode61._DROPPED) == dropped
    assert (list(unicode61._FOLD_FROM), list(unicode61._FOLD_TO)) == (fold_from, fold_to)


@pytest.mark.slow  # ~15 s: 1.1 million code points in four contexts
def test_unicode61_words_are_fts5_tokens_for_every_code_point() -> None:
    """Alone, after a letter and between two: ``words`` lists what FTS5 stores."""
    conn = _fts5()
    blocks = [_CODE_POINTS[at:at + 4096] for at in range(0, len(_CODE_POINTS), 4096)]
    texts = ["".join(f"{chr(c)} x{chr(c)} y{chr(c)}z {chr(c)}{chr(c)} " for c in block)
             for block in blocks]
    for block, text, got in zip(blocks, texts, _tokens(conn, texts), strict=True):
        if words(text) != got:
            raise AssertionError(f"U+{block[0]:04X}..U+{block[-1]:04X}: words differ from FTS5")


def test_unicode61_examples() -> None:
    text = "日本語 サポート ルーティングは Straße 한국어 йогурт καλημέρα ＡＢＣ naïve"
    assert words(text) == ["日本語", "サポート", "ルーティングは", "straße", "한국어", "йогурт",
                           "καλημέρα", "ａｂｃ", "naive"]
    assert words("read_config(ÉTÉ) — İstanbul ΣΟΦΟΣ") == ["read", "config", "ete", "istanbul",
                                                       "σοφοσ"]
    assert fold("A-b") == "a b"


@given(st.text(max_size=60))
def test_unicode61_words_are_fts5_tokens(text: str) -> None:
    text = text.replace("\0", " ")
    assert words(text) == _tokens(_fts5(), [text])[0]
    assert words(" ".join(words(text))) == words(text)  # folding a folded word changes nothing


if __name__ == "__main__":
    _ranges, _dropped, _from, _to = derive_tables()
    sys.stdout.write("\n\n".join([
        f"# Generated from SQLite {sqlite3.sqlite_version}.",
        _render("_SEPARATORS", _ranges), _render("_DROPPED", _dropped),
        _render("_FOLD_FROM", _from), _render("_FOLD_TO", _to)]) + "\n")
