"""Recall over the global layer (issue 16 item 4) and archived -> active when recalled (item 1).

Real stores, the installed ``ctx`` as a subprocess, the real hooks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_ctx, session_of, store_digest

from ctxstore.index import open_index
from ctxstore.index.read import find_node
from ctxstore.knowledge.nodes import add_node, forget_node
from ctxstore.knowledge.scopes import Stores, recall_scoped
from ctxstore.lifecycle.policy import restore_recalled, restore_recalled_scoped, run_lifecycle
from ctxstore.model import scoring
from ctxstore.repo import Store, now_ms, open_store
from ctxstore.session import Session

DAY = scoring.DAY_MS


def _project(tmp_path: Path, name: str = "p") -> Path:
    work = tmp_path / name
    work.mkdir()
    assert run_ctx(["init"], cwd=work).returncode == 0
    return work


def _json(res) -> dict:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _node(store: Store, node_id: str):  # type: ignore[no-untyped-def]
    conn = open_index(store)
    try:
        return find_node(conn, node_id)
    finally:
        conn.close()


def _archived(work: Path) -> tuple[Store, str, str]:
    """A store with one lifecycle-archived node and one forgotten node, both about caches."""
    store = open_store(work / ".ctx")
    kept = add_node(session_of(store), "observation", "the cache warms in ten seconds",
                    tags=["tier:working"]).node
    gone = add_node(session_of(store), "observation", "the cache warms slowly on cold disks").node
    forget_node(session_of(store), gone.id)
    # 300 days: the two are auto-linked, and centrality doubles the 30-day half-life.
    assert run_lifecycle(session_of(store), now_ms=now_ms() + 300 * DAY).count("archive") == 1
    assert _node(store, kept.id).status == "archived"
    return store, kept.id, gone.id


@pytest.mark.slow
def test_recall_cli_reads_both_stores_labelled_and_no_global_reads_one(tmp_path: Path) -> None:
    a, b = _project(tmp_path, "a"), _project(tmp_path, "b")
    user_id = run_ctx(["add", "--global", "--type", "fact", "ruff runs before every commit"],
                      cwd=a).stdout.strip()
    local_id = run_ctx(["add", "--type", "fact", "project b configures ruff in pyproject"],
                       cwd=b).stdout.strip()
    got = _json(run_ctx(["--format", "json", "recall", "ruff"], cwd=b))
    assert [(n["store"], n["id"]) for n in got["nodes"]] == [("project", local_id), ("user", user_id)]
    text = run_ctx(["recall", "ruff"], cwd=b).stdout
    assert f"user     {user_id}" in text and f"project  {local_id}" in text
    alone = _json(run_ctx(["--format", "json", "recall", "--no-global", "ruff"], cwd=b))
    assert [n["id"] for n in alone["nodes"]] == [local_id]
    # The config turns the default off; --global still reads both.
    cfg = b / ".ctx" / "config.toml"
    cfg.write_text(cfg.read_text().replace("recall_global = true", "recall_global = false"))
    assert [n["id"] for n in _json(run_ctx(["--format", "json", "recall", "ruff"], cwd=b))["nodes"]] \
        == [local_id]
    both = _json(run_ctx(["--format", "json", "recall", "--global", "ruff"], cwd=b))
    assert len(both["nodes"]) == 2


def test_recall_cli_bad_input_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    work = _project(tmp_path)
    before = store_digest(work / ".ctx")
    res = run_ctx(["recall", "   "], cwd=work)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("ctx: error[E011]: recall needs a query")
    assert len(res.stderr.strip().splitlines()) == 1
    res = run_ctx(["recall", "x", "--limit", "0"], cwd=work)  # click's usage error, as elsewhere
    assert res.returncode == 2 and res.stdout == "" and "'--limit'" in res.stderr
    assert store_digest(work / ".ctx") == before


@pytest.mark.slow
def test_recall_tag_in_a_hook_reads_the_user_store_labelled(tmp_path: Path) -> None:
    a, b = _project(tmp_path, "a"), _project(tmp_path, "b")
    run_ctx(["add", "--global", "--type", "fact", "the user reviews diffs with delta"], cwd=a)
    run_ctx(["add", "--type", "fact", "project b renders diffs as html"], cwd=b)

    def hook(event: str, **extra: str) -> dict:
        payload = json.dumps({"session_id": "s1", "cwd": str(b), "hook_event_name": event, **extra})
        args = ["hook", event] + (["--response", '<ctx:recall query="diffs"/>'] if event == "stop" else [])
        res = run_ctx(args, cwd=b, stdin=payload)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout or "{}")

    hook("stop")
    out = hook("prompt-submit", prompt="what do we know")
    text = out["hookSpecificOutput"]["additionalContext"]
    assert "project b renders diffs as html" in text
    assert text.index("project b renders") < text.index("From the user store (~/.ctx), 1 nodes:") \
        < text.index("the user reviews diffs with delta")


def test_recall_restores_a_lifecycle_archived_node_not_a_forgotten_one(tmp_path: Path) -> None:
    work = _project(tmp_path)
    store, kept, gone = _archived(work)
    batches = _json(run_ctx(["stage", "status", "--format", "json"], cwd=work))["work_commits"]
    got = _json(run_ctx(["--format", "json", "recall", "--no-global", "cache warms"], cwd=work))
    assert [n["id"] for n in got["nodes"]] == [kept]  # the forgotten node stays forgotten
    back = _node(open_store(work / ".ctx"), kept)
    assert back.status == "active" and "tier:working" in back.tags
    assert "lifecycle_archived" not in back.metadata
    assert _node(open_store(work / ".ctx"), gone).status == "archived"
    # An ordinary change record: one more change batch.
    assert _json(run_ctx(["stage", "status", "--format", "json"], cwd=work))["work_commits"] \
        == batches + 1
    # A second recall writes nothing more.
    before = store_digest(work / ".ctx")
    run_ctx(["recall", "--no-global", "cache warms"], cwd=work)
    assert store_digest(work / ".ctx") == before


def test_recall_tag_restores_and_mcp_style_scoped_recall_restores_in_the_user_store(
        tmp_path: Path) -> None:
    work = _project(tmp_path)
    _, kept, _ = _archived(work)
    payload = json.dumps({"session_id": "s1", "cwd": str(work), "hook_event_name": "Stop"})
    res = run_ctx(["hook", "stop", "--response", '<ctx:recall query="cache warms"/>'], cwd=work,
                  stdin=payload)
    assert res.returncode == 0, res.stderr
    assert _node(open_store(work / ".ctx"), kept).status == "active"

    # The user store's own archived node is restored in the user store.
    home = Path(os.environ["HOME"])
    _, user_kept, _ = _archived(_user_home_store(home))
    with Session.open(work / ".ctx") as project:
        stores = Stores.open(project, home / ".ctx")
        try:
            hits = recall_scoped(stores, "cache warms", limit=10, now=0.0)
            assert ("user", user_kept) in [(h.scope, h.node.id) for h in hits]
            assert restore_recalled_scoped(hits, stores).restored == 1
        finally:
            stores.close_user()
    assert _node(open_store(home / ".ctx"), user_kept).status == "active"


def _user_home_store(home: Path) -> Path:
    """Create ``~/.ctx`` (as ``ctx add --global`` does) and return the directory holding it."""
    from ctxstore.knowledge.scopes import open_user_store

    db = open_user_store(home / ".ctx", create=True)
    assert db is not None
    db.close()
    return home


def test_recall_restore_under_a_held_lock_leaves_the_store_unchanged(tmp_path: Path) -> None:
    from ctxstore import fsio

    work = _project(tmp_path)
    store, kept, _ = _archived(work)
    before = store_digest(work / ".ctx")
    with Session.open(work / ".ctx") as project:
        project.store.lock_timeout = 0.05
        stores = Stores.open(project, None)
        hits = recall_scoped(stores, "cache warms", limit=5, now=0.0)
        with fsio.hold_lock(work / ".ctx" / "LOCK", timeout=1):
            assert restore_recalled_scoped(hits, stores).restored == 0  # skipped, not an error
    assert store_digest(work / ".ctx") == before
    assert _node(open_store(work / ".ctx"), kept).status == "archived"
    # Nothing to restore writes nothing and takes no lock.
    assert not restore_recalled(session_of(store), []).changed


def test_recall_mcp_tool_restores_and_labels(tmp_path: Path) -> None:
    from ctxstore.mcp.server import ToolBox

    work = _project(tmp_path)
    _, kept, gone = _archived(work)
    home = Path(os.environ["HOME"])
    with Session.open(work / ".ctx") as db:
        box = ToolBox(db, user_store=home / ".ctx")
        try:
            got = box.recall("cache warms")
        finally:
            box.close()
    assert [(n["store"], n["id"]) for n in got["nodes"]] == [("project", kept)]
    assert _node(open_store(work / ".ctx"), kept).status == "active"
    assert _node(open_store(work / ".ctx"), gone).status == "archived"
    assert not (home / ".ctx").exists()  # a read creates no user store


def test_recall_tag_with_a_damaged_user_store_still_answers_from_the_project(
        tmp_path: Path) -> None:
    work = _project(tmp_path)
    run_ctx(["add", "--type", "fact", "the linter is ruff"], cwd=work)
    bad = Path(os.environ["HOME"]) / ".ctx"
    bad.mkdir()
    (bad / "HEAD").write_text("not a pointer")
    (bad / "config.toml").write_text("[[[ not toml")
    payload = {"session_id": "s1", "cwd": str(work)}
    res = run_ctx(["hook", "stop", "--response", '<ctx:recall query="linter"/>'], cwd=work,
                  stdin=json.dumps({**payload, "hook_event_name": "Stop"}))
    assert res.returncode == 0, res.stderr
    assert "read this project only: ~/.ctx" in json.loads(res.stdout)["systemMessage"]
    out = run_ctx(["hook", "prompt-submit"], cwd=work,
                  stdin=json.dumps({**payload, "hook_event_name": "UserPromptSubmit",
                                    "prompt": "what is the linter"}))
    assert "the linter is ruff" in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert (bad / "HEAD").read_text() == "not a pointer"  # left as it was
