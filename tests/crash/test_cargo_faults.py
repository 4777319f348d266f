"""`ctx add cargo` killed or failing at a durable write: the store verifies, the snapshot is all or
nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _crashlib import ctx_child

from ctxstore.repo import open_store
from tests.code._ingestlib import ctx_json, make_work, query

FIXTURES = Path(__file__).resolve().parent.parent / "code" / "fixtures" / "build"


def _run_faulted(ctx_dir: Path, fault: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``ctx`` in a child with the fault shim (tests/_shim) and a CTX_FAULT spec."""
    return ctx_child(["--ctx-dir", str(ctx_dir), *args], cwd=ctx_dir.parent, fault=fault)


@pytest.mark.parametrize("fault", ["kill:replace:1:before", "kill:replace:1:after",
                                   "err:replace:1:EIO:once", "err:fsync_file:1:EIO:once"])
def test_cargo_crash_or_io_error_leaves_a_store_that_verifies(tmp_path: Path, fault: str) -> None:
    from ctxstore.verify import verify_store

    ctx_dir = make_work(tmp_path / "r")
    metadata = str(FIXTURES / "cargo_metadata_edge_cases.json")
    res = _run_faulted(ctx_dir, fault, "add", "cargo", "--metadata", metadata)
    assert "Traceback" not in res.stderr, res.stderr
    if res.returncode not in (0, -9):
        assert res.stderr.startswith("ctx: error[") and len(res.stderr.splitlines()) == 1
    problems = [p.line() for p in verify_store(open_store(ctx_dir)).problems
                if p.severity != "warning"]
    assert problems == []
    rows = query(ctx_dir, "SELECT COUNT(*) FROM packages")
    assert rows in ([(0,)], [(3,)])  # all or nothing
    doc = ctx_json(ctx_dir, "add", "cargo", "--metadata", metadata)
    assert doc["packages"] == 3
    assert query(ctx_dir, "SELECT COUNT(*) FROM packages") == [(3,)]
