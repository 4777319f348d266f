"""Hand-made Claude Code transcripts in the real line shapes (claude-code.md §4), for memory tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SESSION = "4d5611e5-241a-462a-8d15-5122611a9569"
T0 = datetime(2026, 2, 12, 16, 0, tzinfo=UTC)


class Transcript:
    """Builds the lines of one session, one content block per assistant line."""

    def __init__(self, session: str = SESSION, start: datetime = T0, *, sidechain: bool = False,
                 cwd: str = "/home/user/demo", branch: str = "main"):
        self.session = session
        self.branch = branch
        self.cwd = cwd
        self.now = start
        self.lines: list[dict[str, Any]] = []
        self.sidechain = sidechain
        self.count = 0
        self.parent: str | None = None

    def _uuid(self) -> str:
        self.count += 1
        return f"{self.session[:8]}-0000-4000-8000-{self.count:012d}"

    def _base(self, kind: str, minutes: float) -> dict[str, Any]:
        self.now += timedelta(minutes=minutes)
        uuid = self._uuid()
        line = {"parentUuid": self.parent, "isSidechain": self.sidechain, "userType": "external",
                "cwd": self.cwd, "sessionId": self.session, "version": "2.1.39",
                "gitBranch": self.branch, "type": kind, "uuid": uuid,
                "timestamp": self.now.isoformat().replace("+00:00", "Z")}
        self.parent = uuid
        return line

    def prompt(self, text: str, minutes: float = 1.0) -> str:
        line = self._base("user", minutes)
        line["message"] = {"role": "user", "content": text}
        self.lines.append(line)
        return str(line["uuid"])

    def meta(self, text: str) -> str:
        line = self._base("user", 0.01)
        line["message"] = {"role": "user", "content": text}
        line["isMeta"] = True
        self.lines.append(line)
        return str(line["uuid"])

    def say(self, text: str, minutes: float = 0.2, msg: str | None = None) -> str:
        line = self._base("assistant", minutes)
        line["requestId"] = "req_1"
        line["message"] = {"model": "claude-opus-4-6", "id": msg or f"msg_{self.count}",
                           "type": "message", "role": "assistant",
                           "content": [{"type": "text", "text": text}], "stop_reason": None}
        self.lines.append(line)
        return str(line["uuid"])

    def think(self, text: str) -> str:
        line = self._base("assistant", 0.05)
        line["message"] = {"id": f"msg_{self.count}", "role": "assistant",
                           "content": [{"type": "thinking", "thinking": text, "signature": "x"}]}
        self.lines.append(line)
        return str(line["uuid"])

    def tool(self, name: str, args: dict[str, Any], output: str) -> tuple[str, str]:
        use = self._base("assistant", 0.05)
        use["message"] = {"id": f"msg_{self.count}", "role": "assistant",
                          "content": [{"type": "tool_use", "id": f"toolu_{self.count}",
                                       "name": name, "input": args}]}
        self.lines.append(use)
        result = self._base("user", 0.05)
        result["message"] = {"role": "user", "content": [
            {"tool_use_id": f"toolu_{self.count - 1}", "type": "tool_result", "content": output,
             "is_error": False}]}
        result["toolUseResult"] = {"stdout": output}
        result["sourceToolAssistantUUID"] = use["uuid"]
        self.lines.append(result)
        return str(use["uuid"]), str(result["uuid"])

    def end_turn(self) -> str:
        line = self._base("system", 0.01)
        line.update({"subtype": "turn_duration", "durationMs": 1000})
        self.lines.append(line)
        return str(line["uuid"])

    def compact(self, summary: str) -> tuple[str, str]:
        boundary = self._base("system", 1)
        boundary.update({"parentUuid": None, "subtype": "compact_boundary",
                         "content": "Conversation compacted",
                         "compactMetadata": {"trigger": "auto", "preTokens": 1000}})
        self.lines.append(boundary)
        line = self._base("user", 0.01)
        line["message"] = {"role": "user", "content": "This session is being continued from a "
                           "previous conversation that ran out of context. The conversation is "
                           f"summarized below:\n{summary}"}
        line["isCompactSummary"] = True
        line["isVisibleInTranscriptOnly"] = True
        self.lines.append(line)
        return str(boundary["uuid"]), str(line["uuid"])

    def other_lines(self) -> None:
        """Line types memory must pass over."""
        self.lines.append({"type": "summary", "summary": "Demo", "leafUuid": "x"})
        self.lines.append({"type": "file-history-snapshot", "messageId": "m",
                           "snapshot": {"trackedFileBackups": {}}, "isSnapshotUpdate": False})
        self.lines.append({"type": "queue-operation", "operation": "enqueue", "content": "hi"})
        progress = self._base("progress", 0.01)
        progress["data"] = {"type": "hook_progress"}
        self.lines.append(progress)
        attachment = self._base("attachment", 0.01)
        attachment["attachment"] = {"type": "hook_additional_context", "content": ["ctx view"]}
        self.lines.append(attachment)

    def data(self) -> bytes:
        return b"".join(json.dumps(line).encode() + b"\n" for line in self.lines)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.data())
        return path


def conversation(session: str = SESSION, start: datetime = T0) -> Transcript:
    """A small session with two topics, a decision that is later changed, tools and a compaction."""
    t = Transcript(session, start)
    t.other_lines()
    t.meta("Caveat: The messages below were generated by the user while running local commands.")
    t.prompt("How should we store the session cache for the web server?")
    t.think("Consider options.")
    t.say("We decided to use Redis for the session cache because it supports expiry natively.")
    t.tool("Bash", {"command": "grep -rn cache src/"}, "src/cache.py:12: CACHE = {}")
    t.say("The cache lives in src/cache.py today.")
    t.end_turn()
    t.prompt("ok thanks")
    t.say("Sure.")
    t.end_turn()
    t.prompt("Actually Redis is too heavy here. Let's switch the session cache to SQLite instead.",
             minutes=5)
    t.say("We decided to use SQLite for the session cache instead of Redis; it keeps deployment "
          "simple.")
    t.end_turn()
    t.compact("The user chose SQLite for the session cache after rejecting Redis.")
    t.prompt("Now let's move on to the login page: the password field overflows on mobile.",
             minutes=45)
    t.say("The problem is the fixed width of 400px on the input; the fix is max-width: 100%.")
    t.tool("Edit", {"file_path": "web/login.css"}, "ok")
    t.say("Fixed by setting max-width on the password input in web/login.css.")
    t.end_turn()
    return t
