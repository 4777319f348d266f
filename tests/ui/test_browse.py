"""The use cases behind the pages of ``ctx ui`` (ctxstore.browse), on a real store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ctxstore.browse.graph import read_graph
from ctxstore.browse.node import EndpointPage, NodePage, read_node_page
from ctxstore.browse.pack import explore_pack
from ctxstore.browse.timeline import read_timeline
from ctxstore.browse.transcripts import read_transcripts, search_transcripts_read_only
from ctxstore.errors import InvalidInput, NodeNotFound, UnsupportedStoreVersion
from ctxstore.graph.scc import POINTER_NAME
from ctxstore.memory.db import memory_path, open_memory
from ctxstore.packs.request import PackRequest
from ctxstore.session import Session
from tests.ui.project import Project, make_project, tree_digest

NOW_MS = 1_800_000_000_000


@pytest.fixture
def db(project: Project):
    session = Session.open(project.ctx)
    yield session
    session.close()


def test_browse_timeline_holds_nodes_commits_and_sessions_newest_first(project: Project, db: Session) -> None:
    timeline = read_timeline(db)
    kinds = {(e.kind, e.type) for e in timeline.entries}
    assert {("node", "decision"), ("node", "task"), ("node", "observation"), ("node", "fact"),
            ("commit", "commit"), ("session", "session")} <= kinds
    stamps = [e.at_ms for e in timeline.entries]
    assert stamps == sorted(stamps, reverse=True)
    assert timeline.counts == {"decision": 1, "task": 1, "observation": 1, "fact": 1, "commit": 3,
                               "session": 1}
    decision = next(e for e in timeline.entries if e.id == project.decision)
    assert decision.title == "Keep the session cache in pkg/a.py behind one function, alpha()"
    session = next(e for e in timeline.entries if e.kind == "session")
    assert session.turns == 5 and session.title.startswith("How should we store the session cache")
    assert [e.title for e in timeline.entries if e.kind == "commit"] == [
        "second session: notes", "first session: the cache decision", "Initialize ctx store"]
    assert timeline.more is False and timeline.notes == ()


@pytest.mark.slow
def test_browse_timeline_keeps_commits_of_one_second_in_history_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits are stamped to the second: those of one second stay newest first, not by id."""
    from click.testing import CliRunner

    from ctxstore import staging
    from ctxstore.cli import cli
    from ctxstore.init import init_store

    ctx = tmp_path / ".ctx"
    init_store(ctx, git=False)
    monkeypatch.setattr(staging, "now_ms", lambda: 1_795_000_000_000)
    runner = CliRunner()
    for i in range(8):
        for args in (["add", "note", f"note number {i}"], ["commit", "-m", f"commit {i}"]):
            assert runner.invoke(cli, ["--ctx-dir", str(ctx), *args]).exit_code == 0
    session = Session.open(ctx)
    try:
        commits = [e for e in read_timeline(session).entries if e.kind == "commit"]
    finally:
        session.close()
    assert len({e.at_ms for e in commits[:8]}) == 1
    assert [e.title for e in commits[:8]] == [f"commit {i}" for i in reversed(range(8))]


def test_browse_timeline_limit_keeps_the_newest(db: Session) -> None:
    every = read_timeline(db).entries
    cut = read_timeline(db, limit=3)
    assert cut.entries == every[:3] and cut.more is True


def test_browse_node_page_has_history_edges_evidence_and_stale_mentions(project: Project) -> None:
    session = Session.open(project.ctx)
    try:
        page = read_node_page(session, project.decision[:10])
        assert isinstance(page, NodePage)
        assert page.id == project.decision and page.type == "decision"
        assert [v.content for v in page.versions] == [
            "Keep the session cache in pkg/a.py behind one function",
            "Keep the session cache in pkg/a.py behind one function, alpha()"]
        mention = next(e for e in page.edges if e.label == "Mentions")
        assert (mention.direction, mention.kind, mention.key) == ("out", "file", "pkg/a.py")
        assert dict(mention.evidence)["tool"] == "narrative" and "blob" in dict(mention.evidence)
        assert page.stale == ()
    finally:
        session.close()


def test_browse_node_page_names_a_stale_mention_after_the_file_changed(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project.work / "pkg/a.py").write_text("def alpha():\n    return 2\n")
    from click.testing import CliRunner

    from ctxstore.cli import cli

    assert CliRunner().invoke(cli, ["--ctx-dir", str(project.ctx), "index"]).exit_code == 0
    session = Session.open(project.ctx)
    try:
        page = read_node_page(session, project.decision)
    finally:
        session.close()
    assert isinstance(page, NodePage)
    assert [(s.kind, s.key, s.reason) for s in page.stale] == [("file", "pkg/a.py", "changed")]


def test_browse_endpoint_page_lists_what_links_to_a_file(db: Session, project: Project) -> None:
    page = read_node_page(db, "file:pkg/a.py")
    assert isinstance(page, EndpointPage)
    assert dict(page.path)["language"] == "python"
    assert [(e.key, e.label) for e in page.mentioned_by] == [(project.decision, "Mentions")]
    assert ("in", "Imports", "module", "pkg.b") in {(e.direction, e.label, e.kind, e.key)
                                                     for e in page.edges}


def test_browse_node_page_refuses_what_names_nothing(db: Session) -> None:
    with pytest.raises(NodeNotFound):
        read_node_page(db, "01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    with pytest.raises(InvalidInput):
        read_node_page(db, "planet:mars")


def test_browse_graph_folds_modules_into_files_and_marks_the_import_cycle(db: Session,
                                                                        project: Project) -> None:
    page = read_graph(db)
    ids = [n.id for n in page.nodes]
    assert {"file:pkg/a.py", "file:pkg/b.py", "file:pkg/c.py", f"node:{project.decision}"} <= set(ids)
    assert not [i for i in ids if i.startswith(("module:", "item:"))]
    assert page.cycles == (("file:pkg/a.py", "file:pkg/b.py"),)
    links = {(ids[link.source], ids[link.target]): link for link in page.links}
    assert links[("file:pkg/a.py", "file:pkg/b.py")].cycle
    assert links[("file:pkg/b.py", "file:pkg/a.py")].cycle
    assert not links[("file:pkg/c.py", "file:pkg/a.py")].cycle
    assert "Imports" in links[("file:pkg/c.py", "file:pkg/a.py")].labels
    assert {n.id: n.cycle for n in page.nodes}["file:pkg/a.py"] == 0
    assert {n.id: n.cycle for n in page.nodes}["file:pkg/c.py"] is None


def test_browse_graph_all_level_keeps_modules_and_items(db: Session) -> None:
    page = read_graph(db, level="all")
    ids = {n.id for n in page.nodes}
    assert {"module:pkg.a", "item:pkg.b.gamma"} <= ids
    assert any({"module:pkg.a", "module:pkg.b"} <= set(c) for c in page.cycles)


def test_browse_graph_limit_and_focus(db: Session, project: Project) -> None:
    cut = read_graph(db, limit=2)
    assert [n.id for n in cut.nodes] == ["file:pkg/a.py", "file:pkg/b.py"]  # the cycle first
    assert cut.total_nodes > 2
    near = read_graph(db, focus="file:pkg/c.py")
    assert near.focus == "file:pkg/c.py"
    assert near.nodes[0].id == "file:pkg/c.py"
    # c imports a (1 link), a reaches b and the decision (2 links); the fact links to nothing
    assert {n.id for n in near.nodes} >= {"file:pkg/a.py", "file:pkg/b.py"}
    assert f"node:{project.fact}" not in {n.id for n in near.nodes}
    with pytest.raises(InvalidInput):
        read_graph(db, level="planets")
    with pytest.raises(InvalidInput):
        read_graph(db, limit=0)
    with pytest.raises(InvalidInput):
        read_graph(db, focus="file:nowhere.py")


def test_browse_graph_computes_a_stale_scc_view_without_storing_it(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    pointer = project.ctx / "DERIVED" / POINTER_NAME
    pointer.unlink()  # as before the first rebuild: no stored view
    before = tree_digest(project.ctx)
    session = Session.open(project.ctx)
    try:
        page = read_graph(session)
    finally:
        session.close()
    assert page.scc_view is None and page.cycles == (("file:pkg/a.py", "file:pkg/b.py"),)
    assert not pointer.exists() and tree_digest(project.ctx) == before


def test_browse_pack_gives_items_costs_and_notes_and_writes_nothing(project: Project) -> None:
    session = Session.open(project.ctx)
    session.index()
    before = tree_digest(project.ctx)
    try:
        view = explore_pack(session, PackRequest("fix the retry loop in retry_loop", budget=4000))
    finally:
        session.close()
    assert tree_digest(project.ctx) == before
    items = view.pack.retrieved
    assert items and len(view.costs) == len(items)
    assert any(item.extra.get("path") == "pkg/c.py" for item in items)
    assert all(item.why for item in items)
    assert sum(view.costs) <= view.pack.token_budget.used <= 4000
    assert view.notes == ()


def test_browse_pack_notes_a_task_without_words_and_refuses_bad_input(db: Session) -> None:
    assert explore_pack(db, PackRequest("!!")).notes[0].startswith(
        "the task has no searchable words")
    with pytest.raises(InvalidInput):
        explore_pack(db, PackRequest("x" * 100_001))
    with pytest.raises(InvalidInput):
        explore_pack(db, PackRequest("retry", budget=0))


def test_browse_transcripts_topics_and_search(db: Session) -> None:
    page = read_transcripts(db)
    assert page.note is None and len(page.sessions) == 1
    assert page.sessions[0].turns == 5
    assert [t.depth for t in page.topics][0] == 0 and page.topics[0].session == page.sessions[0].id
    assert read_transcripts(db, session=page.sessions[0].id[:8]).session == page.sessions[0].id
    found = search_transcripts_read_only(db, "redis session cache", now_ms=NOW_MS)
    assert found.results and "SQLite" in found.results[0]["text"]
    assert found.results[0]["history"][0]["text"].startswith("We decided to use Redis")
    # where it was said: the branch Claude Code recorded; no commit, the project is not in Git
    assert {k: found.results[0]["provenance"][k] for k in ("session", "branch", "commit")} == {
        "session": page.sessions[0].id, "branch": "main", "commit": None}
    with pytest.raises(InvalidInput):
        search_transcripts_read_only(db, "x", now_ms=NOW_MS, intent="gossip")
    with pytest.raises(InvalidInput):
        search_transcripts_read_only(db, "x", now_ms=NOW_MS, since="the twelfth of never")


def test_browse_transcripts_never_migrate_an_older_memory_file(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    path = memory_path(project.ctx)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM schema_version WHERE version > 1")  # as a schema-1 file records it
    conn.commit()
    conn.close()
    before = tree_digest(project.ctx)
    session = Session.open(project.ctx)
    try:
        assert read_transcripts(session).note.startswith("E014: .ctx/local/memory.sqlite was "
                                                         "written by an older ctx")
        assert read_timeline(session).notes[0].startswith("transcript sessions are not shown")
        with pytest.raises(UnsupportedStoreVersion):
            open_memory(project.ctx, create=False, read_only=True)
    finally:
        session.close()
    assert tree_digest(project.ctx) == before


def test_browse_transcripts_without_memory_say_so(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{memory_path(project.ctx)}{suffix}").unlink(missing_ok=True)
    session = Session.open(project.ctx)
    try:
        assert read_transcripts(session).note.startswith("there is no transcript memory yet")
        assert search_transcripts_read_only(session, "cache", now_ms=NOW_MS).note
        assert not memory_path(project.ctx).exists()
    finally:
        session.close()
