"""`ctx mcp` through a real MCP client session: the SDK's stdio client speaks JSON-RPC to a
`ctx mcp` subprocess; every tool and resource is called, and bad calls come back as tool errors
while the server keeps serving (issue 16)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import run_ctx, store_digest

pytest.importorskip("mcp")

PACK_SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "pack.schema.json").read_text())

import anyio  # noqa: E402  (installed with mcp)
import jsonschema  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

EXPECTED_TOOLS = {"remember", "recall", "search", "pack", "memory_search", "compose", "show",
                  "link", "forget", "task_start", "task_end", "status"}


def _session(ctx_dir: Path, *extra: str, env: dict[str, str] | None = None
             ) -> Callable[[Callable[[ClientSession], Awaitable[None]]], None]:
    """Run ``body(client)`` against a fresh ``ctx mcp`` process serving ``ctx_dir``."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "mcp", *extra],
                                   env={**os.environ, **(env or {})}, cwd=str(ctx_dir.parent))

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


@pytest.mark.slow
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
        assert started == {"task": "retry-work", "action": "start", "nodes": [dec["id"]],
                           "compacted": None}
        during = await _call(client, "remember", content="the HTTP client retries 5 times",
                             tags=["tier:working"])
        assert "task:retry-work" in during["tags"]  # the current task tags working memories
        status = await _call(client, "status")
        assert status["nodes"] == 3 and status["by_type"]["fact"] == 1
        assert status["current_task"] == "retry-work"
        ended = await _call(client, "task_end", name="retry-work")
        assert set(ended["nodes"]) == {dec["id"], during["id"]}
        assert re.fullmatch("[0-9a-f]{64}", ended["compacted"])  # the task's end folds the session
        assert (await _call(client, "status"))["current_task"] is None
        gone = await _call(client, "forget", id=during["id"])
        assert (gone["id"], gone["written"]) == (during["id"], True)
        again = await _call(client, "forget", id=during["id"][:12])  # a prefix: the full id back
        assert (again["id"], again["written"]) == (during["id"], False)
        relink = await _call(client, "link", source=dec["id"][:12], target=fact["id"][:12],
                             type="DEPENDS_ON")
        assert (relink["from"], relink["to"], relink["written"]) == (dec["id"], fact["id"], False)
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


@pytest.mark.slow
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


@pytest.mark.slow
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
        add_node(user, "fact", "the user likes sqlite")
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
        add_node(db, "fact", "the user likes sqlite")
        tools = ToolBox(db, user_store=tmp_path / ".ctx")
        try:
            for res in (tools.recall("sqlite", include_global=True),
                        tools.search("sqlite", include_global=True)):
                assert [n["store"] for n in res["nodes"]] == ["project"]
            assert list(tools.compose("type:fact", include_global=True)["nodes"]) \
                == [{"id": n["id"], "store": "project"} for n in tools.search("sqlite")["nodes"]]
        finally:
            tools.close()


# -- pack, memory_search, ranked search (issues 14, 15, 16) -----------------------------------

SOURCE = ('def retry_socket(attempts: int) -> int:\n'
          '    """Reconnect the socket with exponential backoff."""\n'
          '    return attempts * 2\n')


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    """A Git work tree with one Python file, a store, a decision, the code indexed."""
    import subprocess

    work = tmp_path / "code"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "net.py").write_text(SOURCE)
    ctx_dir = work / ".ctx"
    for args in (["init"], ["index"],
                 ["add", "--type", "decision", "Retries use exponential backoff (with jitter)"]):
        assert run_ctx(["--ctx-dir", str(ctx_dir), *args], cwd=work).returncode == 0
    return ctx_dir


@pytest.mark.slow
def test_mcp_pack_is_ctx_pack_json_and_bad_arguments_are_tool_errors(indexed: Path) -> None:
    task = 'why does retry_socket() back off? "exponential backoff" && -- (jitter) *'
    got: dict[str, Any] = {}
    texts: list[str] = []

    async def body(client: ClientSession) -> None:
        got["pack"] = await _call(client, "pack", task=task, budget=3000, depth=1)
        got["plain"] = await _call(client, "pack", task=task, budget=3000, include_narrative=False)
        got["punct"] = await _call(client, "pack", task="?!(){}[]*&&||--")
        texts.append(await _fail(client, "pack", task=task, budget=0))
        texts.append(await _fail(client, "pack", task=task, depth=17))
        texts.append(await _fail(client, "pack", task=task, depth=-1))
        texts.append(await _fail(client, "pack", task=5))  # wrong type: schema check
        texts.append(await _fail(client, "pack"))  # the task missing
        assert (await _call(client, "status"))["nodes"] == 1  # still serving

    before = store_digest(indexed)
    _session(indexed)(body)
    cli = run_ctx(["--ctx-dir", str(indexed), "pack", task, "--budget", "3000", "--depth", "1",
                   "--format", "json"], cwd=indexed.parent)
    assert got["pack"] == json.loads(cli.stdout)  # the same JSON as `ctx pack --format json`
    pack = got["pack"]
    assert pack["version"] == 1 and pack["token_budget"]["total"] == 3000
    kinds = {item["chunk_kind"] for item in pack["retrieved"]}
    assert "Decision" in kinds and any("retry_socket" in i["title"] for i in pack["retrieved"])
    assert "Decision" not in {i["chunk_kind"] for i in got["plain"]["retrieved"]}
    assert got["punct"]["task"] == "?!(){}[]*&&||--" and got["punct"]["retrieved"] == []
    assert "error[E011]" in texts[0] and "budget" in texts[0]
    assert "error[E011]" in texts[1] and "depth must be 0..16" in texts[1] and "-1" in texts[2]
    assert all("Traceback" not in t for t in texts)
    assert store_digest(indexed) == before  # a pack writes nothing


def _structured(res: Any) -> Any:
    return getattr(res, "structured_content", None) or getattr(res, "structuredContent", None)


@pytest.mark.slow
def test_mcp_pack_with_a_budget_too_small_for_any_item_notes_the_smallest(indexed: Path) -> None:
    task = "retry_socket exponential backoff"
    got: dict[str, Any] = {}

    async def body(client: ClientSession) -> None:
        res = await client.call_tool("pack", {"task": task, "budget": 20})
        assert not _is_error(res), res.content[0].text
        got["small"], got["structured"] = json.loads(res.content[0].text), _structured(res)
        smallest = int(re.fullmatch(r".*is (\d+) \(budget: \1\)", got["small"]["note"])[1])  # type: ignore[index]
        got["least"] = await _call(client, "pack", task=task, budget=smallest)
        got["short"] = await _call(client, "pack", task=task, budget=smallest - 1)
        got["nothing"] = await _call(client, "pack", task="zebra quagga", budget=20)

    _session(indexed)(body)
    small = got["small"]
    cli = run_ctx(["--ctx-dir", str(indexed), "pack", task, "--budget", "20", "--format", "json"],
                  cwd=indexed.parent)
    # The pack is ctx pack's JSON; the note is what ctx pack says on stderr, asked the MCP way.
    assert {k: v for k, v in small.items() if k != "note"} == json.loads(cli.stdout)
    jsonschema.validate(small, PACK_SCHEMA)  # the note is part of the documented schema
    assert small["retrieved"] == [] and small["token_budget"]["total"] == 20
    least = got["least"]["token_budget"]["total"]
    assert small["note"] == (f"the budget of 20 tokens is too small to hold any item found; the "
                             f"smallest that holds one is {least} (budget: {least})")
    assert f"ctx: note: {small['note'].replace('(budget: ', '(--budget ')}\n" in cli.stderr
    assert got["structured"] == small  # the structured content carries it too
    assert got["least"]["retrieved"] and "note" not in got["least"]  # held: no note
    assert got["short"]["retrieved"] == [] and got["short"]["note"].endswith(f"(budget: {least})")
    assert "note" not in got["nothing"]  # nothing found is no budget problem


def test_mcp_search_is_ranked_any_text_labelled_by_store(project: Path) -> None:
    async def body(client: ClientSession) -> None:
        fact = await _call(client, "remember", content="Retries use exponential backoff (jitter)",
                           type="fact", tags=["tier:reference"])
        other = await _call(client, "remember", content="The cache is sqlite in WAL mode",
                            type="fact", tags=["tier:reference"])
        glob = await _call(client, "remember", content="I prefer exponential backoff everywhere",
                           type="fact", tags=["tier:reference"], scope="global")
        # Any word may match (the old search wanted every word); punctuation is no syntax.
        for text in ('why "exponential backoff"?? (retry) -- && * NOT', "backoff zebra",
                     "backoff: jitter() {}"):
            hits = await _call(client, "search", text=text)
            assert hits["nodes"][0]["id"] == fact["id"], text
            assert other["id"] not in {n["id"] for n in hits["nodes"]}
            assert hits["nodes"][0]["store"] == "project"
            assert any("backoff" in term for term in hits["nodes"][0]["matched"])
        both = await _call(client, "search", text="exponential backoff", include_global=True)
        assert {(n["store"], n["id"]) for n in both["nodes"]} == \
            {("project", fact["id"]), ("user", glob["id"])}
        nothing = await _call(client, "search", text="?!() -- *")
        assert nothing == {"text": "?!() -- *", "count": 0, "nodes": []}
        assert "limit must be 1..100" in await _fail(client, "search", text="x", limit=101)

    _session(project)(body)


def _backfill(ctx_dir: Path, tmp_path: Path) -> None:
    from tests.memory.memtx import conversation

    conversation().write(tmp_path / "s.jsonl")
    res = run_ctx(["--ctx-dir", str(ctx_dir), "memory", "backfill", str(tmp_path / "s.jsonl")])
    assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_mcp_memory_search_is_ctx_memory_search_json(project: Path, tmp_path: Path) -> None:
    from ctxstore.memory.settings import OFF_NOTE
    from tests.memory.memtx import SESSION

    got: dict[str, Any] = {}
    texts: list[str] = []

    async def body(client: ClientSession) -> None:
        empty = await _call(client, "memory_search", text="sqlite session cache")
        assert empty["results"] == [] and "no transcript memory yet" in empty["note"]
        _backfill(project, tmp_path)  # another process builds the memory meanwhile
        got["all"] = await _call(client, "memory_search", text="sqlite session cache")
        got["narrow"] = await _call(client, "memory_search", text="sqlite (session) cache?!",
                                    session=SESSION[:8], intent="decision", limit=2,
                                    since="2026-01-01", until="2100-01-01")
        for odd in ('" NEAR(x* -- AND ) \x00 {}', "", "?!", "yesterday"):  # never an error
            assert "results" in await _call(client, "memory_search", text=odd)
        texts.append(await _fail(client, "memory_search", text="x", since="blorp"))
        texts.append(await _fail(client, "memory_search", text="x", until="blorp"))
        texts.append(await _fail(client, "memory_search", text="x", session="zzz"))
        texts.append(await _fail(client, "memory_search", text="x", intent="gossip"))
        texts.append(await _fail(client, "memory_search", text="x", limit=0))
        texts.append(await _fail(client, "memory_search", text=["x"]))  # wrong type
        # The privacy switch, turned off while the server runs: nothing is searched.
        config = project / "config.toml"
        config.write_text(config.read_text().replace("enabled = true", "enabled = false", 1))
        got["off"] = await _call(client, "memory_search", text="sqlite session cache")

    _session(project)(body)
    cli = run_ctx(["--ctx-dir", str(project), "--format", "json", "memory", "search",
                   "sqlite session cache"])
    # The CLI's JSON (its "version" envelope is the CLI's own, as for every tool).
    assert {"version": 1, **got["all"]} == json.loads(cli.stdout) and got["all"]["results"]
    assert "SQLite" in got["all"]["results"][0]["text"]
    narrow = got["narrow"]["results"]
    assert 0 < len(narrow) <= 2 and all(r["session"] == SESSION for r in narrow)
    cli = run_ctx(["--ctx-dir", str(project), "--format", "json", "memory", "search",
                   "sqlite (session) cache?!", "--session", SESSION[:8], "--intent", "decision",
                   "--limit", "2", "--since", "2026-01-01", "--until", "2100-01-01"])
    assert {"version": 1, **got["narrow"]} == json.loads(cli.stdout)
    assert got["narrow"]["since"] == "2026-01-01T00:00:00Z"
    assert "error[E011]" in texts[0] and "since" in texts[0] and "until" in texts[1]
    assert "session" in texts[2] and "intent must be one of" in texts[3]
    assert "limit must be 1..100" in texts[4]
    assert all("Traceback" not in t for t in texts)
    assert got["off"] == {"query": "sqlite session cache", "since": None, "until": None,
                          "results": [], "note": OFF_NOTE}


@pytest.mark.slow
def test_mcp_memory_search_falls_back_to_words_when_vectors_cannot_load(project: Path,
                                                                       tmp_path: Path) -> None:
    """``[memory] vectors = "on"`` with the embed extra missing: the tool searches by words (as
    the hooks do) and its ``note`` says why, never an E027 tool error; the CLI answers alike."""
    _backfill(project, tmp_path)  # vectors off: indexed by words
    words = json.loads(run_ctx(["--ctx-dir", str(project), "--format", "json", "memory", "search",
                                "sqlite session cache"]).stdout)
    config = project / "config.toml"
    head, memory, tail = config.read_text().partition("[memory]\n")
    assert memory and 'vectors = "off"' in tail.split("\n[")[0]
    config.write_text(head + memory + tail.replace('vectors = "off"', 'vectors = "on"', 1))
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "wordllama.py").write_text("")  # a module, not the package with its weights
    got: dict[str, Any] = {}

    async def body(client: ClientSession) -> None:
        got["search"] = await _call(client, "memory_search", text="sqlite session cache")

    _session(project, env={"PYTHONPATH": str(shadow)})(body)
    note = got["search"].pop("note")
    assert note.startswith("searched by words only") and "pip install 'ctxstore[embed]'" in note
    assert {"version": 1, **got["search"]} == words and "SQLite" in words["results"][0]["text"]
    cli = run_ctx(["--ctx-dir", str(project), "--format", "json", "memory", "search",
                   "sqlite session cache"], env={"PYTHONPATH": str(shadow)})
    assert cli.returncode == 0 and json.loads(cli.stdout) == {**words, "note": note}


def _raw_server(ctx_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, encoding="utf-8", cwd=str(ctx_dir.parent))


def _exchange(proc: subprocess.Popen[str], line: str, timeout: float = 20) -> dict[str, Any]:
    """Send one line, read one reply line (a watchdog kills the server if none comes)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        reply = proc.stdout.readline()
    finally:
        timer.cancel()
    assert reply, f"no reply to {line!r}"
    return json.loads(reply)


@pytest.mark.slow
def test_mcp_every_request_line_is_answered_even_malformed(tmp_path: Path) -> None:
    # The SDK's transport dropped a line it could not read, leaving the client waiting for
    # ever. Each of these gets a JSON-RPC error (its id when it has a usable one), and the
    # server keeps serving; a lone surrogate in an argument is replaced and the call runs.
    ctx_dir = tmp_path / "w" / ".ctx"
    (tmp_path / "w").mkdir()
    assert run_ctx(["--ctx-dir", str(ctx_dir), "init"], cwd=tmp_path / "w").returncode == 0
    assert run_ctx(["--ctx-dir", str(ctx_dir), "add", "--type", "fact", "ripgrep skips hidden"],
                   cwd=tmp_path / "w").returncode == 0
    proc = _raw_server(ctx_dir)
    try:
        init = _exchange(proc, json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}))
        assert init["id"] == 1 and "result" in init
        # Claude Code lists no tool of a server whose version is empty (the SDK's default)
        from ctxstore import __version__

        assert init["result"]["serverInfo"] == {"name": "ctx", "version": __version__}
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
                         + "\n")  # type: ignore[union-attr]
        cases = [("{not json", None, -32700), ("[]", None, -32600),
                 ('[{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}]', None, -32600),
                 ('{"jsonrpc": "2.0", "id": 101}', 101, -32600),
                 ('{"jsonrpc": "2.0", "id": 104, "method": "tools/call", "params": "str"}', 104,
                  -32600),
                 ('{"jsonrpc": "1.0", "id": "x3", "method": "tools/list"}', "x3", -32600),
                 ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', None, -32600)]
        for line, want_id, code in cases:
            reply = _exchange(proc, line)
            assert (reply["id"], reply["error"]["code"]) == (want_id, code), (line, reply)
        called = _exchange(proc, '{"jsonrpc": "2.0", "id": 108, "method": "tools/call", "params": '
                                 '{"name": "recall", "arguments": {"query": "ripgrep\\ud800"}}}')
        assert called["id"] == 108 and "result" in called
        assert "ripgrep skips hidden" in called["result"]["content"][0]["text"]
        listed = _exchange(proc, '{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}')
        assert {t["name"] for t in listed["result"]["tools"]} == EXPECTED_TOOLS  # still serving
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_mcp_search_finds_a_failing_run_after_it_passed(tmp_path: Path) -> None:
    """The MCP search is the search of ``ctx search``: past command runs come back too."""
    from tests.code.test_command_history import _failed_then_passed

    root = _failed_then_passed(tmp_path)

    async def body(client: ClientSession) -> None:
        found = await _call(client, "search", text="why did the tests fail")
        assert [(r["kind"], r["store"], r["name"], r["status"], r["exit_code"])
                for r in found["runs"]] == [("run", "project", "tests", "failed", 1)]
        run = found["runs"][0]
        assert run["then"]["status"] == "passed" and run["score"] > 0
        assert any("test_add_small" in d["message"] for d in run["diagnostics"])
        code = await _call(client, "search", text="exponential backoff")  # no run asked about
        assert "runs" not in code

    _session(root / ".ctx")(body)
