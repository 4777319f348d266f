"""The Tantivy index of chunks and node text: rebuilt from SQLite, swapped in whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from _derivedlib import ctx, ctx_json, indexed_and_committed

from ctxstore.derived import tantivy_index
from ctxstore.derived.tantivy_index import CodeTextIndex, rebuild_tantivy, search_text
from ctxstore.repo import open_store


def _tantivy(ctx_dir: Path) -> Path:
    return ctx_dir / "index" / "tantivy"


def test_identifier_words_are_cut_alike() -> None:
    index = CodeTextIndex()
    assert index.words("parse_header parseHeader ParseHeader") == ["parse", "header"] * 3
    assert index.words("utf8 HTTPServer Ünïcode") == ["utf8", "https", "erver", "unicode"]
    assert index.words("  ...  ") == []


def test_rebuild_tantivy_then_search_chunks_and_nodes(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    node = ctx_json(ctx_dir, "add", "--type", "fact", "header parsing lives in module c")["id"]
    doc = ctx_json(ctx_dir, "rebuild", "--tantivy")
    assert doc["tantivy"]["chunks"] >= 6 and doc["tantivy"]["nodes"] == 1
    assert "scc" not in doc  # --tantivy only
    store = open_store(ctx_dir)
    for query in ("parseHeader", "parse_header", "PARSE header"):
        hits = search_text(store, query, kind="chunk")
        assert (hits[0].ref, hits[0].name) == ("c.py", "c.parse_header"), query
    nodes = search_text(store, "header parsing", kind="node")
    assert [(h.kind, h.ref) for h in nodes] == [("node", node)]
    assert search_text(store, "!!!") == []
    # A plain `ctx rebuild` keeps an existing Tantivy index current.
    assert "tantivy" in ctx_json(ctx_dir, "rebuild")


def test_a_search_behind_the_store_rebuilds_first(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    store = open_store(ctx_dir)
    rebuild_tantivy(store)
    ctx(ctx_dir, "add", "--type", "fact", "zeppelin storage quirk")
    hits = search_text(open_store(ctx_dir), "zeppelin")
    assert [h.kind for h in hits] == ["node"]
    # ctx index changes this clone's code index without moving a pointer: behind too.
    (ctx_dir.parent / "d.py").write_text("def dirigible_mooring():\n    return 1\n")
    ctx(ctx_dir, "index")
    hits = search_text(open_store(ctx_dir), "dirigible mooring", kind="chunk")
    assert [h.ref for h in hits] == ["d.py"]


def test_a_crashed_rebuild_leaves_the_old_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    store = open_store(ctx_dir)
    rebuild_tantivy(store)
    before = sorted(p.name for p in _tantivy(ctx_dir).iterdir())

    def crash(self: CodeTextIndex) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CodeTextIndex, "commit", crash)
    with pytest.raises(OSError):
        rebuild_tantivy(store)
    monkeypatch.undo()
    assert sorted(p.name for p in _tantivy(ctx_dir).iterdir()) == before
    assert (ctx_dir / "index" / "tantivy.new").is_dir()  # the leftover of the crash
    assert search_text(store, "parse_header")[0].ref == "c.py"
    rebuild_tantivy(store)  # the next rebuild clears the leftover
    assert not (ctx_dir / "index" / "tantivy.new").exists()


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
    assert "tantivy" not in tantivy_index.__dict__


@pytest.mark.slow
def test_concurrent_tantivy_rebuilds_take_turns(tmp_path: Path) -> None:
    """Two `ctx rebuild --tantivy` processes at once: both succeed, the index works after."""
    import subprocess
    import sys

    ctx_dir = indexed_and_committed(tmp_path / "w")
    ctx(ctx_dir, "add", "--type", "fact", "header parsing lives in module c")
    argv = [sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "rebuild", "--tantivy"]
    for _ in range(3):
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        assert [code for code, _ in results] == [0, 0, 0], results
    hits = search_text(open_store(ctx_dir), "parse_header", kind="chunk")
    assert hits and hits[0].ref == "c.py"
    assert not (ctx_dir / "index" / "tantivy.new").exists()
