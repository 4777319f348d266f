"""Narrative Markdown as knowledge (spec 002 §8, §13.2.2, §15.1; DESIGN §7).

`add_note|add_task|add_decision` write Markdown and a node tied by a marker; the next
commit turns human edits of that Markdown into node versions, new nodes and tombstones,
never rewrites what a person wrote, and changes nothing when nothing was edited. The tests
that kill a child between the Markdown write and the node write are
tests/crash/test_narrative_kill_points.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import session_of, store_digest

from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.history import commit as history_commit
from ctxstore.history.commit import fold
from ctxstore.history.compact import compact
from ctxstore.knowledge.nodes import add_node, delete_node, update_node
from ctxstore.model import Commit
from ctxstore.narrative import ingest, snapshot
from ctxstore.narrative import markdown as nar
from ctxstore.narrative.entries import add_decision, add_note, add_task
from ctxstore.narrative.ingest import ingest_narrative_edits
from ctxstore.objects import ObjectId
from ctxstore.replay import replay
from ctxstore.repo import Store, open_store
from ctxstore.session import Session
from ctxstore.staging import start_session
from ctxstore.templates import render_template


def live(store: Store) -> dict[str, tuple[str, str, dict]]:
    """Live nodes: id -> (type, full content, metadata), from a replay of the store."""
    out = {}
    for nid, rec in replay(store).nodes.items():
        text = store.read_blob(ObjectId(rec.content_blob)).decode() if rec.content_blob \
            else rec.content or ""
        out[nid] = (rec.type, text, rec.metadata)
    return out


def ndir(store: Store) -> Path:
    return store.root / "narrative"


def commit_with_edits(store: Store, message: str):  # type: ignore[no-untyped-def]
    """What `ctx commit` does (``history.commit.commit``): ingest edits, then fold."""
    with Session(store) as db:
        res = history_commit.commit(db, message)
    return res.fold, list(res.edits)


def compact_session(store: Store, message: str):  # type: ignore[no-untyped-def]
    """What `ctx stage compact` does (``history.compact.compact``)."""
    with Session(store) as db:
        res = compact(db, message)
    return res.fold, list(res.edits)


def commit(store: Store, message: str = "c") -> list:
    """What `ctx commit` does: ingest edits, then fold (returns the edits)."""
    return commit_with_edits(store, message)[1]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# -- writing ------------------------------------------------------------------------------------

def test_note_is_a_marked_log_entry_and_an_observation(store: Store) -> None:
    a = add_note(session_of(store), "Fixed the timeout bug by adding retry logic", tags=["topic:net"])
    b = add_note(session_of(store), "Second note\n\n## a heading in the note")
    assert a.path == b.path == nar.log_rel(a.node.created_at)
    assert re.fullmatch(r"log/\d{4}-\d\d-\d\d\.md", a.path)
    text = (ndir(store) / a.path).read_text()
    assert text.startswith(f"# Log {a.path[4:14]}\n")
    assert text.count(nar.id_marker(a.node.id)) == text.count(nar.id_marker(b.node.id)) == 1
    assert text.index(a.node.id) < text.index(b.node.id)  # appended, oldest first
    assert "### a heading in the note" in text  # nested below the entry heading
    nodes = live(store)
    assert nodes[a.node.id][:2] == ("observation", "Fixed the timeout bug by adding retry logic")
    assert a.node.tags == ("topic:net",)
    assert nodes[a.node.id][2]["narrative_path"] == a.path
    assert [e.marker for e in nar.parse_entries(a.path, text)] == [a.node.id, b.node.id]


def test_decision_and_task_files(store: Store) -> None:
    d = add_decision(session_of(store), "Retry strategy: exponential backoff",
                     "## Context\nconnect() fails transiently.\n\n## Decision\nBackoff with jitter.")
    t = add_task(session_of(store), "Add connection retry", "## Objective\nRetry connect().")
    dec = (ndir(store) / "decisions.md").read_text()
    assert dec.startswith("# Decisions\n")
    assert f"## Retry strategy: exponential backoff {nar.id_marker(d.node.id)}\n" in dec
    assert "### Context\n" in dec and "\n## Context" not in dec
    assert live(store)[d.node.id][:2] == (
        "decision", "Retry strategy: exponential backoff\n\n### Context\nconnect() fails "
                    "transiently.\n\n### Decision\nBackoff with jitter.")
    assert t.path == f"tasks/task_{t.node.id}.md"
    assert t.task_number == nar.task_number(t.node.id) and re.fullmatch(r"\d{6}", t.task_number)
    task = (ndir(store) / t.path).read_text()
    assert task.splitlines()[0] == (f"# Task {t.task_number}: Add connection retry "
                                    f"{nar.id_marker(t.node.id)}")
    assert live(store)[t.node.id][0] == "task"
    assert live(store)[t.node.id][2]["task_number"] == t.task_number


def test_task_creation_is_logged_as_a_record_not_a_node(store: Store) -> None:
    t = add_task(session_of(store), "Add connection retry", "Max 5 retries.")
    log = ndir(store) / nar.log_rel(t.node.created_at)
    text = log.read_text()
    key = f"task-created-{t.node.id}"
    assert f"task created {nar.event_marker(key)}\n" in text
    assert (f"- Created task {t.task_number}: Add connection retry "
            f"([task_{t.node.id}.md](../{t.path}))\n{nar.end_marker(key)}\n") in text
    before = set(live(store))
    assert commit(store) == []  # the log entry is a record: committing adds no node
    assert set(live(store)) == before
    edit(log, "- Created task", "- Opened task")  # edited by hand: still not a node
    assert commit(store) == [] and set(live(store)) == before


def test_placeholders_in_user_text_are_kept_verbatim(store: Store) -> None:
    n = add_note(session_of(store), "literal {end} and {marker} in a note")
    d = add_decision(session_of(store), "Use {title} braces", "body {end}")
    assert live(store)[n.node.id][1] == "literal {end} and {marker} in a note"
    assert live(store)[d.node.id][1] == "Use {title} braces\n\nbody {end}"
    assert commit(store) == []  # the Markdown reads back exactly as the nodes hold it


def test_templates_are_rendered_in_one_pass() -> None:
    text = render_template("log_entry.md", time="{kind}", kind="note", marker="{end}",
                               text="{time}", end="<!-- e -->")
    assert text == "## {kind} UTC · note {end}\n{time}\n<!-- e -->\n"
    # A line holding only an empty value is left out.
    assert render_template("task.md", number="1", title="T", marker="m", body="") == (
        "# Task 1: T m\n")


def test_oversized_narrative_file_is_not_snapshotted(store: Store) -> None:
    fold(store, "base")  # the README from init
    (ndir(store) / "big.md").write_bytes(b"x" * (snapshot.MAX_NARRATIVE_BYTES + 1))
    (ndir(store) / "small.md").write_text("small\n")
    res = fold(store, "snap")
    refs = store.read_typed(res.commit, Commit).narrative_refs
    assert [r.path for r in refs] == ["small.md"]


def test_task_number_depends_on_the_id_only() -> None:
    assert nar.task_number("01HQ1A2B3C4D5E6F7G8H9JKMNP") == nar.task_number("01ZZZZZZZZ4D5E6F7G8H9JKMNP")
    assert nar.task_number("01HQ1A2B3C4D5E6F7G8H9JKMNP") != nar.task_number("01HQ1A2B3C4D5E6F7G8H9JKMNQ")


@pytest.mark.parametrize("call", [
    lambda s: add_note(session_of(s), "   \n "),
    lambda s: add_task(session_of(s), ""),
    lambda s: add_task(session_of(s), "two\nlines"),
    lambda s: add_decision(session_of(s), "ok", "  "),
    lambda s: add_note(session_of(s), "fine", tags=["bad tag!"]),
])
def test_bad_input_changes_nothing(store: Store, call) -> None:  # type: ignore[no-untyped-def]
    before = store_digest(store.root)
    with pytest.raises(InvalidInput):
        call(store)
    assert store_digest(store.root) == before


def test_symlinked_log_is_never_written_through(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("mine\n")
    (ndir(store) / nar.log_rel(__import__("time").time_ns() // 10**6)).symlink_to(outside)
    with pytest.raises(UnsafePath, match="is a symbolic link"):
        add_note(session_of(store), "x")
    assert outside.read_text() == "mine\n"


def test_tasks_made_in_two_clones_never_share_a_path(store: Store, tmp_path: Path) -> None:
    fold(store, "base")
    other = open_store(Path(shutil.copytree(store.root.parent, tmp_path / "clone")) / ".ctx")
    paths = {add_task(session_of(s), "Fix login").path for s in (store, other, store, other)}
    assert len(paths) == 4
    assert {p.name for p in (ndir(store) / "tasks").iterdir()}.isdisjoint(
        {p.name for p in (ndir(other) / "tasks").iterdir()})


# -- human edits --------------------------------------------------------------------------------

@pytest.fixture
def seeded(store: Store):  # type: ignore[no-untyped-def]
    """A note, a decision and a task, committed."""
    n = add_note(session_of(store), "Retries time out after 30 s")
    d = add_decision(session_of(store), "Use SQLite", "Fewer moving parts.")
    t = add_task(session_of(store), "Fix login", "Users are logged out after 5 min.")
    fold(store, "seed")
    return store, n, d, t


def test_commit_without_edits_changes_nothing(seeded) -> None:  # type: ignore[no-untyped-def]
    store, *_ = seeded
    before, head = store_digest(store.root), store.read_head().single
    assert ingest_narrative_edits(session_of(store)) == []
    assert fold(store, "again").commit is None
    assert store_digest(store.root) == before and store.read_head().single == head


@pytest.mark.parametrize("kind", ["note", "decision", "task"])
def test_edited_entry_becomes_a_new_version(seeded, kind: str) -> None:  # type: ignore[no-untyped-def]
    store, n, d, t = seeded
    entry = {"note": n, "decision": d, "task": t}[kind]
    path = ndir(store) / entry.path
    old = {"note": "30 s", "decision": "Fewer moving parts.", "task": "5 min."}[kind]
    edit(path, old, old + "  \n\n- added *by hand*, with `code`")
    written = path.read_bytes()
    edits = commit(store)
    assert [(e.action, e.node_id) for e in edits] == [("updated", entry.node.id)]
    content = live(store)[entry.node.id][1]
    assert content.endswith(old + "  \n\n- added *by hand*, with `code`")
    assert path.read_bytes() == written  # the person's text, byte for byte
    assert commit(store) == [] and path.read_bytes() == written


def test_new_unmarked_sections_become_nodes_once(seeded) -> None:  # type: ignore[no-untyped-def]
    store, n, *_ = seeded
    dec, log = ndir(store) / "decisions.md", ndir(store) / n.path
    dec.write_text(dec.read_text() + "\n## Use msgpack for objects\n\nCompact and fast.\n")
    log.write_text(log.read_text() + "\n## Standup\n\nDiscussed the retry bug.\n")
    (ndir(store) / "tasks" / "write-docs.md").write_text("# Write the docs\n\nFor narrative.\n")
    files = {p: p.read_bytes() for p in ndir(store).rglob("*.md")}
    edits = commit(store)
    assert sorted((e.action, e.path) for e in edits) == [
        ("added", "decisions.md"), ("added", n.path), ("added", "tasks/write-docs.md")]
    nodes = live(store)
    got = {nodes[e.node_id][:2] for e in edits}
    assert got == {("decision", "Use msgpack for objects\n\nCompact and fast."),
                   ("observation", "Discussed the retry bug."),
                   ("task", "Write the docs\n\nFor narrative.")}
    assert {p: p.read_bytes() for p in ndir(store).rglob("*.md")} == files  # no marker added
    count = len(nodes)
    assert commit(store) == [] and len(live(store)) == count  # recognised, not duplicated
    edit(dec, "Compact and fast.", "Compact, fast and schema-less.")
    again = commit(store)
    assert [(e.action, e.node_id) for e in again] == [
        ("updated", next(e.node_id for e in edits if e.path == "decisions.md"))]
    assert len(live(store)) == count


def test_unmarked_sections_with_one_heading_survive_reordering(seeded) -> None:  # type: ignore[no-untyped-def]
    """A union merge may put sections in the other order: an unchanged section keeps its
    node wherever it is; an edited one is matched by heading and position."""
    store, n, *_ = seeded
    log = ndir(store) / n.path
    head = log.read_text()
    log.write_text(head + "\n## Standup\n\nMonday.\n\n## Standup\n\nTuesday.\n")
    first = {live(store)[e.node_id][1]: e.node_id for e in commit(store)}
    assert set(first) == {"Monday.", "Tuesday."}
    log.write_text(head + "\n## Standup\n\nTuesday.\n\n## Standup\n\nMonday.\n")
    assert commit(store) == []
    log.write_text(head + "\n## Standup\n\nTuesday!\n\n## Standup\n\nMonday.\n")
    assert [(e.action, e.node_id) for e in commit(store)] == [("updated", first["Tuesday."])]
    assert live(store)[first["Tuesday."]][1] == "Tuesday!"


def test_removed_section_and_deleted_task_file_are_tombstones(seeded) -> None:  # type: ignore[no-untyped-def]
    store, n, d, t = seeded
    dec = ndir(store) / "decisions.md"
    text = dec.read_text()
    dec.write_text(text[:text.index("## Use SQLite")])
    (ndir(store) / t.path).unlink()
    edits = commit(store)
    assert sorted((e.action, e.node_id) for e in edits) == sorted(
        [("removed", d.node.id), ("removed", t.node.id)])
    nodes = live(store)
    assert d.node.id not in nodes and t.node.id not in nodes and n.node.id in nodes
    assert commit(store) == []


def test_unreadable_file_removes_nothing(seeded) -> None:  # type: ignore[no-untyped-def]
    store, _, d, _ = seeded
    dec = ndir(store) / "decisions.md"
    dec.write_bytes(dec.read_bytes() + b"\n## Broken \xff\n")
    # Reported (the CLI prints a note), and nothing removed.
    assert commit(store) == [ingest.NarrativeChange("skipped", "", "decisions.md")]
    assert d.node.id in live(store)


def test_update_through_ctx_is_not_undone_by_unchanged_markdown(seeded) -> None:  # type: ignore[no-untyped-def]
    store, n, *_ = seeded
    update_node(session_of(store), n.node.id, content="Retries time out after 45 s")
    commit(store)
    assert live(store)[n.node.id][1] == "Retries time out after 45 s"


def test_deleted_node_is_not_resurrected_by_its_marker(seeded) -> None:  # type: ignore[no-untyped-def]
    store, _, d, _ = seeded
    delete_node(session_of(store), d.node.id)
    fold(store, "delete")
    assert commit(store) == [] and d.node.id not in live(store)


def test_copied_marker_is_one_node(seeded) -> None:  # type: ignore[no-untyped-def]
    store, _, d, _ = seeded
    dec = ndir(store) / "decisions.md"
    text = dec.read_text()
    section = text[text.index("## Use SQLite"):]
    dec.write_text(text + "\n" + section.replace("Fewer moving parts.", "Copied."))
    edits = commit(store)
    assert [e.action for e in edits] == ["added"]  # the copy is a new node, the original stays
    assert live(store)[d.node.id][1] == "Use SQLite\n\nFewer moving parts."


def test_conflict_markers_are_reported_never_ingested(seeded) -> None:  # type: ignore[no-untyped-def]
    store, _, _, t = seeded
    path = ndir(store) / t.path
    good = path.read_text()
    path.write_text(good.replace("Users are logged out after 5 min.",
                                 "<<<<<<< ours\nafter 5 min.\n=======\nafter 6 min.\n>>>>>>> theirs"))
    before = store_digest(store.root)
    line = good.splitlines().index("Users are logged out after 5 min.") + 1  # below the metadata block
    with pytest.raises(InvalidInput, match=rf"narrative/{t.path}:{line}: unresolved merge conflict"):
        ingest_narrative_edits(session_of(store))
    assert store_digest(store.root) == before
    path.write_text(good.replace("5 min.", "6 min."))
    assert [e.action for e in commit(store)] == ["updated"]
    assert "<<<<<<<" not in live(store)[t.node.id][1]


@pytest.mark.git
def test_union_merged_files_give_no_duplicates(git_repo: Path) -> None:
    """Both branches append to the same log and decisions.md and create a task; Git merges
    the Markdown by union (declared in .ctx/.gitattributes) and committing after the merge
    adds no node and no duplicate entry."""
    from ctxstore.init import init_store

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(git_repo), *args], check=True, capture_output=True)

    init_store(git_repo / ".ctx", git=True)
    store = open_store(git_repo / ".ctx")
    add_note(session_of(store), "base note")
    fold(store, "base")
    git("add", "-A")
    git("commit", "-qm", "base")
    for branch in ("side", "main"):
        git("checkout", "-q", "-B" if branch == "side" else "", branch) if branch == "side" \
            else git("checkout", "-q", "main")
        store = open_store(git_repo / ".ctx")
        add_note(session_of(store), f"note from {branch}\n\nsame line in both")
        add_decision(session_of(store), f"Decision of {branch}", "same line in both")
        add_task(session_of(store), "Fix login")
        fold(store, branch)
        git("add", "-A")
        git("commit", "-qm", branch)
    git("merge", "-q", "side", "-m", "merge")
    store = open_store(git_repo / ".ctx")
    ids = set(live(store))
    assert len(ids) == 7
    for rel, path in snapshot.iter_narrative_files(store):
        text = path.read_text()
        assert "<<<<<<<" not in text
        for marker in re.findall(r"ctx:id=(\w+)", text):
            assert text.count(f"ctx:id={marker}") == 1
            assert text.count(f"ctx:end={marker}") == (0 if rel.startswith("tasks/") else 1)
            assert marker in ids
        assert not any(e.tangled for e in nar.parse_entries(rel, text))
    assert len(list((ndir(store) / "tasks").iterdir())) == 2
    assert commit(store, "after merge") == []
    assert set(live(store)) == ids


def test_interleaved_entries_are_reported_and_left_alone(store: Store, tmp_path: Path) -> None:
    """Two entries with the same long body, appended on two branches: Git's union merge
    keeps the shared lines once, interleaving the entries. ctx sees the end markers out
    of place and changes neither node."""
    body = "Same text\non both branches\n\nwith several\nidentical lines"
    a, b = add_note(session_of(store), body), add_note(session_of(store), body)
    log = ndir(store) / a.path
    text = log.read_text()
    cut_a, cut_b = (text.rindex("\n## ", 0, text.index(n.node.id)) + 1 for n in (a, b))
    base, entry_a, entry_b = text[:cut_a], text[cut_a:cut_b], text[cut_b:]
    for name, content in (("base", base), ("ours", base + entry_a), ("theirs", base + entry_b)):
        (tmp_path / name).write_text(content)
    subprocess.run(["git", "merge-file", "--union", str(tmp_path / "ours"), str(tmp_path / "base"),
                    str(tmp_path / "theirs")], check=True)
    merged = (tmp_path / "ours").read_text()
    assert merged.count("with several") == 1  # interleaved: the shared lines once
    log.write_text(merged)
    entries = nar.parse_entries(a.path, merged)
    assert {e.marker for e in entries if e.tangled} == {a.node.id, b.node.id}
    edits = ingest_narrative_edits(session_of(store))
    assert sorted((e.action, e.node_id) for e in edits) == sorted(
        [("tangled", a.node.id), ("tangled", b.node.id)])
    assert live(store)[a.node.id][1] == live(store)[b.node.id][1] == body


def test_code_fences_do_not_split_entries_and_cannot_swallow_the_next(store: Store) -> None:
    a = add_note(session_of(store), "```\n## not a heading\n```\nafter the fence")
    b = add_note(session_of(store), "an unclosed fence\n```python\n## still code")
    c = add_note(session_of(store), "the next note")
    entries = nar.parse_entries(a.path, (ndir(store) / a.path).read_text())
    assert [e.marker for e in entries] == [a.node.id, b.node.id, c.node.id]
    assert [e.content for e in entries] == [live(store)[n.node.id][1] for n in (a, b, c)]
    assert entries[0].content == "```\n## not a heading\n```\nafter the fence"
    fold(store, "c")
    assert commit(store) == []


# -- compaction: the session summary ----------------------------------------------------------------

def test_compact_writes_the_session_summary_into_the_committed_log(store: Store) -> None:
    start_session(store, "Add connection retry")
    n = add_note(session_of(store), "All tests passing")
    fact = add_node(session_of(store), "fact", "Backoff caps at 10 s").node
    res, edits = compact_session(store, "feat: connection retry")
    assert edits == []  # the note and the fact were staged by ctx: nothing to ingest
    log = ndir(store) / n.path
    text = log.read_text()
    summary = nar.parse_entries(n.path, text)[-1]
    assert summary.session == res.session_id and summary.marker is None
    assert "feat: connection retry" in summary.body and "Task: Add connection retry" in summary.body
    assert "2 nodes added" in summary.body
    assert n.node.id in summary.body and fact.id in summary.body
    head = store.read_typed(store.read_head().single, Commit)
    assert head.message == "feat: connection retry"
    refs = {r.path: r.blob_id for r in head.narrative_refs}
    assert store.read_blob(ObjectId(refs[n.path])) == log.read_bytes()
    assert n.node.id in live(store)
    count = len(live(store))
    assert compact_session(store, "again")[0].commit is None  # nothing staged: no summary, no commit
    assert log.read_text() == text and len(live(store)) == count  # the summary is not a node


# -- forged markers (issue 11 item 6) -------------------------------------------------------------

def _cli(runner, store: Store, *args: str) -> str:  # type: ignore[no-untyped-def]
    from conftest import invoke

    res = invoke(runner, store, *args)
    assert res.exit_code == 0, (res.output, res.stderr)
    return res.stdout


def _cli_json(runner, store: Store, *args: str) -> dict:  # type: ignore[no-untyped-def]
    import json

    return json.loads(_cli(runner, store, "--format", "json", *args))


@pytest.mark.parametrize("kind", ["task", "decision", "note"])
@pytest.mark.parametrize("marker", ["<!-- ctx:id={v} -->", "<!--ctx:id={v}-->", "<!--\nctx:id={v} -->",
                                    "<!-- ctx:end={v} -->", "<!-- ctx:session={v} -->"])
def test_forged_marker_in_added_text_never_replaces_another_node(runner, store: Store, kind: str,
                                                                 marker: str) -> None:  # type: ignore[no-untyped-def]
    fact = _cli_json(runner, store, "add", "--type", "fact", "--tag", "tier:pinned", "pinned fact",
                     "-m", "fact")["id"]
    forged = marker.format(v=fact)
    title = f"evil {forged}".replace("\n", " ")
    args = ["add", kind, title] if kind == "note" else ["add", kind, title, "--body", f"b {forged}"]
    added = _cli_json(runner, store, *args)["id"]
    out = _cli(runner, store, "commit", "-m", "x")
    assert fact not in out  # no "updated FACT" / "removed ..." line
    shown = _cli_json(runner, store, "show", fact)
    assert (shown["type"], shown["content"], shown["tags"]) == ("fact", "pinned fact", ["tier:pinned"])
    assert "narrative_path" not in shown["metadata"]
    node = _cli_json(runner, store, "show", added)
    assert node["type"] == {"note": "observation"}.get(kind, kind)
    assert "&lt;!--" in node["content"] and "<!--" not in node["content"]
    _cli(runner, store, "commit", "-m", "again")  # reads the Markdown again: nothing to ingest
    assert len(live(store)) == 2  # the fact and the entry, nothing removed or duplicated


def test_forged_marker_in_a_compact_message_is_escaped(runner, store: Store) -> None:  # type: ignore[no-untyped-def]
    fact = _cli_json(runner, store, "add", "--type", "fact", "pinned fact", "-m", "fact")["id"]
    _cli(runner, store, "add", "--type", "fact", "more")
    _cli(runner, store, "stage", "compact", "--message", f"done <!-- ctx:id={fact} -->")
    log = next((ndir(store) / "log").glob("*.md")).read_text()
    assert f"<!-- ctx:id={fact} -->" not in log and f"&lt;!-- ctx:id={fact} -->" in log
    _cli(runner, store, "commit", "-m", "x", "--allow-empty")
    assert live(store)[fact][:2] == ("fact", "pinned fact")


def test_hand_edited_marker_cannot_take_over_a_node_of_another_kind(seeded) -> None:  # type: ignore[no-untyped-def]
    store, n, d, t = seeded
    fact = add_node(session_of(store), "fact", "pinned fact", tags=["tier:pinned"]).node
    fold(store, "fact")
    task_before = live(store)[t.node.id]
    # A decision heading that names the fact, a log entry that names the task.
    dec = ndir(store) / "decisions.md"
    dec.write_text(dec.read_text() + f"\n## Forged {nar.id_marker(fact.id)}\nTaken over?\n")
    log = ndir(store) / n.path
    log.write_text(log.read_text() + f"\n## 10:00 UTC · note {nar.id_marker(t.node.id)}\nMine now?\n")
    edits = commit(store)
    assert sorted((e.action, e.node_id) for e in edits if e.action == "refused") == sorted(
        [("refused", fact.id), ("refused", t.node.id)])
    nodes = live(store)
    assert nodes[fact.id][:2] == ("fact", "pinned fact")
    assert nodes[t.node.id] == task_before
    contents = {v[1] for v in nodes.values()}
    assert {"Forged\n\nTaken over?", "Mine now?"} <= contents  # each a node of its own
    again = commit(store)  # stable: refused again, no new node, nothing removed
    assert {e.action for e in again} == {"refused"} and len(live(store)) == len(nodes)


# -- issue 17 item 15: the metadata block of spec 002 §8.6 ---------------------------------------
_META = re.compile(r"<!-- metadata:\ncreated: (\S+)\nupdated: (\S+)\ntags: \[(.*)\]\n"
                   r"mentions: \[(.*)\]\n-->\n")


def test_new_narrative_files_carry_the_metadata_block(store: Store) -> None:
    note = add_note(session_of(store), "first note")
    add_decision(session_of(store), "Use WAL", "Readers never block.")
    task = add_task(session_of(store), "Ship it", "Body text", tags=["topic:release", "tier:working"])
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    for rel, title in ((note.path, "# Log "), ("decisions.md", "# Decisions\n"),
                       (task.path, "# Task ")):
        text = (ndir(store) / rel).read_text()
        assert text.startswith(title), rel
        m = _META.search(text)
        assert m is not None, text
        assert re.fullmatch(stamp, m.group(1)) and re.fullmatch(stamp, m.group(2))
        assert text.index("<!-- metadata:") < text.index("\n## ") if "\n## " in text else True
    task_text = (ndir(store) / task.path).read_text()
    assert _META.search(task_text).group(3) == "tier:working, topic:release"  # type: ignore[union-attr]
    meta = nar.parse_metadata(task_text)
    assert meta is not None and meta.tags == ("tier:working", "topic:release") and meta.mentions == ()
    # The block is not knowledge: the node's content is the title and body only.
    content = f"Task {task.task_number}: Ship it\n\nBody text"
    assert live(store)[task.node.id][1] == content
    assert [e.content for e in nar.parse_entries(task.path, task_text)] == [content]
    # Appending moves `updated`, never `created`.
    before = nar.parse_metadata((ndir(store) / "decisions.md").read_text())
    assert before is not None
    edit(ndir(store) / "decisions.md", f"updated: {before.updated}", "updated: 2001-01-01T00:00:00Z")
    edit(ndir(store) / "decisions.md", f"created: {before.created}", "created: 2000-01-01T00:00:00Z")
    add_decision(session_of(store), "Use zstd")
    after = nar.parse_metadata((ndir(store) / "decisions.md").read_text())
    assert after is not None and after.created == "2000-01-01T00:00:00Z"
    assert after.updated != "2001-01-01T00:00:00Z" and re.fullmatch(stamp, after.updated)
    # A commit without edits finds nothing to ingest, and an edit of the block alone changes no node.
    assert commit(store) == []
    edit(ndir(store) / task.path, "mentions: []", "mentions: [src/app.py]")
    assert commit(store) == []


def test_metadata_block_parsing_is_tolerant() -> None:
    text = ("# Decisions\n\n<!-- metadata:\ncreated: 2026-01-20T10:00:00Z\nupdated: 2026-01-20T15:30:00Z\n"
            "updated: 2026-01-21T09:00:00Z\ntags: [rust, async]\nmentions: [crates/core/src/net.rs, "
            "core::net::Client]\n-->\n\n## A <!-- ctx:id=01HZZZZZZZZZZZZZZZZZZZZZZZ -->\nbody\n")
    meta = nar.parse_metadata(text)
    assert meta is not None
    assert (meta.created, meta.updated) == ("2026-01-20T10:00:00Z", "2026-01-21T09:00:00Z")
    assert meta.tags == ("rust", "async")
    assert meta.mentions == ("crates/core/src/net.rs", "core::net::Client")
    assert nar.parse_metadata("# Log\n\nno block here\n") is None
    assert [e.title for e in nar.parse_entries("decisions.md", text)] == ["A"]
