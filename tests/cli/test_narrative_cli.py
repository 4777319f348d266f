"""`ctx add note|task|decision`, `ctx commit` with human edits, `ctx stage compact` (CLI)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import invoke, run_ctx, store_digest

from ctxstore.narrative import markdown as nar
from ctxstore.repo import Store


def ok(runner, store, *args: str, input: str | None = None) -> str:  # type: ignore[no-untyped-def]
    r = invoke(runner, store, *args, input=input)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return r.stdout


def js(runner, store, *args: str, input: str | None = None) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(ok(runner, store, "--format", "json", *args, input=input))


def show(runner, store, node_id: str) -> dict:  # type: ignore[no-untyped-def]
    return js(runner, store, "show", node_id)


def test_add_note_task_decision_text_output(runner, store: Store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # On a terminal: the id, the task number and the Markdown file written.
    monkeypatch.setattr("ctxstore.cli._render.stdout_is_terminal", lambda: True)
    out = ok(runner, store, "add", "note", "Fixed the timeout bug by adding retry logic")
    m = re.fullmatch(r"Added: ([0-9A-Z]{26})  narrative/(log/\d{4}-\d\d-\d\d\.md)\n", out)
    assert m, out
    assert show(runner, store, m.group(1))["type"] == "observation"
    assert m.group(1) in (store.root / "narrative" / m.group(2)).read_text()

    out = ok(runner, store, "add", "task", "Implement rate limiting", "--body", "Token bucket.")
    m = re.fullmatch(r"Added: ([0-9A-Z]{26})  task (\d{6})  narrative/(tasks/task_\1\.md)\n", out)
    assert m, out
    assert m.group(2) == nar.task_number(m.group(1))
    task = (store.root / "narrative" / m.group(3)).read_text()
    assert task.startswith(f"# Task {m.group(2)}: Implement rate limiting ")
    assert show(runner, store, m.group(1))["content"] == (
        f"Task {m.group(2)}: Implement rate limiting\n\nToken bucket.")

    out = ok(runner, store, "add", "decision", "Use SQLite", "--body", "## Why\nFew parts.",
             "--tag", "topic:storage")
    node_id = out.split()[1]
    assert out.endswith("  narrative/decisions.md\n")
    node = show(runner, store, node_id)
    assert (node["type"], node["tags"]) == ("decision", ["topic:storage"])
    assert "### Why" in (store.root / "narrative" / "decisions.md").read_text()


def test_add_note_task_decision_print_the_bare_id_when_piped(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    for args in (["note", "piped note"], ["task", "piped task"], ["decision", "piped decision"]):
        out = ok(runner, store, "add", *args)
        assert re.fullmatch(r"[0-9A-Z]{26}\n", out), out  # id=$(ctx add note ...) just works
        assert show(runner, store, out.strip())["content"].endswith(args[1])


@pytest.mark.parametrize("args,node_type,path", [
    (["note", "a note"], "observation", r"log/\d{4}-\d\d-\d\d\.md"),
    (["task", "a task"], "task", r"tasks/task_[0-9A-Z]{26}\.md"),
    (["decision", "a decision", "--body", "why"], "decision", r"decisions\.md"),
])
def test_add_narrative_json(runner, store: Store, args: list[str], node_type: str, path: str  # type: ignore[no-untyped-def]
                            ) -> None:
    doc = js(runner, store, "add", *args)
    assert doc["type"] == node_type and doc["kind"] == args[0]
    assert re.fullmatch(path, doc["path"]) and (store.root / "narrative" / doc["path"]).is_file()
    assert ("task_number" in doc) == (args[0] == "task")
    assert show(runner, store, doc["id"])["id"] == doc["id"]


def test_note_from_stdin_and_the_type_form_is_unchanged(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    doc = js(runner, store, "add", "note", "--stdin", input="from standard input\n")
    assert show(runner, store, doc["id"])["content"] == "from standard input"
    fact = ok(runner, store, "add", "--type", "fact", "note").strip()  # "note" is the content
    assert show(runner, store, fact)["content"] == "note"
    assert show(runner, store, fact)["type"] == "fact"
    assert not list((store.root / "narrative" / "tasks").iterdir())


@pytest.mark.parametrize("args", [
    ["add", "note", ""],
    ["add", "note", "   "],
    ["add", "note"],
    ["add", "task", ""],
    ["add", "task"],
    ["add", "task", "two\nlines"],
    ["add", "decision", "title", "--body", " "],
    ["add", "note", "text", "--body", "b"],
    ["add", "note", "a", "b"],
    ["add", "note", "text", "--tag", "bad tag"],
    ["add", "something"],
    ["add"],
])
def test_bad_add_is_one_line_error_and_changes_nothing(runner, store: Store, args: list[str]  # type: ignore[no-untyped-def]
                                                       ) -> None:
    before = store_digest(store.root)
    r = invoke(runner, store, *args)
    assert (r.exit_code, r.stdout) == (1, ""), (r.stdout, r.stderr)
    assert r.stderr.startswith("ctx: error[E011]: ") and r.stderr.count("\n") == 1, r.stderr
    assert store_digest(store.root) == before


def test_commit_ingests_edits_and_reports_them(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    dec = js(runner, store, "add", "decision", "Use SQLite", "--body", "Fewer moving parts.")
    ok(runner, store, "commit", "-m", "seed")
    path = store.root / "narrative" / "decisions.md"
    path.write_text(path.read_text().replace("Fewer moving parts.", "Fewer moving parts; WAL.")
                    + "\n## Pack objects\n\nLater.\n")
    doc = js(runner, store, "commit", "-m", "edits")
    assert doc["commit"] is not None
    actions = sorted((e["action"], e["path"]) for e in doc["narrative_edits"])
    assert actions == [("added", "decisions.md"), ("updated", "decisions.md")]
    assert show(runner, store, dec["id"])["content"] == "Use SQLite\n\nFewer moving parts; WAL."
    head = js(runner, store, "stage", "status")["head"]
    assert ok(runner, store, "commit", "-m", "nothing") == "nothing to commit\n"
    assert js(runner, store, "stage", "status")["head"] == head


def test_commit_refuses_conflicted_markdown_then_works(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    task = js(runner, store, "add", "task", "Fix login")
    path = store.root / "narrative" / task["path"]
    line = len(path.read_text().splitlines()) + 1  # the file has a metadata block (spec 002 §8.6)
    path.write_text(path.read_text() + "<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> side\n")
    before = store_digest(store.root)
    r = invoke(runner, store, "commit", "-m", "x")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert f"narrative/{task['path']}:{line}: unresolved merge conflict" in r.stderr
    assert store_digest(store.root) == before
    path.write_text(path.read_text().split("<<<<<<<")[0] + "mine and theirs\n")
    assert "updated" in ok(runner, store, "commit", "-m", "resolved")


def test_stage_compact_writes_the_summary(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    ok(runner, store, "stage", "start", "Retry work")
    note = js(runner, store, "add", "note", "All tests passing")
    doc = js(runner, store, "stage", "compact", "--message", "feat: retry")
    assert doc["commit"] and doc["session_id"]
    log = (store.root / "narrative" / note["path"]).read_text()
    assert f"ctx:session={doc['session_id']}" in log and "Task: Retry work" in log
    assert note["id"] in log.split("session summary")[1]


def test_subprocess_add_edit_commit(store: Store) -> None:
    ctx = ["--ctx-dir", str(store.root)]
    res = run_ctx([*ctx, "--format", "json", "add", "task", "Write docs", "--body", "For narrative."])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    path = store.root / "narrative" / doc["path"]
    path.write_text(path.read_text().replace("For narrative.", "For narrative and merges."))
    res = run_ctx([*ctx, "commit", "-m", "docs"])
    assert res.returncode == 0, res.stderr
    assert f"  updated {doc['id']} from narrative/{doc['path']}" in res.stdout
    res = run_ctx([*ctx, "add", "note", ""])
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E011]: ")


def test_add_with_message_commits_at_once(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    out = ok(runner, store, "add", "note", "Switched the cache to LRU", "-m", "Cache notes")
    m = re.fullmatch(r"([0-9A-Z]{26})\ncommitted ([0-9a-f]{64})\n", out)
    assert m, out
    first = js(runner, store, "log")["commits"][0]
    assert first["message"] == "Cache notes" and first["id"] == m.group(2)
    assert js(runner, store, "status")["staged"]["records"] == 0
    assert show(runner, store, m.group(1))["content"] == "Switched the cache to LRU"

    doc = js(runner, store, "add", "--type", "fact", "Timeouts are 30 s", "--commit")
    assert re.fullmatch(r"[0-9a-f]{64}", doc["commit"])
    assert js(runner, store, "log")["commits"][0]["message"] == f"ctx add fact: {doc['id']}"


def test_add_with_an_empty_message_changes_nothing(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    before = store_digest(store.root)
    r = invoke(runner, store, "add", "note", "text", "-m", "  ")
    assert r.exit_code != 0 and "commit message is empty" in r.stderr
    assert store_digest(store.root) == before


def test_add_commit_failure_says_the_node_is_staged(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    ok(runner, store, "add", "decision", "Use SQLite", "--body", "Few parts.")
    path = store.root / "narrative" / "decisions.md"
    path.write_text(path.read_text() + "<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n")
    r = invoke(runner, store, "add", "note", "still kept", "-m", "try")
    assert r.exit_code != 0
    assert re.search(r"error\[E011\]: added [0-9A-Z]{26} \(staged\), but the commit failed: "
                     r"narrative/decisions.md:\d+: unresolved merge conflict", r.stderr), r.stderr
    node_id = re.search(r"added ([0-9A-Z]{26})", r.stderr).group(1)
    assert show(runner, store, node_id)["content"] == "still kept"
    assert js(runner, store, "status")["staged"]["records"] >= 1


def _fails_cleanly(runner, store: Store, *args: str, code: str = "E011") -> str:  # type: ignore[no-untyped-def]
    """Run a command that must fail with ``code`` and change nothing; return its stderr."""
    before = store_digest(store.root)
    r = invoke(runner, store, *args)
    assert (r.exit_code, r.stdout) == (1, ""), (r.stdout, r.stderr)
    assert r.stderr.startswith(f"ctx: error[{code}]: ") and r.stderr.count("\n") == 1, r.stderr
    assert store_digest(store.root) == before
    return r.stderr


def test_add_task_with_an_unreadable_log_leaves_no_task_file(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    log = store.root / "narrative" / nar.log_rel(int(time.time() * 1000))
    log.write_bytes(b"# Log\n\n\xff\xfe not UTF-8\n")
    err = _fails_cleanly(runner, store, "add", "task", "Fix login")
    assert "is not UTF-8 text" in err
    assert list((store.root / "narrative" / "tasks").iterdir()) == []


def test_add_task_with_a_symlinked_log_folder_leaves_no_task_file(runner, store: Store,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path) -> None:
    logs = store.root / "narrative" / "log"
    logs.rmdir()
    (tmp_path / "elsewhere").mkdir()
    logs.symlink_to(tmp_path / "elsewhere")
    err = _fails_cleanly(runner, store, "add", "task", "Fix login", code="E020")
    assert f"refusing {logs}: is a symbolic link" in err
    assert list((store.root / "narrative" / "tasks").iterdir()) == []
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_stage_compact_counts_a_node_added_then_updated_as_added(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    node = js(runner, store, "add", "--type", "fact", "one")
    ok(runner, store, "update", node["id"], "--content", "two")
    ok(runner, store, "stage", "compact", "-m", "done")
    log = (store.root / "narrative" / nar.log_rel(int(time.time() * 1000))).read_text()
    assert "- Changes: 1 nodes added, 0 updated, 0 removed" in log, log


@pytest.mark.parametrize("args", [["commit", "-m", " \n "], ["stage", "compact", "-m", "  "]])
def test_blank_message_is_refused_before_edits_are_ingested(runner, store: Store,  # type: ignore[no-untyped-def]
                                                            args: list[str]) -> None:
    ok(runner, store, "add", "decision", "Use SQLite", "--body", "Few parts.")
    ok(runner, store, "commit", "-m", "seed")
    path = store.root / "narrative" / "decisions.md"
    path.write_text(path.read_text().replace("Few parts.", "Fewer parts."))
    assert "the commit message is empty" in _fails_cleanly(runner, store, *args)


def test_stage_compact_lists_ingested_edits_like_commit(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    note = js(runner, store, "add", "note", "Temporary note")
    dec = js(runner, store, "add", "decision", "Use SQLite", "--body", "Few parts.")
    ok(runner, store, "commit", "-m", "seed")
    log = store.root / "narrative" / note["path"]
    log.write_text(log.read_text().split("\n## ")[0] + "\n")  # the note's entry is gone
    path = store.root / "narrative" / "decisions.md"
    path.write_text(path.read_text().replace("Few parts.", "Fewer parts."))
    out = ok(runner, store, "stage", "compact", "-m", "tidy")
    assert out.splitlines()[1:] == [f"  updated {dec['id']} from narrative/decisions.md",
                                    f"  removed {note['id']} from narrative/{note['path']}"], out
    path.write_text(path.read_text().replace("Fewer parts.", "Fewest parts."))
    doc = js(runner, store, "stage", "compact", "-m", "again")
    assert doc["narrative_edits"] == [{"action": "updated", "id": dec["id"],
                                       "path": "decisions.md"}]


def test_commit_notes_a_narrative_file_it_cannot_read_as_knowledge(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    """A log over the 8 MiB cap (a teammate's, or a very long day) is not read as knowledge.

    docs/narrative.md says so; the commit said nothing, so notes written in it by hand were
    silently not recorded. It now says which file, once per commit, and exits 0.
    """
    rel = "log/2026-01-02.md"
    path = store.root / "narrative" / rel
    path.write_bytes(b"# Log 2026-01-02\n\n## 10:00 UTC \xc2\xb7 note\nby hand\n"
                     + b"x" * (8 << 20))
    res = invoke(runner, store, "commit", "-m", "with a huge log")
    assert res.exit_code == 0, res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"ctx: note: narrative/{rel} was not read as knowledge"), res.stderr
    assert "by hand" not in json.dumps(js(runner, store, "list"))
    path.write_bytes(b"\xff\xfe not utf-8 \n")
    doc = js(runner, store, "commit", "-m", "not text")
    assert {"action": "skipped", "id": None, "path": rel} in doc["narrative_edits"], doc


@pytest.mark.slow
def test_compaction_summary_lists_files_decisions_and_test_results(tmp_path: Path) -> None:
    # Spec 002's example: the summary says the files changed, the key decisions and how the
    # tests went (the first failure, then the end), not only counts and ids.
    root = tmp_path / "proj"
    root.mkdir()
    assert run_ctx(["init"], cwd=root).returncode == 0
    ctx = ["--ctx-dir", str(root / ".ctx")]

    def call(*args: str, stdin: str | None = None) -> str:
        res = run_ctx([*ctx, *args], cwd=root, stdin=stdin)
        assert res.returncode == 0, res.stderr
        return res.stdout

    call("stage", "start", "Retry work")
    (root / "retry.py").write_text("def backoff():\n    return 2\n")
    call("add", "file", "retry.py")
    call("add", "decision", "Exponential backoff with jitter for retries")
    failing = "tests/test_retry.py:3: in test_backoff\nE   AssertionError: assert 2 == 4\n" \
        "FAILED tests/test_retry.py::test_backoff - AssertionError: assert 2 == 4\n" \
        "1 failed in 0.01s\n"
    call("add", "command", "--stdin", "--name", "pytest", "--tool", "pytest", "--exit-code", "1",
         stdin=failing)
    (root / "retry.py").write_text("def backoff():\n    return 4\n")
    call("add", "file", "retry.py")
    call("add", "command", "--stdin", "--name", "pytest", "--tool", "pytest", "--exit-code", "0",
         stdin="15 passed in 0.02s\n")
    doc = json.loads(call("--format", "json", "stage", "compact", "--message", "feat: retry"))
    logs = sorted((root / ".ctx" / "narrative" / "log").glob("*.md"))
    summary = logs[-1].read_text().split(f"ctx:session={doc['session_id']}")[1]
    files = summary.split("### Files changed")[1].split("###")[0]
    assert "- Created retry.py" in files
    decisions = summary.split("### Key decisions")[1].split("###")[0]
    assert "- Exponential backoff with jitter for retries" in decisions
    tests = summary.split("### Test results")[1]
    assert "- pytest: initially failed (exit 1" in tests
    assert "- pytest: final: passed (2 runs)" in tests
    assert tests.index("initially failed") < tests.index("final: passed")
