"""One owner composes the default view and what session start injects (``packs.compose``).

``ctx compose``, the MCP server's ``compose`` tool and ``compose_view`` give the same
composition; the SessionStart hook injects ``compose_session_start``'s text.
"""

from __future__ import annotations

import json

from conftest import run_ctx

from ctxstore.mcp.server import ToolBox
from ctxstore.packs.compose import compose_session_start, compose_view
from ctxstore.repo import Store
from ctxstore.session import Session


def _seed(store: Store) -> None:
    for args in (["--type", "fact", "--tag", "tier:pinned", "the deploy key rotates monthly"],
                 ["--type", "decision", "--tag", "tier:reference", "retries use jitter"],
                 ["--type", "observation", "--tag", "tier:working", "the cache was cold"]):
        assert run_ctx(["--ctx-dir", str(store.root), "add", *args]).returncode == 0


def test_compose_is_the_same_from_the_cli_the_mcp_server_and_the_library(store: Store) -> None:
    _seed(store)
    cli = json.loads(run_ctx(["--ctx-dir", str(store.root), "--format", "json", "compose",
                              "--budget", "900"]).stdout)
    with Session.open(store.root) as db:
        lib = compose_view(db, budget=900, now_ms=0)
        mcp = ToolBox(db, user_store=None).compose(budget=900)
    ids = [n.id for n in lib.project.nodes]
    assert len(ids) == 3
    assert [n["id"] for n in cli["nodes"]] == ids
    assert [n["id"] for n in mcp["nodes"]] == ids
    # The rendered-at stamp aside, the text is the library's.
    strip = [line for line in lib.text.splitlines() if "rendered at" not in line]
    assert [line for line in mcp["text"].splitlines() if "rendered at" not in line] == strip


def test_session_start_injects_the_composition_of_the_one_owner(store: Store) -> None:
    _seed(store)
    with Session.open(store.root) as db:
        view = compose_session_start(db, task=None, now=0.0)
    assert len(view.ids) == 3 and view.problem is None
    out = run_ctx(["hook", "session-start"], stdin=json.dumps(
        {"session_id": "s1", "cwd": str(store.worktree), "source": "startup"}))
    context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    for line in view.text.splitlines():
        if "rendered at" not in line and line.strip():
            assert line in context
