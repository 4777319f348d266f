"""``search.ranked``: pruned ranking keeps exactly the rows scoring them all keeps."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore.index.schema import SCHEMA
from ctxstore.search import ranked

COMMON = ["response", "header", "value", "self", "return", "data"]
MIDDLE = [f"mid{i}" for i in range(30)]
RARE = [f"rare{i}" for i in range(200)]


def _chunk_text(rng: random.Random) -> str:
    words = rng.choices(COMMON, k=rng.randint(0, 12)) + rng.choices(MIDDLE, k=rng.randint(0, 4)) \
        + rng.choices(RARE, k=rng.randint(0, 2))
    rng.shuffle(words)
    return " ".join(words + ["x"] * rng.randint(0, 30))  # lengths vary: bm25 weighs them


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    """A code index of 3,000 chunks over a skewed vocabulary, plus 40 identical ones (ties)."""
    from ctxstore.index.chunks import pack_text
    from ctxstore.index.codedb import code_schema, register_functions

    db = sqlite3.connect(":memory:")
    register_functions(db)
    db.executescript(SCHEMA)
    db.executescript(code_schema())  # the chunks live in the code index's tables
    rng = random.Random(14)
    texts = [_chunk_text(rng) for _ in range(3000)] + ["header value rare7 mid3"] * 40
    rng.shuffle(texts)
    for rowid, text in enumerate(texts, start=5):  # rowids need not start at 1
        # one file per chunk: its text, kept once, and the chunk's lines in it (code schema 4)
        db.execute("INSERT INTO files(rowid, path, version, blob, byte_count, line_count,"
                   " complete, stamp) VALUES (?, ?, x'', x'', ?, 1, 1, 0)",
                   (rowid, f"f{rowid}.py", len(text.encode())))
        db.execute("INSERT INTO file_text(file, data) VALUES (?, ?)", (rowid, pack_text(text)))
        db.execute("INSERT INTO chunk_rows(rowid, file, qualname, kind, start_line, end_line,"
                   " tokens) VALUES (?, ?, NULL, 'block', 1, 2, 10)", (rowid, rowid))
        db.execute("INSERT INTO chunks_fts(rowid, path, name, text) VALUES (?, ?, '', ?)",
                   (rowid, f"f{rowid}.py", text))
    # chunks_fts is contentless: a document is deleted with the values it was indexed with
    db.executemany("INSERT INTO chunks_fts(chunks_fts, rowid, path, name, text)"
                   " VALUES ('delete', ?, ?, '', ?)",
                   db.execute("SELECT rowid, path, text FROM chunks WHERE rowid % 97 = 0").fetchall())
    db.execute("DELETE FROM chunk_rows WHERE rowid % 97 = 0")  # deleted rows leave rowid gaps
    yield db
    db.close()


def _queries(seed: int, count: int) -> list[tuple[str, ...]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = rng.sample(COMMON, rng.randint(0, 4)) + rng.sample(MIDDLE, rng.randint(0, 3)) \
            + rng.sample(RARE, rng.randint(0, 3))
        rng.shuffle(words)
        out.append(tuple(words))
    return out + [("response", "header", "response"), ("header", "rare7", "mid3", "value"),
                  ("response", "header value", "rare1"), ("response", "héader", "mid1", "rare2"),
                  ("nosuchword", "response", "header")]


def _unpruned(monkeypatch: pytest.MonkeyPatch, conn: sqlite3.Connection, terms: tuple[str, ...],
              limit: int) -> list[Any]:
    with monkeypatch.context() as patch:
        patch.setattr(ranked, "_prune_plan", lambda *args: None)
        return ranked.ranked_chunks(conn, terms, limit=limit)


@pytest.mark.parametrize("limit", [5, 20, 80])
@pytest.mark.parametrize("eager", [False, True], ids=["as-configured", "eager"])
def test_ranked_chunks_pruned_keeps_the_rows_of_scoring_every_row(
        conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch, limit: int, eager: bool) -> None:
    monkeypatch.setattr(ranked, "_PRUNE_MIN_ROWS", 0)  # this corpus is small: prune it anyway
    if eager:  # leave out as many words as bounds allow: second rounds, fallbacks
        monkeypatch.setattr(ranked, "_MAX_SKIPPED", 99)
        monkeypatch.setattr(ranked, "_SKIPPED_SHARE", float("inf"))
    planned = ranked._prune_plan
    rounds: list[int] = []

    def counting(*args: Any) -> Any:
        plan = planned(*args)
        rounds.append(0 if plan is None else 1)
        return plan

    monkeypatch.setattr(ranked, "_prune_plan", counting)
    for terms in _queries(limit, 150):
        if not terms:
            continue
        pruned = ranked.ranked_chunks(conn, terms, limit=limit)
        assert pruned == _unpruned(monkeypatch, conn, terms, limit), terms
    assert sum(rounds) >= 20  # pruning really ran, on many of the queries


def test_ranked_chunks_prunes_only_when_many_rows_match(conn: sqlite3.Connection) -> None:
    assert ranked._prune_plan(conn, "chunks_fts", ("response", "rare3"), 20) is None  # < 8,000


def test_ranked_chunks_prune_plan_scores_rare_terms_first(conn: sqlite3.Connection,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranked, "_PRUNE_MIN_ROWS", 0)
    plan = ranked._prune_plan(conn, "chunks_fts", ("response", "rare3", "header value", "mid2"), 20)
    assert plan is not None
    first, bounded = plan
    assert "rare3" in first and "header value" in first and "response" not in first
    assert [bound for _, bound in bounded] == sorted(bound for _, bound in bounded)


def test_ranked_chunks_bound_exceeds_every_score_of_one_term(conn: sqlite3.Connection,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound ``idf * (k1 + 1)`` is above what the term adds to any row (FTS5's bm25())."""
    monkeypatch.setattr(ranked, "_PRUNE_MIN_ROWS", 0)
    for word in COMMON + MIDDLE[:5] + RARE[:5]:
        plan = ranked._prune_plan(conn, "chunks_fts", (word, "zzznone", "rare0", "rare1"), 1)
        if plan is None or word not in dict(plan[1]):
            continue
        bound = dict(plan[1])[word]
        best = conn.execute("SELECT min(score) FROM (SELECT bm25(chunks_fts) AS score FROM chunks_fts "
                            "WHERE chunks_fts MATCH ? LIMIT -1)", (f'"{word}"',)).fetchone()[0]
        assert -best < bound, word
