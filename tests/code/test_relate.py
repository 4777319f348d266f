"""`ctx relate`: endpoints as paths, qualified names, node ids and task numbers; evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _ingestlib import ctx, ctx_json, make_work, query, write

from ctxstore.model.vocab import ALL_EDGE_LABELS

FILES = {
    "src/pkg/__init__.py": "",
    "src/pkg/net.py": "class Client:\n    def connect(self):\n        return 1\n",
    "src/pkg/other.py": "class Client:\n    def close(self):\n        return 2\n",
    "crates/core/src/net/client.rs": "pub struct Client;\nimpl Client {\n    pub fn connect(&self) {}\n}\n",
}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, FILES)
    ctx_json(ctx_dir, "index")
    return ctx_dir


def _edge(ctx_dir: Path, label: str) -> list[tuple[object, ...]]:
    return query(ctx_dir, "SELECT from_kind, from_key, to_kind, to_key, evidence FROM edges "
                          "WHERE label = ?", label)


def test_relate_node_to_path_and_symbol(work: Path) -> None:
    node = ctx_json(work, "add", "--type", "fact", "retry belongs in the client")["id"]
    doc = ctx_json(work, "relate", node, "mentions", "src/pkg/net.py", "--evidence", "see connect",
                   "--span", "0:10", "--confidence", "medium")
    assert doc["created"] and doc["to"] == ["file", "src/pkg/net.py"] and doc["label"] == "Mentions"
    blob = query(work, "SELECT blob FROM files WHERE path = 'src/pkg/net.py'")[0][0]
    ((fk, fkey, tk, tkey, ev),) = _edge(work, "Mentions")
    assert (fk, fkey, tk, tkey) == ("node", node, "file", "src/pkg/net.py")
    assert json.loads(ev) == {"tool": "human", "confidence": "medium", "blob": blob.hex(),
                              "span": [0, 10], "text": "see connect"}
    doc = ctx_json(work, "relate", node, "References", "pkg.net.Client.connect")
    assert doc["to"] == ["item", "pkg.net.Client.connect"]
    # Loose qualified names: the crate name for `crate`, modules left out.
    doc = ctx_json(work, "relate", node, "Mentions", "core::net::Client::connect")
    assert doc["to"][0] == "item" and doc["to"][1].endswith("Client::connect")
    again = ctx_json(work, "relate", node, "mentions", "src/pkg/net.py")
    assert again["created"] is False


def test_relate_task_number_and_code_to_code(work: Path) -> None:
    task = ctx_json(work, "add", "task", "Add retry")
    doc = ctx_json(work, "relate", f"task_{task['task_number']}", "Mentions", "src/pkg/other.py")
    assert doc["from"] == ["node", task["id"]]
    doc = ctx_json(work, "relate", "src/pkg/net.py", "DependsOn", "src/pkg/other.py")
    assert doc["from"] == ["file", "src/pkg/net.py"] and doc["to"] == ["file", "src/pkg/other.py"]


def test_relate_refuses_bad_input(work: Path) -> None:
    node = ctx_json(work, "add", "--type", "fact", "x")["id"]
    _, err, code = ctx(work, "relate", node, "Mentions", "Client", ok=False)
    assert code != 0 and "names 3 symbols" in err and "pkg.net.Client" in err
    _, err, code = ctx(work, "relate", node, "Likes", "src/pkg/net.py", ok=False)
    assert code != 0 and "unknown edge label 'Likes'" in err
    _, err, code = ctx(work, "relate", node, "Mentions", "no/such/file.py", ok=False)
    assert code != 0 and "is not an indexed file, a symbol or a node" in err
    _, err, code = ctx(work, "relate", node, "Mentions", node, ok=False)
    assert code != 0 and "two different endpoints" in err
    _, err, code = ctx(work, "relate", node, "Mentions", "src/pkg/net.py", "--span", "9:2", ok=False)
    assert code != 0 and "--span" in err
    assert _edge(work, "Mentions") == []


def test_every_label_is_accepted(work: Path) -> None:
    node = ctx_json(work, "add", "--type", "fact", "labels")["id"]
    for label in ALL_EDGE_LABELS:
        ctx_json(work, "relate", node, label, "src/pkg/net.py")
    assert len(query(work, "SELECT label FROM edges WHERE from_key = ?", node)) == len(ALL_EDGE_LABELS)


def test_relate_a_work_tree_file_not_indexed(work: Path) -> None:
    write(work.parent, {"new.py": "x = 1\n"})
    node = ctx_json(work, "add", "--type", "fact", "new file")["id"]
    doc = ctx_json(work, "relate", node, "Mentions", "new.py")
    assert doc["to"] == ["file", "new.py"] and "blob" not in doc["evidence"]
