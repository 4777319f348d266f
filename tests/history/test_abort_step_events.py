"""`ctx stage abort` removes the "file read" and "command run" log events of the session.

Issue 17 item 8: `ctx add file` and `ctx add command` append an event entry to today's log
whose key names the staging session (``file-read-<session>-<unique>``). Aborting the
session removes those entries with its notes, lists them, and nothing of the aborted work
(nodes, file and command records, their log lines) comes back at the next commit or shows
in `ctx status`, `ctx diagnostics` or `ctx search`. Real store, real subprocesses of the
installed package; the kill and fault tests are tests/crash/test_abort_step_events_faults.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.narrative.markdown import is_step_event_of, step_event_key
from ctxstore.repo import open_store
from ctxstore.staging import session_status

PYTEST_OUTPUT = """\
============================= test session starts ==============================
collected 1 item

tests/test_calc.py F                                                     [100%]

=================================== FAILURES ===================================
_________________________________ test_zebra __________________________________

    def test_zebra():
>       assert quokka_total() == 2
E       assert 1 == 2

tests/test_calc.py:4: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_zebra - assert 1 == 2
============================== 1 failed in 0.01s ===============================
"""
_EVENT = re.compile(r"<!-- ctx:event=((?:file-read|command-run)-[0-9a-f-]{36}-[0-9A-Z]{12}) -->")


def ok(args: list[str], cwd: Path, stdin: str | None = None) -> str:
    res = run_ctx(args, cwd=cwd, stdin=stdin)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _snapshots(work: Path) -> int:
    """Live ``file`` records (``ctx add file`` snapshots) in the store's state."""
    from contextlib import closing

    from ctxstore.index import open_index
    from ctxstore.repo import open_store

    with closing(open_index(open_store(work / ".ctx"))) as conn:
        return int(conn.execute("SELECT count(*) FROM versions WHERE kind = 'file' AND key IN"
                                " (SELECT key FROM winners WHERE live = 1)").fetchone()[0])


def _logs(work: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((work / ".ctx" / "narrative" / "log").glob("*.md")))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A store with one committed note and a source file, nothing staged."""
    return make_work(tmp_path)


def make_work(tmp_path: Path) -> Path:
    """The ``work`` fixture's store (tests/crash/test_abort_step_events_faults.py uses it too)."""
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "calc.py").write_text("def quokka_total():\n    return 1\n")
    (work / "tests" / "test_calc.py").write_text("from calc import quokka_total\n\n\n"
                                                 "def test_zebra():\n    assert quokka_total() == 2\n")
    ok(["init", "--no-git"], cwd=work)
    ok(["add", "note", "kept note from before"], cwd=work)
    ok(["commit", "-m", "base"], cwd=work)
    return work


def _session(work: Path) -> None:
    """`ctx add file`, `ctx add command` (a failing pytest run) and a note: one session."""
    ok(["add", "file", "calc.py"], cwd=work)
    ok(["add", "command", "--name", "t", "--exit-code", "1", "--stdin"], cwd=work,
       stdin=PYTEST_OUTPUT)
    ok(["add", "note", "aborted note"], cwd=work)


def test_step_event_keys_name_the_session() -> None:
    sid = "6f1c2d3e-0000-4000-8000-00000000abcd"
    key = step_event_key("command-run", sid, "9XK2ABCDEFGH")
    assert key == f"command-run-{sid}-9XK2ABCDEFGH" and len(key) <= 64
    assert is_step_event_of(key, sid)
    assert not is_step_event_of(key, sid.replace("abcd", "abce"))
    assert not is_step_event_of("command-run-01JD3X5R0000000000000000AB", sid)  # older ctx
    assert not is_step_event_of(f"task-created-{sid}", sid)
    assert step_event_key("command-run", "x" * 60, "A") is None  # would not fit a marker


@pytest.mark.slow
def test_abort_removes_the_sessions_file_and_command_events(work: Path) -> None:
    _session(work)
    before = _logs(work)
    sid = session_status(open_store(work / ".ctx")).session_id
    events = _EVENT.findall(before)
    assert [k.split("-" + sid)[0] for k in events] == ["file-read", "command-run"]
    assert "Read calc.py" in before and "Ran t: exit 1, 1 diagnostics" in before
    assert "FAILED" in ok(["diagnostics"], cwd=work)
    assert "calc.py" in ok(["search", "quokka_total"], cwd=work)
    assert _snapshots(work) == 1  # the session's `ctx add file`

    out = ok(["stage", "abort", "--yes"], cwd=work)
    lines = out.splitlines()
    assert re.search(r"dropped 3 work commits, \d+ records, 1 new node, 3 narrative entries;",
                     lines[0]), lines[0]
    for key in events:  # abort says what it dropped
        assert any(line.startswith(f"  removed entry {key} from narrative/log/") for line in lines)
    after = _logs(work)
    for gone in ("file read", "command run", "Read calc.py", "Ran t:", "aborted note", sid):
        assert gone not in after
    assert "kept note from before" in after

    # the next commit brings nothing back; no aborted record shows anywhere
    ok(["commit", "-m", "after abort"], cwd=work)
    status = json.loads(ok(["--format", "json", "status"], cwd=work))
    assert status["nodes"] == 1 and status["staged"] == {"records": 0, "work_commits": 0}
    assert "no command output stored" in ok(["diagnostics"], cwd=work)
    assert _snapshots(work) == 0  # no file snapshot recorded (the code index is the tree's)
    found = json.loads(ok(["--format", "json", "query", "type:observation"], cwd=work))
    assert "aborted" not in json.dumps(found) and "kept note" in json.dumps(found)
    assert _logs(work) == after


@pytest.mark.slow
def test_abort_json_lists_the_events(work: Path) -> None:
    _session(work)
    keys = set(_EVENT.findall(_logs(work)))
    data = json.loads(ok(["--format", "json", "stage", "abort", "-y"], cwd=work))
    removed = {e["key"]: e for e in data["narrative_removed"]}
    assert keys <= set(removed) and len(removed) == 3
    assert all(removed[k]["kind"] == "entry" and removed[k]["path"].startswith("log/")
               for k in keys)


@pytest.mark.slow
def test_abort_keeps_events_of_earlier_sessions_and_deletes_a_log_it_emptied(
        tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.py").write_text("x = 1\n")
    ok(["init", "--no-git"], cwd=work)
    ok(["add", "file", "a.py"], cwd=work)  # the first session: the log is created
    ok(["stage", "abort", "--yes"], cwd=work)
    assert not list((work / ".ctx" / "narrative" / "log").glob("*.md"))  # header only: gone

    ok(["add", "file", "a.py"], cwd=work)
    ok(["commit", "-m", "kept read"], cwd=work)
    kept = _EVENT.findall(_logs(work))
    assert len(kept) == 1
    (work / "a.py").write_text("x = 2\n")
    ok(["add", "file", "a.py"], cwd=work)
    assert len(_EVENT.findall(_logs(work))) == 2
    ok(["stage", "abort", "--yes"], cwd=work)
    assert _EVENT.findall(_logs(work)) == kept


def test_abort_confirmation_lists_the_events(work: Path) -> None:
    _session(work)
    res = run_ctx(["stage", "abort"], cwd=work, stdin="y\n")
    assert res.returncode == 1 and "3 narrative entries" in res.stderr
    assert len(_EVENT.findall(_logs(work))) == 2  # refused: nothing changed


def test_abort_leaves_linked_and_unreadable_logs_alone(work: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("## 10:00 UTC · file read <!-- ctx:event=file-read-x -->\nnot ours\n")
    logs = work / ".ctx" / "narrative" / "log"
    (logs / "2020-01-01.md").symlink_to(outside)
    (logs / "2020-01-02.md").write_bytes(b"## \xff\xfe not UTF-8\n")
    _session(work)
    out = ok(["stage", "abort", "--yes"], cwd=work)
    assert "3 narrative entries" in out and "2020-01-0" not in out
    assert outside.read_text().endswith("not ours\n")
    assert (logs / "2020-01-01.md").is_symlink()
    assert (logs / "2020-01-02.md").read_bytes() == b"## \xff\xfe not UTF-8\n"
    assert "Read calc.py" not in (logs / sorted(p.name for p in logs.glob("2*.md"))[-1]).read_text()


# -- crashes and faults ----------------------------------------------------------------------------
