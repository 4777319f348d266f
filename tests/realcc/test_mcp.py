"""The real Claude Code CLI lists and calls a ctx MCP tool (issue 16).

``ctx install --mcp`` registers ``ctx mcp`` in the project's .mcp.json (and, as a plugin, in
the plugin's .mcp.json); the scripted model calls ``recall``; the CLI starts ``ctx mcp``, runs
the call and sends its result back to the model.
"""

from __future__ import annotations

import json

import pytest

from .conftest import ClaudeProject

# The real Claude Code CLI: seconds a turn, and an npm install on first use.
pytestmark = pytest.mark.slow


def test_claude_code_lists_and_calls_the_ctx_mcp_recall_tool(cc: ClaudeProject) -> None:
    cc.ctx("add", "--type", "fact", "--tag", "tier:off-context", "MCP-RECALL-61 retries back off")
    if cc.plugin_dir is None:
        cc.ctx("install", "--project", "--mcp")
        tool = "mcp__ctx__recall"
    else:
        tool = "mcp__plugin_ctx_ctx__recall"
    turn = cc.run("What do we know about retries?", [
        [{"type": "text", "text": "Let me check memory."},
         {"type": "tool_use", "name": tool, "input": {"query": "MCP-RECALL-61"}}],
        "Retries back off.",
    ], allowed_tools=f"Bash,{tool}",
        # The CLI connects MCP servers in the background and sends the first request after a
        # short wait; `ctx mcp` first imports the MCP SDK (1-3 s on a loaded machine). What is
        # tested is listing and calling, so the CLI waits for the connection.
        env={"MCP_CONNECTION_NONBLOCKING": "false"})
    first = json.dumps(turn.main_requests[0])
    assert tool in first, "the CLI did not list the ctx MCP tool to the model"
    # The node is off-context (never injected at session start): only the tool call brings it.
    assert turn.count("MCP-RECALL-61 retries back off", 0) == 0
    assert len(turn.main_requests) == 2
    result = json.dumps(turn.main_requests[1])
    assert "tool_result" in result and "MCP-RECALL-61 retries back off" in result
    assert "store" in result and "project" in result  # the result names its store
