"""Code ingestion: `ctx index`, `ctx add file`, the index's code tables, gates, trees, gc."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from _ingestlib import ctx, ctx_json, dump, git, make_work, query, tree_snapshot, write
from conftest import stage_file
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.code.ingest.extract import shares as _shares
from ctxstore.code.walk import glob_regex
from ctxstore.ids import ObjectId
from ctxstore.index.code import chunk_file
from ctxstore.model import Commit, CommitV2
from ctxstore.model.code import CodeSymbol
from ctxstore.repo import open_store
from ctxstore.verify import verify_store

PKG = {
    "src/pkg/__init__.py": "",
    "src/pkg/a.py": "import os\nfrom pkg.b import helper\n\n\nclass A:\n    def m(self):\n"
                    "        return helper(1)\n",
    "src/pkg/b.py": "def helper(x):\n    return x\n",
    "src/pkg/c.py": "def other():\n    return 2\n",
    "README.md": "# Title\n\nSome text.\n",
}


def _edges_from(ctx_dir: Path, path: str) -> set[tuple[object, ...]]:
    return set(query(ctx_dir, "SELECT from_key, label, to_kind, to_key FROM code_edges "
                              "WHERE path = ? AND label != 'Contains' AND label != 'Defines'", path))


def test_index_then_reindex_replaces_edges(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, PKG)
    doc = ctx_json(ctx_dir, "index")
    assert sorted(doc["written"]) == sorted(PKG) and doc["removed"] == []
    # The code index is derived, per clone: nothing staged, nothing written as an object.
    assert doc["read"] == len(PKG) and doc["symbols"] > 0 and doc["work_commit"] is None
    edges = _edges_from(ctx_dir, "src/pkg/a.py")
    assert ("pkg.a", "Imports", "item", "pkg.b.helper") in edges
    assert ("pkg.a", "Imports", "module", "os") in edges
    assert ("pkg.a.A.m", "Calls", "item", "pkg.b.helper") in edges
    assert ("file", "Contains", "module", "pkg.a") in set(query(
        ctx_dir, "SELECT from_kind, label, to_kind, to_key FROM code_edges WHERE path = ?",
        "src/pkg/a.py"))
    write(root, {"src/pkg/a.py": "import pkg.c\n\n\ndef f():\n    return pkg.c.other()\n"})
    doc = ctx_json(ctx_dir, "index")
    assert doc["written"] == ["src/pkg/a.py"] and doc["unchanged"] == len(PKG) - 1
    edges = _edges_from(ctx_dir, "src/pkg/a.py")
    assert ("pkg.a", "Imports", "file", "src/pkg/c.py") in edges
    assert not any(e[3] == "pkg.b.helper" for e in edges), edges
    assert query(ctx_dir, "SELECT qualname FROM symbols WHERE path = 'src/pkg/a.py' ORDER BY 1") \
        == [("pkg.a",), ("pkg.a.f",)]
    assert verify_store(open_store(ctx_dir)).ok


def test_unchanged_tree_reads_nothing_and_writes_nothing(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, PKG)
    ctx_json(ctx_dir, "index")
    stage = stage_file(ctx_dir).read_bytes()
    doc = ctx_json(ctx_dir, "index")
    assert doc["read"] == 0 and doc["unchanged"] == len(PKG) and doc["written"] == []
    assert doc["work_commit"] is None and stage_file(ctx_dir).read_bytes() == stage
    # Touched but the same bytes: read again, stored nothing (dedup gate).
    os.utime(ctx_dir.parent / "README.md", (1_000_000, 1_000_000))
    doc = ctx_json(ctx_dir, "index")
    assert doc["read"] == 1 and doc["deduplicated"] == 1 and doc["work_commit"] is None


def test_index_stages_nothing_and_writes_no_object(tmp_path: Path) -> None:
    # Issue 30: the code index lives in this clone's index/code.sqlite; a run leaves STAGE
    # and objects/ as they were, however many files it indexes.
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(30)})
    before = sorted(p.name for p in (ctx_dir / "objects").rglob("*") if p.is_file())
    doc = ctx_json(ctx_dir, "index")
    assert len(doc["written"]) == 30 and doc["work_commit"] is None
    status = ctx_json(ctx_dir, "status")
    assert status["staged"]["work_commits"] == 0 and status["staged"]["records"] == 0
    assert sorted(p.name for p in (ctx_dir / "objects").rglob("*") if p.is_file()) == before
    assert query(ctx_dir, "SELECT count(*) FROM files") == [(30,)]


def test_gitignore_and_ignore_globs_in_git_and_plain_trees(tmp_path: Path) -> None:
    for use_git in (True, False):
        ctx_dir = make_work(tmp_path / f"w{use_git}", use_git=use_git)
        root = ctx_dir.parent
        write(root, {".gitignore": "build/\n*.log\n!keep.log\n/top.py\n", "build/x.py": "x = 1\n",
                     "a.log": "log\n", "keep.log": "kept\n", "top.py": "t = 1\n",
                     "sub/top.py": "s = 1\n", "target/debug/y.rs": "fn y() {}\n",
                     "node_modules/m/index.js": "var a;\n", "vendor/v.py": "v = 1\n",
                     "src/ok.py": "ok = 1\n"})
        (ctx_dir / "config.toml").write_text(
            '[ingestion]\nignore_globs = ["target/**", "vendor/**", "node_modules/**"]\n')
        doc = ctx_json(ctx_dir, "index")
        assert sorted(doc["written"]) == [".gitignore", "keep.log", "src/ok.py", "sub/top.py"], \
            (use_git, doc)


def test_plain_tree_gitignore_that_is_a_link_or_fifo_is_not_read(tmp_path: Path) -> None:
    """Outside Git, a .gitignore that links to /dev/zero or is a FIFO is skipped, never read."""
    ctx_dir = make_work(tmp_path / "w", use_git=False)
    root = ctx_dir.parent
    write(root, {"src/ok.py": "ok = 1\n", "sub/a.py": "a = 1\n"})
    (root / ".gitignore").symlink_to("/dev/zero")
    os.mkfifo(root / "sub" / ".gitignore")
    doc = ctx_json(ctx_dir, "index")
    assert sorted(doc["written"]) == ["src/ok.py", "sub/a.py"], doc


def test_glob_regex() -> None:
    assert glob_regex("target/**").fullmatch("target/a/b.rs")
    assert not glob_regex("target/**").fullmatch("crates/target/a.rs")
    assert glob_regex("*.min.js").fullmatch("web/x/app.min.js")
    assert glob_regex("docs/*.md").fullmatch("docs/a.md")
    assert not glob_regex("docs/*.md").fullmatch("docs/sub/a.md")
    assert glob_regex("**/gen/*.py").fullmatch("a/b/gen/x.py")


def test_index_paths_limits_the_run_and_removals(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, PKG)
    ctx_json(ctx_dir, "index")
    (root / "src/pkg/c.py").unlink()
    (root / "README.md").unlink()
    doc = ctx_json(ctx_dir, "index", "src")
    assert doc["removed"] == ["src/pkg/c.py"]  # README.md is outside the scope: kept
    assert query(ctx_dir, "SELECT path FROM files WHERE path IN ('README.md', 'src/pkg/c.py')") \
        == [("README.md",)]
    assert query(ctx_dir, "SELECT count(*) FROM symbols WHERE path = 'src/pkg/c.py'") == [(0,)]
    doc = ctx_json(ctx_dir, "index")
    assert doc["removed"] == ["README.md"]
    # Ignored now but still there: it leaves the index too (the index is of what ctx index
    # lists; issue 32), and its rows with it.
    (ctx_dir / "config.toml").write_text('[ingestion]\nignore_globs = ["src/pkg/b.py"]\n')
    doc = ctx_json(ctx_dir, "index")
    assert doc["removed"] == ["src/pkg/b.py"] and query(
        ctx_dir, "SELECT path FROM files WHERE path = ?", "src/pkg/b.py") == []
    assert query(ctx_dir, "SELECT count(*) FROM symbols WHERE path = 'src/pkg/b.py'") == [(0,)]


def test_hostile_files_give_notes_not_tracebacks(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    outside = tmp_path / "secret.py"
    outside.write_text("password = 1\n")
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    write(root, {"bin.dat": b"\x00\x01\x02" * 100, "latin.txt": "caf\xe9\n".encode("latin-1"),
                 "huge.min.js": "var a=1;" * (10 * 1024 * 1024 // 8), "deep.py": deep,
                 "broken.py": "def f(:\n    pass\nclass OK:\n    pass\n",
                 "fine.py": "def g():\n    return 1\n"})
    os.symlink(outside, root / "link.py")
    before = tree_snapshot(root)
    from conftest import run_ctx

    res = run_ctx(["--ctx-dir", str(ctx_dir), "--format", "json", "index"], cwd=root)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    notes = {n["path"]: n["note"] for n in doc["notes"]}
    assert "binary" in notes["bin.dat"] and "UTF-8" in notes["latin.txt"]
    assert "max_file_bytes" in notes["huge.min.js"] and "out of the work tree" in notes["link.py"]
    assert "incomplete" in notes["broken.py"]
    assert {"fine.py", "broken.py", "deep.py"} <= set(doc["written"])
    assert "bin.dat" not in doc["written"] and "link.py" not in doc["written"]
    assert tree_snapshot(root) == before and outside.read_text() == "password = 1\n"
    text = run_ctx(["--ctx-dir", str(ctx_dir), "index"], cwd=root)
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert verify_store(open_store(ctx_dir)).ok


def test_add_file_budgets_and_confidence_gate(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, {f"f{i}.py": "import os\n\n\ndef f():\n    return g()\n" for i in range(4)})
    (ctx_dir / "config.toml").write_text(
        "[ingestion]\nmax_files_per_step = 2\nmax_edges_per_step = 5\n")
    out, err, _ = ctx(ctx_dir, "add", "file", "f0.py", "f1.py", "f2.py", "f3.py",
                      "--extract-semantics")
    assert "2 files not read: over [ingestion] max_files_per_step = 2" in err
    assert "low-confidence edges not stored" in err  # g() resolves to nothing: low
    assert "edges not stored: over [ingestion] max_edges_per_step = 5" in err
    doc = ctx_json(ctx_dir, "add", "file", "f2.py", "f3.py", "--extract-semantics")
    assert doc["written"] == ["f2.py", "f3.py"] and doc["relations"] <= 5
    assert any("max_edges_per_step" in d for d in doc["dropped"])
    assert query(ctx_dir, "SELECT count(*) FROM code_edges WHERE confidence = 'low'") == [(0,)]
    _, err, code = ctx(ctx_dir, "add", "file", "nope.py", ok=False)
    assert code != 0 and "nope.py: no such file" in err


def test_add_file_without_semantics_stores_the_file_only(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"a.py": "def f():\n    return 1\n"})
    doc = ctx_json(ctx_dir, "add", "file", "a.py")
    assert doc["written"] == ["a.py"] and doc["symbols"] == 0
    assert query(ctx_dir, "SELECT kind FROM chunks WHERE path = 'a.py'") == [("window",)]
    doc = ctx_json(ctx_dir, "add", "file", "a.py", "--extract-semantics")
    assert doc["written"] == ["a.py"] and doc["symbols"] == 2  # same bytes, now with symbols
    doc = ctx_json(ctx_dir, "add", "file", "a.py", "--extract-semantics")
    assert doc["written"] == [] and doc["deduplicated"] + doc["unchanged"] == 1


def test_chunks_at_symbol_granularity() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 21))
    syms = [CodeSymbol("m", "m", "module", None, None, None, 0, len(text), 1, 20, ()),
            CodeSymbol("m.f", "f", "function", "m", None, None, 0, 0, 3, 5, ()),
            CodeSymbol("m.C", "C", "class", "m", None, None, 0, 0, 8, 12, ()),
            CodeSymbol("m.C.x", "x", "method", "m.C", None, None, 0, 0, 9, 10, ())]
    chunks = chunk_file(text, syms)
    assert [(c.qualname, c.kind, c.start_line, c.end_line) for c in chunks] == [
        ("m", "module", 1, 20), ("m.f", "function", 3, 5), ("m.C", "class", 8, 12)]
    assert chunks[0].text.startswith("line 1\nline 2\nline 6\n")
    windows = chunk_file("x\n" * 130, [])
    assert [(c.start_line, c.end_line) for c in windows] == [(1, 60), (61, 120), (121, 130)]


def test_chunks_of_a_large_markdown_document_follow_its_sections() -> None:
    # One top heading over a long document used to make the whole file one chunk (25,000
    # tokens for docs/performance.md): a large section splits into its subsections, in turn.
    from ctxstore.code.markdown import MarkdownExtractor
    from ctxstore.tokens import estimate_tokens

    para = "Some words about the topic at hand, repeated for length. " * 12 + "\n\n"
    text = ("# Guide\n\nIntro.\n\n## Small\n\nshort\n\n## Large\n\nlead in\n\n"
            + "### Part one\n\n" + para * 8 + "### Part two\n\n" + para * 8
            + "## Big leaf\n\n" + para * 5)
    symbols = [CodeSymbol(s.qualname, s.name, s.kind, s.parent, None, None, s.span.start_byte,
                          s.span.end_byte, s.span.start_line, s.span.end_line, ())
               for s in MarkdownExtractor().extract("doc.md", text).symbols]
    chunks = chunk_file(text, symbols)
    kinds = [(c.kind, c.qualname.rsplit("/", 1)[-1].rsplit("#", 1)[-1] if c.qualname else None)
             for c in chunks]
    assert ("header", "Guide") in kinds and ("heading", "Small") in kinds
    assert ("header", "Large") in kinds
    assert ("heading", "Part one") in kinds and ("heading", "Part two") in kinds
    assert max(estimate_tokens(c.text) for c in chunks) < 2000
    assert "".join(c.text for c in chunks if c.kind != "module").count("Part one") == 1
    # a long section without subsections (a table) is cut into windows of its lines
    table = "## Figures\n\n" + "".join(f"| row {i} | {'x' * 80} |\n" for i in range(200))
    symbols = [CodeSymbol(s.qualname, s.name, s.kind, s.parent, None, None, s.span.start_byte,
                          s.span.end_byte, s.span.start_line, s.span.end_line, ())
               for s in MarkdownExtractor().extract("t.md", table).symbols]
    windows = chunk_file(table, symbols)
    assert len(windows) == 4 and all(c.kind == "heading" for c in windows)
    assert "".join(c.text for c in windows) == table


def test_commit_names_the_code_by_git_ids_and_copies_none_of_it(tmp_path: Path) -> None:
    # Issue 30: a canonical commit records the code it was made against by the work tree's
    # Git HEAD (commit v2), not by a tree of copied files; gc and rebuild keep the code index.
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    root = ctx_dir.parent
    write(root, PKG)
    git(root, "add", "-A", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "code")
    ctx_json(ctx_dir, "index")
    ctx(ctx_dir, "commit", "-m", "index")
    store = open_store(ctx_dir)
    head = store.read_typed(store.read_head().single, Commit)
    assert isinstance(head, CommitV2) and head.root_tree is None
    assert head.git_commit == git(root, "rev-parse", "HEAD").strip()
    assert head.git_tree == git(root, "rev-parse", "HEAD^{tree}").strip()
    kinds, blobs = _objects(ctx_dir)
    assert "commit" in kinds and "file_version" not in kinds, kinds
    assert not blobs & {text.encode() for text in PKG.values()}  # no copy of the code
    before = dump(ctx_dir)
    ctx(ctx_dir, "gc", "--aggressive")
    assert verify_store(open_store(ctx_dir)).ok
    ctx(ctx_dir, "rebuild")
    assert dump(ctx_dir) == before
    ctx(ctx_dir, "rebuild", "--full")
    assert dump(ctx_dir) == before


def _objects(ctx_dir: Path) -> tuple[set[str], set[bytes]]:
    """The types of the typed objects under objects/ (what Git sees), and the blobs."""
    from ctxstore.model import decode_typed
    from ctxstore.objects import KIND_TYPED

    store = open_store(ctx_dir)
    out, blobs = set(), set()
    for path in (ctx_dir / "objects").rglob("*"):
        if path.is_file():
            obj = store.objects.read(ObjectId(bytes.fromhex(path.name)))
            if obj.kind == KIND_TYPED:
                out.add(type(decode_typed(obj.payload)).TYPE)
            else:
                blobs.add(obj.payload)
    return out, blobs


def test_deleting_the_index_loses_nothing_ctx_index_cannot_rebuild(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, PKG)
    ctx_json(ctx_dir, "index")
    ctx(ctx_dir, "add", "note", "see `src/pkg/b.py`")
    before = dump(ctx_dir)
    for path in (ctx_dir / "index").iterdir():
        path.unlink()
    doc = ctx_json(ctx_dir, "index")  # the code index comes from the work tree again
    assert sorted(doc["written"]) == sorted(PKG)
    assert dump(ctx_dir) == before


@pytest.mark.parametrize("seed", range(4))
def test_rebuild_equals_incremental(tmp_path: Path, seed: int) -> None:
    """Random edits, adds, deletes, index runs and commits; a rebuild gives the same rows."""
    import random

    rng = random.Random(seed)
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    names = [f"p/m{i}.py" for i in range(6)] + ["notes.txt", "lib.rs"]
    for step in range(8):
        for name in rng.sample(names, rng.randint(1, 4)):
            if rng.random() < 0.25 and (root / name).exists():
                (root / name).unlink()
                continue
            other = rng.choice(names).removesuffix(".py").replace("/", ".")
            body = {"notes.txt": f"step {step}\n", "lib.rs": f"pub fn f{step}() {{}}\n"}.get(
                name, f"import {other}\n\n\ndef f{step}():\n    return {other}.g()\n")
            write(root, {name: body})
        if rng.random() < 0.3:
            ctx_json(ctx_dir, "add", "file", *[n for n in names if (root / n).exists()][:2],
                     "--extract-semantics")
        else:
            ctx_json(ctx_dir, "index")
        if rng.random() < 0.3:
            ctx(ctx_dir, "add", "note", f"touching `p/m{step % 6}.py` at step {step}")
        if rng.random() < 0.4:
            ctx(ctx_dir, "commit", "-m", f"step {step}")
    incremental = dump(ctx_dir)
    ctx(ctx_dir, "rebuild")
    assert dump(ctx_dir) == incremental


def test_index_help_and_bad_input(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    out, _, _ = ctx(ctx_dir, "index", "--help")
    assert "Example" in out
    out, _, _ = ctx(ctx_dir, "add", "file", "--help")
    assert "Example" in out
    _, err, code = ctx(ctx_dir, "index", str(tmp_path), ok=False)
    assert code != 0 and "outside the work tree" in err
    _, err, code = ctx(ctx_dir, "add", "file", ".ctx/HEAD", ok=False)
    assert code != 0 and "inside the store" in err
    (ctx_dir / "config.toml").write_text('[ingestion]\nmin_confidence = "sure"\n')
    _, err, code = ctx(ctx_dir, "index", ok=False)
    assert code != 0 and "min_confidence" in err


def test_process_pool_gives_the_same_versions(tmp_path: Path) -> None:
    body = "".join(f"def f{j}(x):\n    return x + {j}  # {'pad ' * 40}\n" for j in range(150))
    files = {f"p/m{i}.py": body + f"import p.m{(i + 1) % 12}\nX = {i}\n"
             for i in range(12)}  # over the pool's 256 KiB
    dumps = []
    for jobs in ("1", "2"):
        ctx_dir = make_work(tmp_path / f"w{jobs}")
        write(ctx_dir.parent, files)
        ctx_json(ctx_dir, "index", "--jobs", jobs)
        dumps.append([r[:8] for r in dump(ctx_dir)["files"]])
    assert dumps[0] == dumps[1]


def test_stale_memory_is_flagged(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, PKG)
    ctx_json(ctx_dir, "index")
    node = ctx_json(ctx_dir, "add", "note", "the retry lives in `pkg.b.helper` (src/pkg/b.py)")["id"]
    assert query(ctx_dir, "SELECT to_kind, to_key FROM edges WHERE from_key = ? AND label = "
                          "'Mentions' ORDER BY 1", node) == [("file", "src/pkg/b.py"),
                                                             ("item", "pkg.b.helper")]
    assert ctx_json(ctx_dir, "show", node)["stale_mentions"] == []
    assert ctx_json(ctx_dir, "status")["stale_memory"] == []
    write(root, {"src/pkg/b.py": "def helper(x):\n    return x + 1\n"})
    ctx_json(ctx_dir, "index")
    stale = ctx_json(ctx_dir, "show", node)["stale_mentions"]
    assert {(s["kind"], s["key"], s["reason"]) for s in stale} == {
        ("file", "src/pkg/b.py", "changed"), ("item", "pkg.b.helper", "changed")}
    out, _, _ = ctx(ctx_dir, "show", node)
    assert "stale:   mentions file src/pkg/b.py, which changed (since " in out
    out, _, _ = ctx(ctx_dir, "status")
    assert "Stale memory: 2 mentions" in out
    (root / "src/pkg/b.py").unlink()
    ctx_json(ctx_dir, "index")
    assert {s["reason"] for s in ctx_json(ctx_dir, "status")["stale_memory"]} == {"removed"}


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("symlink and fork behaviour checked on Linux")


@given(st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=300),
       st.integers(min_value=1, max_value=8))
def test_worker_shares_cover_every_file_once_and_balance(sizes: list[int], jobs: int) -> None:
    shares = _shares(sizes, jobs)
    assert sorted(i for share in shares for i in share) == list(range(len(sizes)))
    assert len(shares) <= jobs and all(shares)
    for share in shares:  # each worker starts with its largest file
        assert [sizes[i] for i in share] == sorted((sizes[i] for i in share), reverse=True)
    if len(shares) == jobs and sizes:  # greedy: no share exceeds another by more than a file
        loads = [sum(sizes[i] + 1 for i in share) for share in shares]
        assert max(loads) - min(loads) <= max(sizes) + 1
