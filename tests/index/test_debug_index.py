"""``ctx debug index KEY``: what the path, name, stable-key and adjacency indexes hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.graph._derivedlib import ctx, ctx_json, indexed_and_committed


@pytest.fixture
def ctx_dir(tmp_path: Path) -> Path:
    return indexed_and_committed(tmp_path / "w")


def test_a_path_shows_the_path_index_and_adjacency(ctx_dir: Path) -> None:
    doc = ctx_json(ctx_dir, "debug", "index", "a.py")
    assert (doc["kind"], doc["key"]) == ("file", "a.py")
    assert doc["path_index"]["language"] == "python" and doc["path_index"]["line_count"] == 5
    assert {"label": "Contains", "kind": "module", "key": "a", "source": "code:a.py"} \
        in doc["adjacency"]["forward"]
    importers = {(e["label"], e["kind"], e["key"]) for e in doc["adjacency"]["backward"]}
    assert importers == {("Imports", "module", "b"), ("Imports", "module", "c")}
    text, _, _ = ctx(ctx_dir, "debug", "index", "a.py")
    assert "path index: a.py version" in text and "Imports <- module:b  [code:b.py]" in text


def test_a_qualified_name_shows_stable_key_and_name_indexes(ctx_dir: Path) -> None:
    doc = ctx_json(ctx_dir, "debug", "index", "a.f")
    assert doc["kind"] == "item"
    assert [(r["path"], r["qualname"], r["kind"]) for r in doc["stable_key_index"]] == \
        [("a.py", "a.f", "function")]
    assert [r["qualname"] for r in doc["name_index"]] == ["a.f"]
    assert {(e["label"], e["key"]) for e in doc["adjacency"]["forward"]} == {("Calls", "b.g")}
    assert ("Calls", "b.g") in {(e["label"], e["key"]) for e in doc["adjacency"]["backward"]}


def test_a_name_query_and_an_explicit_endpoint(ctx_dir: Path) -> None:
    doc = ctx_json(ctx_dir, "debug", "index", "name:item:parse_header")
    assert [r["qualname"] for r in doc["name_index"]] == ["c.parse_header"]
    assert ctx_json(ctx_dir, "debug", "index", "name:module:b")["name_index"][0]["path"] == "b.py"
    assert ctx_json(ctx_dir, "debug", "index", "name:item:nothing")["name_index"] == []
    doc = ctx_json(ctx_dir, "debug", "index", "module:a")
    assert {e["key"] for e in doc["adjacency"]["backward"]} >= {"a.py"}


def test_a_node_id_shows_its_knowledge_edges(ctx_dir: Path) -> None:
    first = ctx_json(ctx_dir, "add", "--type", "fact", "retries use backoff")["id"]
    second = ctx_json(ctx_dir, "add", "--type", "fact", "backoff is exponential")["id"]
    ctx(ctx_dir, "link", second, first, "--type", "DERIVED_FROM")
    doc = ctx_json(ctx_dir, "debug", "index", second[:12])
    assert (doc["kind"], doc["key"]) == ("node", second)
    assert {"label": "DERIVED_FROM", "kind": "node", "key": first, "source": "knowledge"} \
        in doc["adjacency"]["forward"]  # (ctx may add its own links beside it)


@pytest.mark.parametrize("key", ["nothing.here", "name:item", "name::x"])
def test_an_unknown_key_is_one_clear_line(ctx_dir: Path, key: str) -> None:
    out, err, code = ctx(ctx_dir, "debug", "index", key, ok=False)
    assert code != 0 and out == "" and err.count("\n") == 1 and "E011" in err
