"""In-process tests of ``ctxstore.knowledge.nodes`` on real stores: every node operation,
and archive/forget (archive, never delete)."""

from __future__ import annotations

import pytest
from conftest import no_git_provenance, session_of, store_digest

from ctxstore import ids
from ctxstore.errors import AmbiguousPrefix, InvalidInput, NodeNotFound
from ctxstore.index import open_index
from ctxstore.index.read import NodeRow, edges_of, find_node, node_versions
from ctxstore.knowledge import nodes as kn
from ctxstore.repo import Store


def node(store: Store, node_id: str) -> NodeRow | None:
    conn = open_index(store)
    try:
        return find_node(conn, node_id)
    finally:
        conn.close()


def history(store: Store, node_id: str) -> list[dict]:
    conn = open_index(store)
    try:
        return node_versions(conn, node_id)
    finally:
        conn.close()


def out_edges(store: Store, node_id: str, label: str | None = None) -> list[tuple[str, str]]:
    conn = open_index(store)
    try:
        return [(e.to_key, e.label) for e in edges_of(conn, node_id, "out", label)]
    finally:
        conn.close()


def add(store: Store, content: str, *tags: str, node_type: str = "fact") -> str:
    return kn.add_node(session_of(store), node_type, content, tags=list(tags)).node.id


def test_add_node_stages_a_node_with_clean_tags_and_metadata(store: Store) -> None:
    added = kn.add_node(session_of(store), "decision", "use WAL", tags=[" tier:working ", "b", "b"],
                        metadata={"k": [1, 2]}, author="me")
    got = node(store, added.node.id)
    assert got is not None and ids.is_ulid(got.id)
    assert (got.type, got.content, got.tags, got.metadata, got.author, got.status) == \
        ("decision", "use WAL", ["b", "tier:working"],
         {"k": [1, 2], "provenance": no_git_provenance()}, "me", "active")
    assert len(added.staged.batches) == 1


def test_add_node_keeps_large_content_in_a_blob(store: Store) -> None:
    text = "x" * (kn.INLINE_CONTENT_BYTES + 1)
    added = kn.add_node(session_of(store), "source", text)
    assert added.node.content is None and added.node.content_blob is not None
    assert store.read_blob(added.node.content_blob).decode() == text
    got = node(store, added.node.id)
    assert got is not None and got.content == text


@pytest.mark.parametrize("node_type,content,tags,match", [
    ("nope", "text", [], "unknown node type"),
    ("fact", "   ", [], "empty"),
    ("fact", "text", ["not a tag!"], "invalid tag"),
    ("fact", "bad \udc80 text", [], "not valid Unicode"),
])
def test_add_node_refuses_bad_input_and_writes_nothing(store: Store, node_type: str, content: str,
                                                       tags: list[str], match: str) -> None:
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match=match):
        kn.add_node(session_of(store), node_type, content, tags=tags)
    assert store_digest(store.root) == before


def test_update_node_changes_fields_merges_metadata_and_stamps_after_the_old_version(
        store: Store) -> None:
    nid = kn.add_node(session_of(store), "fact", "old", metadata={"a": 1, "b": 2}).node.id
    old = node(store, nid)
    assert old is not None
    res = kn.update_node(session_of(store), nid[:10], content="new", node_type="pattern",
                         metadata={"a": "", "c": 3}, summary="short")
    assert res.changed and len(res.records) == 1
    got = node(store, nid)
    assert got is not None
    # an update keeps where the node came from (outside Git here: no branch, no commit)
    assert (got.content, got.type, got.metadata, got.summary) == (
        "new", "pattern", {"b": 2, "c": 3, "provenance": no_git_provenance()}, "short")
    assert got.updated_at > old.updated_at
    assert res.records[0].prev == old.version  # type: ignore[union-attr]


def test_update_node_refuses_nothing_to_change_and_unknown_nodes(store: Store) -> None:
    nid = add(store, "x")
    with pytest.raises(InvalidInput, match="nothing to update"):
        kn.update_node(session_of(store), nid)
    with pytest.raises(NodeNotFound):
        kn.update_node(session_of(store), "0" * 26, content="y")


def test_node_prefix_shared_by_two_nodes_is_ambiguous(store: Store) -> None:
    a = kn.add_node(session_of(store), "fact", "a", node_id="01HQ0000000000000000000001").node.id
    kn.add_node(session_of(store), "fact", "b", node_id="01HQ0000000000000000000002")
    with pytest.raises(AmbiguousPrefix):
        kn.tag_node(session_of(store), a[:20], ["x"])


def test_tag_and_untag_are_idempotent(store: Store) -> None:
    nid = add(store, "x", "a")
    assert kn.tag_node(session_of(store), nid, ["b", "a"]).changed
    assert not kn.tag_node(session_of(store), nid, ["a", "b"]).changed
    assert node(store, nid).tags == ["a", "b"]  # type: ignore[union-attr]
    assert kn.untag_node(session_of(store), nid, ["a", "zzz"]).changed
    assert not kn.untag_node(session_of(store), nid, ["a"]).changed
    assert node(store, nid).tags == ["b"]  # type: ignore[union-attr]
    with pytest.raises(InvalidInput, match="no tag"):
        kn.tag_node(session_of(store), nid, [])


def test_delete_node_removes_its_edges_and_with_cascade_what_derives_from_it(store: Store) -> None:
    root, kid, grandkid, other = (add(store, t) for t in ("root", "kid", "grandkid", "other"))
    from ctxstore.knowledge.edges import link_nodes

    link_nodes(session_of(store), kid, root, "DERIVED_FROM")
    link_nodes(session_of(store), grandkid, kid, "DERIVED_FROM")
    link_nodes(session_of(store), other, root, "RELATES_TO")
    res = kn.delete_node(session_of(store), root, cascade=True)
    assert {type(r).__name__ for r in res.records} == {"NodeRemoved", "EdgeRemoved"}
    assert [node(store, n) for n in (root, kid, grandkid)] == [None, None, None]
    assert node(store, other) is not None and out_edges(store, other) == []


def test_delete_node_without_cascade_keeps_derived_nodes(store: Store) -> None:
    root, kid = add(store, "root"), add(store, "kid")
    from ctxstore.knowledge.edges import link_nodes

    link_nodes(session_of(store), kid, root, "DERIVED_FROM")
    kn.delete_node(session_of(store), root)
    assert node(store, root) is None and node(store, kid) is not None
    assert out_edges(store, kid) == []


def test_supersede_marks_the_old_node_and_links_once(store: Store) -> None:
    old, new = add(store, "old"), add(store, "new")
    assert len(kn.supersede_node(session_of(store), old, new).records) == 2
    assert not kn.supersede_node(session_of(store), old, new).changed
    assert node(store, old).superseded_by == new  # type: ignore[union-attr]
    assert out_edges(store, new, "SUPERSEDES") == [(old, "SUPERSEDES")]
    with pytest.raises(InvalidInput, match="itself"):
        kn.supersede_node(session_of(store), old, old)


def test_summarize_derives_from_each_source_once_and_can_archive_them(store: Store) -> None:
    a, b = add(store, "a", "tier:working", "x"), add(store, "b", "tier:pinned")
    summary, res = kn.summarize_nodes(session_of(store), [a, b, a[:12]], "a and b", archive_sources=True,
                                      tags=["tier:reference"])
    assert summary.type == "summary" and summary.tags == ("tier:reference",)
    derived = sorted([(a, "DERIVED_FROM"), (b, "DERIVED_FROM")])
    assert sorted(out_edges(store, summary.id)) == derived
    assert node(store, a).tags == ["tier:off-context", "x"]  # type: ignore[union-attr]
    assert node(store, b).tags == ["tier:off-context"]  # type: ignore[union-attr]
    assert len(res.records) == 5  # summary, two edges, two archived sources


def test_summarize_refuses_no_sources_and_content_over_the_callers_limit(store: Store) -> None:
    a = add(store, "a")
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match="at least one source"):
        kn.summarize_nodes(session_of(store), [], "text")
    with pytest.raises(InvalidInput, match="over the limit of 10"):
        kn.summarize_nodes(session_of(store), [a], "x" * 11, max_content=10)
    assert store_digest(store.root) == before
    assert kn.summarize_nodes(session_of(store), [a], "x" * 10, max_content=10)[1].changed


@pytest.mark.parametrize("operation", [kn.archive_node, kn.forget_node])
def test_archive_and_forget_archive_never_delete_and_keep_history(store: Store, operation) -> None:
    nid = add(store, "keep me", "tier:working", "project:x")
    res = operation(session_of(store), nid[:8])
    assert res.changed
    got = node(store, nid)
    assert got is not None, "an archived node stays in the store"
    assert (got.status, got.tags, got.content) == ("archived", ["project:x", "tier:off-context"],
                                                   "keep me")
    assert [v["kind"] for v in history(store, nid)] == ["node", "node"]
    assert not operation(session_of(store), nid).changed  # archived already: a no-op
    assert len(history(store, nid)) == 2


def test_forget_of_an_unknown_node_is_refused_and_writes_nothing(store: Store) -> None:
    before = store_digest(store.root)
    with pytest.raises(NodeNotFound):
        kn.forget_node(session_of(store), "0" * 26)
    assert store_digest(store.root) == before


def test_with_tier_replaces_every_tier_tag() -> None:
    tags = ["tier:working", "tier:pinned", "a"]
    assert kn.with_tier(tags, "reference") == ("a", "tier:reference")


def test_forget_and_archive_are_recorded_under_their_own_names(store: Store) -> None:
    from ctxstore.staging import stage_chain

    a, b = add(store, "a"), add(store, "b")
    kn.forget_node(session_of(store), a)
    assert stage_chain(store, store.staged_heads())[-1][1].message == f"forget {a}"
    kn.archive_node(session_of(store), b)
    assert stage_chain(store, store.staged_heads())[-1][1].message == f"archive {b}"
