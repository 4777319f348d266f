"""Installing ctx into Claude Code: the skill file, settings.json hooks, or a plugin.

Three kinds of hook command, by where the settings live:

- ``--user`` (``~/.claude/settings.json``, this machine only): ctx by absolute path.
- ``--project --shared`` (the default): the committed ``.claude/settings.json`` holds a
  portable command that finds ctx on each machine (``$CTX_BIN``, then ``ctx`` on PATH,
  then ``~/.local/bin/ctx`` where pipx and ``uv tool`` put it) and, when there is none,
  prints ``{}`` and exits 0 (SessionStart: a visible notice) instead of failing with 127
  on every event. This machine's absolute ctx goes into the uncommitted
  ``.claude/settings.local.json`` as ``env.CTX_BIN``, which Claude Code passes to the
  hooks, so they keep working whatever PATH Claude Code was started with.
- ``--project --local``: the absolute commands go into ``settings.local.json`` only.

``.claude/.gitignore`` gets a marked block naming the machine-specific files (the local
settings and ctx's backups). A plugin (``--plugin DIR``) runs its hooks through
``${CLAUDE_PLUGIN_ROOT}/bin/ctx-hook``, which finds ctx the same way, and ships a README,
a LICENSE and a ``marketplace.json``, so it can be published and installed anywhere.

Every operation is planned first as a list of file changes (old bytes -> new bytes) and
only then applied, so ``--dry-run`` shows exactly what a real run writes, a run that
changes nothing writes nothing, and a bad settings.json is refused before any file is
touched. ctx's hook entries are recognised by their command (``<...>/ctx hook <event>``
or ``<python> -m ctxstore.cli hook <event>``), whatever path an older install used, so
reinstalling replaces them in place and uninstalling removes exactly them.

Every path a plan reads, writes or deletes is checked against a ``Boundary`` while the
plan is made and again before the first write, so a refusal leaves every file as it
was. A project's ``.claude/`` and a plugin folder may come from a cloned repository:
there no symlink is followed, no special file read, nothing written or deleted through
a link. The user's own ``~/.claude`` may be linked into a dotfiles repository: there
links are followed and a linked file is written through (its target is replaced
atomically, so the link stays), but a linked file is never deleted.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import stat
from collections.abc import Callable, Iterable
from dataclasses import field
from importlib import resources
from pathlib import Path
from typing import Any

import ctxstore
from ctxstore import fsio
from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.records import dataclass

__all__ = [
    "CTX_BIN_ENV",
    "FILE_LIMIT",
    "HOOK_EVENTS",
    "LICENSE_TEXT",
    "LOCAL_SETTINGS",
    "PLUGIN_HOOK_SCRIPT",
    "SKILL_MARKER",
    "Boundary",
    "FileChange",
    "Plan",
    "apply_plan",
    "backup_path",
    "ctx_hooks",
    "describe",
    "hook_command",
    "is_ctx_hook",
    "plan_install",
    "plan_plugin",
    "plan_uninstall",
    "plan_unplugin",
    "plugin_hook_command",
    "portable_hook_command",
    "resolve_ctx_command",
    "skill_text",
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
SKILL_MARKER = "<!-- written by `ctx install`; `ctx uninstall` removes this file -->"
BACKUP_SUFFIX = ".bak"
PLUGIN_NAME = "ctx"
FILE_LIMIT = 4 * 1024 * 1024  # settings.json and SKILL.md are a few KiB; read no more than this
LOCAL_SETTINGS = "settings.local.json"
CTX_BIN_ENV = "CTX_BIN"
AUTHOR = "ctx contributors"
LICENSE_TEXT = """\
MIT License

Copyright (c) 2026 ctx contributors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""
# Said (SessionStart only) when a portable hook finds no ctx on this machine.
MISSING_NOTICE = ("ctx: the ctx command was not found by the hooks, so memory is off "
                  "in this session. Install ctx (pipx install ctxstore) and run "
                  "`ctx install --project` here (or set CTX_BIN), then `ctx doctor`.")
# Where the portable command looks for ctx, in order (``$c`` is each in turn).
_CANDIDATES = '"$CTX_BIN" ctx ~/.local/bin/ctx'
_PORTABLE_MARK = 'exec "$c" hook '
PLUGIN_HOOK_SCRIPT = "bin/ctx-hook"
_PLUGIN_MARK = '"${CLAUDE_PLUGIN_ROOT}/bin/ctx-hook" '
_GITIGNORE_BEGIN = "# >>> ctx install: machine-specific files, never committed >>>"
_GITIGNORE_END = "# <<< ctx install <<<"
_README_MARK = "<!-- written by `ctx install --plugin`; `ctx uninstall --plugin` removes it -->"

_STRICT_HINT = ("a cloned repository can commit such a link; ctx install never writes, reads "
                "or deletes through one in a project or plugin folder: remove it, or use "
                "--user for your own ~/.claude")
_OWN_HINT = "point the link at a regular file, or replace it with one"


def _unsafe(path: Path, detail: str, hint: str) -> UnsafePath:
    return UnsafePath(os.fspath(path), detail=detail, hint=hint)


@dataclass(frozen=True)
class Boundary:
    """Where a plan may read and write, and whether symlinks on the way are followed.

    ``root`` is the folder holding ``.claude`` (or the plugin folder); it and its parents
    are the user's choice and are not checked. Below it, with ``follow_links`` False
    (a project, a plugin: content a clone may bring), every folder must be a real
    directory and every file a regular file or absent. With ``follow_links`` True (the
    user's own configuration), links are followed, but what they reach must be a
    directory or a regular file, and a file that is a link is never deleted.
    """

    root: Path
    follow_links: bool = False

    def _parts(self, path: Path) -> list[Path]:
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            raise _unsafe(path, f"is outside {self.root}", _STRICT_HINT) from None
        if ".." in rel.parts or not rel.parts:
            raise _unsafe(path, f"is not a path below {self.root}", _STRICT_HINT)
        return [self.root.joinpath(*rel.parts[:i]) for i in range(1, len(rel.parts) + 1)]

    def resolve(self, path: Path) -> Path:
        """Check ``path`` and return the file to read and replace.

        ``path`` itself, or the target of a link in the user's own configuration.

        Raises:
            UnsafePath: (E020) naming the first component that is a link (project or
                plugin) or that is not a directory / regular file (a FIFO, a device,
                a dangling link).
        """
        parts = self._parts(path)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                st = os.lstat(part)
            except FileNotFoundError:
                return path  # the rest is created by apply_plan
            if stat.S_ISLNK(st.st_mode):
                if not self.follow_links:
                    raise _unsafe(part, "is a symbolic link", _STRICT_HINT)
                try:
                    st = os.stat(part)
                except OSError:
                    raise _unsafe(part, f"is a symbolic link to a missing file "
                                        f"({os.readlink(part)})", _OWN_HINT) from None
            if not last and not stat.S_ISDIR(st.st_mode):
                raise _unsafe(part, f"is {fsio.file_kind(st.st_mode)}, not a directory",
                              _OWN_HINT if self.follow_links else _STRICT_HINT)
            if last and not stat.S_ISREG(st.st_mode):
                raise _unsafe(part, f"is {fsio.file_kind(st.st_mode)}, not a regular file",
                              _OWN_HINT if self.follow_links else _STRICT_HINT)
        return Path(os.path.realpath(path)) if self.is_link(path) else path

    def is_link(self, path: Path) -> bool:
        """Whether ``path`` itself is a symbolic link."""
        return os.path.islink(path)

    def read(self, path: Path, limit: int = FILE_LIMIT) -> bytes | None:
        """The bytes of ``path`` (checked by ``resolve``), or None if there is no such file.

        Args:
            path: The file.
            limit: The most bytes it may hold.

        Raises:
            UnsafePath: (E020) see ``resolve``.
            InvalidInput: if the file is larger than ``limit``.
        """
        target = self.resolve(path)
        try:
            data = fsio.read_regular(target, limit)
        except FileNotFoundError:
            return None
        if len(data) > limit:
            raise InvalidInput(f"{path} is larger than {limit // (1024 * 1024)} MiB; "
                               "nothing was changed")
        return data

    def ensure_dir(self, folder: Path) -> None:
        """Create ``folder`` and the missing folders between it and ``root``.

        Raises:
            UnsafePath: (E020) if a component is a link (project, plugin) or not a folder.
            OSError: if a folder cannot be created.
        """
        if not self.follow_links:
            with fsio.open_dir(self.root) as root:
                root.ensure_dir(folder)
            return
        if folder == self.root:
            return  # the root is the user's choice (``~`` for ``~/.claude.json``): it exists
        for part in self._parts(folder):
            try:
                st = os.stat(part)  # the user's own links are followed
            except FileNotFoundError:
                if os.path.islink(part):
                    raise _unsafe(part, "is a symbolic link to a missing folder", _OWN_HINT) \
                        from None
                fsio.mkdir(part)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise _unsafe(part, f"is {fsio.file_kind(st.st_mode)}, not a directory",
                              _OWN_HINT)


@dataclass
class FileChange:
    """One file's planned change: ``new is None`` deletes it, ``old is None`` creates it.

    ``target`` is the file actually replaced: ``path``, or the target of a link in the
    user's own configuration.
    """

    path: Path
    old: bytes | None
    new: bytes | None
    backup: bool = False  # keep the old bytes in ``<path>.bak`` before replacing them
    target: Path | None = None
    mode: int | None = None  # permission bits of a new file (default: 0o644)

    @property
    def action(self) -> str:
        """``create``, ``update`` or ``delete``."""
        if self.new is None:
            return "delete"
        return "create" if self.old is None else "update"

    def diff(self) -> str:
        """A unified diff of the change (text files)."""
        old = (self.old or b"").decode("utf-8", "replace").splitlines(keepends=True)
        new = (self.new or b"").decode("utf-8", "replace").splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, new, f"{self.path} (now)", f"{self.path} (after)"))


@dataclass
class Plan:
    """The changes one install/uninstall would make; empty when everything is in place.

    ``checked`` lists every path the plan read or may write, each already checked by
    ``boundary``; ``apply_plan`` checks them all again before it writes anything.
    """

    boundary: Boundary
    changes: list[FileChange] = field(default_factory=list)
    prune_dirs: list[tuple[Path, Path]] = field(default_factory=list)  # (dir, stop) pairs
    checked: dict[Path, Path] = field(default_factory=dict)  # path -> resolved file
    limits: dict[Path, int] = field(default_factory=dict)  # path -> its size limit, if not FILE_LIMIT

    def check(self, *paths: Path) -> None:
        """Check paths the plan reads or may write (see ``Boundary.resolve``).

        Raises:
            UnsafePath: (E020) for the first path that fails.
        """
        for path in paths:
            self.checked[path] = self.boundary.resolve(path)

    def read(self, path: Path) -> bytes | None:
        """The current bytes of a checked ``path`` (None when absent).

        Raises:
            UnsafePath: (E020) if the path fails the boundary.
            InvalidInput: if the file is too large.
        """
        self.check(path)
        return self.boundary.read(path, self.limits.get(path, FILE_LIMIT))

    def add(self, path: Path, new: bytes | None, *, backup: bool = False,
            mode: int | None = None) -> None:
        """Plan writing ``new`` to ``path`` (or deleting it), unless it already holds that.

        ``mode`` gives a new file its permission bits (an existing file keeps its own).

        Raises:
            UnsafePath: (E020) if ``path`` (or its backup) fails the boundary, or a
                planned delete names a link (a link is never deleted, nor its target).
            InvalidInput: if the file is too large.
        """
        old = self.read(path)
        if old == new:
            return
        if new is None and self.boundary.is_link(path):
            raise _unsafe(path, "is a symbolic link; ctx does not delete through a link",
                          "remove it yourself if ctx's copy is no longer wanted")
        backup = backup and old is not None
        if backup:
            self.check(backup_path(path))
        self.changes.append(FileChange(path, old, new, backup=backup, target=self.checked[path],
                                       mode=mode))


# -- the ctx command -------------------------------------------------------------------


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


def _plugin_script() -> bytes:
    """``bin/ctx-hook``: finds ctx as the portable command does, or says it is missing."""
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


def skill_text() -> bytes:
    """The packaged SKILL.md."""
    return resources.files("ctxstore.claude").joinpath("SKILL.md").read_bytes()


# -- settings.json ---------------------------------------------------------------------


def _dump(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(raw: bytes) -> Any:
    """Strict JSON: no NaN/Infinity, no lone surrogates (they could not be written back).

    Raises:
        ValueError: (``json.JSONDecodeError`` with a position where JSON has one) if the
            bytes are not such JSON, nested too deeply included.
    """
    try:
        data = json.loads(raw.decode("utf-8-sig"), parse_constant=_no_constant)
        _dump(data)  # a lone surrogate ("\ud800") decodes but cannot be encoded again
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeEncodeError:
        raise ValueError("holds a lone surrogate") from None
    return data


def _load_settings(plan: Plan, path: Path) -> tuple[bytes | None, dict[str, Any]]:
    """Read (through the plan's boundary) and shape-check settings.json; missing is ``{}``.

    Raises:
        UnsafePath: (E020) if the path fails the plan's boundary.
        InvalidInput: if the file is not a JSON object or its ``hooks`` are malformed.
    """
    raw = plan.read(path)
    if raw is None:
        return None, {}
    try:
        data = _loads(raw)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        where = ""
        if isinstance(exc, json.JSONDecodeError):
            where = f" (line {exc.lineno} column {exc.colno})"
        elif not isinstance(exc, UnicodeDecodeError):
            where = f" ({exc})"
        raise InvalidInput(f"{path} is not valid JSON{where}; nothing was changed",
                           hint="fix or move the file, then run the command again") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} must hold a JSON object; nothing was changed")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise InvalidInput(f"{path}: \"hooks\" must map event names to lists; nothing was changed")
    for event, groups in hooks.items():
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
                raise InvalidInput(f"{path}: hooks.{event} holds a malformed matcher group; "
                                   "nothing was changed")
    return raw, data


def _is_ctx_handler(handler: Any) -> bool:
    return isinstance(handler, dict) and is_ctx_hook(handler.get("command"))


def _without_ctx(groups: list[Any]) -> tuple[list[Any], int | None]:
    """The groups with ctx's handlers removed, and the index where the first one was."""
    kept: list[Any] = []
    first: int | None = None
    for group in groups:
        handlers = group.get("hooks", [])
        if not any(_is_ctx_handler(h) for h in handlers):
            kept.append(group)
            continue
        if first is None:
            first = len(kept)
        others = [h for h in handlers if not _is_ctx_handler(h)]
        if others:
            kept.append({**group, "hooks": others})
    return kept, first


def _merged_settings(data: dict[str, Any], hooks: list[str] | Callable[[str], str] | None,
                     ctx_bin: str | None = None) -> dict[str, Any]:
    """``data`` with ctx's entries in place: an old entry is replaced where it stood.

    ``hooks`` None removes ctx's hook entries instead; ``ctx_bin`` sets ``env.CTX_BIN``
    (None removes it).
    """
    out = _stripped_settings(data) if hooks is None else dict(data)
    if hooks is not None:
        merged = dict(data.get("hooks", {}))
        for event, groups in ctx_hooks(hooks).items():
            kept, first = _without_ctx(merged.get(event, []))
            at = len(kept) if first is None else first
            merged[event] = kept[:at] + groups + kept[at:]
        out["hooks"] = merged
    if ctx_bin is None:
        return _without_ctx_bin(out)
    env = out.get("env")
    out["env"] = {**(env if isinstance(env, dict) else {}), CTX_BIN_ENV: ctx_bin}
    return out


def _without_ctx_bin(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without ``env.CTX_BIN`` (and without ``env`` if that leaves it empty)."""
    env = data.get("env")
    if not (isinstance(env, dict) and CTX_BIN_ENV in env):
        return data
    out = {**data, "env": {k: v for k, v in env.items() if k != CTX_BIN_ENV}}
    if not out["env"]:
        del out["env"]
    return out


def _stripped_settings(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without ctx's entries (hooks, ``env.CTX_BIN``); what that leaves empty goes."""
    out = dict(_without_ctx_bin(data))
    if "hooks" not in data:
        return out
    hooks: dict[str, Any] = {}
    for event, groups in data["hooks"].items():
        kept, first = _without_ctx(groups)
        if kept or first is None:
            hooks[event] = kept
    if hooks or data["hooks"] == {}:
        out["hooks"] = hooks
    else:
        del out["hooks"]
    return out


def _gitignore_text(old: bytes | None, lines: list[str] | None) -> bytes | None:
    """``.claude/.gitignore`` with ctx's block set to ``lines`` (None: removed), in place.

    None when nothing but blank lines would be left.
    """
    text = old.decode("utf-8", "replace") if old is not None else ""
    block = "\n".join([_GITIGNORE_BEGIN, *lines, _GITIGNORE_END]) + "\n" if lines else ""
    if _GITIGNORE_BEGIN in text and _GITIGNORE_END in text.split(_GITIGNORE_BEGIN, 1)[1]:
        head, rest = text.split(_GITIGNORE_BEGIN, 1)
        tail = rest.split(_GITIGNORE_END, 1)[1].removeprefix("\n")
        text = head + block + tail
    elif block:
        if text and not text.endswith("\n"):
            text += "\n"
        text += block
    return text.encode() if text.strip() else None


def backup_path(path: Path) -> Path:
    """Where ``ctx install`` keeps the previous bytes of ``path`` (``<name>.bak``)."""
    return path.with_name(path.name + BACKUP_SUFFIX)


# -- plans -----------------------------------------------------------------------------


def _claude_paths(claude_dir: Path) -> tuple[Path, Path]:
    return claude_dir / "settings.json", claude_dir / "skills" / "ctx" / "SKILL.md"


def _checked_plan(claude_dir: Path, follow_links: bool) -> Plan:
    """A plan for ``claude_dir`` with every path install/uninstall may touch checked."""
    plan = Plan(Boundary(claude_dir.parent, follow_links=follow_links))
    settings_path, skill_path = _claude_paths(claude_dir)
    local = claude_dir / LOCAL_SETTINGS
    plan.check(settings_path, backup_path(settings_path), skill_path, backup_path(skill_path),
               local, backup_path(local), claude_dir / ".gitignore")
    return plan


def _ignored(claude_dir: Path, mode: str) -> list[str]:
    """The ``.claude/.gitignore`` lines of a project install: files of this machine only."""
    settings_path, skill_path = _claude_paths(claude_dir)
    local = claude_dir / LOCAL_SETTINGS
    lines = ["/" + p.relative_to(claude_dir).as_posix()
             for p in (local, backup_path(local), backup_path(settings_path), backup_path(skill_path))]
    if mode == "local":  # nothing of ctx's is committed, this file included
        from ctxstore.claude.skillset import SKILL_NAMES  # issue 16

        lines += ["/skills/ctx/", *(f"/skills/{name}/" for name in SKILL_NAMES), "/.gitignore"]
    return lines


def _plan_settings(plan: Plan, path: Path, hooks: list[str] | Callable[[str], str] | None,
                   ctx_bin: str | None = None) -> None:
    """Plan ctx's entries of one settings file: ``hooks`` and ``env.CTX_BIN`` (None: none).

    Raises:
        UnsafePath: (E020) if the path fails the plan's boundary.
        InvalidInput: if the file cannot be read as settings.
    """
    if hooks is None and ctx_bin is None:
        _plan_strip(plan, path)
        return
    raw, data = _load_settings(plan, path)
    merged = _merged_settings(data, hooks, ctx_bin)
    if raw is None or merged != data:
        # Only a file without ctx's entries is the user's own: a reinstall (ctx moved, say)
        # must keep the pre-install backup that uninstall restores byte for byte.
        plan.add(path, _dump(merged), backup=_stripped_settings(data) == data)


def plan_install(claude_dir: Path, prefix: list[str], *, follow_links: bool = False,
                 mode: str = "absolute") -> Plan:
    """What ``ctx install`` changes: the skill file and ctx's hook entries in settings.

    Args:
        claude_dir: the ``.claude`` folder (a project's, or the user's own).
        prefix: the argv prefix that runs ctx (``resolve_ctx_command``).
        follow_links: True for the user's own configuration (links followed and written
            through); False for a project, whose ``.claude`` a clone may bring.
        mode: ``absolute`` (settings.json runs ctx by absolute path: the user's own
            settings), ``shared`` (settings.json gets the portable command, this machine's
            ctx goes to settings.local.json as ``env.CTX_BIN``) or ``local`` (only
            settings.local.json, by absolute path; ctx's entries leave settings.json).
            ``shared`` and ``local`` also write ctx's block of ``.claude/.gitignore``.

    Returns:
        The plan (empty when everything is in place).

    Raises:
        UnsafePath: (E020) if any path the install may read or write fails the boundary
            (nothing has been written then).
        InvalidInput: if an existing settings file cannot be read as settings, or
            ``mode`` is unknown.
    """
    if mode not in ("absolute", "shared", "local"):
        raise InvalidInput(f"unknown install mode {mode!r}")
    plan = _checked_plan(claude_dir, follow_links)
    settings_path, skill_path = _claude_paths(claude_dir)
    local = claude_dir / LOCAL_SETTINGS
    # A SKILL.md that ctx did not write (no marker) is someone's own: keep a copy of it.
    skill = plan.read(skill_path)
    foreign = skill is not None and SKILL_MARKER.encode() not in skill
    plan.add(skill_path, skill_text(), backup=foreign)
    from ctxstore.claude.skillset import plan_skills  # issue 16: /recall, /remember, ... skills

    plan_skills(plan, skill_path.parent.parent)
    if mode == "absolute":
        _plan_settings(plan, settings_path, prefix)
        return plan
    if mode == "shared":
        _plan_settings(plan, settings_path, portable_hook_command)
        # A single script can be named by CTX_BIN; ``python -m ctxstore.cli`` cannot.
        _plan_settings(plan, local, None, prefix[0] if len(prefix) == 1 else None)
    else:
        _plan_settings(plan, settings_path, None)
        _plan_settings(plan, local, prefix)
    gitignore = claude_dir / ".gitignore"
    plan.add(gitignore, _gitignore_text(plan.read(gitignore), _ignored(claude_dir, mode)))
    return plan


def plan_uninstall(claude_dir: Path, *, follow_links: bool = False) -> Plan:
    """What ``ctx uninstall`` changes.

    The hook entries (settings.json and settings.local.json), ``env.CTX_BIN``, ctx's
    ``.gitignore`` block and the skill file ctx wrote go (a SKILL.md of the user's that
    install backed up is put back).

    A settings file that ends up equal to its pre-install backup gets the backup's exact
    bytes back (and the then redundant backup is removed); one that ctx created and that
    is left empty is deleted (or, if it is a link, rewritten as ``{}``).

    Returns:
        The plan (empty when ctx is not installed there).

    Raises:
        UnsafePath: (E020) if any path the uninstall may read, write or delete fails the
            boundary (see ``plan_install``), or a file to delete is a link.
        InvalidInput: if an existing settings file cannot be read as settings.
    """
    plan = _checked_plan(claude_dir, follow_links)
    settings_path, skill_path = _claude_paths(claude_dir)
    skill = plan.read(skill_path)
    if skill is not None and SKILL_MARKER.encode() in skill:
        backup = backup_path(skill_path)
        own = plan.read(backup)
        if own is not None and SKILL_MARKER.encode() not in own:
            plan.add(skill_path, own)  # the SKILL.md that install found there comes back
            plan.add(backup, None)
        else:
            plan.add(skill_path, None)
            plan.prune_dirs.append((skill_path.parent, settings_path.parent))
    from ctxstore.claude.skillset import plan_unskills  # issue 16: the slash-command skills

    plan_unskills(plan, skill_path.parent.parent, settings_path.parent)
    _plan_strip(plan, settings_path)
    _plan_strip(plan, claude_dir / LOCAL_SETTINGS)
    gitignore = claude_dir / ".gitignore"
    old = plan.read(gitignore)
    if old is not None:
        plan.add(gitignore, _gitignore_text(old, None))
        plan.prune_dirs.append((claude_dir, claude_dir))
    return plan


def _plan_strip(plan: Plan, settings_path: Path) -> None:
    """Plan removing ctx's entries from one settings file (see ``plan_uninstall``).

    Raises:
        UnsafePath: (E020) if the path fails the plan's boundary, or a file to delete is a link.
        InvalidInput: if the file cannot be read as settings.
    """
    raw, data = _load_settings(plan, settings_path)
    if raw is None:
        return
    stripped = _stripped_settings(data)
    if stripped == data:
        return
    backup = backup_path(settings_path)
    saved = plan.read(backup)
    saved_data = _parse(saved)
    if saved is not None and saved_data == stripped:
        plan.add(settings_path, saved)
        plan.add(backup, None)
    elif stripped == {} and not plan.boundary.is_link(settings_path) and (
            saved is None or (isinstance(saved_data, dict)
                              and _stripped_settings(saved_data) == {})):
        # ctx created this file (the backup, if any, holds only an earlier ctx install).
        plan.add(settings_path, None)
        plan.add(backup, None)
        plan.prune_dirs.append((settings_path.parent, settings_path.parent))
    else:
        plan.add(settings_path, _dump(stripped))


def _parse(raw: bytes | None) -> Any:
    """JSON of a backup, or None when there is none or it is not JSON."""
    if raw is None:
        return None
    try:
        return _loads(raw)
    except ValueError:
        return None


_DESCRIPTION = ("Persistent, Git-friendly memory for coding agents: context at session start, "
                "<ctx:*> command tags after each reply.")


def _plugin_paths(plugin_dir: Path) -> dict[str, Path]:
    return {"manifest": plugin_dir / ".claude-plugin" / "plugin.json",
            "marketplace": plugin_dir / ".claude-plugin" / "marketplace.json",
            "hooks": plugin_dir / "hooks" / "hooks.json",
            "script": plugin_dir / PLUGIN_HOOK_SCRIPT,
            "skill": plugin_dir / "skills" / "ctx" / "SKILL.md",
            "readme": plugin_dir / "README.md",
            "license": plugin_dir / "LICENSE"}


def _checked_plugin_plan(plugin_dir: Path, root: Path | None) -> Plan:
    # The folder may sit in a clone (or be a committed link): nothing below ``root`` (its
    # parent unless the caller names a higher folder) is followed, the folder included.
    plan = Plan(Boundary(plugin_dir.parent if root is None else root))
    plan.check(*_plugin_paths(plugin_dir).values())
    return plan


def _plugin_readme() -> bytes:
    version = ctxstore.__version__
    return f"""# ctx: persistent memory for Claude Code

{_README_MARK}

ctx {version} gives Claude Code a memory that lives in your repository: a `.ctx/` store of facts,
decisions and tasks, committed to Git with the code. At session start the plugin injects the
project's memory; after each reply it runs the `<ctx:remember>`, `<ctx:recall>` and `<ctx:task>`
tags Claude writes (the bundled `ctx` skill teaches them).

## Requirements

The hooks run the `ctx` command, which is a Python package:

    pipx install ctxstore        # or: uv tool install ctxstore

The hooks find `ctx` as `$CTX_BIN`, on `PATH`, or in `~/.local/bin`. Without it they do nothing
and say so once at session start. Then, in your project: `ctx init` (creates `.ctx/` at the
repository root) and `ctx doctor` (checks the setup, one line per check, each with its fix).

## Install

    /plugin marketplace add <this folder or its Git repository>
    /plugin install ctx@ctx

or, for one session: `claude --plugin-dir <this folder>`.

## License

MIT (see LICENSE).
""".encode()


def plan_plugin(plugin_dir: Path, *, root: Path | None = None) -> Plan:
    """What ``ctx install --plugin DIR`` writes: a complete, portable, publishable plugin.

    ``.claude-plugin/plugin.json`` (name, version, author, license),
    ``.claude-plugin/marketplace.json`` (DIR is a marketplace listing this one plugin, so
    ``/plugin marketplace add DIR`` and ``/plugin install ctx@ctx`` work), ``hooks/hooks.json``
    (every hook runs ``${CLAUDE_PLUGIN_ROOT}/bin/ctx-hook``, which finds ctx on the machine
    that runs it), ``bin/ctx-hook``, the skill, README.md and LICENSE. Nothing in it names
    this machine.

    Args:
        plugin_dir: the plugin folder (absolute).
        root: (default: DIR's parent) the folder below which no link is followed; the
            CLI passes the current directory for a relative DIR inside it.

    Returns:
        The plan.

    Raises:
        UnsafePath: (E020) if ``DIR`` or anything below it on the way is a symbolic link
            or a special file (nothing has been written then).
        InvalidInput: if a file there is too large.
    """
    version = ctxstore.__version__
    author = {"name": AUTHOR}
    keywords = ["memory", "context", "git", "hooks", "knowledge"]
    manifest = {"name": PLUGIN_NAME, "version": version, "description": _DESCRIPTION,
                "author": author, "license": "MIT", "keywords": keywords}
    market = {"name": PLUGIN_NAME, "owner": author,
              "metadata": {"description": "The ctx plugin: " + _DESCRIPTION, "version": version},
              "plugins": [{"name": PLUGIN_NAME, "source": "./", "description": _DESCRIPTION,
                           "version": version, "author": author, "license": "MIT",
                           "keywords": keywords}]}
    hooks = {"description": "ctx memory hooks (generated by `ctx install --plugin`)",
             "hooks": ctx_hooks(plugin_hook_command)}
    plan = _checked_plugin_plan(plugin_dir, root)
    paths = _plugin_paths(plugin_dir)
    plan.add(paths["manifest"], _dump(manifest))
    plan.add(paths["marketplace"], _dump(market))
    plan.add(paths["hooks"], _dump(hooks))
    plan.add(paths["script"], _plugin_script(), mode=0o755)
    plan.add(paths["skill"], skill_text())
    from ctxstore.claude.skillset import plan_mcp, plan_skills  # issue 16: skills, `ctx mcp`

    plan_skills(plan, paths["skill"].parent.parent)
    plan_mcp(plan, plugin_dir / ".mcp.json", ["ctx"])  # ctx on PATH: nothing of this machine
    plan.add(paths["readme"], _plugin_readme())
    plan.add(paths["license"], LICENSE_TEXT.encode())
    return plan


def plan_unplugin(plugin_dir: Path, *, root: Path | None = None) -> Plan:
    """What ``ctx uninstall --plugin DIR`` removes.

    The files ``plan_plugin`` writes, each only if it is still ctx's (a manifest or
    marketplace named ctx, a hooks file of ctx hooks only, the marked skill and README,
    the wrapper and LICENSE as ctx wrote them); directories left empty go, ``DIR``
    included. Anything else stays.

    Returns:
        The plan.

    Raises:
        UnsafePath: (E020) as for ``plan_plugin``: nothing is deleted through a link.
        InvalidInput: if a file there is too large.
    """
    plan = _checked_plugin_plan(plugin_dir, root)
    paths = _plugin_paths(plugin_dir)

    def drop(path: Path) -> None:
        plan.add(path, None)
        plan.prune_dirs.append((path.parent, plugin_dir))

    for key in ("manifest", "marketplace"):
        doc = _parse(plan.read(paths[key]))
        if isinstance(doc, dict) and doc.get("name") == PLUGIN_NAME:
            drop(paths[key])
    doc = _parse(plan.read(paths["hooks"]))
    groups = doc.get("hooks") if isinstance(doc, dict) else None
    handlers = [h for event in (groups.values() if isinstance(groups, dict) else [])
                if isinstance(event, list) for g in event if isinstance(g, dict)
                for h in g.get("hooks", []) if isinstance(g.get("hooks"), list)]
    if handlers and all(_is_ctx_handler(h) for h in handlers):
        drop(paths["hooks"])
    for key, mark in (("skill", SKILL_MARKER), ("readme", _README_MARK)):
        text = plan.read(paths[key])
        if text is not None and mark.encode() in text:
            drop(paths[key])
    for key, ours in (("script", _plugin_script()), ("license", LICENSE_TEXT.encode())):
        if plan.read(paths[key]) == ours:
            drop(paths[key])
    from ctxstore.claude.skillset import plan_unmcp, plan_unskills  # issue 16

    plan_unskills(plan, paths["skill"].parent.parent, plugin_dir)
    plan_unmcp(plan, plugin_dir / ".mcp.json")
    plan.prune_dirs.append((plugin_dir, plugin_dir))
    return plan


# -- applying --------------------------------------------------------------------------


def _prune(boundary: Boundary, folder: Path, stop: Path) -> None:
    """Remove ``folder`` and its parents up to and including ``stop`` while they are empty.

    ``rmdir`` never removes a link's target; in a project or plugin folder a linked
    parent stops the walk before anything is removed through it.
    """
    while folder == stop or stop in folder.parents:
        if not boundary.follow_links:
            try:
                fsio.check_under(boundary.root, folder)
            except UnsafePath:
                return
        try:
            fsio.rmdir(folder)
        except OSError:
            return  # not empty (or already gone): leave it and everything above it
        folder = folder.parent


def apply_plan(plan: Plan) -> None:
    """Write the planned changes: backups first, each file atomically, then empty dirs go.

    Every path the plan checked is checked again before the first write, so a link
    that appeared since the plan was made is refused with nothing written.

    Raises:
        UnsafePath: (E020) if a checked path now fails the boundary or leads elsewhere.
        OSError: if a write fails (files already replaced stay replaced, each whole).
    """
    for path, target in plan.checked.items():
        if plan.boundary.resolve(path) != target:
            raise _unsafe(path, "changed while ctx was planning; nothing was written",
                          "run the command again")
    for change in plan.changes:
        target = change.target or change.path
        # The backup and the rewritten file keep the original's mode (secrets stay private).
        mode = fsio.mode_of(target, change.mode if change.mode is not None else 0o644)
        if change.backup and change.old is not None:
            backup = backup_path(change.path)
            fsio.replace_atomic(plan.checked.get(backup, backup), change.old, mode=mode)
        if change.new is None:
            try:
                fsio.unlink(target)  # never a link: Plan.add refuses to delete one
            except FileNotFoundError:
                pass  # a concurrent uninstall got there first
            continue
        if target == change.path:  # a link's target exists, and so does its folder
            plan.boundary.ensure_dir(change.path.parent)
        # A link of the user's own stays a link: its target is replaced (temp file next to
        # the target, then rename), not the link.
        fsio.replace_atomic(target, change.new, mode=mode)
    for folder, stop in plan.prune_dirs:
        _prune(plan.boundary, folder, stop)


def describe(changes: Iterable[FileChange]) -> list[str]:
    """One line per change: ``create PATH`` / ``update PATH`` / ``delete PATH``."""
    return [f"{c.action} {c.path}" for c in changes]
