"""Decisions that evolve (issue 32 item 3): a newer memory refines or contradicts an older one.

The rule (``knowledge.evolution.classify``), the edge written with the new node, the proposal
``ctx add`` makes, and every injected context marking the older node as history until a
person supersedes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.knowledge.evolution import classify


@pytest.mark.parametrize(("new", "old", "label"), [
    ("We switched the session cache from SQLite to Redis", "Cache sessions in SQLite with WAL",
     "CONTRADICTS"),
    ("Do not retry failed uploads on the client", "Retry failed uploads on the client",
     "CONTRADICTS"),
    ("Sessions expire after one day unless the user ticks remember me",
     "Sessions expire after one day", "REFINES"),
])
def test_a_newer_text_on_the_same_subject_is_classified(new: str, old: str, label: str) -> None:
    found = classify(new, old)
    assert found is not None and found[0] == label


@pytest.mark.parametrize(("new", "old"), [
    ("Deploys run on Fridays after the freeze", "Cache sessions in SQLite with WAL"),  # other subject
    ("Sessions expire after one day", "Sessions expire after one day unless remembered"),  # says less
])
def test_other_subjects_or_a_shorter_restatement_do_not_evolve(new: str, old: str) -> None:
    assert classify(new, old) is None


def _ctx(root: Path, *args: str, stdin: str | None = None) -> str:
    res = run_ctx(["--ctx-dir", str(root / ".ctx"), *args], cwd=root, stdin=stdin)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _add(root: Path, node_type: str, text: str) -> dict[str, object]:
    res = run_ctx(["--ctx-dir", str(root / ".ctx"), "--format", "json", "add", "--type", node_type,
                   "--tag", "tier:reference", text], cwd=root)
    assert res.returncode == 0, res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def _hook(root: Path, event: str, session: str, **fields: str) -> str:
    payload = {"session_id": session, "transcript_path": str(root / "none.jsonl"),
               "cwd": str(root), "hook_event_name": event, **fields}
    out = json.loads(_ctx(root, "hook", event.replace("Submit", "-submit").replace(
        "SessionStart", "session-start").replace("UserPrompt", "prompt").lower(),
        stdin=json.dumps(payload)))
    return str(out.get("hookSpecificOutput", {}).get("additionalContext", ""))


@pytest.mark.slow
def test_a_changed_decision_is_shown_with_its_predecessor_marked_until_superseded(
        tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    run_ctx(["init"], cwd=root)
    old = _add(root, "decision", "Cache sessions in SQLite with WAL mode")
    assert old["evolves"] == []
    other = _add(root, "fact", "The session cache moved away from SQLite last week")
    assert other["evolves"] == []  # another type: linked at most, never a new version
    res = run_ctx(["--ctx-dir", str(root / ".ctx"), "add", "--type", "decision", "--tag",
                   "tier:reference", "We switched the session cache from SQLite to Redis"],
                  cwd=root)
    assert res.returncode == 0, res.stderr
    new_id = res.stdout.strip()
    assert f"ctx supersede {str(old['id'])[:12]} {new_id[:12]}" in res.stderr  # the proposal
    edges = json.loads(_ctx(root, "--format", "json", "edges", new_id))
    assert {(e["direction"], e["type"], e["node"]) for e in edges["edges"]} >= {
        ("out", "CONTRADICTS", old["id"])}, edges

    note = "contradicts this (newer; `ctx supersede` confirms)"
    composed = _ctx(root, "compose")
    old_item = composed.split("Cache sessions in SQLite with WAL mode")[1].split("\n- ")[0]
    assert note in old_item and f"[decision:{new_id[:8]}" in old_item
    start = _hook(root, "SessionStart", "s1", source="startup")
    assert note in start and "Cache sessions in SQLite" in start and "to Redis" in start
    prompt = _hook(root, "UserPromptSubmit", "s2", prompt="how is the session cache stored? SQLite WAL?")
    assert "Cache sessions in SQLite" in prompt and note in prompt
    _ctx(root, "claude-md")
    claude_md = (root / "CLAUDE.md").read_text()
    line = next(x for x in claude_md.splitlines() if "Cache sessions in SQLite" in x)
    assert "(history: [decision:" in line and "contradicts this" in line

    _ctx(root, "supersede", str(old["id"]), new_id)  # the person confirms
    composed = _ctx(root, "compose")
    assert "Cache sessions in SQLite" not in composed and note not in composed
    assert "to Redis" in composed
