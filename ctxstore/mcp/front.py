"""The front of ``ctx mcp``'s stdio wire: the handshake answered before the SDK is loaded.

Importing the MCP SDK takes 0.6-3 s (its protocol types are thousands of pydantic models),
and Claude Code connects MCP servers in the background: a server that answers ``initialize``
late can miss the first turn's tool list. The front reads the client's lines on its own
thread from the start, while the SDK is imported, and answers from a description of what the
SDK answers (``described.json``) until the SDK serves:

- ``initialize`` as the first message, well formed: the protocol version negotiated as the SDK
  negotiates it (the client's when the SDK speaks it through the handshake, else the newest
  it does), the capabilities, ``serverInfo`` and ``instructions`` the SDK gives;
- then ``ping`` (``{}``) and ``tools/list`` without a cursor (the tools as the SDK lists them
  for that protocol version).

Nothing else is answered here, and nothing is withheld from the SDK: every line goes to it in
order (the ``initialize`` included, so its session is initialised as the client believes),
and its answer to a request the front already answered is dropped, after comparing it with
the front's: a difference is logged on stderr (``ctx mcp --no-fast-start`` then lets the
SDK answer everything). The description is used only with the SDK release it was taken from
(``sdk``), found without importing it; with any other, or none, the front answers nothing.
``tests/mcp/test_fast_start.py`` keeps the description equal to the SDK's answers.

The front imports no SDK and nothing of ctx beyond the package version: it must be quick.
Writes to the wire go through one lock, so its lines and the SDK's never interleave.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from importlib.util import find_spec
from pathlib import Path
from typing import Any

__all__ = ["DESCRIPTION_FILE", "VERSION_MARK", "Front", "load_description"]

DESCRIPTION_FILE = Path(__file__).with_name("described.json")
VERSION_MARK = "<ctx version>"  # serverInfo.version in the description: this ctx's, at run time
_LOG = logging.getLogger("ctxstore.mcp")
_READ_BYTES = 1 << 16
_SENTINEL = None


def load_description() -> dict[str, Any] | None:
    """The SDK's answers, when the installed SDK is the release they were taken from.

    Returns:
        ``{"sdk", "latest", "versions": {version: n}, "answers": [{"initialize",
        "tools/list"}, ...]}`` (versions answered alike share an entry), or None (no SDK,
        another release, or no readable description): then nothing is answered early.
    """
    try:
        description: dict[str, Any] = json.loads(DESCRIPTION_FILE.read_text(encoding="utf-8"))
        spec = find_spec("mcp")
    except (OSError, ValueError, RecursionError, ImportError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(next(iter(spec.submodule_search_locations))).parent
    # pip writes <name>-<version>.dist-info beside the package: the release, without
    # importing importlib.metadata (tens of milliseconds).
    if not (site / f"mcp-{description.get('sdk')}.dist-info").is_dir():
        return None
    return description


def _request_id(message: dict[str, Any]) -> str | int | None:
    value = message.get("id")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _well_formed_initialize(params: Any) -> bool:
    """Whether ``initialize`` params hold what the SDK requires of them (else it answers)."""
    if not isinstance(params, dict):
        return False
    client = params.get("clientInfo")
    return (isinstance(params.get("protocolVersion"), str)
            and isinstance(params.get("capabilities"), dict)
            and isinstance(client, dict) and isinstance(client.get("name"), str)
            and isinstance(client.get("version"), str))


class Front:
    """The client's lines read on a thread; the handshake answered until the SDK serves.

    Args:
        wire_in: The descriptor the client writes to (its lines are read here only; closed
            at the end of the input).
        wire_out: The descriptor the client reads (every line is written through ``write``).
        description: ``load_description()``; None answers nothing early.
        version: This ctx's version (``serverInfo.version``).
    """

    def __init__(self, wire_in: int, wire_out: int, description: dict[str, Any] | None,
                 version: str) -> None:
        self._in = wire_in
        self._out = wire_out
        self._description = description
        self._version = version
        self._lock = threading.Lock()
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._early: dict[str | int, dict[str, Any]] = {}  # id -> the result sent here
        self._negotiated: str | None = None  # once initialize was answered here
        self._first = True
        self._serving = False
        self._thread = threading.Thread(target=self._read, name="ctx-mcp-front", daemon=True)
        self.answered = 0  # requests answered here (the bench and tests read it)

    def start(self) -> None:
        """Start reading the client's lines."""
        self._thread.start()

    def alive(self) -> bool:
        """Whether the reading thread still runs (it ends at the end of the input)."""
        return self._thread.is_alive()

    def serving(self) -> None:
        """The SDK reads lines from now on: nothing more is answered here."""
        with self._lock:
            self._serving = True

    def next_line(self) -> str | None:
        """The client's next line for the SDK, in order; None at the end of the input."""
        return self._lines.get()

    # -- reading -----------------------------------------------------------------------------

    def _read(self) -> None:
        pending = b""
        try:
            while True:
                chunk = os.read(self._in, _READ_BYTES)
                if not chunk:
                    break
                pending += chunk
                if b"\n" not in chunk:  # a long line: split once it ends, not on every chunk
                    continue
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    self._take(raw.decode("utf-8", "replace") + "\n")
            if pending:
                self._take(pending.decode("utf-8", "replace"))
        except OSError as exc:  # the input went away: the SDK ends as at its end
            _LOG.warning("ctx mcp: reading the client failed: %s", exc)
        finally:
            self._lines.put(_SENTINEL)
            os.close(self._in)  # this thread's copy of the input: nothing else reads it

    def _take(self, line: str) -> None:
        """Answer ``line`` here if the SDK is not serving yet and it is ours; pass it on."""
        with self._lock:
            first, self._first = self._first, self._first and not line.strip()
            if not self._serving and self._description is not None and line.strip():
                self._answer_early(line, first)
            self._lines.put(line)  # after the early answer is recorded: its duplicate drops

    def _answer_early(self, line: str, first: bool) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return
        rid, method = _request_id(message), message.get("method")
        if rid is None or not isinstance(method, str) or rid in self._early:
            return
        result = self._result(method, message.get("params"), first)
        if result is not None:
            self._early[rid] = result
            self.answered += 1  # before the line: a reader of it sees the count
            self._send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result},
                                  ensure_ascii=False) + "\n")

    def _result(self, method: str, params: Any, first: bool) -> dict[str, Any] | None:
        """The SDK's result for a request answered here, or None to leave it to the SDK."""
        assert self._description is not None
        versions: dict[str, Any] = self._description["versions"]
        if method == "initialize":
            if not first or not _well_formed_initialize(params):
                return None
            asked = params["protocolVersion"]
            negotiated = asked if asked in versions else self._description["latest"]
            if negotiated not in versions:
                return None
            self._negotiated = negotiated
            result = dict(self._answers(negotiated)["initialize"])  # serverInfo is replaced
            info = result.get("serverInfo")
            if isinstance(info, dict) and info.get("version") == VERSION_MARK:
                result["serverInfo"] = {**info, "version": self._version}
            return {**result, "protocolVersion": negotiated}
        if self._negotiated is None:
            return None
        if method == "ping" and (params is None or (isinstance(params, dict)
                                                    and set(params) <= {"_meta"})):
            return {}
        if method == "tools/list" and (params is None or (isinstance(params, dict)
                                                          and params.get("cursor") is None)):
            listed: dict[str, Any] = self._answers(self._negotiated)["tools/list"]
            return listed
        return None

    def _answers(self, protocol: str) -> dict[str, Any]:
        assert self._description is not None
        found: dict[str, Any] = self._description["answers"][self._description["versions"][protocol]]
        return found

    # -- writing -----------------------------------------------------------------------------

    def _send(self, text: str) -> None:
        """Write one line to the client (the caller holds the lock)."""
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self._out, data):]

    def write(self, text: str) -> None:
        """Write the SDK's line to the client, unless it answers a request answered here.

        Such an answer is compared with the front's; a difference is logged (the client keeps
        the front's).

        Args:
            text: One JSON-RPC line the SDK wrote.
        """
        with self._lock:
            if self._early and self._duplicate(text):
                return
            self._send(text)

    def _duplicate(self, text: str) -> bool:
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict) or "method" in message:
            return False
        rid = _request_id(message)
        if rid is None or rid not in self._early:
            return False
        sent = self._early.pop(rid)
        if message.get("result") != sent:
            _LOG.warning("ctx mcp: the MCP SDK answered request %r otherwise than the fast "
                         "start did (ctx mcp --no-fast-start lets the SDK answer): %s",
                         rid, text.strip()[:300])
        return True
