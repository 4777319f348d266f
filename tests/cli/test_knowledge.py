"""The knowledge command set of spec 000 end to end (CliRunner against a real store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import invoke, no_git_provenance, run_ctx, store_digest, without_autolink

from ctxstore.repo import Store


@pytest.fixture
def store(store: Store) -> Store:
    """Auto-linking off: these tests check exactly the edges they write."""
    return without_autolink(store)


def add(runner, store, *args: str) -> str:
    r = invoke(runner, store, "add", *args)
    assert r.exit_code == 0, r.output
    return r.stdout.strip()


def ok(runner, store, *args: str, input: str | None = None) -> str:
    r = invoke(runner, store, *args, input=input)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return r.stdout


def js(runner, store, *args: str) -> dict:
    return json.loads(ok(runner, store, "--format", "json", *args))


def error(runner, store, args: list[str], code: str) -> str:
    before = store_digest(store.root)
    r = invoke(runner, store, *args)
    assert (r.exit_code, r.stdout) == (1, ""), (r.stdout, r.stderr)
    assert r.stderr.startswith(f"ctx: error[{code}]: ") and r.stderr.count("\n") == 1, r.stderr
    assert store_digest(store.root) == before
    return r.stderr


@pytest.fixture
def graph(store: Store, runner):
    fact = add(runner, store, "--type", "fact", "--tag", "tier:reference", "--tag",
               "project:demo", "Database uses SQLite with WAL mode")
    dec = add(runner, store, "--type", "decision", "--tag", "tier:reference", "--meta",
              "rationale=no server to run", "Use SQLite for the retry queue")
    obs = add(runner, store, "--type", "observation", "--tag", "tier:working", "--tag",
              "task:retry", "Retry storms seen when the server restarts")
    pin = add(runner, store, "--type", "pattern", "--tag", "tier:pinned",
              "Always wrap writes in a transaction")
    ok(runner, store, "link", dec, fact, "--type", "DEPENDS_ON")
    return {"fact": fact, "dec": dec, "obs": obs, "pin": pin}


def test_show_text_and_json(store, runner, graph) -> None:
    out = ok(runner, store, "show", graph["dec"])
    lines = out.splitlines()
    assert lines[0] == f"{graph['dec']}  decision"
    assert lines[1] == "tags:    tier:reference"
    assert "meta:    rationale=no server to run" in lines
    assert lines[-1] == "Use SQLite for the retry queue"
    doc = js(runner, store, "show", graph["dec"][:12], "--with-edges")
    assert doc["id"] == graph["dec"] and doc["tier"] == "reference"
    assert doc["edges"] == [{"from": graph["dec"], "to": graph["fact"], "type": "DEPENDS_ON",
                             "direction": "out"}]
    md = ok(runner, store, "--format", "markdown", "show", graph["fact"])
    short = md.split("[fact:", 1)[1].split("]", 1)[0]
    assert graph["fact"].startswith(short) and len(short) >= 8
    assert md == f"- [fact:{short}] Database uses SQLite with WAL mode\n"


def test_unknown_and_ambiguous_ids(store, runner, graph) -> None:
    error(runner, store, ["show", "ZZZZZZZZ"], "E019")
    error(runner, store, ["show", "01"], "E011")
    error(runner, store, ["show", "not-an-id!"], "E011")
    err = error(runner, store, ["show", graph["fact"][:4]], "E016")
    assert graph["fact"] in err and graph["dec"] in err


def test_update_writes_a_new_version_with_history(store, runner, graph) -> None:
    ok(runner, store, "update", graph["fact"], "--content", "Database uses SQLite (WAL)",
       "--meta", "source=ops")
    doc = js(runner, store, "show", graph["fact"], "--history")
    assert doc["content"] == "Database uses SQLite (WAL)" and doc["metadata"] == {
        "source": "ops", "provenance": no_git_provenance()}
    assert [h["record"]["content"] for h in doc["history"]] == \
        ["Database uses SQLite with WAL mode", "Database uses SQLite (WAL)"]
    assert doc["history"][1]["record"]["prev"] == doc["history"][0]["version"]
    ok(runner, store, "update", graph["fact"], "--type", "decision")
    assert js(runner, store, "show", graph["fact"])["type"] == "decision"
    error(runner, store, ["update", graph["fact"]], "E011")
    error(runner, store, ["update", graph["fact"], "--type", "nope"], "E011")


def test_delete_removes_node_and_edges(store, runner, graph) -> None:
    out = ok(runner, store, "delete", graph["fact"])
    assert out == f"deleted {graph['fact']} (1 edge)\n"
    error(runner, store, ["show", graph["fact"]], "E019")
    assert js(runner, store, "edges", graph["dec"])["edges"] == []
    doc = js(runner, store, "status")
    assert doc["nodes"] == 3 and doc["edges"] == 0


def test_delete_cascade_follows_derived_from(store, runner, graph) -> None:
    summary = js(runner, store, "summarize", graph["obs"], "--content", "Retries need jitter")["id"]
    second = js(runner, store, "summarize", summary, "--content", "Jitter everywhere")["id"]
    doc = js(runner, store, "delete", graph["obs"], "--cascade")
    assert set(doc["deleted"]) == {graph["obs"], summary, second}


def test_list_filters(store, runner, graph) -> None:
    assert js(runner, store, "list")["count"] == 4
    assert [n["id"] for n in js(runner, store, "list", "--type", "fact")["nodes"]] == [graph["fact"]]
    ids = {n["id"] for n in js(runner, store, "list", "--tag", "tier:reference")["nodes"]}
    assert ids == {graph["fact"], graph["dec"]}
    assert js(runner, store, "list", "--tag", "tier:reference", "--tag", "project:demo")["count"] == 1
    assert js(runner, store, "list", "--since", "1h")["count"] == 4
    assert js(runner, store, "list", "--since", "2999-01-01")["count"] == 0
    assert js(runner, store, "list", "--limit", "2")["count"] == 2
    newest = ok(runner, store, "list", "--limit", "1")
    assert newest.startswith(f"{graph['pin']}  pattern       Always wrap writes in a transaction")
    error(runner, store, ["list", "--since", "yesterday"], "E011")


def test_link_unlink_edges_idempotent(store, runner, graph) -> None:
    again = ok(runner, store, "link", graph["dec"], graph["fact"], "--type", "depends_on")
    assert again == "already linked\n"
    ok(runner, store, "link", graph["obs"], graph["dec"], "--type", "RELATES_TO")
    out = ok(runner, store, "edges", graph["dec"])
    assert f"-> DEPENDS_ON    {graph['fact']}  fact" in out
    assert f"<- RELATES_TO    {graph['obs']}  observation" in out
    assert len(js(runner, store, "edges", graph["dec"], "--direction", "in")["edges"]) == 1
    assert ok(runner, store, "unlink", graph["dec"], graph["fact"]) == "removed 1 edge\n"
    assert ok(runner, store, "unlink", graph["dec"], graph["fact"]) == "removed 0 edges\n"
    error(runner, store, ["link", graph["dec"], graph["fact"], "--type", "LIKES"], "E011")
    error(runner, store, ["link", graph["dec"], graph["dec"], "--type", "RELATES_TO"], "E011")
    error(runner, store, ["link", graph["dec"], "ZZZZZZZZZZ", "--type", "RELATES_TO"], "E019")


def test_tag_untag_tags(store, runner, graph) -> None:
    assert ok(runner, store, "tag", graph["fact"], "task:current", "tier:working") == "tagged\n"
    assert ok(runner, store, "tag", graph["fact"], "task:current") == "already tagged\n"
    assert js(runner, store, "show", graph["fact"])["tags"] == \
        ["project:demo", "task:current", "tier:reference", "tier:working"]
    assert ok(runner, store, "untag", graph["fact"], "tier:working") == "untagged\n"
    assert ok(runner, store, "untag", graph["fact"], "tier:working") == "not tagged\n"
    assert ok(runner, store, "tags", "--prefix", "task:") == "task:current  1\ntask:retry  1\n"
    assert {t["tag"]: t["count"] for t in js(runner, store, "tags")["tags"]}["tier:reference"] == 2
    error(runner, store, ["tag", graph["fact"], "bad tag"], "E011")


def test_search_ranks_and_filters(store, runner, graph) -> None:
    doc = js(runner, store, "search", "sqlite")
    assert [n["id"] for n in doc["nodes"]][:2] and {n["id"] for n in doc["nodes"]} == \
        {graph["fact"], graph["dec"]}
    assert js(runner, store, "search", "retry storms")["nodes"][0]["id"] == graph["obs"]
    assert js(runner, store, "search", '"server restarts"')["count"] == 1
    assert js(runner, store, "search", "nonexistentword")["count"] == 0


def test_query_language(store, runner, graph) -> None:
    q = lambda text, *extra: {n["id"] for n in js(runner, store, "query", text, *extra)["nodes"]}  # noqa: E731
    assert q("type:fact AND tag:project:demo") == {graph["fact"]}
    assert q("type:decision OR type:pattern") == {graph["dec"], graph["pin"]}
    assert q("sqlite AND type:decision") == {graph["dec"]}
    assert q("tag:tier:reference AND NOT type:fact") == {graph["dec"]}
    assert q(f"from:{graph['dec']}") == {graph["fact"]}
    assert q(f"to:{graph['fact']}") == {graph["dec"]}
    assert q("has:edges") == {graph["dec"], graph["fact"]}
    assert q("created:>1h") == set(graph.values())
    assert q("tokens:<3") == set()
    err = error(runner, store, ["query", "type:fact AND (tag:x"], "E011")
    assert "column" in err or "position" in err


def test_supersede_excludes_old_from_queries(store, runner, graph) -> None:
    new = add(runner, store, "--type", "fact", "--tag", "tier:reference", "Database uses Postgres now")
    assert ok(runner, store, "supersede", graph["fact"], new) == f"{graph['fact']} superseded by {new}\n"
    assert graph["fact"] not in {n["id"] for n in js(runner, store, "query", "type:fact")["nodes"]}
    assert graph["fact"] in {n["id"] for n in js(runner, store, "query", "type:fact",
                                                  "--include-superseded")["nodes"]}
    assert js(runner, store, "show", graph["fact"])["superseded_by"] == new
    assert js(runner, store, "edges", new)["edges"][0]["type"] == "SUPERSEDES"
    error(runner, store, ["supersede", new, new], "E011")


def test_trace_and_related(store, runner, graph) -> None:
    s1 = js(runner, store, "summarize", graph["obs"], graph["dec"], "--content", "Use jitter")["id"]
    steps = js(runner, store, "trace", s1)["steps"]
    assert {(s["id"], s["depth"]) for s in steps} == {(graph["obs"], 1), (graph["dec"], 1),
                                                      (graph["fact"], 2)}
    back = js(runner, store, "trace", graph["fact"], "--reverse")["steps"]
    assert [s["id"] for s in back] == [graph["dec"], s1]
    rel = js(runner, store, "related", graph["fact"], "--depth", "1")["related"]
    assert [r["id"] for r in rel] == [graph["dec"]]
    rel2 = {r["id"]: r["distance"] for r in js(runner, store, "related", graph["fact"])["related"]}
    assert rel2 == {graph["dec"]: 1, s1: 2}


def test_summarize_archives_sources(store, runner, graph) -> None:
    out = ok(runner, store, "summarize", graph["obs"], "--content", "Retry fixed",
             "--archive-sources")
    lines = out.splitlines()
    assert lines[0].startswith("Created summary: ") and lines[1] == f"Archived: {graph['obs']}"
    assert js(runner, store, "show", graph["obs"])["tags"] == ["task:retry", "tier:off-context"]
    error(runner, store, ["summarize", graph["obs"], "--content", "  "], "E011")


def test_compose_orders_by_tier_and_respects_budget(store, runner, graph) -> None:
    md = ok(runner, store, "compose")
    assert md.startswith("<!-- ctx: 4 nodes, ")
    assert md.endswith("<!-- ctx:end -->\n")
    order = [md.index(s) for s in ("## Pinned", "## Reference", "### Decisions", "### Facts",
                                   "## Working Context")]
    assert order == sorted(order)
    assert "  - Rationale: no server to run" in md
    dep = md.split("  - Depends on: [", 1)[1].split("]", 1)[0]
    assert len(dep) >= 8 and graph["fact"].startswith(dep)
    assert js(runner, store, "show", dep)["id"] == graph["fact"]  # short ids can be typed back
    doc = js(runner, store, "compose", "--budget", "60")
    assert doc["meta"]["token_count"] <= 60 and doc["meta"]["skipped"] >= 1
    assert doc["nodes"][0]["id"] == graph["pin"]  # pinned first
    only = js(runner, store, "compose", "--query", "type:fact")
    assert [n["id"] for n in only["nodes"]] == [graph["fact"]]
    error(runner, store, ["compose", "--budget", "5"], "E010")


def test_default_budget_env(store, runner, graph, monkeypatch) -> None:
    monkeypatch.setenv("CTX_DEFAULT_BUDGET", "70")
    assert js(runner, store, "compose")["meta"]["budget"] == 70
    monkeypatch.setenv("CTX_DEFAULT_BUDGET", "lots")
    error(runner, store, ["compose"], "E011")


def test_views_lifecycle(store, runner, graph) -> None:
    views = js(runner, store, "view", "list")["views"]
    assert views == [{"name": "default", "query": "tag:tier:pinned OR tag:tier:reference OR "
                      "tag:tier:working", "budget": 50000, "description": "built-in default view",
                      "builtin": True}]
    ok(runner, store, "view", "create", "facts", "--query", "type:fact OR type:decision",
       "--budget", "40000")
    error(runner, store, ["view", "create", "facts", "--query", "type:fact"], "E011")
    error(runner, store, ["view", "create", "bad", "--query", "type:fact AND"], "E011")
    md = ok(runner, store, "view", "render", "facts")
    assert "<!-- ctx: 2 nodes" in md
    assert js(runner, store, "view", "render", "facts", "--budget", "1000")["meta"]["budget"] == 1000
    ok(runner, store, "view", "update", "facts", "--budget", "30000")
    ok(runner, store, "view", "update", "default", "--budget", "80000")
    listed = {v["name"]: v for v in js(runner, store, "view", "list")["views"]}
    assert listed["facts"]["budget"] == 30000 and listed["default"]["budget"] == 80000
    assert not listed["default"]["builtin"]
    ok(runner, store, "view", "delete", "facts")
    error(runner, store, ["view", "render", "facts"], "E019")
    error(runner, store, ["view", "delete", "facts"], "E019")


def test_status_layout(store, runner, graph) -> None:
    out = ok(runner, store, "status").splitlines()
    assert out[0].startswith(f"Store: {store.root} (store, ")
    assert out[1].startswith("Nodes: 4 (estimated ")
    assert "  decision: 1" in out and "Edges: 1" in out and "Tags: 5 unique" in out
    assert "Tier breakdown:" in out
    assert any(line.startswith("  pinned: 1 node (") for line in out)


def test_user_store_when_no_project_store(tmp_path: Path) -> None:
    r = run_ctx(["add", "--type", "fact", "global fact"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    home = Path(__import__("os").environ["HOME"])
    assert (home / ".ctx" / "HEAD").exists()
    st = run_ctx(["status"], cwd=tmp_path)
    assert st.stdout.startswith(f"Store: {home / '.ctx'} (user store, ")


def test_index_deleted_loses_nothing(store, runner, graph) -> None:
    before = js(runner, store, "list")
    import shutil

    shutil.rmtree(store.root / "index")
    assert js(runner, store, "list") == before
    assert ok(runner, store, "rebuild").startswith("rebuilt index: 4 nodes, 1 edges")
    assert js(runner, store, "list") == before
    (store.root / "index" / "index.sqlite").write_bytes(b"garbage" * 100)
    assert js(runner, store, "list") == before


def test_db_alias(store, tmp_path) -> None:
    r = run_ctx(["--db", str(store.root), "status"], cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith(f"Store: {store.root}")
    r = run_ctx(["status"], cwd=tmp_path, env={"CTX_DB": str(store.root)})
    assert r.stdout.startswith(f"Store: {store.root}")
