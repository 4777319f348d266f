"""Recall of a filter-only query is ordered by decay (issue 16 item 1), and shows what it restored.

Real stores written by the installed ``ctx`` (``ctx import`` keeps a node's age), recall
through the library and through ``ctx recall`` as a subprocess.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import run_ctx, session_of

from ctxstore.ids import new_ulid
from ctxstore.index import open_index
from ctxstore.knowledge.nodes import add_node, forget_node
from ctxstore.knowledge.recall import by_decay, recall_nodes
from ctxstore.knowledge.scopes import Stores, recall_scoped
from ctxstore.lifecycle.policy import restore_recalled_scoped, run_lifecycle
from ctxstore.model import scoring
from ctxstore.repo import now_ms, open_store
from ctxstore.session import Session

DAY = scoring.DAY_MS
# (name, type, age in days, tags, metadata). Newest first: calm, prio2, stale, pinned, fact, drift.
# By decay: pinned (no decay, priority 10) 0.70, fact (stable) 0.60, calm (1 day of 30) 0.59,
# prio2 (stable, priority 2) 0.54, drift (90 days of 60) 0.28, stale (20 days of 7) 0.17.
NODES = [
    ("stale", "task", 20, [], {}),
    ("fact", "fact", 60, [], {}),
    ("calm", "observation", 1, [], {}),
    ("pinned", "task", 30, ["tier:pinned"], {}),
    ("drift", "pattern", 90, [], {}),
    ("prio2", "decision", 10, [], {"priority": 2}),
]
BY_DECAY = ["pinned", "fact", "calm", "prio2", "drift", "stale"]
BY_RECENCY = ["calm", "prio2", "stale", "pinned", "fact", "drift"]


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A project whose nodes (all tagged ``area:billing``) have the ages of ``NODES``."""
    work = tmp_path / "p"
    work.mkdir()
    assert run_ctx(["init"], cwd=work).returncode == 0
    now = now_ms()
    ids = {name: new_ulid() for name, *_ in NODES}
    doc = {"version": 1, "format": "ctx-export", "nodes": [
        {"id": ids[name], "type": kind, "content": f"billing note {name}",
         "tags": ["area:billing", *tags], "metadata": meta,
         "created_at": _iso(now - age * DAY), "updated_at": _iso(now - age * DAY)}
        for name, kind, age, tags, meta in NODES]}
    res = run_ctx(["import"], cwd=work, stdin=json.dumps(doc))
    assert res.returncode == 0, res.stderr
    return work, ids


def _names(ids: dict[str, str], got: list[str]) -> list[str]:
    back = {v: k for k, v in ids.items()}
    return [back[i] for i in got]


def _cli(work: Path, *args: str) -> list[str]:
    res = run_ctx(["--format", "json", "recall", "--no-global", *args], cwd=work)
    assert res.returncode == 0, res.stderr
    return [n["id"] for n in json.loads(res.stdout)["nodes"]]


def test_recall_filter_only_query_is_ordered_by_decay_in_the_library(tmp_path: Path) -> None:
    work, ids = _project(tmp_path)
    store = open_store(work / ".ctx")
    gone = add_node(session_of(store), "fact", "billing note forgotten", tags=["area:billing", "tier:pinned"])
    forget_node(session_of(store), gone.node.id)  # archived by hand: recall never returns it
    conn = open_index(store)
    try:
        now = time.time()
        got = recall_nodes(conn, "tag:area:billing", limit=20, now=now)
        assert _names(ids, [n.id for n in got]) == BY_DECAY
        # Every match is scored before the cut: the best two are among the oldest.
        assert _names(ids, [n.id for n in recall_nodes(conn, "tag:area:billing", limit=2,
                                                       now=now)]) == ["pinned", "fact"]
        # A pinned task outranks a newer, unpinned one; decay is scored at ``now``.
        assert _names(ids, [n.id for n in recall_nodes(conn, "type:task", limit=5, now=now)]) \
            == ["pinned", "stale"]
        assert [n.id for n in got] == [n.id for n in by_decay(got[::-1], now_ms=int(now * 1000))]
        # The query language without text ranks by decay, with text by relevance (unchanged).
        assert _names(ids, [n.id for n in recall_nodes(
            conn, "tag:area:billing AND NOT type:fact", limit=20, now=now)]) \
            == [x for x in BY_DECAY if x != "fact"]
        assert _names(ids, [n.id for n in recall_nodes(conn, "stale AND tag:area:billing",
                                                       limit=20, now=now)]) == ["stale"]
    finally:
        conn.close()
    with Session.open(work / ".ctx") as db:
        hits = recall_scoped(Stores(db), "tag:area:billing", limit=20, now=time.time())
        assert _names(ids, [h.node.id for h in hits]) == BY_DECAY


def test_recall_filter_only_query_is_ordered_by_decay_on_the_command_line(tmp_path: Path) -> None:
    work, ids = _project(tmp_path)
    assert _names(ids, _cli(work, "tag:area:billing")) == BY_DECAY
    assert _names(ids, _cli(work, "tag:area:billing", "--limit", "3")) == BY_DECAY[:3]
    assert _names(ids, _cli(work, "type:task OR type:pattern")) == ["pinned", "drift", "stale"]
    # ``ctx query`` is not recall: it keeps its documented newest-first order.
    res = run_ctx(["--format", "json", "query", "tag:area:billing"], cwd=work)
    assert res.returncode == 0, res.stderr
    assert _names(ids, [n["id"] for n in json.loads(res.stdout)["nodes"]]) == BY_RECENCY


def _archived(work: Path) -> str:
    """A lifecycle-archived observation in ``work``'s store (as the lifecycle pass leaves it)."""
    store = open_store(work / ".ctx")
    node = add_node(session_of(store), "observation", "the cache warms in ten seconds",
                    tags=["tier:working"]).node
    assert run_lifecycle(session_of(store), now_ms=now_ms() + 300 * DAY).count("archive") == 1
    return node.id


def test_recall_shows_a_restored_node_as_active(tmp_path: Path) -> None:
    work = tmp_path / "p"
    work.mkdir()
    assert run_ctx(["init"], cwd=work).returncode == 0
    kept = _archived(work)
    res = run_ctx(["--format", "json", "recall", "--no-global", "cache warms"], cwd=work)
    assert res.returncode == 0, res.stderr
    [doc] = json.loads(res.stdout)["nodes"]
    assert (doc["id"], doc["status"]) == (kept, "active")
    assert "tier:working" in doc["tags"] and "tier:off-context" not in doc["tags"]
    assert "restored 1 archived node" not in res.stderr  # json output: no notes


def test_recall_restore_result_keeps_order_and_unrestored_hits(tmp_path: Path) -> None:
    work = tmp_path / "p"
    work.mkdir()
    assert run_ctx(["init"], cwd=work).returncode == 0
    kept = _archived(work)
    other = add_node(session_of(open_store(work / ".ctx")), "fact", "the cache lives in redis").node.id
    with Session.open(work / ".ctx") as db:
        stores = Stores(db)
        found = recall_scoped(stores, "cache", limit=10, now=time.time())
        assert {h.node.id: h.node.status for h in found} == {kept: "archived", other: "active"}
        recalled = restore_recalled_scoped(found, stores)
        assert recalled.restored == 1
        assert [h.node.id for h in recalled.hits] == [h.node.id for h in found]
        assert {h.node.id: h.node.status for h in recalled.hits} == {kept: "active", other: "active"}
        again = restore_recalled_scoped(recalled.hits, stores)  # nothing left to restore
        assert again.restored == 0 and again.hits == recalled.hits
