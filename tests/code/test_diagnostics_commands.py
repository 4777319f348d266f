"""``ctx add command`` and ``ctx diagnostics``: stored runs, edges, replacement, hostile input.

Their crash and fault tests are tests/crash/test_diagnostics_faults.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT, session_of, store_digest

from ctxstore.code.ingest import add_files
from ctxstore.code.runs import bound_output
from ctxstore.gc import collect_garbage
from ctxstore.objects import ObjectId
from ctxstore.repo import open_store
from ctxstore.verify import verify_store
from tests.code._ingestlib import ctx, ctx_json, make_work, query, tree_snapshot, write

FIXTURES = Path(__file__).parent / "fixtures" / "build"
SHIM_DIR = REPO_ROOT / "tests" / "_shim"  # the fault shim of tests/crash (sitecustomize)

FAILING_TESTS = '''\
def helper(x):
    return x * 2


def test_ok():
    assert helper(2) == 4


def test_fails():
    assert helper(2) == 5
'''


def _run(ctx_dir: Path, *args: str, stdin: bytes | int | None = None, fault: str | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """The real ``ctx`` in a child process, from the work tree (the shim on its path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTX_FAULT")}
    env["PYTHONPATH"] = os.pathsep.join([str(SHIM_DIR), str(REPO_ROOT)])
    if fault:
        env["CTX_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), *args],
                          cwd=ctx_dir.parent, env=env, timeout=timeout, capture_output=True,
                          input=stdin if isinstance(stdin, bytes) else None,
                          stdin=stdin if isinstance(stdin, int) else None)


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    return make_failing_work(tmp_path)


def make_failing_work(tmp_path: Path) -> Path:
    """The ``work`` fixture's tree: a committed store and a test file that fails."""
    root = tmp_path / "repo"
    make_work(root)
    write(root, {"test_a.py": FAILING_TESTS})
    return root


@pytest.mark.slow
def test_diagnostics_failing_pytest_run_is_stored_and_listed(work: Path) -> None:
    ctx_dir = work / ".ctx"
    add_files(session_of(open_store(ctx_dir)), ["test_a.py"], semantics=True)  # symbols for item edges
    res = _run(ctx_dir, "--format", "json", "add", "command", "--name", "pytest", "--",
               sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_a.py")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["name"], doc["tool"], doc["exit_code"], doc["replaced"]) == \
        ("pytest", "pytest", 1, False)
    (diag,) = doc["diagnostics"]
    assert (diag["severity"], diag["code"], diag["message"]) == \
        ("error", "FAILED", "test_a.py::test_fails: assert 4 == 5")
    assert diag["spans"][0]["path"] == "test_a.py" and diag["spans"][0]["line"] == 10
    assert diag["spans"][0]["item"] == "test_a.test_fails"  # resolved when recorded
    listed = ctx_json(ctx_dir, "diagnostics")
    assert [(r["name"], r["exit_code"], r["diagnostics"]) for r in listed["runs"]] == \
        [("pytest", 1, 1)]
    assert [(d["id"], d["path"], d["line"]) for d in listed["diagnostics"]] == \
        [("pytest#1", "test_a.py", 10)]
    text, _, _ = ctx(ctx_dir, "diagnostics")
    assert text.splitlines()[1] == "  error[FAILED] test_a.py:10 test_a.py::test_fails: assert 4 == 5"
    # References edges: to the file, and to the function the failing line is in.
    assert query(ctx_dir, "SELECT from_kind, from_key, to_kind, to_key, label FROM build_edges"
                          " WHERE path = 'cmd:pytest' ORDER BY to_kind") == [
        ("diagnostic", "pytest#1", "file", "test_a.py", "References"),
        ("diagnostic", "pytest#1", "item", "test_a.test_fails", "References")]
    # The output blob is stored as printed.
    out = open_store(ctx_dir).read_blob(ObjectId(bytes.fromhex(listed["runs"][0]["output_blob"])))
    assert b"1 failed, 1 passed" in out


def test_diagnostics_stdin_run_replaces_the_previous_run_of_that_name(work: Path) -> None:
    ctx_dir = work / ".ctx"
    first = (FIXTURES / "cargo_build_human.txt").read_bytes()
    res = _run(ctx_dir, "add", "command", "--stdin", "--name", "cargo test", "--exit-code",
               "101", stdin=first)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().splitlines() == [
        "command 'cargo test' [cargo]: exit 101, 1 error",
        "  error[E0308] src/main.rs:3:18 mismatched types"]
    res = _run(ctx_dir, "--format", "json", "add", "command", "--stdin", "--name", "cargo test",
               "--exit-code", "0", stdin=b"test result: ok. 15 passed; 0 failed\n")
    doc = json.loads(res.stdout)
    assert (doc["replaced"], doc["exit_code"], doc["diagnostics"]) == (True, 0, [])
    assert ctx_json(ctx_dir, "diagnostics", "--name", "cargo test")["diagnostics"] == []
    assert query(ctx_dir, "SELECT COUNT(*) FROM build_edges WHERE path = 'cmd:cargo test'") == [(0,)]
    assert query(ctx_dir, "SELECT COUNT(*) FROM versions WHERE kind = 'command_run'") == [(2,)]
    text, _, _ = ctx(ctx_dir, "diagnostics", "--name", "nope")
    assert text == "no command named 'nope' was stored\n"


def test_diagnostics_rebuild_gives_the_same_rows(work: Path) -> None:
    ctx_dir = work / ".ctx"
    for name, fixture in (("mypy", "mypy.txt"), ("gcc", "gcc.txt"), ("tsc", "tsc_plain.txt")):
        res = _run(ctx_dir, "add", "command", "--stdin", "--name", name,
                   stdin=(FIXTURES / fixture).read_bytes())
        assert res.returncode == 0, res.stderr
    sql = ("SELECT * FROM diagnostics ORDER BY id", "SELECT * FROM command_runs ORDER BY name",
           "SELECT * FROM build_edges WHERE path LIKE 'cmd:%' ORDER BY 1, 2, 3, 4, 5")
    before = [query(ctx_dir, s) for s in sql]
    assert len(before[0]) == 7
    ctx(ctx_dir, "commit", "-m", "runs")
    collect_garbage(open_store(ctx_dir), keep_days=0)  # snapshots and outputs stay reachable
    ctx(ctx_dir, "rebuild")
    assert [query(ctx_dir, s) for s in sql] == before
    for run in ctx_json(ctx_dir, "diagnostics")["runs"]:
        assert open_store(ctx_dir).read_blob(ObjectId(bytes.fromhex(run["output_blob"])))
    assert _verify_errors(ctx_dir) == []


def test_diagnostics_files_and_a_run_in_one_commit_rebuild_to_the_same_edges(work: Path) -> None:
    # Issue 13: `ctx rebuild` applies a commit's run before its files; the item edges were
    # looked up in `symbols` at apply time and vanished. They are resolved when recorded.
    ctx_dir = work / ".ctx"
    write(work, {"pkg/b.py": 'def helper(name: str) -> str:\n    return "hi " + name\n'})
    ctx(ctx_dir, "add", "file", "test_a.py", "pkg/b.py", "--extract-semantics")
    mypy = (b"test_a.py:10: error: Non-overlapping equality check  [comparison-overlap]\n"
            b"pkg/b.py:2: note: here\ntest_a.py:3: error: Blank  [misc]\n"
            b"gone.py:1: error: Not indexed  [misc]\n")
    res = _run(ctx_dir, "add", "command", "--stdin", "--name", "mypy", "--exit-code", "1",
               stdin=mypy)
    assert res.returncode == 0, res.stderr
    ctx(ctx_dir, "commit", "-m", "files and a failing run")
    sql = ("SELECT from_key, to_kind, to_key, label, confidence, evidence FROM build_edges"
           " WHERE path = 'cmd:mypy' ORDER BY 1, 2, 3")
    before = query(ctx_dir, sql)
    assert [r[:4] for r in before] == [
        ("mypy#1", "file", "test_a.py", "References"),
        ("mypy#1", "item", "test_a.test_fails", "References"),
        ("mypy#2", "file", "pkg/b.py", "References"),
        ("mypy#2", "item", "pkg.b.helper", "References"),
        ("mypy#3", "file", "test_a.py", "References"),  # line 3: between two functions
        ("mypy#4", "file", "gone.py", "References")]
    ctx(ctx_dir, "rebuild")
    assert query(ctx_dir, sql) == before
    out, _, code = ctx(ctx_dir, "debug", "verify", "--index", ok=False)
    assert code == 0, out
    assert [ln for ln in out.splitlines() if ln.startswith(("error ", "warning "))] == []


def test_diagnostics_output_is_bounded_when_stored(work: Path) -> None:
    ctx_dir = work / ".ctx"
    big = b"".join(b"src/m.py:%d: error: e%d  [misc]\n" % (i, i) for i in range(400_000))
    assert len(big) > 10_000_000
    files = tree_snapshot(work)
    started = time.monotonic()
    res = _run(ctx_dir, "--format", "json", "add", "command", "--stdin", "--name", "mypy",
               stdin=big)
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - started < 30
    doc = json.loads(res.stdout)
    assert len(doc["diagnostics"]) == 1000 and doc["output_bytes"] == len(big)
    assert doc["notes"] == ["kept the first 1000 diagnostics; the rest were not read",
                            "output cut to 500 lines (400000 written)"]
    run = ctx_json(ctx_dir, "diagnostics")["runs"][0]
    blob = open_store(ctx_dir).read_blob(ObjectId(bytes.fromhex(run["output_blob"])))
    assert len(blob.splitlines()) == 501 and b"[ctx: 399500 lines omitted]" in blob
    assert tree_snapshot(work) == files


def test_diagnostics_bound_output_keeps_head_and_tail() -> None:
    data = b"a" * 3000 + b"\n" + b"z" * 3000
    kept, notes = bound_output(data, max_bytes=1000, max_lines=10)
    assert kept.startswith(b"a" * 500) and kept.endswith(b"z" * 500) and len(kept) < 1100
    assert notes == ["output cut to 1000 bytes (6001 kept after the line limit)"]


def test_diagnostics_binary_output_is_stored_with_no_diagnostics(work: Path) -> None:
    ctx_dir = work / ".ctx"
    data = bytes(range(256)) * 100
    res = _run(ctx_dir, "--format", "json", "add", "command", "--stdin", "--name", "bin",
               stdin=data)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["tool"], doc["diagnostics"]) == ("custom", [])
    run = ctx_json(ctx_dir, "diagnostics")["runs"][0]
    assert open_store(ctx_dir).read_blob(ObjectId(bytes.fromhex(run["output_blob"]))) == data


def test_diagnostics_command_that_hangs_is_stopped_at_the_timeout(work: Path) -> None:
    ctx_dir = work / ".ctx"
    code = "import sys, time; print('started', flush=True); time.sleep(600)"
    started = time.monotonic()
    res = _run(ctx_dir, "--format", "json", "add", "command", "--name", "hang", "--timeout",
               "1", "--", sys.executable, "-c", code)
    assert time.monotonic() - started < 20
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["exit_code"], doc["notes"]) == (None, ["timed out after 1 s: stopped"])
    assert res.stderr.decode() == "ctx: note: timed out after 1 s: stopped\n" or \
        res.stderr == b""  # the JSON form says it in "notes"


def test_diagnostics_fifo_on_stdin_that_never_ends_is_refused(work: Path, tmp_path: Path) -> None:
    ctx_dir = work / ".ctx"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer that never closes it
    reader = os.open(fifo, os.O_RDONLY)
    try:
        os.write(writer, b"partial output\n")
        before = store_digest(ctx_dir)
        res = _run(ctx_dir, "add", "command", "--stdin", "--name", "f", "--timeout", "1",
                   stdin=reader)
    finally:
        os.close(reader)
        os.close(writer)
    assert (res.returncode, res.stdout) == (1, b"")
    assert res.stderr.decode() == (
        "ctx: error[E011]: standard input did not end within 1 s; nothing stored "
        "(hint: pipe a command that finishes, or raise --timeout)\n")
    assert store_digest(ctx_dir) == before


@pytest.mark.parametrize("args,stdin,message", [
    (["--name", "x", "--", "/nonexistent/prog"], None,
     "cannot run '/nonexistent/prog': No such file or directory"),
    (["--name", "x"], None, "give the output with --stdin, or the command after `--` (not both)"),
    (["--name", "x", "--stdin", "--", "true"], b"", "give the output with --stdin, or the command"),
    (["--name", "x", "--exit-code", "1", "--", "true"], None, "--exit-code is for --stdin"),
    (["--name", "", "--stdin"], b"x", "--name must be one line of 1 to 200 characters"),
    (["--name", "x", "--tool", "javac", "--stdin"], b"x", "--tool: unknown tool 'javac'"),
])
def test_diagnostics_bad_input_is_one_clear_line_and_changes_nothing(
        work: Path, args: list[str], stdin: bytes | None, message: str) -> None:
    ctx_dir = work / ".ctx"
    before, files = store_digest(ctx_dir), tree_snapshot(work)
    res = _run(ctx_dir, "add", "command", *args, stdin=stdin if stdin is not None else b"")
    err = res.stderr.decode()
    assert (res.returncode, res.stdout) == (1, b""), err
    assert err.startswith("ctx: error[E011]: " + message) and len(err.splitlines()) == 1, err
    assert store_digest(ctx_dir) == before and tree_snapshot(work) == files


def test_diagnostics_help_has_examples() -> None:
    from click.testing import CliRunner

    from ctxstore.cli import cli

    for args in (["add", "cargo"], ["add", "command"], ["diagnostics"]):
        res = CliRunner().invoke(cli, [*args, "--help"])
        assert res.exit_code == 0 and "Examples:" in res.output, res.output
    res = CliRunner().invoke(cli, ["add", "--help"])
    assert "ctx add command" in res.output and "ctx add cargo" in res.output


def _verify_errors(ctx_dir: Path) -> list[str]:
    return [p.line() for p in verify_store(open_store(ctx_dir)).problems
            if p.severity != "warning"]
