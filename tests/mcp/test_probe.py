"""``ctxstore.mcp.probe``: start a stdio MCP server, ask initialize and tools/list, stop it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.mcp.probe import probe_server

TOOLS = {"remember", "recall", "search", "pack", "memory_search", "compose", "show", "link",
         "forget", "task_start", "task_end", "status"}


@pytest.mark.slow
def test_probe_lists_the_tools_of_ctx_mcp(tmp_path: Path) -> None:
    ctx_dir = tmp_path / ".ctx"
    assert run_ctx(["--ctx-dir", str(ctx_dir), "init"], cwd=tmp_path).returncode == 0
    result = probe_server([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "mcp"],
                          cwd=tmp_path)
    assert result.ok and result.server.startswith("ctx") and set(result.tools) == TOOLS, result


def test_probe_reports_a_missing_command_garbage_and_an_error_exit(tmp_path: Path) -> None:
    missing = probe_server([str(tmp_path / "no-such-ctx"), "mcp"], cwd=tmp_path)
    assert not missing.ok and missing.detail.startswith(f"cannot start {tmp_path / 'no-such-ctx'}")
    garbage = probe_server([sys.executable, "-c", "print('hello, not JSON')"], cwd=tmp_path)
    assert (garbage.ok, garbage.detail) == (False, "not JSON-RPC on stdout: b'hello, not JSON\\n'")
    failed = probe_server([sys.executable, "-c", "import sys; sys.stderr.write('\\nboom: no store\\n');"
                           " sys.exit(1)"], cwd=tmp_path)
    assert (failed.ok, failed.detail) == (False, "the server closed its output without answering; "
                                                 "it said: boom: no store")
    errored = probe_server([sys.executable, "-c", "import sys, json; sys.stdin.readline(); print("
                            "json.dumps({'jsonrpc': '2.0', 'id': 1, 'error': {'code': -32602, "
                            "'message': 'bad version'}}), flush=True)"], cwd=tmp_path)
    assert not errored.ok and errored.detail.startswith('error answer: {"code": -32602')


@pytest.mark.slow
def test_probe_kills_a_server_that_never_answers(tmp_path: Path) -> None:
    start = time.monotonic()
    hung = probe_server([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path,
                        timeout=1.0)
    assert (hung.ok, hung.detail) == (False, "no answer within 1 s")
    assert time.monotonic() - start < 10
