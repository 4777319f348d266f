"""The commands ctx's hooks run, and how ctx recognises its own hook entries.

Three kinds of hook command, by where they are installed:

- the user's own settings, and ``--project --local``: ctx by absolute path
  (``resolve_ctx_command``, ``hook_command``);
- a committed ``.claude/settings.json`` (``--project --shared``): a portable command that
  finds ctx on each machine (``$CTX_BIN``, then ``ctx`` on PATH, then ``~/.local/bin/ctx``
  where pipx and ``uv tool`` put it) and, when there is none, prints ``{}`` and exits 0
  (SessionStart: a visible notice) instead of failing with 127 on every event
  (``portable_hook_command``);
- a plugin: ``${CLAUDE_PLUGIN_ROOT}/bin/ctx-hook``, which finds ctx the same way
  (``plugin_hook_command``).

ctx's entries are recognised by their command (``<...>/ctx hook <event>``, ``<python> -m
ctxstore.cli hook <event>``, the portable command or the plugin wrapper), whatever path an
older install used, so reinstalling replaces them in place and uninstalling removes exactly
them.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore.errors import UnsafePath

__all__ = [
    "CTX_BIN_ENV",
    "HOOK_EVENTS",
    "MISSING_NOTICE",
    "PLUGIN_HOOK_SCRIPT",
    "ctx_hooks",
    "hook_command",
    "is_ctx_handler",
    "is_ctx_hook",
    "plugin_hook_command",
    "plugin_script",
    "portable_hook_command",
    "resolve_ctx_command",
]

# Claude Code event -> (``ctx hook`` subcommand, timeout in seconds). UserPromptSubmit's
# platform default is 30 s; SessionEnd's 1.5 s budget is raised by a settings-file timeout.
HOOK_EVENTS: dict[str, tuple[str, int]] = {
    "SessionStart": ("session-start", 30),
    "UserPromptSubmit": ("prompt-submit", 30),
    "Stop": ("stop", 60),
    "PreCompact": ("pre-compact", 60),
    "SessionEnd": ("session-end", 10),
}
CTX_BIN_ENV = "CTX_BIN"
# Said (SessionStart only) when a portable hook finds no ctx on this machine.
MISSING_NOTICE = ("ctx: the ctx command was not found by the hooks, so memory is off "
                  "in this session. Install ctx (pipx install ctxstore) and run "
                  "`ctx install --project` here (or set CTX_BIN), then `ctx doctor`.")
# Where the portable command looks for ctx, in order (``$c`` is each in turn).
_CANDIDATES = '"$CTX_BIN" ctx ~/.local/bin/ctx'
_PORTABLE_MARK = 'exec "$c" hook '
PLUGIN_HOOK_SCRIPT = "bin/ctx-hook"
_PLUGIN_MARK = '"${CLAUDE_PLUGIN_ROOT}/bin/ctx-hook" '


def _is_executable_file(path: Path) -> bool:
    return path.is_file() and path.stat().st_mode & 0o111 != 0


def resolve_ctx_command(executable: str, on_path: str | None) -> list[str]:
    """The argv prefix that runs this installation of ctx, by absolute path.

    The console script installed next to the running interpreter wins; symlinks of the
    interpreter are followed one at a time only until a ``ctx`` script sits next to it.
    ``on_path`` (``shutil.which("ctx")``) is used only if it is a real script that runs
    this interpreter: a version-manager shim would add its start-up time to every hook.
    Failing both, ``<python> -m ctxstore.cli`` always works.
    """
    step = Path(executable)
    for _ in range(8):
        candidate = step.parent / "ctx"
        if _is_executable_file(candidate):
            return [str(candidate)]
        if not step.is_symlink():
            break
        target = step.readlink()
        step = target if target.is_absolute() else step.parent / target
    if on_path:
        script = Path(on_path)
        try:  # the shebang line only: bounded, never a FIFO (pipx links the script here)
            first = fsio.read_regular(os.path.realpath(script), 512).split(b"\n", 1)[0]
        except (OSError, UnsafePath):
            first = b""
        if first.startswith(b"#!") and Path(first[2:].decode(errors="replace").strip()).resolve() \
                == Path(executable).resolve():
            return [str(script.absolute())]
    return [str(Path(executable).absolute()), "-m", "ctxstore.cli"]


def hook_command(prefix: list[str], subcommand: str) -> str:
    """The shell command line of one hook (paths quoted for ``sh -c``)."""
    return shlex.join([*prefix, "hook", subcommand])


def portable_hook_command(subcommand: str) -> str:
    """The hook command of a committed settings.json: it finds ctx on whatever machine runs it.

    ``$CTX_BIN`` (set per machine in settings.local.json), then ``ctx`` on PATH, then
    ``~/.local/bin/ctx``; the first executable file runs ``ctx hook SUBCOMMAND`` with the
    hook's stdin. With none, it prints ``{}`` (SessionStart: a notice the user sees) and
    exits 0: a teammate without ctx gets no error on every event.

    Args:
        subcommand: the ``ctx hook`` subcommand (``stop``, ``session-start``, ...).

    Returns:
        A ``sh -c`` command line.
    """
    missing = json.dumps({"systemMessage": MISSING_NOTICE}) if subcommand == "session-start" \
        else "{}"
    return (f'for c in {_CANDIDATES}; do c=$(command -v "$c") && [ -f "$c" ] && [ -x "$c" ] '
            f'&& {_PORTABLE_MARK}{subcommand}; done; echo {shlex.quote(missing)}')


def plugin_hook_command(subcommand: str) -> str:
    """The hook command of a plugin: its ``bin/ctx-hook`` wrapper, through ``${CLAUDE_PLUGIN_ROOT}``.

    Run by ``sh``, so a plugin copied without its executable bit still works.

    Args:
        subcommand: the ``ctx hook`` subcommand.

    Returns:
        A ``sh -c`` command line.
    """
    return f"sh {_PLUGIN_MARK}{subcommand}"


def plugin_script() -> bytes:
    """The plugin's ``bin/ctx-hook``: finds ctx as the portable command does, or says it is missing."""
    missing = json.dumps({"systemMessage": MISSING_NOTICE.replace(
        "run `ctx install --project` here (or set CTX_BIN)", "make sure Claude Code's PATH "
        "reaches it (or set CTX_BIN)")})
    return f"""#!/bin/sh
# Runs `ctx hook EVENT` for the ctx Claude Code plugin (written by `ctx install --plugin`).
# ctx is $CTX_BIN, else `ctx` on PATH, else ~/.local/bin/ctx (pipx, uv tool install).
# Without ctx the hook prints {{}} (at session start, a notice) and exits 0.
event="$1"
for c in {_CANDIDATES}; do
  c=$(command -v "$c") && [ -f "$c" ] && [ -x "$c" ] && exec "$c" hook "$event"
done
if [ "$event" = session-start ]; then
  echo {shlex.quote(missing)}
else
  echo '{{}}'
fi
exit 0
""".encode()


def is_ctx_hook(command: Any) -> bool:
    """Whether a hook handler's command runs ``ctx hook ...``.

    Any install path of ctx, the portable command and the plugin wrapper included.
    """
    if not isinstance(command, str):
        return False
    if _PORTABLE_MARK in command or command.startswith("sh " + _PLUGIN_MARK):
        return True
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if argv and Path(argv[0]).name == "ctx":
        rest = argv[1:]
    elif len(argv) >= 3 and argv[1:3] == ["-m", "ctxstore.cli"]:
        rest = argv[3:]
    else:
        return False
    return len(rest) >= 2 and rest[0] == "hook"


def is_ctx_handler(handler: Any) -> bool:
    """Whether a hook handler (a settings entry) runs ``ctx hook ...``."""
    return isinstance(handler, dict) and is_ctx_hook(handler.get("command"))


def ctx_hooks(prefix: list[str] | Callable[[str], str]) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` mapping ctx installs: one matcher group with one command handler per event.

    Args:
        prefix: the argv prefix of ctx (commands by absolute path), or a function from the
            ``ctx hook`` subcommand to the command line (``portable_hook_command``).

    Returns:
        Event name -> list of matcher groups.
    """
    make = prefix if callable(prefix) else (lambda sub: hook_command(prefix, sub))
    return {event: [{"hooks": [{"type": "command", "command": make(sub), "timeout": timeout}]}]
            for event, (sub, timeout) in HOOK_EVENTS.items()}
