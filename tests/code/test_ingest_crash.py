"""kill -9 in the middle of `ctx index`: the store verifies, a re-run completes."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest
from _ingestlib import ctx_json, make_work, query, write

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "crash"))
from _crashlib import run_cli  # noqa: E402
from conftest import session_of

from ctxstore.code.ingest import index_tree  # noqa: E402
from ctxstore.objects import KIND_BLOB, LayeredObjectStore, ObjectId  # noqa: E402
from ctxstore.recover import recover, stage_needs_recover  # noqa: E402
from ctxstore.repo import open_store  # noqa: E402
from ctxstore.verify import verify_store  # noqa: E402

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


# Over the pool's 256 KiB: `ctx index --jobs 2` extracts in forked workers, which write the
# blobs and versions before the parent takes its lock and adopts them.
POOL_FILES = {f"pool/m{i}.py": "".join(f"def f{i}_{j}(x):\n    return x + {j}  # {'pad ' * 40}\n"
                                       for j in range(300)) for i in range(16)}


@pytest.mark.crash
@pytest.mark.parametrize("fault", ["kill:open_excl:3:before", "kill:replace:9:after",
                                   "kill:sync_barrier:1:before", "kill:sync_barrier:1:after"])
def test_kill_during_a_pool_index_then_rerun(tmp_path: Path, fault: str) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, POOL_FILES)
    before = (ctx_dir / "local" / "STAGE").read_bytes() \
        if (ctx_dir / "local" / "STAGE").exists() else None
    res = run_cli(ctx_dir, ["index", "--jobs", "2"], fault=fault)
    assert res.returncode != 0
    if "sync_barrier" not in fault:  # a worker was killed: the parent says so in one line
        assert "an extraction process died" in res.stderr
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
        now = (ctx_dir / "local" / "STAGE").read_bytes() \
            if (ctx_dir / "local" / "STAGE").exists() else None
        assert now == before  # nothing staged
    store = open_store(ctx_dir)
    if stage_needs_recover(store):
        recover(store)
    assert verify_store(open_store(ctx_dir)).ok
    doc = ctx_json(ctx_dir, "index", "--jobs", "2")
    assert doc["notes"] == []
    assert [r[0] for r in query(ctx_dir, "SELECT path FROM files ORDER BY 1")] == sorted(POOL_FILES)
    assert query(ctx_dir, "SELECT count(*) FROM symbols")[0][0] == 301 * len(POOL_FILES)
    assert verify_store(open_store(ctx_dir)).ok


def test_a_worker_that_cannot_write_leaves_it_to_the_parent(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, POOL_FILES)
    parent = os.getpid()
    real_write = LayeredObjectStore.write
    failed: list[int] = []

    def write_in_parent_only(self: LayeredObjectStore, kind: int,
                             payload: bytes) -> tuple[ObjectId, bool]:
        if os.getpid() != parent:  # the forked workers inherit this patch
            (tmp_path / f"worker-{os.getpid()}").touch()
            raise OSError(errno.EIO, "Input/output error")
        failed.append(kind)
        return real_write(self, kind, payload)

    monkeypatch.setattr(LayeredObjectStore, "write", write_in_parent_only)
    report = index_tree(session_of(open_store(ctx_dir)), jobs=2)
    assert sorted(report.written) == sorted(POOL_FILES)
    assert list(tmp_path.glob("worker-*"))  # the workers tried, and failed
    assert len(failed) >= 2 * len(POOL_FILES)  # the parent wrote every blob and version
    monkeypatch.undo()
    assert verify_store(open_store(ctx_dir)).ok
    assert query(ctx_dir, "SELECT count(*) FROM files")[0][0] == len(POOL_FILES)


@pytest.mark.crash
def test_a_disk_that_refuses_every_write_fails_the_pool_index_cleanly(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, POOL_FILES)
    res = run_cli(ctx_dir, ["index", "--jobs", "2"], fault="err:open_excl:1:ENOSPC:sticky")
    assert res.returncode != 0
    assert "E017" in res.stderr and "Traceback" not in res.stderr
    assert verify_store(open_store(ctx_dir)).ok
    assert ctx_json(ctx_dir, "index")["written"] == sorted(POOL_FILES)


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
