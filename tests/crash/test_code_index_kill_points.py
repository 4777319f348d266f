"""kill -9 in the middle of `ctx index` or `ctx add file`: the store and the code index verify,
a re-run completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _crashlib import run_cli
from conftest import session_of

from ctxstore.code.ingest import index_tree
from ctxstore.objects import KIND_BLOB
from ctxstore.recover import recover, stage_needs_recover
from ctxstore.repo import open_store
from ctxstore.verify import verify_store
from tests.code._ingestlib import ctx, ctx_json, make_work, query, write

FILES = {f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(12)}


@pytest.mark.crash
@pytest.mark.parametrize("fault", ["kill:open_excl:1:before", "kill:write_all:7:after",
                                   "kill:sync_barrier:1:after", "kill:fsync_file:2:before",
                                   "kill:replace:1:before", "kill:replace:1:after"])
def test_kill_mid_index_then_rerun(tmp_path: Path, fault: str) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, FILES)
    res = run_cli(ctx_dir, ["index"], fault=fault)
    assert res.returncode != 0 or "indexed" in res.stdout  # killed, or the fault never hit
    store = open_store(ctx_dir)
    if stage_needs_recover(store):
        recover(store)
    assert verify_store(open_store(ctx_dir)).ok
    doc = ctx_json(ctx_dir, "index")
    assert doc["notes"] == []
    rows = query(ctx_dir, "SELECT path FROM files ORDER BY 1")
    assert [r[0] for r in rows] == sorted(FILES)
    assert query(ctx_dir, "SELECT count(*) FROM symbols")[0][0] == 2 * len(FILES)
    assert ctx_json(ctx_dir, "index")["written"] == []
    assert verify_store(open_store(ctx_dir)).ok


# Over the pool's 256 KiB: `ctx index --jobs 2` extracts in forked workers, and the parent
# writes the code index (index/code.sqlite) in slices as their records arrive.
POOL_FILES = {f"pool/m{i}.py": "".join(f"def f{i}_{j}(x):\n    return x + {j}  # {'pad ' * 40}\n"
                                       for j in range(300)) for i in range(16)}


def _children(pid: int) -> list[int]:
    """The extraction workers of ``pid``: its forks (not the git it runs to list files)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    out = []
    for child in text.split():
        try:
            if b"ctxstore.cli" in Path(f"/proc/{child}/cmdline").read_bytes():
                out.append(int(child))
        except OSError:
            continue
    return out


def _code_index_consistent(ctx_dir: Path) -> None:
    """No error in `ctx debug verify --index` (term_df, rows of each file as derived)."""
    res = run_cli(ctx_dir, ["--format", "json", "debug", "verify", "--index"])
    doc = json.loads(res.stdout)
    assert [p for p in doc["problems"] if p["severity"] == "error"] == [], doc["problems"]


@pytest.mark.crash
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("victim", ["worker", "parent"])
def test_kill_during_a_pool_index_then_rerun(tmp_path: Path, victim: str) -> None:
    # SIGKILL a worker (the parent names it in one line) or the whole run once the workers
    # are at work: the code index is every file as it was or as the run indexed it (SQLite
    # transactions), nothing is staged, and the next run completes it.
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, POOL_FILES)
    before = (ctx_dir / "local" / "STAGE").read_bytes() \
        if (ctx_dir / "local" / "STAGE").exists() else None
    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir),
                             "index", "--jobs", "2"], cwd=ctx_dir.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    killed = False
    while proc.poll() is None and time.monotonic() < deadline and not killed:
        workers = _children(proc.pid)
        if len(workers) == 2:  # both forked (one child alone may be git between fork and exec)
            os.kill(workers[0] if victim == "worker" else proc.pid, signal.SIGKILL)
            killed = True
        time.sleep(0.001)
    _, err = proc.communicate(timeout=60)
    assert killed, "the run ended before it could be killed"
    assert proc.returncode != 0
    if victim == "worker":
        assert "an extraction process died" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err
    now = (ctx_dir / "local" / "STAGE").read_bytes() \
        if (ctx_dir / "local" / "STAGE").exists() else None
    assert now == before  # nothing staged
    assert verify_store(open_store(ctx_dir)).ok
    _code_index_consistent(ctx_dir)
    doc = ctx_json(ctx_dir, "index", "--jobs", "2")
    assert doc["notes"] == []
    assert [r[0] for r in query(ctx_dir, "SELECT path FROM files ORDER BY 1")] == sorted(POOL_FILES)
    assert query(ctx_dir, "SELECT count(*) FROM symbols")[0][0] == 301 * len(POOL_FILES)
    _code_index_consistent(ctx_dir)


@pytest.mark.crash
def test_kill_between_slices_keeps_what_was_committed(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A slice is committed every SLICE_SECONDS: with slices of one file, a run that fails
    # half-way keeps the files of its committed slices, and the next run reads only the rest.
    from ctxstore.code.ingest import store as store_stage

    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, FILES)
    monkeypatch.setattr(store_stage, "SLICE_SECONDS", 0.0)
    real_put = store_stage.CodeWriter.put
    calls: list[str] = []

    def put_then_fail(self: store_stage.CodeWriter, prepared: object) -> None:
        if len(calls) == 5:
            raise OSError(5, "Input/output error")
        calls.append(prepared.path)  # type: ignore[attr-defined]
        real_put(self, prepared)  # type: ignore[arg-type]

    monkeypatch.setattr(store_stage.CodeWriter, "put", put_then_fail)
    with pytest.raises(OSError):
        index_tree(session_of(open_store(ctx_dir)), jobs=1)
    monkeypatch.undo()
    kept = [r[0] for r in query(ctx_dir, "SELECT path FROM files ORDER BY 1")]
    assert kept == sorted(calls)  # every committed slice, nothing of the failed one
    _code_index_consistent(ctx_dir)
    doc = ctx_json(ctx_dir, "index")
    assert sorted(doc["written"]) == sorted(set(FILES) - set(calls))
    assert [r[0] for r in query(ctx_dir, "SELECT path FROM files ORDER BY 1")] == sorted(FILES)
    _code_index_consistent(ctx_dir)


def test_adopt_writes_again_what_vanished_before_the_lock(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    store = open_store(ctx_dir)
    store.ensure_staging_area()
    kept, _ = store.objects.write(KIND_BLOB, b"written by a worker")
    lost, _ = store.objects.write(KIND_BLOB, b"removed by an aggressive gc before the lock")
    for path in store.objects.paths_for(lost):
        path.unlink()
    with store.transaction() as tx:
        assert tx.adopt(kept, KIND_BLOB, b"written by a worker") == kept
        assert tx.adopt(lost, KIND_BLOB, b"removed by an aggressive gc before the lock") == lost
    assert store.read_blob(lost) == b"removed by an aggressive gc before the lock"
    assert store.read_blob(kept) == b"written by a worker"


@pytest.mark.crash
@pytest.mark.parametrize("fault", ["kill:replace:1:after", "kill:sync_barrier:1:after"])
def test_kill_during_add_file_leaves_a_store_that_verifies(tmp_path: Path, fault: str) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"pkg/a.py": "def f():\n    return 1\n"})
    res = run_cli(ctx_dir, ["add", "file", "pkg/a.py", "--extract-semantics"], fault=fault)
    assert res.returncode != 0 or "indexed" in res.stdout
    store = open_store(ctx_dir)
    if stage_needs_recover(store):
        recover(store)
    assert verify_store(open_store(ctx_dir)).ok
    ctx(ctx_dir, "add", "file", "pkg/a.py", "--extract-semantics")
    ctx(ctx_dir, "commit", "-m", "after the crash")
    assert query(ctx_dir, "SELECT path FROM files") == [("pkg/a.py",)]
    assert verify_store(open_store(ctx_dir)).ok
