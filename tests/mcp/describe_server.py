"""What the MCP SDK answers to ``initialize`` and ``tools/list``: ``ctxstore/mcp/described.json``.

``ctx mcp`` answers the handshake before the SDK is loaded, from that file
(``ctxstore.mcp.front``). This asks a ``ctx mcp --no-fast-start`` (the SDK answering
everything) for each protocol version the SDK negotiates through ``initialize``, over real
stdio. ``tests/mcp/test_fast_start.py`` compares the file with it; after a change to a tool,
its docstring or the SDK release, write it again:

    python tests/mcp/describe_server.py > ctxstore/mcp/described.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ctxstore import __version__
from ctxstore.mcp.front import VERSION_MARK


def handshake_versions() -> tuple[list[str], str]:
    """The protocol versions the installed SDK negotiates through ``initialize``, and its newest."""
    try:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
    except ImportError:  # mcp 1.x
        from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS as HANDSHAKE_PROTOCOL_VERSIONS
        from mcp.types import LATEST_PROTOCOL_VERSION as LATEST_HANDSHAKE_VERSION
    return list(HANDSHAKE_PROTOCOL_VERSIONS), LATEST_HANDSHAKE_VERSION


def talk(ctx_dir: Path, lines: list[dict[str, Any]], *extra: str,
         timeout: float = 60) -> tuple[list[dict[str, Any]], str]:
    """Send ``lines`` to a ``ctx mcp`` and read one answer per request (in any order).

    Returns:
        The answers sorted as the requests were, and what the server wrote on stderr.
    """
    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "mcp",
                             "--no-global", *extra], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ctx_dir.parent))
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        want = [m["id"] for m in lines if "id" in m]
        for m in lines:
            proc.stdin.write((json.dumps(m) + "\n").encode())
        proc.stdin.flush()
        got: dict[Any, dict[str, Any]] = {}
        while len(got) < len(want):
            line = proc.stdout.readline()
            assert line, f"no answer to {sorted(set(want) - set(got))}"
            message = json.loads(line)
            if "id" in message:
                got[message["id"]] = message
        proc.stdin.close()
        err = proc.stderr.read().decode("utf-8", "replace")
        proc.wait()
    finally:
        timer.cancel()
        proc.kill()
    return [got[i] for i in want], err


def initialize(rid: int, protocol: str) -> dict[str, Any]:
    """An ``initialize`` request as clients send it."""
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize",
            "params": {"protocolVersion": protocol, "capabilities": {},
                       "clientInfo": {"name": "describe", "version": "0"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def describe(ctx_dir: Path) -> dict[str, Any]:
    """The SDK's answers for every handshake version (the SDK answering: ``--no-fast-start``)."""
    versions, latest = handshake_versions()
    out: dict[str, Any] = {"sdk": version("mcp"), "latest": latest, "versions": {}, "answers": []}
    for protocol in versions:
        (init, listed), _ = talk(ctx_dir, [initialize(1, protocol), INITIALIZED,
                                           {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}],
                                 "--no-fast-start")
        result = dict(init["result"])
        assert result.pop("protocolVersion") == protocol
        assert result["serverInfo"]["version"] == __version__
        result["serverInfo"] = {**result["serverInfo"], "version": VERSION_MARK}
        answers = {"initialize": result, "tools/list": listed["result"]}
        if answers not in out["answers"]:  # versions answered alike share one entry
            out["answers"].append(answers)
        out["versions"][protocol] = out["answers"].index(answers)
    return out


def main() -> None:
    """Print the description of a fresh store's ``ctx mcp``."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        work.mkdir()
        subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(work / ".ctx"),
                        "init", "--no-git"], cwd=work, check=True, capture_output=True,
                       env={**os.environ, "HOME": tmp})
        print(json.dumps(describe(work / ".ctx"), indent=1, ensure_ascii=False, sort_keys=True))


if __name__ == "__main__":
    main()
