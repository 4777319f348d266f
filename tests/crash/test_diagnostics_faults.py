"""`ctx add command` killed or failing at a durable write leaves a store that verifies, all or nothing.

The CLI runs in a child with the fault shim (``tests/_shim``); after each fault the store verifies,
the run is stored whole or not at all, and the next run is stored.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.code._ingestlib import ctx_json
from tests.code.test_diagnostics_commands import _run, _verify_errors, make_failing_work
from tests.crash._crashlib import copy_store


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    return make_failing_work(tmp_path)


def _ops(ctx_dir: Path, tmp_path: Path) -> int:
    count = tmp_path / "count"
    res = _run(ctx_dir, "add", "command", "--stdin", "--name", "probe",
               stdin=b"a.py:1: error: x  [misc]\n", fault=f"count:{count}")
    assert res.returncode == 0, res.stderr
    return int(count.read_text())


def _crash_cases(work: Path, tmp_path: Path, faults: list[str]) -> None:
    template = tmp_path / "template"
    copy_store(work, template)
    for fault in faults:
        case = tmp_path / "case"
        copy_store(template, case)
        cdir = case / ".ctx"
        res = _run(cdir, "add", "command", "--stdin", "--name", "probe",
                   stdin=b"a.py:1: error: x  [misc]\n", fault=fault)
        if fault.startswith("err") and res.returncode != 0:
            err = res.stderr.decode()
            assert err.startswith("ctx: error[") and "Traceback" not in err, err
        assert _verify_errors(cdir) == [], (fault, res.stderr)
        runs = ctx_json(cdir, "diagnostics")["runs"]
        assert [r["name"] for r in runs] in ([], ["probe"])  # all or nothing
        again = _run(cdir, "add", "command", "--stdin", "--name", "probe",
                     stdin=b"a.py:2: error: y  [misc]\n")
        assert again.returncode == 0, (fault, again.stderr)
        assert [d["line"] for d in ctx_json(cdir, "diagnostics")["diagnostics"]] == [2]
        shutil.rmtree(case)


@pytest.mark.slow
def test_diagnostics_crash_before_the_pointer_moves_and_an_io_error_leave_a_good_store(
        work: Path, tmp_path: Path) -> None:
    total = _ops(work / ".ctx", tmp_path)
    _crash_cases(work, tmp_path, ["kill:replace:1:before", "kill:replace:1:after",
                                  f"err:*:{total // 2}:EIO:once"])


@pytest.mark.slow
@pytest.mark.crash
def test_diagnostics_crash_at_every_write_leaves_a_verifiable_store(work: Path,
                                                                    tmp_path: Path) -> None:
    total = _ops(work / ".ctx", tmp_path)
    assert total > 3
    _crash_cases(work, tmp_path, [f for n in range(1, total + 1)
                                  for f in (f"kill:*:{n}:before", f"err:*:{n}:EIO:once")])
