"""The MCP ``recall`` tool and the lifecycle (issue 16): a filter-only query comes back in decay
order, and a lifecycle-archived node it restores is reported as active. A real MCP client
session: the SDK's stdio client speaks JSON-RPC to a ``ctx mcp`` subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_ctx

from tests.lifecycle.test_recall_order import BY_DECAY, _archived, _names, _project

pytest.importorskip("mcp")

from mcp.client.session import ClientSession  # noqa: E402

from tests.mcp.test_server import _call, _session  # noqa: E402


def test_mcp_recall_filter_only_query_is_ordered_by_decay(tmp_path: Path) -> None:
    work, ids = _project(tmp_path)

    async def body(client: ClientSession) -> None:
        got = await _call(client, "recall", query="tag:area:billing")
        assert _names(ids, [n["id"] for n in got["nodes"]]) == BY_DECAY
        top = await _call(client, "recall", query="tag:area:billing", limit=2)
        assert _names(ids, [n["id"] for n in top["nodes"]]) == BY_DECAY[:2]
        tasks = await _call(client, "recall", query="type:task")
        assert _names(ids, [n["id"] for n in tasks["nodes"]]) == ["pinned", "stale"]

    _session(work / ".ctx", "--no-global")(body)


def test_mcp_recall_returns_the_restored_status(tmp_path: Path) -> None:
    work = tmp_path / "p"
    work.mkdir()
    assert run_ctx(["init"], cwd=work).returncode == 0
    kept = _archived(work)

    async def body(client: ClientSession) -> None:
        got = await _call(client, "recall", query="cache warms")
        [doc] = got["nodes"]
        assert (doc["id"], doc["status"], doc["store"]) == (kept, "active", "project")
        assert "tier:working" in doc["tags"] and "tier:off-context" not in doc["tags"]
        shown = await _call(client, "show", id=kept)  # the store agrees with what recall said
        assert shown["status"] == "active"
        again = await _call(client, "recall", query="cache warms")
        assert [(n["id"], n["status"]) for n in again["nodes"]] == [(kept, "active")]

    _session(work / ".ctx", "--no-global")(body)
