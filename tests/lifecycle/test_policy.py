"""Lifecycle transitions: archive after decay, restore on recall, prune; as change records."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import invoke, session_of, store_digest

from ctxstore.index import open_index
from ctxstore.index.read import find_node
from ctxstore.knowledge.edges import link_nodes
from ctxstore.knowledge.nodes import add_node, forget_node
from ctxstore.knowledge.recall import recall_nodes
from ctxstore.lifecycle.policy import run_lifecycle
from ctxstore.model import scoring
from ctxstore.repo import Store, now_ms

DAY = scoring.DAY_MS


def _node(store: Store, node_id: str):
    conn = open_index(store)
    try:
        return find_node(conn, node_id)
    finally:
        conn.close()


def test_lifecycle_archives_a_decayed_task_after_the_grace_period(store: Store) -> None:
    task = add_node(session_of(store), "task", "rotate the signing keys", tags=["tier:working"]).node
    fact = add_node(session_of(store), "fact", "the service listens on port 8443").node
    # task: half-life 7 days, 1.0 -> 0.3 after 7*log2(1/0.3) = 12.2 days, + 14 days of grace.
    assert run_lifecycle(session_of(store), now_ms=now_ms() + 25 * DAY).transitions == ()
    rep = run_lifecycle(session_of(store), now_ms=now_ms() + 27 * DAY)
    assert [(t.node_id, t.kind) for t in rep.transitions] == [(task.id, "archive")]
    got = _node(store, task.id)
    assert got.status == "archived" and "tier:off-context" in got.tags
    assert got.metadata["lifecycle_tier"] == "working"
    assert _node(store, fact.id).status == "active"  # stable type: never decays


def test_lifecycle_dry_run_writes_nothing(store: Store) -> None:
    add_node(session_of(store), "task", "short lived progress note")
    before = store_digest(store.root)
    rep = run_lifecycle(session_of(store), now_ms=now_ms() + 60 * DAY, dry_run=True)
    assert rep.count("archive") == 1
    assert store_digest(store.root) == before


def test_lifecycle_pinned_and_central_memories_decay_slower(store: Store) -> None:
    pinned = add_node(session_of(store), "task", "pinned progress", tags=["tier:pinned"]).node
    plain = add_node(session_of(store), "task", "unrelated chore").node
    central = add_node(session_of(store), "task", "central hub").node
    other = add_node(session_of(store), "fact", "spoke").node
    link_nodes(session_of(store), other.id, central.id, "DEPENDS_ON")
    rep = run_lifecycle(session_of(store), now_ms=now_ms() + 27 * DAY, access={})
    assert [t.node_id for t in rep.transitions] == [plain.id]
    assert _node(store, pinned.id).status == "active"
    assert _node(store, central.id).status == "active"  # centrality 1.0 > 0.5: half-life 14


def test_lifecycle_frequent_recall_doubles_the_half_life(store: Store) -> None:
    node = add_node(session_of(store), "task", "often recalled progress").node
    rep = run_lifecycle(session_of(store), now_ms=now_ms() + 27 * DAY, access={node.id: 11}, dry_run=True)
    assert rep.transitions == ()  # half-life 14 days: below 0.3 only after 24 days + 14


def test_lifecycle_restores_a_recalled_node_and_prunes_an_untouched_one(store: Store) -> None:
    kept = add_node(session_of(store), "observation", "the cache warms in ten seconds").node
    gone = add_node(session_of(store), "observation", "flaky test in the nightly job").node
    t0 = now_ms() + 100 * DAY
    assert run_lifecycle(session_of(store), now_ms=t0).count("archive") == 2
    # Archived for decay, it is still recallable; a recall (the hooks count it) restores it.
    conn = open_index(store)
    try:
        assert [n.id for n in recall_nodes(conn, "cache warms", limit=5, now=t0 / 1000)] == [kept.id]
    finally:
        conn.close()
    rep = run_lifecycle(session_of(store), now_ms=t0 + DAY, access={kept.id: 1})
    assert [(t.node_id, t.kind) for t in rep.transitions] == [(kept.id, "restore")]
    back = _node(store, kept.id)
    assert back.status == "active" and "tier:off-context" not in back.tags
    assert "lifecycle_archived" not in back.metadata
    # Untouched for the prune period since it was archived: tombstoned.
    early = run_lifecycle(session_of(store), now_ms=t0 + 29 * DAY, access={kept.id: 1}, dry_run=True)
    assert gone.id not in [t.node_id for t in early.transitions]
    rep = run_lifecycle(session_of(store), now_ms=t0 + 30 * DAY, access={kept.id: 1})
    assert (gone.id, "prune") in [(t.node_id, t.kind) for t in rep.transitions]
    assert _node(store, gone.id) is None


def test_lifecycle_leaves_forgotten_nodes_alone(store: Store) -> None:
    node = add_node(session_of(store), "observation", "forget me").node
    forget_node(session_of(store), node.id)
    rep = run_lifecycle(session_of(store), now_ms=now_ms() + 400 * DAY, access={node.id: 5})
    assert rep.transitions == ()
    assert _node(store, node.id).status == "archived"


def test_lifecycle_cli_applies_and_reports(tmp_path: Path, runner: CliRunner, store: Store) -> None:
    (store.root / "config.toml").write_text(
        "[lifecycle]\narchive_confidence_threshold = 1.0\narchive_grace_days = 0.0\n")
    node = invoke(runner, store, "add", "--type", "task", "progress to archive").stdout.strip()
    invoke(runner, store, "add", "--type", "fact", "a stable fact")
    dry = invoke(runner, store, "--format", "json", "lifecycle", "--dry-run")
    assert dry.exit_code == 0, dry.output
    doc = json.loads(dry.stdout)
    assert (doc["archived"], doc["dry_run"]) == (1, True)
    assert doc["transitions"][0]["id"] == node and doc["transitions"][0]["action"] == "archive"
    res = invoke(runner, store, "lifecycle")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1] == "1 archived, 0 restored, 0 pruned (of 2 nodes)"
    shown = invoke(runner, store, "--format", "json", "show", node)
    assert json.loads(shown.stdout)["status"] == "archived"
    again = invoke(runner, store, "lifecycle")
    assert again.stdout.splitlines()[-1].startswith("0 archived")


def test_lifecycle_cli_bad_config_is_one_line_error(runner: CliRunner, store: Store) -> None:
    (store.root / "config.toml").write_text("[lifecycle]\narchive_grace_days = -1\n")
    res = invoke(runner, store, "lifecycle")
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.startswith("ctx: error[E") and "archive_grace_days" in res.stderr
