"""``ctx memory``: backfill, search, stats, topics, promote (the installed CLI as a subprocess)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.memory.backfill import project_dir_name
from ctxstore.repo import Store
from tests.memory.memtx import Transcript, conversation

NOW = "2026-02-13T12:00:00Z"


def ctx(store: Store, *args: str, code: int = 0) -> str:
    res = run_ctx(["--ctx-dir", str(store.root), *args])
    assert res.returncode == code, (res.stdout, res.stderr)
    if code:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctx: error["), res.stderr
        return res.stderr
    return res.stdout


def cj(store: Store, *args: str) -> dict:
    return json.loads(ctx(store, "--format", "json", *args))


def _projects(home: Path) -> Path:
    projects = home / ".claude" / "projects" / "-home-user-demo"
    conversation().write(projects / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    side = Transcript(sidechain=True)
    side.prompt("Explore how the session cache is wired")
    side.say("The session cache is created in src/cache.py.")
    side.write(projects / "4d5611e5-241a-462a-8d15-5122611a9569" / "subagents" / "agent-a1.jsonl")
    (projects / "notes.txt").write_text("not a transcript")
    return projects


def test_cli_backfill_is_idempotent_and_search_follows_the_contract(store: Store, tmp_path: Path) -> None:
    projects = _projects(tmp_path)
    first = cj(store, "memory", "backfill", str(projects))
    assert (first["files"], first["turns"]) == (2, 6) and first["bytes"] > 0
    again = cj(store, "memory", "backfill", str(projects))
    assert (again["bytes"], again["turns"], again["ideas"]) == (0, 0, 0)
    out = cj(store, "memory", "search", "sqlite session cache", "--now", NOW)
    hit = out["results"][0]
    assert set(hit) >= {"score", "session", "topic", "timestamp", "uuids", "text", "intent",
                        "history"}
    assert isinstance(hit["score"], float) and hit["timestamp"].endswith("Z") and hit["uuids"]
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)
    text = ctx(store, "memory", "search", "sqlite session cache", "--now", NOW)
    assert text.startswith("## ") and "SQLite" in text


def test_cli_backfill_all_reads_the_claude_projects_folder(store: Store, tmp_path: Path) -> None:
    _projects(Path(os.environ["HOME"]))
    assert cj(store, "memory", "backfill", "--all-projects")["files"] == 2
    stats = cj(store, "memory", "stats")
    assert stats["sessions"] == 2  # the subagent's turns are a thread of their own
    assert stats["turns"] == 6 and stats["intents"]["decision"] >= 2
    assert ".ctx/local/memory.sqlite" in stats["path"]


def test_cli_backfill_all_keeps_to_this_project(store: Store, tmp_path: Path) -> None:
    """Issue 32: `--all` pulled every project's transcripts into this project's memory."""
    projects = Path(os.environ["HOME"]) / ".claude" / "projects"
    here = str(store.worktree)
    mine = Transcript("aaaaaaaa-0000-4000-8000-000000000001", cwd=here)
    mine.prompt("How should the billing retries work here?")
    mine.say("Billing retries back off exponentially.")
    mine.write(projects / project_dir_name(here) / f"{mine.session}.jsonl")
    below = Transcript("cccccccc-0000-4000-8000-000000000002", cwd=here + "/src/billing")
    below.prompt("Which module sends the invoices?")
    below.say("Invoices are sent by src/billing/send.py.")
    below.write(projects / project_dir_name(here + "/src/billing") / f"{below.session}.jsonl")
    # A sibling whose encoded name starts like ours (`work` -> `work-other`) is another project.
    other = Transcript("bbbbbbbb-0000-4000-8000-000000000001", cwd=here + "-other")
    other.prompt("Private notes of another project about billing retries")
    other.say("Nothing of this belongs to the first project.")
    other.write(projects / project_dir_name(here + "-other") / f"{other.session}.jsonl")
    _projects(Path(os.environ["HOME"]))  # /home/user/demo, with a subagent transcript

    res = run_ctx(["--ctx-dir", str(store.root), "memory", "backfill", "--all"])
    assert res.returncode == 0, res.stderr
    assert "indexed 2 files" in res.stdout
    assert ("skipped 3 transcripts of 2 other projects (-home-user-demo, "
            f"{project_dir_name(here + '-other')}); --project DIR or --all-projects indexes them"
            ) in res.stderr
    texts = cj(store, "memory", "search", "billing retries invoices", "--limit", "20")["results"]
    assert texts and not [r for r in texts if "another project" in r["text"]]
    assert cj(store, "memory", "stats")["sessions"] == 2
    # Another project only when named; then every project.
    doc = cj(store, "memory", "backfill", "--all", "--project", "/home/user/demo")
    assert doc["files"] == 4 and doc["turns"] == 6
    assert doc["skipped_other_projects"] == {"transcripts": 1,
                                             "projects": [project_dir_name(here + "-other")]}
    assert cj(store, "memory", "backfill", "--all-projects")["turns"] == 1
    assert cj(store, "memory", "stats")["sessions"] == 5


@pytest.mark.slow
def test_cli_topics_and_promote(store: Store, tmp_path: Path) -> None:
    conversation().write(tmp_path / "s.jsonl")
    ctx(store, "memory", "backfill", str(tmp_path / "s.jsonl"))
    spans = cj(store, "memory", "topics", "4d5611e5")["spans"]
    assert {s["depth"] for s in spans} == {0, 1} and any("login" in s["name"] for s in spans)
    assert "login" in ctx(store, "memory", "topics")
    # Each topic's summary (spec 004 §4.4): its focus by content, its decisions, its conclusions.
    cache = next(s for s in spans if s["depth"] == 0 and "cache" in s["summary"]["focus"])
    assert "session" in cache["summary"]["focus"]
    assert any("SQLite" in d for d in cache["summary"]["decisions"]), cache["summary"]
    login = next(s for s in spans if s["depth"] == 0 and "login" in s["name"])
    assert {"login", "mobile"} <= set(login["summary"]["focus"]) and "cache" not in login["summary"]["focus"]
    text = ctx(store, "memory", "topics", "4d5611e5")
    assert "focus: " in text and "decided: " in text
    hit = cj(store, "memory", "search", "decided sqlite instead of redis", "--now", NOW)
    conn_ideas = hit["results"][0]
    assert conn_ideas["intent"] == "decision"
    promoted = cj(store, "memory", "promote", "1")
    assert promoted["derived_from"]["kind"] == "transcript-span"
    node = cj(store, "show", promoted["id"])
    assert node["type"] == "open-question" or node["type"]


@pytest.mark.slow
def test_cli_errors_are_one_line(store: Store, tmp_path: Path) -> None:
    assert "E018" in ctx(store, "memory", "search", "x", code=1)  # no memory yet
    # stats is a read: with no memory yet every count is 0, in text and JSON, and nothing is made
    empty = cj(store, "memory", "stats")
    assert (empty["sessions"], empty["turns"], empty["bytes"], empty["first"]) == (0, 0, 0, None)
    assert "sessions   0" in ctx(store, "memory", "stats")
    assert not (store.root / "local" / "memory.sqlite").exists()
    assert "E011" in ctx(store, "memory", "backfill", code=1)
    conversation().write(tmp_path / "s.jsonl")
    ctx(store, "memory", "backfill", str(tmp_path / "s.jsonl"))
    assert "--now" in ctx(store, "memory", "search", "x", "--now", "yesterday", code=1)
    assert "--since" in ctx(store, "memory", "search", "x", "--since", "blorp", code=1)
    assert "session" in ctx(store, "memory", "search", "x", "--session", "zzz", code=1)
    assert "E011" in ctx(store, "memory", "promote", "999", code=1)
    out = cj(store, "memory", "backfill", str(tmp_path / "missing"), str(tmp_path / "s.jsonl"))
    assert out["notes"] and out["bytes"] == 0


def test_cli_damaged_memory_is_named_not_wiped(store: Store) -> None:
    target = store.root / "local" / "memory.sqlite"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"junk" * 500)
    assert "E023" in ctx(store, "memory", "stats", code=3)
    assert target.read_bytes() == b"junk" * 500


def test_cli_help_has_examples() -> None:
    for sub in ("backfill", "search", "stats", "topics", "promote"):
        res = run_ctx(["memory", sub, "--help"])
        assert res.returncode == 0 and "Example" in res.stdout


def test_cli_search_folds_inflections_and_reads_intent(store: Store, tmp_path: Path) -> None:
    """Issue 32: "retry" did not find "retries"; "open questions" found nothing."""
    t = Transcript("dddddddd-0000-4000-8000-000000000001")
    t.prompt("The upload job retries three times and then gives up on the file.")
    t.say("Noted: three attempts in all.")
    t.end_turn()
    t.prompt("Which store should the session cache use?")
    t.say("We decided to use SQLite for the session cache, in WAL mode.")
    t.end_turn()
    t.prompt("Any thoughts on the resume feature?")
    t.say("Should uploads resume from the last chunk or start over?")
    t.end_turn()
    t.prompt("The session cache is slow after a cold start and the cache misses pile up.")
    t.say("The session cache warms slowly; the cache has no preload yet.")
    t.end_turn()
    ctx(store, "memory", "backfill", str(t.write(tmp_path / "s.jsonl")))

    found = cj(store, "memory", "search", "retry", "--now", NOW)["results"]
    assert found and "retries three times" in found[0]["text"]
    assert cj(store, "memory", "search", "retried", "--now", NOW)["results"][0]["turn"] == \
        found[0]["turn"]
    # An intent alone lists the ideas of that intent: the question nothing answered, not the
    # one the SQLite decision answered.
    open_q = cj(store, "memory", "search", "open questions", "--now", NOW)["results"]
    assert [r["text"] for r in open_q if "resume from the last chunk" in r["text"]]
    assert not [r for r in open_q if "Which store" in r["text"]]
    # "what did we decide about X" ranks the decision on X above turns that only talk of X.
    decided = cj(store, "memory", "search", "what did we decide about the session cache",
                 "--now", NOW)["results"]
    assert "We decided to use SQLite" in decided[0]["text"], [r["text"] for r in decided]
