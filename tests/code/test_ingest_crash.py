"""kill -9 in the middle of `ctx index`: the store verifies, a re-run completes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _ingestlib import ctx_json, make_work, query, write

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "crash"))
from _crashlib import run_cli  # noqa: E402

from ctxstore.repo import open_store  # noqa: E402
from ctxstore.staging import recover, stage_needs_recover  # noqa: E402
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
