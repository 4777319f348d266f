"""A recall that restores an archived node, killed before and after each durable operation:
all or nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _crashlib import ctx_child, run_cli

from ctxstore.repo import open_store
from tests.lifecycle.test_recall_restore import _archived, _node, _project


@pytest.mark.slow
def test_recall_restore_killed_at_every_durable_operation_is_all_or_nothing(
        tmp_path: Path) -> None:
    import shutil
    import signal

    def _ctx(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        res = ctx_child(argv, cwd=cwd)
        assert "Traceback (most recent call last)" not in res.stderr, res.stderr
        return res

    work = _project(tmp_path, "tpl")
    _, kept, _ = _archived(work)
    args = ["recall", "--no-global", "cache warms"]
    clean = tmp_path / "clean"
    shutil.copytree(work, clean)
    count = tmp_path / "count"
    assert run_cli(clean / ".ctx", args, fault=f"count:{count}").returncode == 0
    ops = int(count.read_text())
    assert ops > 0 and _node(open_store(clean / ".ctx"), kept).status == "active"
    for k in range(1, ops + 1):
        for when in ("before", "after"):
            point = tmp_path / f"p{k}{when[0]}"
            shutil.copytree(work, point)
            res = run_cli(point / ".ctx", args, fault=f"kill:*:{k}:{when}")
            assert res.returncode in (0, -signal.SIGKILL), res.stderr
            assert "Traceback" not in res.stderr
            assert _ctx(["stage", "recover"], point).returncode == 0
            verify = json.loads(_ctx(["--format", "json", "debug", "verify"], point).stdout)
            assert verify["ok"], (k, when, verify["problems"][:3])
            # Either the restore happened whole or not at all; recalling again completes it.
            assert _node(open_store(point / ".ctx"), kept).status in ("archived", "active")
            assert _ctx(args, point).returncode == 0
            assert _node(open_store(point / ".ctx"), kept).status == "active"
            shutil.rmtree(point)
