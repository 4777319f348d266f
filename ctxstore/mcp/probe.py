"""Probing an MCP server over stdio: start it, ``initialize``, ``tools/list``, stop it.

``ctx doctor`` checks with it that ``ctx mcp`` starts and answers, and the release check
runs it against an installed wheel. It speaks the JSON-RPC lines itself (no SDK: a probe
must work where the SDK is what is broken), bounded in time (a watchdog kills a server that
does not answer) and in what it reads (a few lines of at most ``MAX_LINE_BYTES``). It reads
no environment: the caller passes the server's ``env``.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ctxstore.records import dataclass

__all__ = ["MAX_LINE_BYTES", "PROTOCOL_VERSION", "ProbeResult", "probe_server"]

PROTOCOL_VERSION = "2025-06-18"
MAX_LINE_BYTES = 1 << 20  # a tools/list answer is a few KiB
_MAX_LINES = 64  # notifications a server may send before its answer


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What the probe saw: ``ok`` when the server answered ``initialize`` and ``tools/list``.

    ``server`` is the name and version it gave, ``tools`` the names it listed, ``detail``
    (when not ok) what went wrong, in one line.
    """

    ok: bool
    server: str = ""
    tools: tuple[str, ...] = ()
    detail: str = ""


class _Failed(Exception):
    """The probe stops here; the message says why (one line)."""


def _read_answer(out: IO[bytes], want: int) -> dict[str, Any]:
    """The response with id ``want`` (notifications and other ids before it are skipped)."""
    for _ in range(_MAX_LINES):
        line = out.readline(MAX_LINE_BYTES + 1)
        if not line:
            raise _Failed("the server closed its output without answering")
        if len(line) > MAX_LINE_BYTES:
            raise _Failed(f"an answer longer than {MAX_LINE_BYTES} bytes")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            raise _Failed(f"not JSON-RPC on stdout: {line[:80]!r}") from None
        if isinstance(message, dict) and message.get("id") == want:
            if "error" in message:
                raise _Failed(f"error answer: {json.dumps(message['error'])[:200]}")
            result = message.get("result")
            if not isinstance(result, dict):
                raise _Failed("an answer without a result object")
            return result
    raise _Failed(f"no answer in {_MAX_LINES} lines")


def _exchange(proc: subprocess.Popen[bytes], client: str) -> ProbeResult:
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                     "clientInfo": {"name": client, "version": "1"}}})
    init = _read_answer(proc.stdout, 1)
    info = init.get("serverInfo")
    server = f"{info.get('name', '?')} {info.get('version', '')}".strip() \
        if isinstance(info, dict) else "?"
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = _read_answer(proc.stdout, 2).get("tools")
    if not isinstance(listed, list):
        raise _Failed("tools/list answered without a list of tools")
    names = tuple(str(t.get("name")) for t in listed if isinstance(t, dict))
    return ProbeResult(True, server, names)


def _first_line(err: IO[bytes]) -> str:
    err.seek(0)
    lines = [line.strip() for line in err.read(4096).decode("utf-8", "replace").splitlines()]
    return next((line for line in lines if line), "")


def probe_server(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None,
                 timeout: float = 30.0, client: str = "ctx-probe") -> ProbeResult:
    """Start the stdio MCP server ``argv``, ask ``initialize`` and ``tools/list``, stop it.

    Args:
        argv: The server's command line (``[ctx, "mcp"]``).
        cwd: Where it runs (it finds its store from there).
        env: Its environment (None: this process's).
        timeout: Seconds for the whole exchange; the server is killed after that.
        client: The ``clientInfo.name`` sent.

    Returns:
        The result; never raises for a server that fails (``ok`` False, ``detail`` why).
    """
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err)
        except OSError as exc:
            return ProbeResult(False, detail=f"cannot start {argv[0]}: {exc.strerror or exc}")
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            proc.kill()

        watchdog = threading.Timer(timeout, kill)
        watchdog.start()
        try:
            result = _exchange(proc, client)
        except (_Failed, OSError) as exc:
            why = f"no answer within {timeout:g} s" if timed_out.is_set() else str(exc)
            said = _first_line(err)
            result = ProbeResult(False, detail=why + (f"; it said: {said}" if said else ""))
        finally:
            watchdog.cancel()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()  # EOF on its stdin: a stdio server ends
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return result
