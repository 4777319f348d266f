"""A Stop hook killed after a tag's store write, before the state records the tag as run.

The claim of the dead process is taken over by the next Stop, which runs the tag again: its
effect must not happen twice (docs/hooks.md "Exactly once"). Killed with the fault shim
(``CTX_FAULT=kill:replace:N:after``) right after the rename of ``local/STAGE``, the last
durable step of the write. ``remember`` and ``summarize`` are known by the ``hook_key`` their
node keeps; every other tag that writes (link, supersede, forget, task start and end, a recall
that restores an archived node) is killed after each rename of its Stop, and the store after
the re-runs must be the store of an uninterrupted run, history included.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from _crashlib import copy_store, ctx_child, read_trace

from ctxstore.index import open_index
from ctxstore.repo import open_store
from ctxstore.session import Session

pytestmark = pytest.mark.crash


def _transcript(path: Path, reply: str) -> None:
    lines = [{"type": "user", "uuid": "u-1", "isSidechain": False,
              "timestamp": "2026-01-02T10:00:00.000Z",
              "message": {"role": "user", "content": "Please keep a note of this."}},
             {"type": "assistant", "uuid": "a-1", "isSidechain": False,
              "timestamp": "2026-01-02T10:00:05.000Z",
              "message": {"id": "msg-1", "role": "assistant",
                          "content": [{"type": "text", "text": reply}]}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _stop(work: Path, transcript: Path, fault: str | None) -> subprocess.CompletedProcess[str]:
    payload = {"session_id": "s1", "cwd": str(work), "hook_event_name": "Stop",
               "transcript_path": str(transcript), "prompt_id": "p1"}
    return ctx_child(["hook", "stop"], stdin=json.dumps(payload), cwd=work, fault=fault)


def _ctx(work: Path, *args: str) -> str:
    res = ctx_child(["--ctx-dir", str(work / ".ctx"), *args], cwd=work)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _contents(work: Path) -> list[str]:
    with closing(open_index(open_store(work / ".ctx"))) as conn:
        return sorted(r[0] for r in conn.execute("SELECT content FROM nodes"))


def _renames(work: Path, tmp_path: Path, transcript: Path) -> list[dict[str, object]]:
    """The ``replace`` operations of a clean Stop, in order (the shim numbers them from 1)."""
    probe = tmp_path / "probe"
    copy_store(work, probe)
    trace = tmp_path / "trace.jsonl"
    res = _stop(probe, transcript, f"trace:{trace}")
    assert res.returncode == 0, res.stderr
    shutil.rmtree(probe)
    trace_ops: list[dict[str, object]] = read_trace(trace)
    return [r for r in trace_ops if r["op"] == "replace"]


def _stage_renames(work: Path, tmp_path: Path, transcript: Path) -> list[int]:
    """The numbers of the ``replace`` operations of a clean Stop that rename ``local/STAGE``."""
    renames = _renames(work, tmp_path, transcript)
    return [i for i, r in enumerate(renames, 1) if r.get("dst") == "local/STAGE"]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    _ctx(work, "init")
    _ctx(work, "add", "--type", "fact", "source one")
    _ctx(work, "add", "--type", "fact", "source two")
    return work


def _source_ids(work: Path) -> list[str]:
    found = json.loads(_ctx(work, "--format", "json", "list"))["nodes"]
    return [n["id"] for n in found if n["content"].startswith("source ")]


@pytest.mark.parametrize("tag", ["summarize", "remember"])
def test_hook_tag_killed_after_its_write_does_not_write_twice(work: Path, tmp_path: Path,
                                                              tag: str) -> None:
    if tag == "summarize":
        a, b = _source_ids(work)
        reply = (f'Done. <ctx:summarize nodes="{a},{b}" archive="true" tags="tier:reference">'
                 "both sources in one</ctx:summarize>")
        wanted = "both sources in one"
    else:
        reply = 'Noted. <ctx:remember type="fact">remembered across a kill</ctx:remember>'
        wanted = "remembered across a kill"
    transcript = tmp_path / "session.jsonl"
    _transcript(transcript, reply)
    [n] = _stage_renames(work, tmp_path, transcript)  # the tag's one write
    killed = _stop(work, transcript, f"kill:replace:{n}:after")
    assert killed.returncode == -9
    assert _contents(work).count(wanted) == 1  # written, not recorded as run
    again = _stop(work, transcript, None)  # the dead process's claim is taken over
    assert again.returncode == 0 and json.loads(again.stdout) == {}, again.stdout
    assert _contents(work).count(wanted) == 1
    assert _stop(work, transcript, None).returncode == 0
    assert _contents(work).count(wanted) == 1


# -- every other tag that writes: a re-run after the kill writes nothing more ----------------------

_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|^## \d\d:\d\d UTC", re.MULTILINE)


def _knowledge(work: Path) -> dict[str, object]:
    """What a user sees of the store: nodes, tags, edges, the staged work, the current task."""
    from ctxstore.knowledge.tasks import read_current_task

    with closing(open_index(open_store(work / ".ctx"))) as conn:
        seen: dict[str, object] = {
            "nodes": sorted(conn.execute("SELECT id, status, superseded_by FROM nodes")),
            "tags": sorted(conn.execute("SELECT node_id, tag FROM tags")),
            "edges": sorted(conn.execute("SELECT from_key, label, to_key FROM edges")),
            # A second write of the same edge or tags is one more version in the history
            # (`ctx show --history`), though the index keeps one row per edge and node; and
            # one more staged record until a task boundary folds the staged work.
            "versions": sorted(conn.execute("SELECT kind, count(*) FROM versions GROUP BY kind"))}
    seen["staged"] = json.loads(_ctx(work, "--format", "json", "status"))["staged"]
    seen["task"] = read_current_task(work / ".ctx")
    # The narrative Markdown a task-end compaction logs to, its times aside (a re-run is later).
    seen["narrative"] = {p.relative_to(work).as_posix(): _ISO_TIME.sub("<time>", p.read_text())
                         for p in sorted((work / ".ctx" / "narrative").rglob("*")) if p.is_file()}
    return seen


def _add(work: Path, *args: str) -> str:
    return _ctx(work, "add", *args).strip()


def _setup(work: Path, tag: str) -> str:
    """Prepare ``work`` for ``tag``; returns the reply that holds it."""
    a, b = _source_ids(work)
    if tag == "link":
        return f'Linked. <ctx:link from="{a}" to="{b}" type="DEPENDS_ON"/>'
    if tag == "supersede":
        return f'Replaced. <ctx:supersede old="{a}" new="{b}"/>'
    if tag == "forget":
        return f'Dropped. <ctx:forget id="{a}"/>'
    if tag == "task-start":
        _add(work, "--type", "observation", "--tag", "tier:working", "loose working note")
        return 'Starting. <ctx:task name="auth" action="start"/>'
    if tag == "task-end":
        for kind in ("decision", "observation"):
            _add(work, "--type", kind, "--tag", "tier:working", "--tag", "task:auth", f"auth {kind}")
        return 'Done. <ctx:task name="auth" action="end"/>'
    assert tag == "recall"  # a lifecycle-archived node a recall restores (spec 003)
    from ctxstore.lifecycle.policy import run_lifecycle
    from ctxstore.model import scoring
    from ctxstore.repo import now_ms

    kept = _add(work, "--type", "observation", "--tag", "tier:working", "the cache warms fast")
    store = open_store(work / ".ctx")
    with Session(store) as db:  # closed before the store is copied
        run_lifecycle(db, now_ms=now_ms() + 300 * scoring.DAY_MS)
    with closing(open_index(store)) as conn:
        assert conn.execute("SELECT status FROM nodes WHERE id = ?", (kept,)).fetchone() == \
            ("archived",)
    return 'Let me look. <ctx:recall query="cache warms"/>'


@pytest.mark.parametrize("tag", ["link", "supersede", "forget", "task-start", "task-end", "recall"])
def test_hook_tag_killed_after_any_write_changes_nothing_more_when_run_again(
        work: Path, tmp_path: Path, tag: str) -> None:
    reply = _setup(work, tag)
    transcript = tmp_path / "session.jsonl"
    _transcript(transcript, reply)
    before = _knowledge(work)
    clean = tmp_path / "clean"
    copy_store(work, clean)
    done = _stop(clean, transcript, None)
    assert done.returncode == 0 and json.loads(done.stdout) == {}, done.stdout
    wanted = _knowledge(clean)  # what the tag does when nothing kills it
    assert wanted != before
    renames = _renames(work, tmp_path, transcript)
    assert any(r.get("dst") == "local/STAGE" for r in renames), "the tag writes nothing"
    # Killed after each rename of the Stop in turn: the objects, STAGE (a task end writes
    # twice: its own batch, then the compaction it triggers, with its log entry and commit).
    for n in range(1, len(renames) + 1):
        killed_dir = tmp_path / f"killed-{n}"
        copy_store(work, killed_dir)
        killed = _stop(killed_dir, transcript, f"kill:replace:{n}:after")
        assert killed.returncode == -9, killed.stderr
        again = _stop(killed_dir, transcript, None)  # the dead process's claim is taken over
        assert again.returncode == 0 and json.loads(again.stdout) == {}, again.stdout
        assert _knowledge(killed_dir) == wanted, f"killed after rename {n}: {renames[n - 1]}"
        assert _stop(killed_dir, transcript, None).returncode == 0
        assert _knowledge(killed_dir) == wanted
        if tag == "recall":  # the result, lost with the killed hook, comes from the re-run
            assert "the cache warms fast" in _prompt(killed_dir)


def _prompt(work: Path) -> str:
    """What the next prompt of the session is given (pending results)."""
    payload = {"session_id": "s1", "cwd": str(work), "hook_event_name": "UserPromptSubmit",
               "prompt": "go on"}
    res = ctx_child(["hook", "prompt-submit"], stdin=json.dumps(payload), cwd=work)
    assert res.returncode == 0, res.stderr
    out: dict[str, dict[str, str]] = json.loads(res.stdout)
    return out.get("hookSpecificOutput", {}).get("additionalContext", "")
