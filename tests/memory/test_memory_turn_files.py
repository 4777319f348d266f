"""The files a turn's tool calls read or wrote are on its ideas as soon as the Stop hook indexes it.

Spec 003 Phase 4 (provenance: the files in play). The hooks do not open the code index (it
costs more than a turn's budget), so the files an idea names in its text are linked to the code
only by ``ctx memory backfill``. The tool calls of the turn (``Edit``, ``Write``, ``Read``, ...)
name their files exactly, in the transcript lines the hook already reads: those in the work
tree go on every idea of the turn, said before or after the call, repo-relative, and
``ctx memory search`` shows them in ``provenance.files`` at once. Through the real hook command.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import run_ctx

from ctxstore.memory.db import memory_path
from ctxstore.repo import Store
from tests.memory.memtx import SESSION, Transcript

NOW = "2026-02-13T12:00:00Z"


def _turn(store: Store, path: Path) -> Path:
    work = store.root.parent
    (work / "src").mkdir()
    (work / "src" / "cache.py").write_text("CACHE = 'sqlite'\n")
    (work / "README.md").write_text("# demo\n")
    t = Transcript(SESSION)
    t.prompt("How should we store the session cache?")
    t.say("We decided to use SQLite for the session cache because it needs no server.")
    t.tool("Read", {"file_path": str(work / "README.md")}, "# demo")
    t.tool("Edit", {"file_path": str(work / "src" / "cache.py"), "old_string": "x",
                    "new_string": "y"}, "ok")
    t.tool("Read", {"file_path": str(path.parent / "outside.txt")}, "not in the project")
    t.tool("Bash", {"command": f"cat {work / 'src' / 'other.py'}"}, "")
    t.say("We decided to keep the cache file in the data folder.")
    t.end_turn()
    (path.parent / "outside.txt").write_text("x\n")
    return t.write(path)


def _stop(store: Store, path: Path) -> None:
    res = run_ctx(["hook", "stop"], stdin=json.dumps({
        "session_id": SESSION, "transcript_path": str(path), "cwd": str(store.root.parent),
        "hook_event_name": "Stop"}))
    assert res.returncode == 0 and "systemMessage" not in json.loads(res.stdout), res.stdout


def _idea_files(store: Store) -> dict[str, set[str]]:
    conn = sqlite3.connect(memory_path(store.root))
    rows = conn.execute("SELECT i.content, e.code_path FROM ideas i JOIN idea_entities ie "
                        "ON ie.idea_id = i.id JOIN entities e ON e.id = ie.entity_id "
                        "WHERE e.code_path IS NOT NULL").fetchall()
    conn.close()
    found: dict[str, set[str]] = {}
    for content, code_path in rows:
        found.setdefault(content, set()).add(code_path)
    return found


def test_the_stop_hook_records_the_turns_files_on_its_ideas(store: Store, tmp_path: Path) -> None:
    _stop(store, _turn(store, tmp_path / "s.jsonl"))
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "memory", "search",
                   "session cache sqlite", "--now", NOW])
    assert res.returncode == 0, res.stderr
    hit = json.loads(res.stdout)["results"][0]
    assert "SQLite for the session cache" in hit["text"]
    assert hit["provenance"]["files"] == ["README.md", "src/cache.py"]  # in the order used
    ideas = _idea_files(store)
    # every idea of the turn (the question, the decisions said before the calls and after);
    # nothing outside the work tree, nothing a command line merely mentions
    assert len(ideas) == 3 and all(files == {"README.md", "src/cache.py"} for files in ideas.values())


def test_no_tool_output_kept_no_files_recorded(store: Store, tmp_path: Path) -> None:
    """``[memory] index_tool_output = false`` keeps no tool calls: their files neither."""
    config = store.root / "config.toml"
    text = config.read_text()
    assert "index_tool_output = true" in text
    config.write_text(text.replace("index_tool_output = true", "index_tool_output = false", 1))
    _stop(store, _turn(store, tmp_path / "s.jsonl"))
    assert _idea_files(store) == {}


def test_a_backfill_records_the_same_files(store: Store, tmp_path: Path) -> None:
    path = _turn(store, tmp_path / "s.jsonl")
    res = run_ctx(["--ctx-dir", str(store.root), "memory", "backfill", str(path)])
    assert res.returncode == 0, res.stderr
    ideas = _idea_files(store)
    assert len(ideas) == 3 and all(files == {"README.md", "src/cache.py"} for files in ideas.values())
