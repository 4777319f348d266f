"""The SCC view: built at commit and rebuild, stored, pointed to, never trusted blindly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import networkx as nx
import pytest
from _derivedlib import code_rows, ctx, ctx_json, indexed_and_committed, make_cycle_repo
from hypothesis import given
from hypothesis import strategies as st

from ctxstore import fsio
from ctxstore.graph import scc
from ctxstore.model import decode_typed, encode_typed
from ctxstore.model.derived import SccView
from ctxstore.objects import LooseObjectStore
from ctxstore.repo import open_store

IMPORT_CYCLE = ["file:a.py", "file:b.py", "module:a", "module:b"]


def _view(ctx_dir: Path) -> tuple[str, SccView]:
    found = scc.load_scc(open_store(ctx_dir).root)
    assert found.notices == [] and found.view is not None and found.oid is not None
    return found.oid.hex(), found.view


def _pointer(ctx_dir: Path) -> Path:
    return ctx_dir / "DERIVED" / "scc_latest"


def test_commit_builds_the_view_with_the_import_cycle(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    oid, view = _view(ctx_dir)
    assert _pointer(ctx_dir).read_text() == oid + "\n"
    assert IMPORT_CYCLE in scc.cycles(view)
    assert ["item:a.f", "item:b.g"] in scc.cycles(view)  # mutual recursion
    # Every node in exactly one SCC; the DAG is acyclic and the ids are a topological order.
    groups = scc.members(view)
    assert sorted(n for g in groups for n in g) == list(view.nodes)
    pairs = list(zip(view.dag_from, view.dag_to, strict=True))
    assert all(a < b for a, b in pairs)
    assert nx.is_directed_acyclic_graph(nx.DiGraph(pairs))
    by_node = dict(zip(view.nodes, view.scc_of, strict=True))
    assert by_node["module:c"] < by_node["module:a"]  # c imports a: c's SCC comes first
    assert view.heads == (open_store(ctx_dir).read_head().heads[0],)


def test_debug_graph_cycles_scc_and_dot(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    doc = ctx_json(ctx_dir, "debug", "graph", "--cycles")
    assert IMPORT_CYCLE in doc["cycles"]
    text, _, _ = ctx(ctx_dir, "debug", "graph", "--cycles")
    assert "cycle 1 (4 members): file:a.py file:b.py module:a module:b" in text
    dag = ctx_json(ctx_dir, "debug", "graph", "--scc")
    assert dag["scc_view"] == _view(ctx_dir)[0]
    assert all(a < b for a, b in dag["dag"])
    assert sum(len(s["members"]) for s in dag["sccs"]) == len(_view(ctx_dir)[1].nodes)
    dot, _, _ = ctx(ctx_dir, "debug", "graph", "--format", "dot")
    assert dot.startswith("digraph ctx {") and '"module:a" -> "file:b.py" [label="Imports"];' in dot
    dot_scc, _, _ = ctx(ctx_dir, "debug", "graph", "--scc", "--format", "dot")
    assert "digraph scc {" in dot_scc and "s0 -> s1;" in dot_scc
    edges = ctx_json(ctx_dir, "debug", "graph")
    assert {"from": "item:a.f", "to": "item:b.g", "label": "Calls"} in edges["edges"]
    _, err, code = ctx(ctx_dir, "debug", "graph", "--format", "markdown", ok=False)
    assert code == 2 and "markdown" in err


def test_deleting_derived_and_index_then_rebuild_gives_the_same_view_and_tables(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    oid, _ = _view(ctx_dir)
    before = code_rows(ctx_dir)
    assert before["code_edges"] and before["chunks"]
    shutil.rmtree(ctx_dir / "DERIVED")
    shutil.rmtree(ctx_dir / "index")
    ctx(ctx_dir, "index")  # this clone's code index comes from the work tree
    doc = ctx_json(ctx_dir, "rebuild")
    assert doc["scc"]["id"] == oid and doc["scc"]["cycles"] == 2
    assert _view(ctx_dir)[0] == oid
    assert code_rows(ctx_dir) == before
    # --full and --incremental recompute the same view too.
    assert ctx_json(ctx_dir, "rebuild", "--full")["scc"]["id"] == oid
    assert ctx_json(ctx_dir, "rebuild", "--incremental")["scc"]["id"] == oid
    assert [p.name for p in (ctx_dir / "DERIVED" / "objects").rglob("*") if p.is_file()] == [oid]


def test_a_new_commit_replaces_the_view(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    old, _ = _view(ctx_dir)
    (ctx_dir.parent / "b.py").write_text("def g():\n    return 1\n")  # the cycle is broken
    ctx(ctx_dir, "index")  # the code index is per clone: the commit needs something to record
    ctx(ctx_dir, "add", "note", "b.py no longer imports a.py")
    ctx(ctx_dir, "commit", "-m", "break the cycle")
    new, view = _view(ctx_dir)
    assert new != old and IMPORT_CYCLE not in scc.cycles(view)
    assert not (ctx_dir / "DERIVED" / "objects" / old[:2] / old).exists()


@pytest.mark.parametrize("damage", ["garbage", "missing object", "wrong type", "link"])
def test_a_stale_pointer_is_named_and_rebuilt(tmp_path: Path, damage: str) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    oid, _ = _view(ctx_dir)
    pointer = _pointer(ctx_dir)
    outside = tmp_path / "outside"
    outside.write_text(oid + "\n")
    if damage == "garbage":
        pointer.write_bytes(b"\xff not an id")
    elif damage == "missing object":
        pointer.write_text("ab" * 32 + "\n")
    elif damage == "wrong type":  # an object of the store that is not an SCC view
        head = open_store(ctx_dir).read_head().heads[0]
        objects = LooseObjectStore(ctx_dir / "DERIVED" / "objects")
        stored = open_store(ctx_dir).objects.read(head)
        objects.write(stored.kind, stored.payload)
        pointer.write_text(head.hex() + "\n")
    else:
        pointer.unlink()
        pointer.symlink_to(outside)
    found = scc.load_scc(open_store(ctx_dir).root)
    assert found.view is None and len(found.notices) == 1 and str(pointer) in found.notices[0]
    out, err, _ = ctx(ctx_dir, "debug", "graph", "--cycles")
    assert "scc_latest" in err and "rebuilt" in err
    assert "cycle 1" in out
    assert not pointer.is_symlink() and pointer.read_text() == oid + "\n"
    assert outside.read_text() == oid + "\n"  # the link's target was never written


def test_a_hostile_derived_directory_is_refused(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.rmtree(ctx_dir / "DERIVED")
    (ctx_dir / "DERIVED").symlink_to(outside)
    _, err, code = ctx(ctx_dir, "rebuild", "--scc", ok=False)
    assert code != 0 and "E020" in err and "DERIVED" in err
    _, err, code = ctx(ctx_dir, "debug", "graph", "--cycles", ok=False)
    assert code != 0 and "E020" in err
    assert list(outside.iterdir()) == []


def test_a_fifo_pointer_is_refused_not_read(tmp_path: Path) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    pointer = _pointer(ctx_dir)
    pointer.unlink()
    os.mkfifo(pointer)
    _, err, code = ctx(ctx_dir, "rebuild", "--scc", ok=False)
    assert code != 0 and "E020" in err and "FIFO" in err


def test_commit_succeeds_when_the_view_cannot_be_written(tmp_path: Path) -> None:
    ctx_dir = make_cycle_repo(tmp_path / "w")
    pointer = _pointer(ctx_dir)
    ctx(ctx_dir, "index")
    os.mkfifo(pointer)  # refused (E020), never opened: the commit must still succeed
    ctx(ctx_dir, "add", "note", "indexed the cycle")
    out, err, code = ctx(ctx_dir, "commit", "-m", "index")
    assert code == 0 and out.startswith("committed")
    assert "SCC view not rebuilt" in err and "FIFO" in err and "ctx rebuild --scc" in err
    pointer.unlink()
    assert ctx_json(ctx_dir, "rebuild", "--scc")["scc"]["cycles"] == 2  # the next rebuild retries


def test_a_failed_pointer_write_keeps_the_old_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                   ) -> None:
    ctx_dir = indexed_and_committed(tmp_path / "w")
    oid, _ = _view(ctx_dir)
    ctx(ctx_dir, "add", "note", "a new fact: the view of the new heads differs")

    real = fsio.Dir.replace_atomic

    def fail_for_the_pointer(self: fsio.Dir, rel: str, data: bytes, **kw: object) -> None:
        if rel == "scc_latest":
            raise OSError(28, "No space left on device")
        real(self, rel, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(fsio.Dir, "replace_atomic", fail_for_the_pointer)
    _, err, code = ctx(ctx_dir, "commit", "-m", "disk full for the view")
    assert code == 0 and "SCC view not rebuilt" in err
    monkeypatch.undo()
    assert _view(ctx_dir)[0] == oid  # the old view is still whole and named
    assert sorted(p.name for p in (ctx_dir / "DERIVED").iterdir()) == ["objects", "scc_latest"]
    # It is out of date (other heads), so the next reader rebuilds it.
    assert scc.current_scc(open_store(ctx_dir)).oid != bytes.fromhex(oid)


def test_rebuild_flags_are_exclusive(tmp_path: Path) -> None:
    ctx_dir = make_cycle_repo(tmp_path / "w")
    _, err, code = ctx(ctx_dir, "rebuild", "--scc", "--full", ok=False)
    assert code != 0 and "choose one of" in err


def test_the_view_decodes_without_networkx_and_refuses_a_cycle_in_its_dag() -> None:
    view = SccView(heads=(), nodes=("a", "b"), scc_of=(0, 1), dag_from=(0,), dag_to=(1,))
    assert decode_typed(encode_typed(view)) == view
    bad = SccView(heads=(), nodes=("a", "b"), scc_of=(0, 1), dag_from=(1,), dag_to=(0,))
    with pytest.raises(Exception, match="forward"):
        decode_typed(encode_typed(bad))


_NAMES = st.sampled_from([f"{k}:{i}" for k in ("file", "module", "item", "node") for i in range(6)])


@given(st.lists(st.tuples(_NAMES, _NAMES), max_size=40), st.randoms(use_true_random=False))
def test_condensation_is_a_dag_and_every_node_is_in_one_scc(pairs: list[tuple[str, str]],
                                                            rnd: object) -> None:
    edges = [(*scc.split_node(a), *scc.split_node(b), "Calls") for a, b in pairs]
    view = scc.compute_scc(edges, ())
    decode_typed(encode_typed(view))  # passes its own checks
    graph = nx.DiGraph([(a, b) for a, b in pairs])
    assert list(view.nodes) == sorted(graph.nodes)
    # The partition is networkx's SCC partition, each node in exactly one SCC.
    expected = sorted(sorted(c) for c in nx.strongly_connected_components(graph))
    assert sorted(scc.members(view)) == expected
    dag = nx.DiGraph()
    dag.add_nodes_from(range(view.scc_count))
    dag.add_edges_from(zip(view.dag_from, view.dag_to, strict=True))
    assert nx.is_directed_acyclic_graph(dag)
    by_node = dict(zip(view.nodes, view.scc_of, strict=True))
    for a, b in pairs:  # every edge is inside an SCC or a DAG edge forward
        assert by_node[a] == by_node[b] or dag.has_edge(by_node[a], by_node[b])
    shuffled = list(edges)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert scc.compute_scc(shuffled, ()) == view


def test_a_graph_over_the_limit_is_condensed_on_request_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A large code index: ctx commit and ctx rebuild do not run networkx over it (seconds at
    # 10,000 files); the stale view goes, and `ctx rebuild --scc` or a reader builds it.
    ctx_dir = indexed_and_committed(tmp_path / "w")
    oid, _ = _view(ctx_dir)
    monkeypatch.setattr(scc, "AUTO_MAX_EDGES", 3)
    ctx(ctx_dir, "add", "note", "a later note")
    out, err, _ = ctx(ctx_dir, "commit", "-m", "large graph")
    assert out.startswith("committed") and err == ""
    assert not _pointer(ctx_dir).exists()
    doc = ctx_json(ctx_dir, "rebuild")
    assert doc["scc"]["deferred"] is True and doc["scc"]["edges"] > 3
    assert not _pointer(ctx_dir).exists()
    assert ctx_json(ctx_dir, "rebuild", "--scc")["scc"]["cycles"] == 2
    assert _pointer(ctx_dir).exists() and _view(ctx_dir)[0] != oid  # of the new heads
