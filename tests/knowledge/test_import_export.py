"""In-process tests of ``ctxstore.knowledge.exchange`` along its phases: parse, build the
plan (pure: no store), stage the plan (what the store has, one change batch), and the
export document; plus ``ctxstore.knowledge.sources`` (a file ingested as a source node)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import run_ctx, session_of, store_digest

from ctxstore.clock import now_ms
from ctxstore.errors import InvalidInput
from ctxstore.index import open_index
from ctxstore.index.read import find_node
from ctxstore.knowledge import exchange as kx
from ctxstore.knowledge.edges import link_nodes
from ctxstore.knowledge.nodes import add_node, delete_node
from ctxstore.knowledge.sources import MAX_INGEST_BYTES, ingest_file
from ctxstore.knowledge.views import create_view
from ctxstore.repo import Store

A, B = "01HQ00000000000000000000AA", "01HQ00000000000000000000BB"
HOUR_MS = 3_600_000


def doc(nodes: list[dict] | None = None, edges: list[dict] | None = None,
        views: list[dict] | None = None) -> dict:
    return {"version": 1, "format": "ctx-export", "nodes": nodes or [], "edges": edges or [],
            "views": views or []}


def export(store: Store, node_ids: list[str] | None = None) -> dict:
    conn = open_index(store)
    try:
        return kx.export_document(conn, node_ids=node_ids)
    finally:
        conn.close()


def node_of(store: Store, node_id: str):
    conn = open_index(store)
    try:
        return find_node(conn, node_id)
    finally:
        conn.close()


@pytest.fixture
def full(store: Store) -> Store:
    a = add_node(session_of(store), "fact", "alpha", tags=["tier:working"], metadata={"k": 1}).node.id
    b = add_node(session_of(store), "decision", "beta " * 2000).node.id  # kept as a blob
    link_nodes(session_of(store), a, b, "DEPENDS_ON")
    create_view(session_of(store), "mine", "type:fact", 1000, "facts")
    return store


def test_parse_document_refuses_duplicate_keys_nan_and_a_bom() -> None:
    assert kx.parse_document(b'{"a": 1}') == {"a": 1}
    for text, match in (('{"a": 1, "a": 2}', "duplicate key"), ('{"a": NaN}', "NaN"),
                        ("\ufeff{}", "byte-order mark"), ("[]", "must be a JSON object"),
                        (b"\xff", "not UTF-8")):
        with pytest.raises(InvalidInput, match=match):
            kx.parse_document(text)


def test_build_import_plan_is_pure_and_clamps_the_future() -> None:
    now = 1_700_000_000_000
    plan = kx.build_import_plan(doc(
        nodes=[{"id": A, "type": "fact", "content": "a", "updated_at": "2999-01-01T00:00:00Z"},
               {"id": B, "type": "fact", "content": "b" * 5000}],
        edges=[{"from": A, "to": B, "type": "depends-on"}],
        views=[{"name": "v", "query": "type:fact", "budget": 10}]), now=now)
    assert [n.id for n in plan.nodes] == [A, B]
    assert plan.nodes[0].updated_at == now and plan.nodes[1].created_at == now
    assert set(plan.blobs) == {B} and plan.nodes[1].content is None
    assert [(e.label, e.evidence) for e in plan.edges] == [("DEPENDS_ON", {"tool": "import"})]
    assert [v.name for v in plan.views] == ["v"]


@pytest.mark.parametrize("bad,match", [
    (doc(nodes=[{"id": A, "type": "nope", "content": "x"}]), r"nodes\[0\]\.type"),
    (doc(nodes=[{"id": A, "type": "fact", "content": "x"}] * 2), "duplicate id"),
    (doc(edges=[{"from": A, "to": A, "type": "RELATES_TO"}]), "two different nodes"),
    (doc(views=[{"name": "v", "query": "(", "budget": 1}]), r"views\[0\]\.query"),
    ({**doc(), "version": 2}, "unsupported export version"),
    ({**doc(), "format": "x"}, "not a ctx export"),
])
def test_build_import_plan_names_the_first_invalid_item(bad: dict, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        kx.build_import_plan(bad, now=now_ms())


def test_export_then_import_into_an_empty_store_round_trips(full: Store, tmp_path: Path) -> None:
    from ctxstore.init import init_store
    from ctxstore.repo import open_store

    init_store(tmp_path / "other" / ".ctx", git=False)
    empty = open_store(tmp_path / "other" / ".ctx")
    first = export(full)
    report = kx.import_document(session_of(empty), json.dumps(first), merge=False)
    assert (report.nodes, report.edges, report.views, report.skipped) == (2, 1, 1, [])
    assert report.staged is not None
    assert export(empty) == first


def test_stage_import_plan_refuses_what_the_store_has_without_merge(full: Store) -> None:
    plan = kx.build_import_plan(export(full), now=now_ms())
    before = store_digest(full.root)
    with pytest.raises(InvalidInput, match="2 nodes are already in the store"):
        kx.stage_import_plan(session_of(full), plan, merge=False)
    assert store_digest(full.root) == before
    report = kx.stage_import_plan(session_of(full), plan, merge=True)
    assert (report.nodes, report.edges, report.views, report.staged) == (0, 0, 0, None)
    assert (len(report.skipped), report.skipped_edges, report.skipped_views) == (2, 1, 1)
    assert store_digest(full.root) == before


def test_stage_import_plan_refuses_an_edge_to_a_node_found_nowhere(store: Store) -> None:
    plan = kx.build_import_plan(doc(nodes=[{"id": A, "type": "fact", "content": "a"}],
                                    edges=[{"from": A, "to": B, "type": "RELATES_TO"}]),
                                now=now_ms())
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match=f"node {B} is neither in the document nor in the store"):
        kx.stage_import_plan(session_of(store), plan, merge=True)
    assert store_digest(store.root) == before


def test_import_restores_a_deleted_node_after_its_tombstone(full: Store) -> None:
    exported = export(full)
    node_id = exported["nodes"][0]["id"]
    delete_node(session_of(full), node_id)
    assert node_of(full, node_id) is None
    report = kx.import_document(session_of(full), exported, merge=True)
    assert report.nodes == 1
    got = node_of(full, node_id)
    assert got is not None and got.content == exported["nodes"][0]["content"]


def test_export_of_some_nodes_keeps_only_edges_between_them_and_no_views(full: Store) -> None:
    whole = export(full)
    one = whole["nodes"][0]["id"]
    part = export(full, [one, "0" * 26])
    assert [n["id"] for n in part["nodes"]] == [one]
    assert (part["edges"], part["views"]) == ([], [])


def test_read_document_file_is_bounded_and_never_blocks(tmp_path: Path) -> None:
    good = tmp_path / "doc.json"
    good.write_text("{}")
    assert kx.read_document_file(good) == b"{}"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="not a regular file"):
        kx.read_document_file(fifo)
    with pytest.raises(InvalidInput, match="no such file"):
        kx.read_document_file(tmp_path / "missing")


def test_ingest_file_stores_a_source_node_with_its_origin(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\nhello\n")
    added = ingest_file(session_of(store), path, tags=["project:x"])
    got = node_of(store, added.node.id)
    assert got is not None
    assert (got.type, got.content, got.tags) == ("source", "# Notes\nhello\n", ["project:x"])
    # tmp_path holds the work tree (tmp_path/work): the file is outside it, named alone
    assert got.metadata["path"] == "notes.md" and got.metadata["bytes"] == 14
    assert len(got.metadata["sha256"]) == 64 and got.metadata["outside_worktree"] is True


def test_ingest_file_never_records_this_machines_directories(store: Store, tmp_path: Path) -> None:
    # The node is committed and shared: a file in the work tree is named relative to it, one
    # outside by its name alone, never by an absolute path.
    inside = store.worktree / "docs" / "guide.md"
    inside.parent.mkdir()
    inside.write_text("guide\n")
    outside = tmp_path / "mail.txt"  # beside the work tree (tmp_path/work)
    outside.write_text("a letter\n")
    got_in = node_of(store, ingest_file(session_of(store), inside).node.id)
    got_out = node_of(store, ingest_file(session_of(store), outside).node.id)
    assert got_in is not None and got_out is not None
    assert got_in.metadata["path"] == "docs/guide.md"
    assert (got_out.metadata["path"], got_out.metadata["outside_worktree"]) == ("mail.txt", True)
    assert "outside_worktree" not in got_in.metadata
    assert str(tmp_path) not in json.dumps([got_in.metadata, got_out.metadata])


@pytest.mark.parametrize("data,match", [
    (b"a\0b", "binary"), (b"\xff\xfe", "not UTF-8"), (b"  \n", "empty"),
])
def test_ingest_file_refuses_what_is_not_text_writing_nothing(store: Store, tmp_path: Path,
                                                              data: bytes, match: str) -> None:
    path = tmp_path / "f"
    path.write_bytes(data)
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match=match):
        ingest_file(session_of(store), path)
    assert store_digest(store.root) == before


def test_ingest_file_refuses_a_file_over_the_limit(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "big"
    with path.open("wb") as fh:
        fh.truncate(MAX_INGEST_BYTES + 1)
    with pytest.raises(InvalidInput, match="larger than"):
        ingest_file(session_of(store), path)


def _cli(store: Path, *args: str) -> str:
    res = run_ctx(["--ctx-dir", str(store), *args])
    assert res.returncode == 0, res.stderr
    return res.stdout


def _contents(store: Path) -> set[str]:
    doc = json.loads(_cli(store, "--format", "json", "list"))
    rows = doc["nodes"] if isinstance(doc, dict) else doc
    return {r["content"].split("\n")[0] for r in rows}


@pytest.mark.slow
def test_import_of_narrative_nodes_into_another_store_survives_its_next_commit(
        tmp_path: Path) -> None:
    """Decisions, notes and tasks exported from one project and imported into another.

    Their metadata ties them to narrative entries of the first project; the importing store
    has no such entries, so the next commit must not read them as entries a person deleted
    (it removed them all). In a store that has the entries (a clone restoring nodes), they
    stay tied: the commit changes nothing and duplicates nothing.
    """
    src, dst, clone = tmp_path / "src", tmp_path / "dst", tmp_path / "clone"
    for root in (src, dst, clone):
        _cli(root, "init", "--no-git")
    _cli(src, "add", "decision", "Use Postgres", "--body", "for analytics")
    _cli(src, "add", "note", "profiled the cache")
    _cli(src, "add", "task", "Migrate tables")
    _cli(src, "add", "--type", "fact", "plain fact")
    _cli(src, "commit", "-m", "work")
    exported = tmp_path / "export.json"
    exported.write_text(_cli(src, "export"))
    wanted = _contents(src)
    assert len(wanted) == 4, wanted

    _cli(dst, "import", str(exported))
    _cli(dst, "commit", "-m", "imported")
    assert _contents(dst) == wanted
    doc = json.loads(_cli(dst, "export"))
    assert not any("narrative_path" in n["metadata"] for n in doc["nodes"])

    # The same narrative files, not the nodes: the entries name the imported nodes.
    shutil.rmtree(clone / "narrative")
    shutil.copytree(src / "narrative", clone / "narrative")
    _cli(clone, "import", str(exported))
    out = _cli(clone, "--format", "json", "commit", "-m", "imported")
    assert json.loads(out)["narrative_edits"] == [], out
    assert _contents(clone) == wanted
    doc = json.loads(_cli(clone, "export"))
    assert sum("narrative_path" in n["metadata"] for n in doc["nodes"]) == 3
