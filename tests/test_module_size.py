"""Rooms sized to one job (issue 29, STYLE §2.1): no module of ``ctxstore`` over 600 lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ctxstore"
MAX_LINES = 600
def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def oversized(root: Path) -> dict[str, int]:
    """The modules under ``root`` over MAX_LINES lines, by their path relative to it."""
    return {p.relative_to(root).as_posix(): n for p in sorted(root.rglob("*.py"))
            if (n := _lines(p)) > MAX_LINES}


def test_module_size_no_module_over_the_limit() -> None:
    assert oversized(PKG) == {}


def test_module_size_check_fails_on_a_planted_module(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "small.py").write_text("x = 1\n" * MAX_LINES)
    assert oversized(tmp_path) == {"pkg/big.py": MAX_LINES + 1}


# One module per hook event, loaded when its handler is asked for: a hook imports its own
# event's module and what the events share, never the other events'.
EVENTS = ["session-start", "prompt-submit", "stop", "pre-compact", "session-end"]


@pytest.mark.parametrize("event", EVENTS)
def test_module_size_hook_imports_only_its_own_event_module(tmp_path: Path, event: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(work / ".ctx"), "init"],
                   check=True, capture_output=True)
    payload = json.dumps({"session_id": "s1", "cwd": str(work), "hook_event_name": event,
                          "prompt": "why does the upload worker retry", "source": "startup"})
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "ctxstore.cli", "hook", event],
                         input=payload, capture_output=True, text=True, cwd=work)
    assert res.returncode == 0 and isinstance(json.loads(res.stdout), dict)
    imported = {line.split("|")[-1].strip() for line in res.stderr.splitlines()
                if line.startswith("import time:")}
    events = {m for m in imported if m.startswith("ctxstore.claude.hooks.on_")}
    assert events == {f"ctxstore.claude.hooks.on_{event.replace('-', '_')}"}


def test_module_size_hook_handlers_resolve_by_event_and_name() -> None:
    from ctxstore.claude import hooks

    assert list(hooks.HANDLERS) == EVENTS and len(hooks.HANDLERS) == 5
    for event in EVENTS:
        handler = hooks.HANDLERS[event]
        assert handler is getattr(hooks, event.replace("-", "_"))
        assert handler.__module__ == f"ctxstore.claude.hooks.on_{event.replace('-', '_')}"
    assert "nope" not in hooks.HANDLERS
    with pytest.raises(KeyError):
        hooks.HANDLERS["nope"]
    with pytest.raises(AttributeError):
        hooks.nope  # noqa: B018
    from ctxstore.claude.hooks import MAX_COMMANDS_PER_TURN, preview_session_start, turn_commands

    assert MAX_COMMANDS_PER_TURN == 50
    assert callable(preview_session_start) and callable(turn_commands)
