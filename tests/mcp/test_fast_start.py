"""`ctx mcp` answers the handshake before the MCP SDK is loaded, exactly as the SDK would.

Over real stdio against the installed `ctx mcp`: `initialize`, `tools/list` and `ping` are
answered by the front (`ctxstore.mcp.front`) from `ctxstore/mcp/described.json`, the SDK then
serves a tool call, and every answer equals what the SDK gives on its own
(`--no-fast-start`), for each protocol version a client may ask for. The front writes JSON
with spaces after separators and the SDK writes it compact: that is how a line shows who
answered it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import run_ctx

from ctxstore.mcp import front as front_module
from ctxstore.mcp.front import load_description

pytest.importorskip("mcp")

from tests.mcp.describe_server import INITIALIZED, describe, initialize, talk  # noqa: E402

MISMATCH = "otherwise than the fast start"


@pytest.fixture
def ctx_dir(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    assert run_ctx(["--ctx-dir", str(work / ".ctx"), "init", "--no-git"], cwd=work).returncode == 0
    assert run_ctx(["--ctx-dir", str(work / ".ctx"), "add", "--type", "fact",
                    "ripgrep skips hidden files"], cwd=work).returncode == 0
    return work / ".ctx"


def _exchange(ctx_dir: Path, protocol: str, *extra: str) -> tuple[list[dict[str, Any]], str]:
    return talk(ctx_dir, [
        initialize(1, protocol), INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "recall", "arguments": {"query": "ripgrep"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}], *extra)


@pytest.mark.slow
def test_mcp_fast_start_answers_as_the_sdk_for_every_protocol_version(ctx_dir: Path) -> None:
    # a version the SDK negotiates, an older one, a newer era's (not through initialize), a
    # version no one knows: the SDK answers its newest handshake version to the last two
    for protocol, agreed in (("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"),
                             ("2026-07-28", "2025-11-25"), ("1999-01-01", "2025-11-25")):
        fast, err = _exchange(ctx_dir, protocol)
        slow, _ = _exchange(ctx_dir, protocol, "--no-fast-start")
        assert MISMATCH not in err, err  # the SDK's own answers, dropped, were the same
        assert [m.get("result") for m in fast] == [m.get("result") for m in slow], protocol
        init, listed, ping, called, again = fast
        assert init["result"]["protocolVersion"] == agreed
        assert {t["name"] for t in listed["result"]["tools"]} >= {"recall", "remember", "pack"}
        assert ping["result"] == {}
        assert "ripgrep skips hidden files" in called["result"]["content"][0]["text"]
        assert again["result"] == listed["result"]  # the SDK serving lists what came early


def test_mcp_fast_start_answers_before_the_sdk_and_hands_over(ctx_dir: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(ctx_dir.parent))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write((json.dumps(initialize(1, "2025-06-18")) + "\n").encode())
        proc.stdin.flush()
        first = proc.stdout.readline()
        proc.stdin.write((json.dumps(INITIALIZED) + "\n" + json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n").encode())
        proc.stdin.flush()
        second = proc.stdout.readline()
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": '
                         b'{"name": "status", "arguments": {}}}\n')
        proc.stdin.flush()
        third = proc.stdout.readline()
    finally:
        proc.kill()
        proc.wait()
    # the front's line (spaced JSON): written while the SDK was still being imported
    assert first.startswith(b'{"jsonrpc": "2.0", "id": 1, "result": {'), first[:80]
    # the list comes from the front too unless this client was slower than the SDK's import
    assert json.loads(second)["result"] == _answers("2025-06-18")["tools/list"]
    # the SDK's line (compact JSON): it serves the tool call after the hand-over
    assert json.loads(third)["id"] == 3 and b'"jsonrpc":"2.0"' in third


def _answers(protocol: str) -> dict[str, Any]:
    described = json.loads(front_module.DESCRIPTION_FILE.read_text())
    found: dict[str, Any] = described["answers"][described["versions"][protocol]]
    return found


def _lines(fd: int, count: int) -> list[dict[str, Any]]:
    data = b""
    while data.count(b"\n") < count:
        data += os.read(fd, 1 << 16)
    return [json.loads(line) for line in data.splitlines()]


def test_front_answers_until_the_sdk_serves_and_drops_the_sdks_duplicates(
        caplog: pytest.LogCaptureFixture) -> None:
    from ctxstore.mcp.front import Front

    read_in, write_in = os.pipe()  # the client writes write_in
    read_out, wire_out = os.pipe()  # and reads read_out
    front = Front(read_in, wire_out, load_description(), "9.9")
    front.start()
    sent = [initialize(1, "2025-03-26"), INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "id": "t", "method": "tools/list", "params": {}},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "status"}}]
    os.write(write_in, "".join(json.dumps(m) + "\n" for m in sent).encode())
    init, ping, listed = _lines(read_out, 3)  # the tool call is the SDK's to answer
    assert init["result"]["protocolVersion"] == "2025-03-26"
    assert init["result"]["serverInfo"] == {"name": "ctx", "version": "9.9"}
    assert (ping["id"], ping["result"]) == (2, {})
    assert listed["result"] == _answers("2025-03-26")["tools/list"]
    assert front.answered == 3
    # every line goes on to the SDK, in order, the answered ones included
    assert [json.loads(front.next_line() or "null") for _ in sent] == sent
    front.serving()
    os.write(write_in, b'{"jsonrpc": "2.0", "id": 5, "method": "ping"}\n')
    assert json.loads(front.next_line() or "null")["id"] == 5 and front.answered == 3
    # the SDK's answers to what was answered early are dropped, a different one logged
    front.write(json.dumps({"jsonrpc": "2.0", "id": 1, "result": init["result"]}) + "\n")
    with caplog.at_level(logging.WARNING, "ctxstore.mcp"):
        front.write(json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"x": 1}}) + "\n")
    assert MISMATCH in caplog.text
    front.write(json.dumps({"jsonrpc": "2.0", "id": 4, "result": {"ok": True}}) + "\n")
    assert _lines(read_out, 1) == [{"jsonrpc": "2.0", "id": 4, "result": {"ok": True}}]
    os.close(write_in)
    assert front.next_line() is None  # the end of the input ends the SDK's reading
    front._thread.join(5)
    assert not front.alive()
    os.close(wire_out)
    os.close(read_out)


@pytest.mark.slow
def test_mcp_fast_start_leaves_a_malformed_initialize_to_the_sdk(ctx_dir: Path) -> None:
    bad = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {}}}  # no clientInfo
    fast, err = talk(ctx_dir, [bad])
    slow, _ = talk(ctx_dir, [bad], "--no-fast-start")
    assert fast == slow and "error" in fast[0], fast
    assert MISMATCH not in err


def test_mcp_fast_start_description_is_used_only_with_its_sdk_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_description() is not None  # the installed SDK is the one described
    other = tmp_path / "described.json"
    shutil.copy(front_module.DESCRIPTION_FILE, other)
    other.write_text(other.read_text().replace('"sdk": "', '"sdk": "0.0.0-', 1))
    monkeypatch.setattr(front_module, "DESCRIPTION_FILE", other)
    assert load_description() is None
    other.write_text("{not json")
    assert load_description() is None


@pytest.mark.slow
def test_mcp_described_json_is_what_the_installed_sdk_answers(ctx_dir: Path) -> None:
    # After a change to a tool, its docstring or the SDK release:
    #   python tests/mcp/describe_server.py > ctxstore/mcp/described.json
    assert describe(ctx_dir) == json.loads(front_module.DESCRIPTION_FILE.read_text())
