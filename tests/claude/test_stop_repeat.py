"""A repeated Stop of a turn that already ran returns before parsing (no CommonMark import),
and a turn that went on still runs its new commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _stop(work: Path, response: str, *, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    payload = json.dumps({"session_id": "s1", "cwd": str(work), "hook_event_name": "Stop",
                          "prompt_id": "p1"})
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "ctxstore.cli", "hook", "stop",
                           "--response", response], input=payload, capture_output=True,
                          text=True, cwd=work)


def _contents(work: Path) -> list[str]:
    res = subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(work / ".ctx"),
                          "--format", "json", "list"], capture_output=True, text=True, check=True)
    return sorted(n["content"] for n in json.loads(res.stdout)["nodes"])


def test_stop_repeated_turn_skips_the_parser_and_a_longer_turn_runs_its_new_tag(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(work / ".ctx"), "init"],
                   check=True, capture_output=True)
    first = 'Done. <ctx:remember type="fact">the cache is keyed by pointers</ctx:remember>'
    assert _stop(work, first).returncode == 0
    again = _stop(work, first, importtime=True)
    assert again.returncode == 0 and json.loads(again.stdout) == {}
    assert "markdown_it" not in again.stderr  # returned before parsing
    assert _contents(work) == ["the cache is keyed by pointers"]
    longer = first + '\nAlso <ctx:remember type="fact">views compose lazily</ctx:remember>'
    assert _stop(work, longer).returncode == 0
    assert _contents(work) == ["the cache is keyed by pointers", "views compose lazily"]
