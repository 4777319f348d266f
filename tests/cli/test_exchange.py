"""ctx export, import and ingest end to end (CliRunner against real stores)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from conftest import invoke, no_git_provenance, run_ctx, store_digest, without_autolink

from ctxstore.ids import new_ulid
from ctxstore.init import init_store
from ctxstore.repo import Store, open_store


def ok(runner, store, *args: str, input: str | bytes | None = None) -> str:
    r = invoke(runner, store, *args, input=input)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return r.stdout


def add(runner, store, *args: str) -> str:
    return ok(runner, store, "add", *args).strip()


def error(runner, store, args: list[str], code: str = "E011",
          input: str | bytes | None = None) -> str:
    before = store_digest(store.root)
    r = invoke(runner, store, *args, input=input)
    assert (r.exit_code, r.stdout) == (1, ""), (r.stdout, r.stderr)
    assert r.stderr.startswith(f"ctx: error[{code}]: ") and r.stderr.count("\n") == 1, r.stderr
    assert store_digest(store.root) == before
    return r.stderr


def stage_status(runner, store) -> dict:
    return json.loads(ok(runner, store, "--format", "json", "stage", "status"))


@pytest.fixture
def empty(tmp_path: Path) -> Store:
    """A second, empty store to import into."""
    work = tmp_path / "other"
    work.mkdir()
    init_store(work / ".ctx", git=False)
    return without_autolink(open_store(work / ".ctx"))


@pytest.fixture
def store(store: Store) -> Store:
    """Auto-linking off: exports and imports are compared edge for edge."""
    return without_autolink(store)


@pytest.fixture
def full(store: Store, runner) -> dict[str, str]:
    big = "".join(f"line {i}: the retry queue keeps its state in SQLite\n" for i in range(200))
    assert len(big.encode()) > 4096
    fact = add(runner, store, "--type", "fact", "--tag", "tier:reference", "--tag",
               "project:demo", "Database uses SQLite with WAL mode")
    dec = add(runner, store, "--type", "decision", "--meta", "rationale=no server — ünïcode",
              "Use SQLite for the retry queue")
    doc = ok(runner, store, "add", "--type", "source", "--tag", "project:demo", "--stdin",
             input=big).strip()
    old = add(runner, store, "--type", "fact", "Retries are unbounded")
    new = add(runner, store, "--type", "fact", "Retries stop after 5 attempts")
    ok(runner, store, "update", dec, "--summary", "SQLite for retries")
    ok(runner, store, "supersede", old, new)
    ok(runner, store, "link", dec, fact, "--type", "DEPENDS_ON")
    ok(runner, store, "link", fact, doc, "--type", "DERIVED_FROM")
    ok(runner, store, "view", "create", "facts", "--query", "type:fact OR type:decision",
       "--budget", "4000", "--description", "what we know")
    return {"fact": fact, "dec": dec, "doc": doc, "old": old, "new": new, "big": big}


def node_doc(node_id: str | None = None, **fields) -> dict:
    base = {"id": node_id or new_ulid(), "type": "fact", "content": "a fact", "summary": None,
            "tags": [], "metadata": {}, "status": "active", "superseded_by": None,
            "created_at": "2026-01-02T03:04:05.678Z", "updated_at": "2026-01-02T03:04:05.678Z",
            "author": None}
    base.update(fields)
    return base


def document(nodes=(), edges=(), views=(), **top) -> dict:
    return {"version": 1, "format": "ctx-export", "nodes": list(nodes), "edges": list(edges),
            "views": list(views), **top}


# -- export / import round trip -------------------------------------------------------------------

def test_export_import_round_trip_is_byte_identical(store, empty, runner, full) -> None:
    first = ok(runner, store, "export")
    doc = json.loads(first)
    assert (doc["version"], doc["format"]) == (1, "ctx-export")
    assert [n["id"] for n in doc["nodes"]] == sorted(n["id"] for n in doc["nodes"])
    by_id = {n["id"]: n for n in doc["nodes"]}
    assert by_id[full["doc"]]["content"] == full["big"]
    assert by_id[full["fact"]]["tags"] == ["project:demo", "tier:reference"]
    assert by_id[full["dec"]]["metadata"] == {"rationale": "no server — ünïcode",
                                              "provenance": no_git_provenance()}
    assert by_id[full["dec"]]["summary"] == "SQLite for retries"
    assert by_id[full["old"]]["superseded_by"] == full["new"]
    assert by_id[full["fact"]]["created_at"].endswith("Z")
    assert len(by_id[full["fact"]]["created_at"]) == len("2026-11-22T20:37:31.123Z")
    assert {(e["from"], e["to"], e["type"]) for e in doc["edges"]} == {
        (full["dec"], full["fact"], "DEPENDS_ON"), (full["fact"], full["doc"], "DERIVED_FROM"),
        (full["new"], full["old"], "SUPERSEDES")}
    assert doc["views"] == [{"name": "facts", "query": "type:fact OR type:decision",
                             "budget": 4000, "description": "what we know",
                             "created_at": doc["views"][0]["created_at"],
                             "updated_at": doc["views"][0]["updated_at"]}]
    assert first.endswith("}\n")

    out = ok(runner, empty, "import", input=first)
    assert out == "imported 5 nodes, 3 edges, 1 view\n"
    assert ok(runner, empty, "export") == first
    # The big content is a blob in the new store too, and reads back whole.
    shown = json.loads(ok(runner, empty, "--format", "json", "show", full["doc"]))
    assert shown["content"] == full["big"]


def test_export_output_file_and_import_file_argument(store, empty, runner, full,
                                                     tmp_path) -> None:
    target = tmp_path / "backup.json"
    assert ok(runner, store, "export", "--output", str(target)) == ""
    assert target.read_text(encoding="utf-8") == ok(runner, store, "export")
    assert ok(runner, empty, "import", str(target)).startswith("imported 5 nodes")
    assert ok(runner, empty, "export") == target.read_text(encoding="utf-8")


def test_export_query_selects_nodes_and_edges_between_them(store, runner, full) -> None:
    doc = json.loads(ok(runner, store, "export", "--query", "tag:project:demo"))
    assert sorted(n["id"] for n in doc["nodes"]) == sorted([full["fact"], full["doc"]])
    assert [(e["from"], e["to"], e["type"]) for e in doc["edges"]] == [
        (full["fact"], full["doc"], "DERIVED_FROM")]
    assert doc["views"] == []


def test_export_query_syntax_error(store, runner, full) -> None:
    error(runner, store, ["export", "--query", "(type:fact"])


def test_export_empty_store(store, runner) -> None:
    assert json.loads(ok(runner, store, "export")) == document()


def test_import_writes_one_change_batch(empty, runner) -> None:
    nodes = [node_doc(content=f"fact number {i}", tags=["project:bulk"]) for i in range(200)]
    edges = [{"from": nodes[i]["id"], "to": nodes[i + 1]["id"], "type": "RELATES_TO"}
             for i in range(10)]
    before = stage_status(runner, empty)
    out = ok(runner, empty, "import", input=json.dumps(document(nodes, edges)))
    assert out == "imported 200 nodes, 10 edges, 0 views\n"
    after = stage_status(runner, empty)
    assert after["work_commits"] == before["work_commits"] + 1
    assert after["records"] == before["records"] + 210
    listed = json.loads(ok(runner, empty, "--format", "json", "query", "tag:project:bulk"))
    assert len(listed["nodes"] if isinstance(listed, dict) else listed) == 200


def test_import_json_report(empty, runner) -> None:
    doc = json.dumps(document([node_doc()]))
    r = json.loads(ok(runner, empty, "import", "--format", "json", input=doc))
    assert r["version"] == 1
    assert r["imported"] == {"nodes": 1, "edges": 0, "views": 0}
    assert r["skipped"] == {"nodes": 0, "edges": 0, "views": 0}
    assert len(r["work_commit"]) == 64


def test_import_hand_written_document_fills_defaults(empty, runner) -> None:
    node_id = new_ulid()
    doc = {"version": 1, "format": "ctx-export",
           "nodes": [{"id": node_id, "type": "fact", "content": "minimal"}]}
    ok(runner, empty, "import", input=json.dumps(doc))
    shown = json.loads(ok(runner, empty, "--format", "json", "show", node_id))
    assert (shown["content"], shown["tags"], shown["metadata"], shown["status"]) == (
        "minimal", [], {"provenance": no_git_provenance("import")}, "active")  # none given: import


def test_import_empty_document_writes_nothing(empty, runner) -> None:
    before = store_digest(empty.root)
    assert ok(runner, empty, "import", input=json.dumps(document())) == \
        "imported 0 nodes, 0 edges, 0 views\n"
    assert store_digest(empty.root) == before


# -- collisions and merge -------------------------------------------------------------------------

def test_import_twice_without_merge_fails_and_changes_nothing(store, runner, full) -> None:
    exported = ok(runner, store, "export")
    err = error(runner, store, ["import"], input=exported)
    assert err.startswith("ctx: error[E011]: 5 nodes are already in the store: ")
    assert err.rstrip().endswith("(hint: use --merge to skip them)")


def test_import_merge_skips_existing_and_is_idempotent(store, runner, full) -> None:
    exported = ok(runner, store, "export")
    before = store_digest(store.root)
    out = ok(runner, store, "import", "--merge", input=exported)
    assert out == ("imported 0 nodes, 0 edges, 0 views\n"
                   "skipped 5 existing nodes, 3 edges, 1 view\n")
    assert store_digest(store.root) == before
    assert ok(runner, store, "export") == exported


def test_import_merge_imports_only_new_nodes(store, runner, full) -> None:
    doc = json.loads(ok(runner, store, "export"))
    fresh = node_doc(content="a brand new fact")
    doc["nodes"].append(fresh)
    doc["edges"].append({"from": fresh["id"], "to": full["fact"], "type": "relates-to"})
    out = ok(runner, store, "import", "--merge", input=json.dumps(doc))
    assert out == ("imported 1 node, 1 edge, 0 views\n"
                   "skipped 5 existing nodes, 3 edges, 1 view\n")
    edges = json.loads(ok(runner, store, "--format", "json", "show", fresh["id"],
                          "--with-edges"))["edges"]
    assert edges == [{"from": fresh["id"], "to": full["fact"], "type": "RELATES_TO",
                      "direction": "out"}]


def test_import_edge_to_node_already_in_store(store, runner, full) -> None:
    fresh = node_doc(content="links to an existing node")
    doc = document([fresh], [{"from": fresh["id"], "to": full["dec"], "type": "DEPENDS_ON"}])
    assert ok(runner, store, "import", input=json.dumps(doc)) == \
        "imported 1 node, 1 edge, 0 views\n"


def test_import_restores_a_deleted_node(store, runner, full) -> None:
    exported = ok(runner, store, "export", "--query", f"id:{full['new']}")
    ok(runner, store, "delete", full["new"])
    assert ok(runner, store, "import", input=exported) == "imported 1 node, 0 edges, 0 views\n"
    shown = json.loads(ok(runner, store, "--format", "json", "show", full["new"]))
    assert shown["content"] == "Retries stop after 5 attempts"


# -- timestamps -----------------------------------------------------------------------------------

def test_import_clamps_future_timestamps(empty, runner) -> None:
    node = node_doc(created_at="9999-12-31T23:59:59.999Z", updated_at="9999-12-31T23:59:59.999Z")
    before_ms = int(time.time() * 1000)
    ok(runner, empty, "import", input=json.dumps(document([node])))
    after_ms = int(time.time() * 1000)
    exported = json.loads(ok(runner, empty, "export"))["nodes"][0]
    assert exported["created_at"] == exported["updated_at"]
    assert exported["updated_at"] < "9999"
    import datetime as dt

    stamp = dt.datetime.fromisoformat(exported["updated_at"].replace("Z", "+00:00"))
    assert before_ms - 1 <= int(stamp.timestamp() * 1000) <= after_ms + 1


def test_import_keeps_past_timestamps_exactly(empty, runner) -> None:
    node = node_doc(created_at="2020-02-29T12:00:00.001Z", updated_at="2024-05-06T07:08:09.999Z")
    ok(runner, empty, "import", input=json.dumps(document([node])))
    exported = json.loads(ok(runner, empty, "export"))["nodes"][0]
    assert (exported["created_at"], exported["updated_at"]) == (
        "2020-02-29T12:00:00.001Z", "2024-05-06T07:08:09.999Z")


# -- hostile documents ----------------------------------------------------------------------------

NID = "01HQ0000000000000000000000"


def _bad_documents() -> list[tuple[str, str | bytes, str]]:
    good = node_doc(NID)
    return [
        ("invalid-json", "{", "import document is not valid JSON"),
        ("empty", "", "import document is not valid JSON"),
        ("not-object", "[]", "import document must be a JSON object, got an array"),
        ("null", "null", "import document must be a JSON object, got null"),
        ("wrong-version", json.dumps(document(version=2)), "unsupported export version 2"),
        ("version-bool", json.dumps(document(version=True)), "unsupported export version True"),
        ("wrong-format", json.dumps(document(format="other")), "not a ctx export"),
        ("unknown-top", json.dumps(document(extra=1)), "document: unknown field 'extra'"),
        ("nodes-not-list", json.dumps(document() | {"nodes": {}}), "nodes: expected an array"),
        ("node-not-object", json.dumps(document([5])), "nodes[0]: expected an object"),
        ("unknown-type", json.dumps(document([node_doc(type="x")])),
         "nodes[0].type: unknown node type 'x'"),
        ("bad-tag", json.dumps(document([node_doc(tags=["bad tag!"])])),
         "nodes[0].tags[0]: invalid tag 'bad tag!'"),
        ("tag-not-string", json.dumps(document([node_doc(tags=[1])])),
         "nodes[0].tags[0]: expected a string"),
        ("empty-content", json.dumps(document([node_doc(content="  ")])),
         "nodes[0].content: node content is empty"),
        ("content-not-string", json.dumps(document([node_doc(content=["x"])])),
         "nodes[0].content: expected a string, got an array"),
        ("missing-content", json.dumps(document([{"id": NID, "type": "fact"}])),
         "nodes[0]: missing field 'content'"),
        ("unknown-node-field", json.dumps(document([node_doc(colour="red")])),
         "nodes[0]: unknown field 'colour'"),
        ("metadata-not-object", json.dumps(document([node_doc(metadata=[1])])),
         "nodes[0].metadata: expected an object"),
        ("duplicate-id", json.dumps(document([good, node_doc(NID)])),
         f"nodes[1].id: duplicate id {NID} (also nodes[0])"),
        ("id-slash", json.dumps(document([node_doc("../../etc/passwd")])),
         "nodes[0].id: not a node id"),
        ("id-nul", json.dumps(document([node_doc(NID[:-1] + "\0")])), "nodes[0].id: not a node id"),
        ("id-lowercase", json.dumps(document([node_doc(NID.lower())])),
         "nodes[0].id: not a node id"),
        ("bad-time", json.dumps(document([node_doc(created_at="yesterday")])),
         "nodes[0].created_at: invalid time 'yesterday'"),
        ("bad-date", json.dumps(document([node_doc(updated_at="2026-02-30T00:00:00Z")])),
         "nodes[0].updated_at: invalid time"),
        ("time-number", json.dumps(document([node_doc(created_at=1700000000000)])),
         "nodes[0].created_at: invalid time 1700000000000"),
        ("before-1970", json.dumps(document([node_doc(created_at="1969-12-31T23:59:59.000Z")])),
         "nodes[0].created_at: time '1969-12-31T23:59:59.000Z' is before 1970"),
        ("edge-unknown-node", json.dumps(document(
            [good], [{"from": NID, "to": "01HQ0000000000000000000001", "type": "DEPENDS_ON"}])),
         "edges[0]: node 01HQ0000000000000000000001 is neither in the document nor in the store"),
        ("edge-unknown-type", json.dumps(document(
            [good, node_doc("01HQ0000000000000000000001")],
            [{"from": NID, "to": "01HQ0000000000000000000001", "type": "LIKES"}])),
         "edges[0].type: unknown edge type 'LIKES'"),
        ("edge-self-loop", json.dumps(document([good], [{"from": NID, "to": NID,
                                                         "type": "DEPENDS_ON"}])),
         "edges[0]: an edge needs two different nodes"),
        ("edge-weight", json.dumps(document(
            [good, node_doc("01HQ0000000000000000000001")],
            [{"from": NID, "to": "01HQ0000000000000000000001", "type": "DEPENDS_ON",
              "weight": "heavy"}])), "edges[0].weight: expected a number"),
        ("view-bad-query", json.dumps(document(views=[{"name": "v", "query": "(type:fact",
                                                       "budget": 10}])), "views[0].query: "),
        ("view-bad-budget", json.dumps(document(views=[{"name": "v", "query": "type:fact",
                                                        "budget": 0}])),
         "views[0].budget: expected a positive integer, got 0"),
        ("view-bad-name", json.dumps(document(views=[{"name": "a/b", "query": "type:fact",
                                                      "budget": 10}])),
         "views[0].name: invalid view name 'a/b'"),
        ("nan", json.dumps(document([good])).replace('"metadata": {}', '"metadata": {"x": NaN}'),
         "NaN is not allowed"),
        ("infinity", '{"version": 1, "format": "ctx-export", "nodes": [], "x": -Infinity}',
         "-Infinity is not allowed"),
        ("duplicate-key", '{"version": 1, "version": 1, "format": "ctx-export"}',
         "duplicate key 'version'"),
        ("lone-surrogate", json.dumps(document([node_doc(NID, content="x\ud800y")])),
         "nodes[0].content: not valid Unicode (lone surrogate)"),
        ("surrogate-in-metadata", json.dumps(document([node_doc(NID, metadata={"k": "\udc00"})])),
         "nodes[0].metadata.k: not valid Unicode"),
        ("huge-int", json.dumps(document([node_doc(NID, metadata={"n": 2 ** 70})])),
         "nodes[0].metadata.n: integer out of the 64-bit range"),
        ("deep-metadata", json.dumps(document([node_doc(NID, metadata={"a": [[[[[[[[[[[[[[[[
            [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})])),
         "nested deeper than 32 levels"),
        ("deep-nesting", "[" * 100_000 + "]" * 100_000, "import document is nested too deeply"),
        ("not-utf8", b'{"version": 1, "format": "ctx-export", "nodes": [\xff]}',
         "import document is not UTF-8 text"),
        ("bom", b"\xef\xbb\xbf" + json.dumps(document()).encode(), "byte-order mark"),
        ("utf16", json.dumps(document()).encode("utf-16"), "import document is not UTF-8 text"),
        ("nul-bytes", b"\0\0\0", "import document is not valid JSON"),
    ]


@pytest.mark.parametrize("name,text,message", _bad_documents(), ids=lambda v: v
                         if isinstance(v, str) and len(v) < 30 and "{" not in v else "")
def test_import_rejects_bad_document(store, runner, full, name, text, message) -> None:
    err = error(runner, store, ["import"], input=text)
    assert message in err, err


def test_import_rejects_bad_document_anywhere_without_partial_write(store, runner, full) -> None:
    nodes = [node_doc(content=f"fine {i}") for i in range(50)] + [node_doc(type="nope")]
    err = error(runner, store, ["import"], input=json.dumps(document(nodes)))
    assert "nodes[50].type: unknown node type 'nope'" in err


def test_import_missing_file(store, runner, tmp_path) -> None:
    err = error(runner, store, ["import", str(tmp_path / "nope.json")])
    assert err == f"ctx: error[E011]: no such file: {tmp_path / 'nope.json'}\n"


def test_import_directory(store, runner, tmp_path) -> None:
    err = error(runner, store, ["import", str(tmp_path)])
    assert err == f"ctx: error[E011]: {tmp_path} is a directory, not a file\n"


def test_import_hostile_input_in_a_real_process(store) -> None:
    before = store_digest(store.root)
    for data in ("[" * 100_000 + "]" * 100_000, '{"version": NaN}', "\ud800"):
        res = run_ctx(["--ctx-dir", str(store.root), "import"],
                      stdin=data.encode("utf-8", "surrogatepass"))
        assert (res.returncode, res.stdout) == (1, ""), res
        assert res.stderr.startswith("ctx: error[E011]: ") and res.stderr.count("\n") == 1
    assert store_digest(store.root) == before


# -- ingest ---------------------------------------------------------------------------------------

def test_ingest_text_file(store, runner, tmp_path) -> None:
    path = tmp_path / "README.md"
    data = "# Demo\n\nUses SQLite — with <ctx:remember>tags</ctx:remember> as plain text.\n"
    path.write_text(data, encoding="utf-8")
    node_id = ok(runner, store, "ingest", str(path), "--tag", "project:demo",
                 "--tag=type:documentation").strip()
    shown = json.loads(ok(runner, store, "--format", "json", "show", node_id))
    raw = data.encode("utf-8")
    assert shown["type"] == "source"
    assert shown["content"] == data
    assert shown["tags"] == ["project:demo", "type:documentation"]
    # the file is beside the work tree (tmp_path/work): named alone, never by this machine's path
    assert shown["metadata"] == {"path": "README.md", "outside_worktree": True, "bytes": len(raw),
                                 "sha256": hashlib.sha256(raw).hexdigest(),
                                 "provenance": no_git_provenance()}


def test_ingest_names_a_work_tree_file_relative_to_the_work_tree(store) -> None:
    # Run as a user would, from a sub-folder with a relative path: the committed node says
    # where the file is in the project, not where the project is on this machine.
    sub = store.worktree / "docs"
    sub.mkdir()
    (sub / "guide.md").write_text("How to deploy.\n", encoding="utf-8")
    res = run_ctx(["ingest", "guide.md"], cwd=sub)
    assert res.returncode == 0, res.stderr
    shown = json.loads(run_ctx(["--format", "json", "show", res.stdout.strip()], cwd=sub).stdout)
    assert shown["metadata"]["path"] == "docs/guide.md"
    assert "outside_worktree" not in shown["metadata"]
    assert str(store.worktree) not in json.dumps(shown["metadata"])


def test_ingest_big_file_and_json_output(store, runner, tmp_path) -> None:
    path = tmp_path / "big.txt"
    data = "x" * 10_000 + "\n"
    path.write_text(data)
    out = json.loads(ok(runner, store, "ingest", str(path), "--format", "json"))
    assert (out["version"], out["type"], out["metadata"]["bytes"]) == (1, "source", 10_001)
    shown = json.loads(ok(runner, store, "--format", "json", "show", out["id"]))
    assert shown["content"] == data


def test_ingest_binary_file(store, runner, tmp_path) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    err = error(runner, store, ["ingest", str(path)])
    assert err == (f"ctx: error[E011]: {path} is a binary file (it contains NUL bytes) "
                   "(hint: ingest text files only)\n")


def test_ingest_non_utf8_file(store, runner, tmp_path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("café".encode("latin-1"))
    err = error(runner, store, ["ingest", str(path)])
    assert "is not UTF-8 text (invalid byte at offset 3)" in err


def test_ingest_missing_file(store, runner, tmp_path) -> None:
    err = error(runner, store, ["ingest", str(tmp_path / "missing.md")])
    assert err == f"ctx: error[E011]: no such file: {tmp_path / 'missing.md'}\n"


def test_ingest_directory_and_empty_file(store, runner, tmp_path) -> None:
    assert error(runner, store, ["ingest", str(tmp_path)]) == \
        f"ctx: error[E011]: {tmp_path} is a directory, not a file\n"
    empty = tmp_path / "empty.md"
    empty.write_text("\n")
    assert error(runner, store, ["ingest", str(empty)]) == \
        f"ctx: error[E011]: {empty} is empty\n"


def test_ingest_bad_tag(store, runner, tmp_path) -> None:
    path = tmp_path / "a.md"
    path.write_text("text\n")
    assert "invalid tag" in error(runner, store, ["ingest", str(path), "--tag", "bad tag"])


def test_ingest_fifo_does_not_block(store, runner, tmp_path) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert error(runner, store, ["ingest", str(fifo)]) == \
        f"ctx: error[E011]: {fifo} is not a regular file\n"
