"""Tantivy serving search on a large index (``search.tantivy_index``): built, kept, trusted."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ctxstore.index import open_index
from ctxstore.repo import open_store
from ctxstore.search import tantivy_index
from ctxstore.search.rank import FieldStats
from ctxstore.search.tantivy import TantivyEngine
from ctxstore.search.tantivy_index import path_field, rebuild_tantivy
from tests.graph._derivedlib import ctx, ctx_json, indexed_and_committed

pytest.importorskip("tantivy")


def _tantivy(ctx_dir: Path) -> Path:
    return ctx_dir / "index" / "tantivy"


def _serve(ctx_dir: Path, setting: str = "tantivy") -> None:
    """Set ``[index] fulltext`` (a small test store is served by FTS5 under "auto")."""
    config = ctx_dir / "config.toml"
    text = config.read_text()
    start = text.index("fulltext = ")
    end = text.index("\n", start)
    config.write_text(f'{text[:start]}fulltext = "{setting}"{text[end:]}')


def _empty_fts5(ctx_dir: Path) -> None:
    """Empty the FTS5 tables: a search that still finds something was served by Tantivy."""
    conn = sqlite3.connect(ctx_dir / "index" / "index.sqlite")
    conn.execute("DELETE FROM nodes_fts")
    conn.commit()
    conn.close()
    conn = sqlite3.connect(ctx_dir / "index" / "code.sqlite")  # this clone's code index
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")  # contentless
    conn.commit()
    conn.close()


def _keys(ctx_dir: Path, *args: str) -> list[str]:
    return [r["key"] for r in ctx_json(ctx_dir, "search", *args)["results"]]


def _rebuild(ctx_dir: Path) -> None:
    store = open_store(ctx_dir)
    with open_index(store) as conn:
        rebuild_tantivy(ctx_dir, conn, lock_timeout=5.0)


def test_tantivy_serves_chunks_and_nodes_once_built(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    node = ctx_json(ctx_dir, "add", "--type", "fact", "header parsing lives in module c")["id"]
    _serve(ctx_dir)
    doc = ctx_json(ctx_dir, "rebuild", "--tantivy")
    assert doc["tantivy"]["chunks"] >= 6 and doc["tantivy"]["nodes"] == 1
    assert doc["tantivy"]["files"] == 3 and "scc" not in doc  # --tantivy only
    _empty_fts5(ctx_dir)
    for query in ("parseHeader", "parse_header", "PARSE header"):
        keys = _keys(ctx_dir, query, "--kind", "chunk")
        assert keys and keys[0].startswith("c.py:"), query
    assert _keys(ctx_dir, "header parsing", "--kind", "node") == [node]
    assert _keys(ctx_dir, "!!!") == []
    _serve(ctx_dir, "fts5")  # FTS5 alone has nothing left: Tantivy answered above
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk") == []


def test_small_project_is_served_by_fts5_and_builds_no_tantivy(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")  # "auto", far below TANTIVY_MIN_CHUNKS
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk")[0].startswith("c.py:")
    assert not _tantivy(ctx_dir).exists()
    ctx_json(ctx_dir, "rebuild")
    assert not _tantivy(ctx_dir).exists()


def test_ctx_index_and_commit_keep_it_current(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    (ctx_dir.parent / "d.py").write_text("def zeppelin_frame():\n    return 1\n")
    ctx(ctx_dir, "index")  # builds it (there was none), then keeps it
    assert _tantivy(ctx_dir).is_dir()
    (ctx_dir.parent / "e.py").write_text("def dirigible_mast():\n    return 2\n")
    ctx(ctx_dir, "index")
    node = ctx_json(ctx_dir, "add", "--type", "fact", "the airship hangar holds blimps")["id"]
    ctx(ctx_dir, "commit", "-m", "airship")
    marker = (ctx_dir / "index" / "tantivy.synced").read_text()
    _empty_fts5(ctx_dir)
    assert _keys(ctx_dir, "zeppelin", "--kind", "chunk")[0].startswith("d.py:")
    assert _keys(ctx_dir, "dirigible", "--kind", "chunk")[0].startswith("e.py:")
    assert _keys(ctx_dir, "airship hangar", "--kind", "node") == [node]
    assert (ctx_dir / "index" / "tantivy.synced").read_text() == marker  # nothing to sync


def test_a_search_behind_the_store_syncs_first(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    _rebuild(ctx_dir)
    node = ctx_json(ctx_dir, "add", "--type", "fact", "zeppelin storage quirk")["id"]
    ctx_json(ctx_dir, "status")  # the index applies the node (into nodes_fts), Tantivy not
    _empty_fts5(ctx_dir)
    assert _keys(ctx_dir, "zeppelin") == [node]
    ctx(ctx_dir, "delete", node)
    assert _keys(ctx_dir, "zeppelin") == []


def test_a_crashed_build_claims_nothing_and_fts5_answers(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    _rebuild(ctx_dir)
    before = sorted(p.name for p in _tantivy(ctx_dir).iterdir())

    def crash(self: TantivyEngine) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TantivyEngine, "commit", crash)
    with pytest.raises(OSError):
        _rebuild(ctx_dir)
    monkeypatch.undo()
    assert sorted(p.name for p in _tantivy(ctx_dir).iterdir()) == before  # the old one stays
    assert (ctx_dir / "index" / "tantivy.new").is_dir()  # the leftover of the crash
    assert not (ctx_dir / "index" / "tantivy.synced").exists()  # not trusted: FTS5 answers
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk")[0].startswith("c.py:")
    _empty_fts5(ctx_dir)
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk") == []  # (it was FTS5)
    ctx(ctx_dir, "rebuild", "--tantivy")  # the next build clears the leftover and serves
    assert not (ctx_dir / "index" / "tantivy.new").exists()
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk")[0].startswith("c.py:")


def test_a_sync_interrupted_after_its_commit_is_applied_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tantivy committed, its state not yet written: the next sync adds nothing twice."""
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    _rebuild(ctx_dir)
    ctx_json(ctx_dir, "add", "--type", "fact", "zeppelin one")
    ctx_json(ctx_dir, "add", "--type", "fact", "zeppelin two")
    real = tantivy_index._write_state
    monkeypatch.setattr(tantivy_index, "_write_state", lambda *a, **k: (_ for _ in ()).throw(
        OSError(5, "Input/output error")))
    store = open_store(ctx_dir)
    with open_index(store) as conn, pytest.raises(OSError):
        tantivy_index.sync_tantivy(ctx_dir, conn, lock_timeout=5.0)
    monkeypatch.setattr(tantivy_index, "_write_state", real)
    _empty_fts5(ctx_dir)
    assert len(_keys(ctx_dir, "zeppelin")) == 2


def test_a_row_that_is_not_the_indexed_one_makes_fts5_answer(tmp_path: Path) -> None:
    """Rowids reused by a rebuild in place are caught by the check each document keeps."""
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    _rebuild(ctx_dir)
    conn = sqlite3.connect(ctx_dir / "index" / "code.sqlite")  # this clone's code index
    conn.execute("UPDATE files SET path = 'moved.py' WHERE path = 'c.py'")  # meta unchanged
    conn.commit()
    conn.close()
    keys = _keys(ctx_dir, "parse_header", "--kind", "chunk")
    assert keys and keys[0].startswith("moved.py:")  # FTS5's answer, from the rows as they are
    assert not (ctx_dir / "index" / "tantivy.synced").exists()  # and the next write rebuilds


def test_a_linked_tantivy_directory_is_refused(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    _tantivy(ctx_dir).symlink_to(outside)
    _, err, code = ctx(ctx_dir, "rebuild", "--tantivy", ok=False)
    assert code != 0 and "E020" in err and "tantivy" in err
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]


def test_the_module_imports_no_tantivy_until_used() -> None:
    code = "import sys, ctxstore.search.tantivy_index, ctxstore.search.search; " \
           "print('tantivy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_concurrent_tantivy_rebuilds_take_turns(tmp_path: Path) -> None:
    """Two `ctx rebuild --tantivy` processes at once: both succeed, the index works after."""
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    ctx(ctx_dir, "add", "--type", "fact", "header parsing lives in module c")
    argv = [sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "rebuild", "--tantivy"]
    for _ in range(3):
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        assert [code for code, _ in results] == [0, 0, 0], results
    _empty_fts5(ctx_dir)
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk")[0].startswith("c.py:")
    assert not (ctx_dir / "index" / "tantivy.new").exists()


def test_tantivy_file_scores_are_the_rankings_bm25() -> None:
    """Body BM25 (k1 1.2, b 0.75) plus twice the path's (b 0, every path padded alike)."""
    docs = {1: (["parse", "header", "header", "cookie"], ["src", "http"]),
            2: (["cookie", "jar", "jar"], ["src", "cookies", "cookie"]),
            3: (["header"] * 5 + ["value"] * 9, ["tests", "test_http"]),
            4: (["unrelated"], ["docs"])}
    engine = TantivyEngine(None, ("body", "path"), positions=False)
    for rowid, (body, where) in docs.items():
        engine.index_terms(rowid, {"body": body, "path": path_field(where)})
    weights = {"header": 1.0, "cookie": 2.0, "http": 1.0}
    got = dict((r, s) for r, s, _ in engine.weighted(weights, {"body": 1.0, "path": 2.0}, 10))
    order = sorted(docs)
    body = FieldStats.from_bags([_bag(docs[i][0]) for i in order], 0.75)
    path = FieldStats.from_bags([_bag(docs[i][1]) for i in order], 0.0)
    want: dict[int, float] = {}
    for field, weight in ((body, 1.0), (path, 2.0)):
        for i, s in field.scores(weights, 1.2).items():
            want[order[i]] = want.get(order[i], 0.0) + weight * s
    assert got.keys() == want.keys()
    assert all(abs(got[r] - want[r]) < 1e-4 * want[r] for r in want), (got, want)


def _bag(terms: list[str]):  # type: ignore[no-untyped-def]
    from collections import Counter

    return Counter(terms)


def test_tantivy_engine_groups_and_checks() -> None:
    engine = TantivyEngine(None, ("text",), checked=True)
    engine.index_document(1, {"text": "alpha beta"}, group="a.py", check=11)
    engine.index_document(2, {"text": "alpha"}, group="a.py", check=12)
    engine.index_document(3, {"text": "alpha gamma"}, group="b.py", check=13)
    assert sorted((r, c) for r, _, c in engine.hits(["alpha"], mode="any")) == \
        [(1, 11), (2, 12), (3, 13)]
    engine.delete_group("a.py")
    assert [r for r, _ in engine.search(["alpha"])] == [3]


def test_rebuild_json_names_the_tantivy_counts(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    out = json.loads(ctx(ctx_dir, "--format", "json", "rebuild")[0])
    assert set(out["tantivy"]) == {"chunks", "nodes", "files", "seconds"}


def test_tantivy_engine_breaks_ties_by_rowid_under_a_limit() -> None:
    """Tied scores (copies of one file) keep the lowest rowids, as FTS5's ORDER BY does."""
    engine = TantivyEngine(None, ("text",))
    for rowid in range(500, 0, -1):  # added in reverse: Tantivy's own order is not rowid order
        engine.index_document(rowid, {"text": "retry backoff"})
    engine.index_document(1000, {"text": "retry retry backoff"})
    assert [r for r, _ in engine.search(["retry"], limit=5)] == [1000, 1, 2, 3, 4]
    assert len(engine.search(["retry"])) == 501


def test_packs_are_served_by_tantivy_where_it_serves_search(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack ranks files and memory with Tantivy where Tantivy serves at all.

    That is ``[index] fulltext = "tantivy"``, or ``"auto"`` on an index over
    ``TANTIVY_MIN_CHUNKS`` (docs/index.md); a small index under ``"auto"``, and any index under
    ``"fts5"``, is ranked by the postings and FTS5. FTS5's node table is emptied here, so a
    pack that shows the memory read it from Tantivy.
    """
    ctx_dir = indexed_and_committed(tmp_path / "w")
    ctx_json(ctx_dir, "add", "--type", "fact", "header parsing lives in module c")
    task = "fix parse_header in module c"
    by_postings = ctx_json(ctx_dir, "pack", task)["ranked_files"]
    _serve(ctx_dir)
    ctx(ctx_dir, "rebuild", "--tantivy")
    _empty_fts5(ctx_dir)
    pack = ctx_json(ctx_dir, "pack", task)
    assert pack["ranked_files"] == by_postings  # short files: Tantivy's BM25 is the ranking's
    assert any("header parsing" in item["snippet"] for item in pack["retrieved"])  # memory
    _serve(ctx_dir, "auto")  # a small index: packs and searches read postings and FTS5
    pack = ctx_json(ctx_dir, "pack", task)
    assert pack["ranked_files"] == by_postings
    assert not any("header parsing" in item["snippet"] for item in pack["retrieved"])
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk") == []
    monkeypatch.setattr(tantivy_index, "TANTIVY_MIN_CHUNKS", 1)  # a large index, as "auto" sees it
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk")[0].startswith("c.py:")  # Tantivy's
    pack = ctx_json(ctx_dir, "pack", task)
    assert pack["ranked_files"] == by_postings
    assert any("header parsing" in item["snippet"] for item in pack["retrieved"])  # Tantivy's
    _serve(ctx_dir, "fts5")  # however large: the postings and FTS5
    pack = ctx_json(ctx_dir, "pack", task)
    assert pack["ranked_files"] == by_postings
    assert not any("header parsing" in item["snippet"] for item in pack["retrieved"])


def test_auto_counts_chunks_not_the_span_of_their_ids(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-indexing one file again and again does not carry a small index over the threshold.

    A re-indexed file's chunks get new row ids: a store judged by the span of its chunk ids
    crossed ``TANTIVY_MIN_CHUNKS`` after enough one-file ``ctx index`` runs and then built and
    synced Tantivy on every run; judged by how many chunks it holds, it stays on FTS5.
    """
    ctx_dir = indexed_and_committed(tmp_path / "w")
    code = ctx_dir / "index" / "code.sqlite"

    def chunk_ids() -> tuple[int, int, int]:
        with sqlite3.connect(code) as conn:
            row = conn.execute("SELECT count(*), min(rowid), max(rowid) FROM chunk_rows").fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    count, _, _ = chunk_ids()
    monkeypatch.setattr(tantivy_index, "TANTIVY_MIN_CHUNKS", count + 1)
    for n in range(2 * count):  # a.py and b.py in turn: each run's chunks above the other's
        name, other = ("a", "b") if n % 2 else ("b", "a")
        (ctx_dir.parent / f"{name}.py").write_text(
            f"import {other}\n\n\ndef f{n}():\n    return {other}.g() or {n}\n")
        ctx(ctx_dir, "index")
    now, low, high = chunk_ids()
    assert now == count and high - low + 1 > count + 1  # the span passed the threshold
    assert not _tantivy(ctx_dir).exists()  # "auto" still serves by FTS5
    with open_index(open_store(ctx_dir)) as conn:
        assert not tantivy_index.wanted(conn, open_store(ctx_dir).config)
        monkeypatch.setattr(tantivy_index, "TANTIVY_MIN_CHUNKS", count)
        assert tantivy_index.wanted(conn, open_store(ctx_dir).config)


def test_damaged_tantivy_files_make_fts5_answer(tmp_path: Path) -> None:
    """A Tantivy file that cannot be read (a cloned or broken copy): searches still answer."""
    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    _rebuild(ctx_dir)
    for corpus in ("chunks", "source"):
        (_tantivy(ctx_dir) / corpus / "meta.json").write_text("{ not json")
    keys = _keys(ctx_dir, "parse_header", "--kind", "chunk")
    assert keys and keys[0].startswith("c.py:")  # FTS5's answer
    assert not (ctx_dir / "index" / "tantivy.synced").exists()  # the next write rebuilds it
    assert "c.py" in ctx_json(ctx_dir, "pack", "fix parse_header")["ranked_files"]
    ctx(ctx_dir, "index")
    _empty_fts5(ctx_dir)
    assert _keys(ctx_dir, "parse_header", "--kind", "chunk")[0].startswith("c.py:")


def test_tantivy_scores_the_terms_the_postings_would_be_read_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tantivy ranks a pack's files by the rarest terms under the posting cap, as the postings do.

    A long task's common words are not scored (they would cost Tantivy what they cost the
    postings), so both rankings weigh the same terms and list the same matches.
    """
    from ctxstore.packs import seed
    from ctxstore.search.rank import Params
    from ctxstore.search.task import parse_query

    ctx_dir = indexed_and_committed(tmp_path / "w")
    _serve(ctx_dir)
    _rebuild(ctx_dir)
    monkeypatch.setattr(seed, "MIN_TERMS", 1)  # the rarest term alone: "value" (c.py only)
    monkeypatch.setattr(seed, "MAX_POSTINGS", 1)
    query = parse_query("return the value")
    store = open_store(ctx_dir)
    with open_index(store) as conn:
        served = tantivy_index.Served(_tantivy(ctx_dir))
        by_postings = seed.rank_files(conn, query, Params(graph_weight=0.0), matched_only=True)
        by_tantivy = seed.rank_files(conn, query, Params(graph_weight=0.0), matched_only=True,
                                     served=served)
    assert [(h.path, h.terms) for h in by_postings] == [("c.py", ["value"])]
    assert [(h.path, h.terms) for h in by_tantivy] == [("c.py", ["value"])]


def test_tantivy_lists_the_terms_of_the_first_explained_hits_of_both_groups(
        tmp_path: Path) -> None:
    """``explain=k`` over Tantivy: the first k hits (source files and prose merged) list the
    terms the postings' ranking lists for them, and no hit after them lists any; ranked
    lazily, only the hits asked about do."""
    from ctxstore.init import init_store
    from ctxstore.packs import seed
    from ctxstore.search.rank import Params
    from ctxstore.search.task import parse_query

    root = tmp_path / "w"
    root.mkdir()
    init_store(root / ".ctx", git=False)
    files = {"cookie.py": "def parse_cookie(header):\n    return header.split(';')\n",
             "retry.py": "def retry(timeout):\n    return timeout * 2\n",
             "both.py": "def parse_cookie_retry(header, timeout):\n    return header, timeout\n",
             "COOKIES.md": "# Cookies\n\nThe cookie header is parsed lazily.\n",
             "RETRY.md": "# Retry\n\nA retry waits for the timeout.\n"}
    for rel, text in files.items():
        (root / rel).write_text(text)
    ctx_dir = root / ".ctx"
    ctx(ctx_dir, "index")
    _serve(ctx_dir)
    _rebuild(ctx_dir)
    query = parse_query("parse the cookie header, retry on timeout")
    store = open_store(ctx_dir)
    with open_index(store) as conn:
        served = tantivy_index.Served(_tantivy(ctx_dir))
        params = Params(graph_weight=0.0)
        every = seed.rank_files(conn, query, params, matched_only=True)
        by_postings = seed.rank_files(conn, query, params, matched_only=True, explain=2)
        by_tantivy = seed.rank_files(conn, query, params, matched_only=True, explain=2,
                                     served=served)
        lazily = seed.rank_files_lazily(conn, query, params, matched_only=True, explain=2,
                                        served=served)
        unasked = [list(h.terms) for h in lazily.hits]
        lazily.explain([lazily.hits[1]])  # a pack asks for the files it reads chunks of
    assert len(every) == 5 and all(h.terms for h in every)
    assert [h.path for h in by_tantivy] == [h.path for h in every]
    assert [h.terms for h in by_tantivy[:2]] == [h.terms for h in every[:2]] \
        == [h.terms for h in by_postings[:2]]
    assert all(not h.terms for h in by_tantivy[2:])  # read for the first two, not two a group
    assert unasked == [[]] * 5
    assert [h.terms for h in lazily.hits] == [[], every[1].terms, [], [], []]
