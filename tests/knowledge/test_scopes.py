"""The global layer (issue 16): the user store ~/.ctx is written with --global (or
<ctx:remember scope="global">) and read with the project store, each result labelled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_ctx, store_digest

from ctxstore.errors import InvalidInput
from ctxstore.init import init_store
from ctxstore.knowledge.nodes import add_node
from ctxstore.knowledge.scopes import (
    Stores,
    open_user_store,
    parse_scope,
    query_scoped,
    recall_scoped,
    search_scoped,
    session_for_scope,
)
from ctxstore.packs.compose import compose_scoped
from ctxstore.session import Session


def _project(tmp_path: Path, name: str) -> Path:
    work = tmp_path / name
    work.mkdir()
    run_ctx(["--ctx-dir", str(work / ".ctx"), "init"], cwd=work)
    return work


def _home() -> Path:
    return Path(os.environ["HOME"])


def _json(res) -> dict:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.slow
def test_scopes_fact_written_globally_in_project_a_is_recalled_in_project_b(tmp_path: Path) -> None:
    a, b = _project(tmp_path, "a"), _project(tmp_path, "b")
    run_ctx(["add", "--type", "fact", "--tag", "tier:reference", "project A uses tabs"], cwd=a)
    added = run_ctx(["add", "--global", "--type", "fact", "--tag", "tier:reference",
                     "the user prefers pytest fixtures over setUp"], cwd=a)
    assert added.returncode == 0, added.stderr
    user_id = added.stdout.strip()
    # Written to ~/.ctx, not to project A.
    assert (_home() / ".ctx" / "HEAD").is_file()
    in_a = _json(run_ctx(["--format", "json", "list"], cwd=a))
    assert [n["content"] for n in in_a["nodes"]] == ["project A uses tabs"]
    local = run_ctx(["add", "--type", "fact", "--tag", "tier:reference", "project B pins pytest 8"], cwd=b)
    local_id = local.stdout.strip()

    found = _json(run_ctx(["--format", "json", "search", "--global", "pytest"], cwd=b))
    assert sorted((n["store"], n["id"]) for n in found["nodes"]) == \
        sorted([("project", local_id), ("user", user_id)])
    # Without --global only the project store is read.
    plain = _json(run_ctx(["--format", "json", "search", "pytest"], cwd=b))
    assert [n["id"] for n in plain["nodes"]] == [local_id]

    queried = _json(run_ctx(["--format", "json", "query", "--global", "type:fact AND pytest"], cwd=b))
    assert [(n["store"], n["id"]) for n in queried["nodes"]] == [("project", local_id), ("user", user_id)]
    text = run_ctx(["search", "--global", "pytest"], cwd=b).stdout
    assert f"user     {user_id}" in text and f"project  {local_id}" in text

    composed = _json(run_ctx(["--format", "json", "compose", "--global", "--budget", "2000"], cwd=b))
    assert [n["id"] for n in composed["nodes"]] == [local_id]
    assert composed["nodes"][0]["store"] == "project"
    assert [(n["store"], n["id"]) for n in composed["global"]["nodes"]] == [("user", user_id)]
    md = run_ctx(["compose", "--global", "--budget", "2000"], cwd=b).stdout
    assert md.index("project B pins pytest 8") < md.index("From the user store") < md.index("pytest fixtures")
    assert "project A uses tabs" not in md


def test_scopes_remember_tag_with_global_scope_writes_to_the_user_store(tmp_path: Path) -> None:
    a = _project(tmp_path, "a")
    payload = json.dumps({"session_id": "s1", "cwd": str(a), "hook_event_name": "Stop"})
    reply = ('<ctx:remember type="fact" tags="tier:reference" scope="global">'
             'the user writes commit messages in the imperative</ctx:remember>')
    res = run_ctx(["hook", "stop", "--response", reply], cwd=a, stdin=payload)
    assert res.returncode == 0, res.stderr
    user = _json(run_ctx(["--ctx-dir", str(_home() / ".ctx"), "--format", "json", "list"]))
    assert [n["content"] for n in user["nodes"]] == ["the user writes commit messages in the imperative"]
    assert _json(run_ctx(["--format", "json", "list"], cwd=a))["nodes"] == []


def test_scopes_global_read_without_a_user_store_creates_nothing(tmp_path: Path) -> None:
    b = _project(tmp_path, "b")
    run_ctx(["add", "--type", "fact", "x marks the spot"], cwd=b)
    found = _json(run_ctx(["--format", "json", "search", "--global", "spot"], cwd=b))
    assert [n["store"] for n in found["nodes"]] == ["project"]
    assert not (_home() / ".ctx").exists()


def test_scopes_global_search_bad_query_is_one_line_error_and_changes_nothing(tmp_path: Path) -> None:
    b = _project(tmp_path, "b")
    before = store_digest(b / ".ctx")
    res = run_ctx(["query", "--global", "type:"], cwd=b)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("ctx: error[E011]:") and len(res.stderr.strip().splitlines()) == 1
    assert store_digest(b / ".ctx") == before


def test_scopes_library_merges_and_labels(tmp_path: Path) -> None:
    init_store(tmp_path / "p" / ".ctx", git=False)
    user_path = tmp_path / "home" / ".ctx"
    with Session.open(tmp_path / "p" / ".ctx") as project:
        p = add_node(project, "fact", "deploys go through the staging cluster",
                     tags=["tier:reference"]).node
        assert Stores.open(project, user_path).user is None  # nothing to read, nothing created
        assert not user_path.exists()
        with session_for_scope(project, "global", user_store=user_path) as written:
            u = add_node(written, "fact", "staging cluster credentials live in the vault",
                         tags=["tier:reference"]).node
        stores = Stores.open(project, user_path)
        try:
            assert [(h.scope, h.node.id) for h in search_scoped(stores, "staging cluster", limit=10)] \
                in ([("project", p.id), ("user", u.id)], [("user", u.id), ("project", p.id)])
            assert [(h.scope, h.node.id) for h in query_scoped(stores, "staging", now=0.0)] == \
                [("project", p.id), ("user", u.id)]
            assert [h.scope for h in query_scoped(stores, "staging", now=0.0, limit=1)] == ["project"]
            # Recall takes free text the query language cannot parse.
            assert [h.node.id for h in recall_scoped(stores, "staging (cluster", limit=5, now=0.0)] \
                == [p.id, u.id]
            with pytest.raises(InvalidInput):
                recall_scoped(stores, "  ", limit=5, now=0.0)
            comp = compose_scoped(stores, "tag:tier:reference", 10_000, now_ms=0)
            assert comp.labels == {p.id: "project", u.id: "user"} and comp.tokens <= 10_000
            # A budget the project fills leaves no room for the user store; never over budget.
            tight = compose_scoped(stores, "tag:tier:reference", comp.project.tokens + 3, now_ms=0)
            assert tight.user is None and tight.tokens <= comp.project.tokens + 3
        finally:
            stores.close_user()
        # The project store passed as the user store is read once, as the project.
        assert Stores.open(project, tmp_path / "p" / ".ctx").user is None
    user = open_user_store(user_path, create=False)
    assert user is not None
    user.close()


def test_scopes_parse_scope() -> None:
    assert [parse_scope(s) for s in (None, "", "project", "local", "global", "USER")] == \
        ["project", "project", "project", "project", "user", "user"]
    with pytest.raises(InvalidInput):
        parse_scope("galaxy")


@pytest.mark.slow
def test_scopes_markdown_ids_are_unique_in_their_store_and_show_takes_them(tmp_path: Path) -> None:
    # Nodes made within a second share their first 8 characters: the markdown of --global
    # results gives each store's shortest unique prefix, which `ctx show` accepts.
    project = _project(tmp_path, "p")
    with Session.open(project / ".ctx") as db:  # in one process: the same first 8 characters
        for i in range(4):
            add_node(db, "fact", f"fact number {i}")
    assert run_ctx(["add", "--global", "--type", "fact", "user fact"], cwd=project).returncode == 0
    for argv in (["query", "--global", "type:fact"], ["recall", "type:fact"],
                 ["search", "--global", "fact number"]):
        res = run_ctx([*argv, "--format", "markdown"], cwd=project)
        assert res.returncode == 0, res.stderr
        shown = [line.split("]")[0].split(":")[1] for line in res.stdout.splitlines()
                 if line.startswith("- [") and line.endswith("(project)")]
        assert len(shown) == 4 and len(set(shown)) == 4, res.stdout
        for short in shown:
            assert run_ctx(["show", short], cwd=project).returncode == 0, short
