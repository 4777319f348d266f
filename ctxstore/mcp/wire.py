"""The stdio wire of ``ctx mcp``: every request line gets an answer, whatever it holds.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message: no reply, not
even for a request whose ``id`` it could see, so the client waits for ever. Here each line is
checked before the SDK sees it:

- not JSON, or nested deeper than the parser goes: a ``-32700`` parse error (``id`` null);
- JSON, but no JSON-RPC 2.0 message the SDK accepts, or one whose ``id`` is neither a string
  nor an integer (the SDK reads that as a notification, never answered): a ``-32600``
  invalid request with the line's ``id`` when it has a usable one, else null;
- a lone UTF-16 surrogate in a string (``"\\ud800"``: Claude Code may split a pair) is
  replaced with U+FFFD first, and the line goes on if that makes it valid.

The client's lines come from the front (``mcp.front``), which reads them from the start and
may have answered the handshake before the SDK was imported; the errors are written through
the front's line-locked writer like the SDK's own messages, so no two lines interleave. As
the SDK does, the standard descriptors are moved out of the way while serving
(``wire_descriptors``): fd 0 reads the null device and fd 1 writes to stderr, so a stray
read or print in a tool can never touch the wire; both are restored on exit.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxstore.mcp.front import Front

__all__ = ["serve_stdio", "check_line", "wire_descriptors"]

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def check_line(line: str, sdk_accepts: Callable[[str], bool]) -> tuple[str | None, str | None]:
    """What to do with one line read from the client.

    Args:
        line: The line, its newline included or not.
        sdk_accepts: Whether the SDK reads a line as a JSON-RPC message.

    Returns:
        ``(line to pass on, None)``, or ``(None, error reply line)``; ``(None, None)`` for a
        blank line.
    """
    if not line.strip():
        return None, None
    try:
        message = json.loads(line)
    except ValueError as exc:
        return None, _error(None, PARSE_ERROR, "Parse error", str(exc))
    except RecursionError:  # one line must never end the server (the reader's task group)
        return None, _error(None, PARSE_ERROR, "Parse error", "nested too deeply")
    try:
        return _check_message(line, message, sdk_accepts)
    except RecursionError:  # parsed, but too deep to copy or encode again
        return None, _error(_usable_id(message), PARSE_ERROR, "Parse error", "nested too deeply")


def _check_message(line: str, message: Any,
                   sdk_accepts: Callable[[str], bool]) -> tuple[str | None, str | None]:
    if isinstance(message, dict) and "id" in message and _usable_id(message) is None:
        # The SDK reads it as a notification, which is never answered: the client that
        # sent an id waits. MCP's ids are strings or integers, never null.
        return None, _error(None, INVALID_REQUEST, "Invalid Request",
                            "an id is a string or an integer")
    if sdk_accepts(line):
        return line, None
    fixed = _without_surrogates(message)
    if fixed != message:
        again = json.dumps(fixed, ensure_ascii=False)
        if sdk_accepts(again):
            return again + "\n", None
    what = ("a JSON-RPC 2.0 message is one object (batches are not taken)"
            if isinstance(message, list) else "not a JSON-RPC 2.0 request, notification or response")
    return None, _error(_usable_id(message), INVALID_REQUEST, "Invalid Request", what)


def _usable_id(message: Any) -> str | int | None:
    if isinstance(message, dict):
        value = message.get("id")
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value if _encodable(value) else re.sub("[\ud800-\udfff]", "\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _error(request_id: str | int | None, code: int, message: str, detail: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": code, "message": message, "data": detail[:200]}}) + "\n"


def _sdk_check() -> Callable[[str], bool]:
    """The SDK's own reading of a line (mcp 2.x, else 1.x)."""
    import importlib

    validate: Callable[[str], Any]
    try:
        adapter: Any = importlib.import_module("mcp_types").jsonrpc_message_adapter  # mcp 2.x

        def validate(line: str) -> Any:
            return adapter.validate_json(line, by_name=False)
    except ImportError:  # mcp 1.x
        validate = importlib.import_module("mcp.types").JSONRPCMessage.model_validate_json

    def accepts(line: str) -> bool:
        try:
            validate(line)
        except Exception:  # noqa: BLE001 - any refusal is "not a message"
            return False
        return True

    return accepts


class _Writer:
    """The wire's writer for the SDK: one line at a time, through the front (``mcp.front``).

    The front drops the SDK's answer to a request it answered itself, and holds the lock
    that keeps its lines and the SDK's whole.
    """

    def __init__(self, front: Front) -> None:
        self._front = front

    async def write(self, text: str) -> None:
        import anyio

        await anyio.to_thread.run_sync(self._front.write, text)

    async def flush(self) -> None:
        """Nothing is buffered: each line is written whole."""


class _Reader:
    """The client's lines from the front, each checked (``check_line``); errors answered."""

    def __init__(self, front: Front, writer: _Writer) -> None:
        self._front = front
        self._writer = writer
        self._accepts = _sdk_check()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        import anyio

        self._front.serving()  # from here the SDK answers every request
        while True:
            # abandon_on_cancel: a server stopped by an error does not wait for the client.
            line = await anyio.to_thread.run_sync(self._front.next_line, abandon_on_cancel=True)
            if line is None:
                return
            passed, reply = check_line(line, self._accepts)
            if reply is not None:
                await self._writer.write(reply)
            if passed is not None:
                yield passed


@contextmanager
def wire_descriptors() -> Iterator[tuple[int, int]]:
    """Private copies of fd 0 and 1 for the wire; fd 0 then reads /dev/null, fd 1 is stderr.

    As the SDK does, the standard descriptors are moved out of the way while serving, so a
    stray read or print can never touch the wire; both are restored on exit. The copy of fd
    0 given out belongs to its reader (``mcp.front.Front`` closes it at the end of the
    input, perhaps after this returns); fd 0 is restored from a copy of its own.
    """
    import fcntl

    saved_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)  # nothing is buffered for fd 1 yet: the server has printed nothing
        yield wire_in, wire_out
    finally:
        os.dup2(saved_in, 0)
        os.dup2(wire_out, 1)
        os.close(saved_in)
        os.close(wire_out)


def serve_stdio(server: Any, front: Front) -> None:
    """Serve ``server`` (the SDK's ``MCPServer``/``FastMCP``) on the front's wire until the end.

    Args:
        server: The server ``build_server`` made.
        front: The wire's front, started (``mcp.front.Front``): it reads the client's lines
            and may have answered the handshake already.
    """
    import anyio

    low = getattr(server, "_lowlevel_server", None) or server._mcp_server  # mcp 2.x, 1.x

    async def run() -> None:
        from mcp.server.stdio import stdio_server

        writer = _Writer(front)
        reader = _Reader(front, writer)
        async with stdio_server(stdin=reader, stdout=writer) as (read_stream, write_stream):  # type: ignore[arg-type]
            await low.run(read_stream, write_stream, low.create_initialization_options())

    anyio.run(run)
