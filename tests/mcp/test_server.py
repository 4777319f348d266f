"""`ctx mcp` through a real MCP client session: the SDK's stdio client speaks JSON-RPC to a
`ctx mcp` subprocess; every tool and resource is called, and bad calls come back as tool errors
while the server keeps serving (issue 16)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_ctx, store_digest

pytest.importorskip("mcp")

import anyio  # noqa: E402  (installed with mcp)
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

EXPECTED_TOOLS = {"remember", "recall", "search", "compose", "show", "link", "forget",
                  "task_start", "task_end", "status"}


def _session(ctx_dir: Path, *extra: str) -> Callable[[Callable[[ClientSession], Awaitable[None]]], None]:
    """Run ``body(client)`` against a fresh ``ctx mcp`` process serving ``ctx_dir``."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "mcp", *extra],
                                   env=dict(os.environ), cwd=str(ctx_dir.parent))

    def run(body: Callable[[ClientSession], Awaitable[None]]) -> None:
        async def main() -> None:
            with anyio.fail_after(60):
                async with stdio_client(params) as (read, write):
                    async with ClientSession(read, write) as client:
                        await client.initialize()
                        await body(client)

        anyio.run(main)

    return run


def _is_error(res: Any) -> bool:
    return bool(getattr(res, "is_error", None) or getattr(res, "isError", False))


async def _call(client: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    res = await client.call_tool(tool, args)
    assert not _is_error(res), res.content[0].text
    return json.loads(res.content[0].text)


async def _fail(client: ClientSession, tool: str, **args: Any) -> str:
    res = await client.call_tool(tool, args)
    assert _is_error(res), res
    return res.content[0].text


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "proj"
    work.mkdir()
    run_ctx(["--ctx-dir", str(work / ".ctx"), "init"], cwd=work)
    return work / ".ctx"


def test_mcp_server_every_tool_round_trips(project: Path) -> None:
    seen: dict[str, Any] = {}

    async def body(client: ClientSession) -> None:
        tools = await client.list_tools()
        assert {t.name for t in tools.tools} == EXPECTED_TOOLS
        assert all(t.description for t in tools.tools)
        fact = await _call(client, "remember", content="Retries use exponential backoff with jitter",
                           type="fact", tags=["tier:reference"])
        assert (fact["store"], fact["type"], fact["written"]) == ("project", "fact", True)
        dec = await _call(client, "remember", content="Chose jitter to avoid retry storms",
                          type="decision", tags=["tier:working"])
        rec = await _call(client, "recall", query="retry OR retries")
        assert {n["id"] for n in rec["nodes"]} >= {fact["id"]}
        assert all(n["store"] == "project" for n in rec["nodes"])
        # Free text that is not the query language is searched, never refused (DESIGN §8).
        free = await _call(client, "recall", query="backoff (with")
        assert [n["id"] for n in free["nodes"]] == [fact["id"]]
        hits = await _call(client, "search", text="exponential backoff")
        assert [n["id"] for n in hits["nodes"]] == [fact["id"]] and "score" in hits["nodes"][0]
        link = await _call(client, "link", source=dec["id"], target=fact["id"], type="DEPENDS_ON")
        assert (link["from"], link["to"], link["type"], link["written"]) == \
            (dec["id"], fact["id"], "DEPENDS_ON", True)
        shown = await _call(client, "show", id=dec["id"][:10])
        assert shown["id"] == dec["id"] and shown["content"] == "Chose jitter to avoid retry storms"
        assert {"from": dec["id"], "to": fact["id"], "type": "DEPENDS_ON"} in shown["edges"]
        comp = await _call(client, "compose", budget=2000)
        assert "exponential backoff" in comp["text"] and comp["tokens"] <= 2000
        assert {n["id"] for n in comp["nodes"]} == {fact["id"], dec["id"]}
        started = await _call(client, "task_start", name="retry-work")
        assert started == {"task": "retry-work", "action": "start", "nodes": [dec["id"]]}
        during = await _call(client, "remember", content="the HTTP client retries 5 times",
                             tags=["tier:working"])
        assert "task:retry-work" in during["tags"]  # the current task tags working memories
        status = await _call(client, "status")
        assert status["nodes"] == 3 and status["by_type"]["fact"] == 1
        assert status["current_task"] == "retry-work"
        ended = await _call(client, "task_end", name="retry-work")
        assert set(ended["nodes"]) == {dec["id"], during["id"]}
        gone = await _call(client, "forget", id=during["id"])
        assert (gone["id"], gone["written"]) == (during["id"], True)
        again = await _call(client, "forget", id=during["id"])
        assert again["written"] is False
        after = await _call(client, "recall", query="retries")
        assert during["id"] not in {n["id"] for n in after["nodes"]}  # forgotten = archived
        view = await client.read_resource("ctx://view/default")
        assert "exponential backoff" in view.contents[0].text
        node = await client.read_resource(f"ctx://node/{fact['id']}")
        assert json.loads(node.contents[0].text)["id"] == fact["id"]
        seen.update(fact=fact["id"], dec=dec["id"])

    _session(project)(body)
    # The writes are ordinary store writes: the CLI sees them.
    shown = run_ctx(["--ctx-dir", str(project), "--format", "json", "show", seen["dec"]])
    assert json.loads(shown.stdout)["content"] == "Chose jitter to avoid retry storms"


def test_mcp_server_bad_calls_are_tool_errors_and_change_nothing(project: Path) -> None:
    run_ctx(["--ctx-dir", str(project), "add", "--type", "fact", "keep me"])
    before = store_digest(project)
    texts: list[str] = []

    async def body(client: ClientSession) -> None:
        texts.append(await _fail(client, "show", id="nope"))
        texts.append(await _fail(client, "show", id="01ZZZZZZZZZZZZZZZZZZZZZZZZ"))
        texts.append(await _fail(client, "recall", query="   "))
        texts.append(await _fail(client, "recall", query="x", limit=0))
        texts.append(await _fail(client, "recall", query=5))  # wrong type: schema check
        texts.append(await _fail(client, "remember", content="x", type="nonsense"))
        texts.append(await _fail(client, "remember", content="x", tags=["two words"]))
        texts.append(await _fail(client, "remember", content="x", scope="galaxy"))
        texts.append(await _fail(client, "remember"))  # a required argument missing
        texts.append(await _fail(client, "link", source="nope", target="nope2"))
        texts.append(await _fail(client, "forget", id="01ZZZZZZZZZZZZZZZZZZZZZZZZ"))
        texts.append(await _fail(client, "compose", query="type:", budget=100))
        texts.append(await _fail(client, "task_start", name=""))
        texts.append(await _fail(client, "no_such_tool"))
        # The server is still serving after all of that.
        st = await _call(client, "status")
        assert st["nodes"] == 1

    _session(project)(body)
    assert "error[E011]" in texts[0] and "error[E019]" in texts[1]
    assert "error[E011]" in texts[2] and "limit must be 1..100" in texts[3]
    assert all("Traceback" not in t for t in texts)
    assert store_digest(project) == before


def test_mcp_server_sees_writes_of_other_processes_and_the_user_store(project: Path,
                                                                      tmp_path: Path) -> None:
    async def body(client: ClientSession) -> None:
        first = await _call(client, "recall", query="sqlite")
        assert first["count"] == 0
        # Another process writes while the server runs: the next call sees it.
        added = run_ctx(["--ctx-dir", str(project), "add", "--type", "fact", "--tag", "tier:reference",
                         "the cache is sqlite in WAL mode"])
        node_id = added.stdout.strip()
        later = await _call(client, "recall", query="sqlite")
        assert [n["id"] for n in later["nodes"]] == [node_id]
        # A global memory goes to ~/.ctx, is recalled (recall reads it by default) and labelled.
        glob = await _call(client, "remember", content="the user prefers sqlite for small tools",
                           type="fact", tags=["tier:reference"], scope="global")
        assert glob["store"] == "user"
        both = await _call(client, "recall", query="sqlite")
        assert [(n["store"], n["id"]) for n in both["nodes"]] == \
            [("project", node_id), ("user", glob["id"])]
        only = await _call(client, "recall", query="sqlite", include_global=False)
        assert [n["id"] for n in only["nodes"]] == [node_id]
        shown = await _call(client, "show", id=glob["id"], store="global")
        assert shown["store"] == "user"

    _session(project)(body)
    home = Path(os.environ["HOME"])
    listed = run_ctx(["--ctx-dir", str(home / ".ctx"), "--format", "json", "list"])
    assert [n["content"] for n in json.loads(listed.stdout)["nodes"]] == \
        ["the user prefers sqlite for small tools"]


def test_mcp_server_no_global_keeps_to_the_project(project: Path) -> None:
    async def body(client: ClientSession) -> None:
        text = await _fail(client, "remember", content="x", scope="global")
        assert "no user store" in text

    _session(project, "--no-global")(body)
    assert not (Path(os.environ["HOME"]) / ".ctx").exists()


def test_mcp_command_help_has_an_example() -> None:
    res = run_ctx(["mcp", "--help"])
    assert res.returncode == 0 and "ctx mcp" in res.stdout and "Examples" in res.stdout


def test_mcp_recall_global_default_follows_the_config(tmp_path: Path) -> None:
    """`[retrieval] recall_global = false` keeps recall to the project unless asked."""
    from ctxstore.init import init_store
    from ctxstore.knowledge.nodes import add_node
    from ctxstore.mcp.server import ToolBox
    from ctxstore.session import Session

    init_store(tmp_path / "p" / ".ctx", git=False)
    init_store(tmp_path / "u" / ".ctx", git=False)
    with Session.open(tmp_path / "u" / ".ctx") as user:
        add_node(user.store, "fact", "the user likes sqlite")
    config = tmp_path / "p" / ".ctx" / "config.toml"
    config.write_text(config.read_text().replace("recall_global = true", "recall_global = false"))
    assert "recall_global = false" in config.read_text()
    with Session.open(tmp_path / "p" / ".ctx") as db:
        tools = ToolBox(db, user_store=tmp_path / "u" / ".ctx")
        try:
            assert tools.recall("sqlite")["count"] == 0
            assert [n["store"] for n in tools.recall("sqlite", include_global=True)["nodes"]] == ["user"]
        finally:
            tools.close()


def test_mcp_user_store_that_is_the_project_is_read_once(tmp_path: Path) -> None:
    """When ~/.ctx is the project store itself, a global read lists each node once, as project."""
    from ctxstore.init import init_store
    from ctxstore.knowledge.nodes import add_node
    from ctxstore.mcp.server import ToolBox
    from ctxstore.session import Session

    init_store(tmp_path / ".ctx", git=False)
    with Session.open(tmp_path / ".ctx") as db:
        add_node(db.store, "fact", "the user likes sqlite")
        tools = ToolBox(db, user_store=tmp_path / ".ctx")
        try:
            for res in (tools.recall("sqlite", include_global=True),
                        tools.search("sqlite", include_global=True)):
                assert [n["store"] for n in res["nodes"]] == ["project"]
            assert list(tools.compose("type:fact", include_global=True)["nodes"]) \
                == [{"id": n["id"], "store": "project"} for n in tools.search("sqlite")["nodes"]]
        finally:
            tools.close()
