"""`ctx stage abort` and the steps that log events, killed or failing at a log write.

A command killed right after its log line leaves no step and `ctx stage abort` removes the line;
an I/O error on the log write fails the step and changes nothing; an abort killed between the
rewrites of the entries it removes leaves whole entries and a store that commits. The CLI runs
in a child with the fault shim (``tests/_shim``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.crash._crashlib import ctx_child, read_trace
from tests.history.test_abort_step_events import (
    _EVENT,
    PYTEST_OUTPUT,
    _logs,
    _session,
    _snapshots,
    make_work,
    ok,
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A store with one committed note and a source file, nothing staged."""
    return make_work(tmp_path)


def _faulted(work: Path, args: list[str], fault: str,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``ctx ARGS`` in ``work`` with the fault shim and ``CTX_FAULT=fault``."""
    return ctx_child(["--ctx-dir", str(work / ".ctx"), *args], cwd=work, stdin=stdin, fault=fault)


def _log_replaces(work: Path, tmp_path: Path, args: list[str], stdin: str | None = None
                  ) -> list[int]:
    """Run ``args`` on a copy of ``work``: the 1-based indexes, among its ``replace``
    operations, of the renames onto a daily log."""
    probe = tmp_path / "probe"
    shutil.copytree(work, probe)
    trace = tmp_path / "trace.jsonl"
    res = _faulted(probe, args, f"trace:{trace}", stdin)
    assert res.returncode == 0, res.stderr
    renames = [r for r in read_trace(trace) if r["op"] == "replace"]
    shutil.rmtree(probe)
    trace.unlink()
    return [i for i, r in enumerate(renames, 1)
            if str(r.get("dst", "")).startswith("narrative/log/")]


@pytest.mark.crash
def test_command_killed_after_its_log_line_leaves_no_step_and_abort_removes_the_line(
        work: Path, tmp_path: Path) -> None:
    ok(["add", "note", "aborted note"], cwd=work)  # the session exists
    staged = json.loads(ok(["--format", "json", "stage", "status"], cwd=work))
    args = ["add", "command", "--name", "t", "--exit-code", "1", "--stdin"]
    [n] = _log_replaces(work, tmp_path, args, PYTEST_OUTPUT)

    # killed right after the log's rename: the event is there, STAGE never named the step
    res = _faulted(work, args, f"kill:replace:{n}:after", PYTEST_OUTPUT)
    assert res.returncode == -9
    assert len(_EVENT.findall(_logs(work))) == 1
    assert json.loads(ok(["--format", "json", "stage", "status"], cwd=work)) == staged
    assert "no command output stored" in ok(["diagnostics"], cwd=work)

    ok(["stage", "abort", "--yes"], cwd=work)  # the orphan line names the session: it goes
    assert _EVENT.findall(_logs(work)) == []
    assert "aborted note" not in _logs(work)
    ok(["commit", "-m", "after"], cwd=work)
    assert json.loads(ok(["--format", "json", "status"], cwd=work))["nodes"] == 1


@pytest.mark.crash
def test_log_write_failure_fails_the_step_and_changes_nothing(work: Path, tmp_path: Path) -> None:
    ok(["add", "note", "aborted note"], cwd=work)
    before = _logs(work)
    staged = json.loads(ok(["--format", "json", "stage", "status"], cwd=work))
    [n] = _log_replaces(work, tmp_path, ["add", "file", "calc.py"])
    res = _faulted(work, ["add", "file", "calc.py"], f"err:replace:{n}:EIO:once")
    assert res.returncode == 1
    assert res.stderr.startswith("ctx: error[") and "Traceback" not in res.stderr
    assert _logs(work) == before
    assert json.loads(ok(["--format", "json", "stage", "status"], cwd=work)) == staged
    assert _snapshots(work) == 0  # no file snapshot recorded (the code index is the tree's)


@pytest.mark.crash
@pytest.mark.slow
def test_abort_killed_while_removing_entries_keeps_the_store_sound(work: Path,
                                                                   tmp_path: Path) -> None:
    _session(work)
    writes = _log_replaces(work, tmp_path, ["stage", "abort", "--yes"])
    assert len(writes) == 3  # one atomic rewrite per entry removed: note, file read, command run
    for done, n in enumerate(writes, 1):
        copy = tmp_path / f"kill{n}"
        shutil.copytree(work, copy)
        res = _faulted(copy, ["stage", "abort", "--yes"], f"kill:replace:{n}:after")
        assert res.returncode == -9
        text = _logs(copy)
        assert text.count("<!-- ctx:end=") * 2 == text.count("<!-- ctx:")  # whole entries
        assert len(_EVENT.findall(text)) + ("aborted note" in text) == 3 - done
        ok(["commit", "-m", "after"], cwd=copy)  # events left are no nodes; no record comes back
        assert "no command output stored" in ok(["diagnostics"], cwd=copy)
        assert _snapshots(copy) == 0  # no file snapshot recorded (the code index is the tree's)
