"""A Stop hook killed after a tag's store write, before the state records the tag as run.

The claim of the dead process is taken over by the next Stop, which runs the tag again: its
effect must not happen twice (docs/hooks.md "Exactly once"). Killed with the fault shim
(``CTX_FAULT=kill:replace:N:after``) right after the rename of ``local/STAGE``, the last
durable step of the write.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _crashlib import child_env, read_trace

from ctxstore.index import open_index
from ctxstore.repo import open_store

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
    return subprocess.run([sys.executable, "-m", "ctxstore.cli", "hook", "stop"],
                          input=json.dumps(payload), capture_output=True, text=True, cwd=work,
                          env=child_env(fault), timeout=60)


def _ctx(work: Path, *args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(work / ".ctx"),
                          *args], capture_output=True, text=True, check=True)
    return res.stdout


def _contents(work: Path) -> list[str]:
    with open_index(open_store(work / ".ctx")) as conn:
        return sorted(r[0] for r in conn.execute("SELECT content FROM nodes"))


def _stage_renames(work: Path, tmp_path: Path, transcript: Path) -> list[int]:
    """The numbers of the ``replace`` operations of a clean Stop that rename ``local/STAGE``."""
    probe = tmp_path / "probe"
    shutil.copytree(work, probe)
    trace = tmp_path / "trace.jsonl"
    res = _stop(probe, transcript, f"trace:{trace}")
    assert res.returncode == 0, res.stderr
    renames = [r for r in read_trace(trace) if r["op"] == "replace"]
    shutil.rmtree(probe)
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
