"""Installing ctx into Claude Code: the skill file, settings.json hooks, or a plugin.

Every operation is planned first as a list of file changes (old bytes -> new bytes) and
only then applied, so ``--dry-run`` shows exactly what a real run writes, a run that
changes nothing writes nothing, and a bad settings.json is refused before any file is
touched. ctx's hook entries are recognised by their command (``<...>/ctx hook <event>``
or ``<python> -m ctxstore.cli hook <event>``), whatever path an older install used, so
reinstalling replaces them in place and uninstalling removes exactly them.
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import ctxstore
from ctxstore import fsio
from ctxstore.errors import InvalidInput

__all__ = ["HOOK_EVENTS", "SKILL_MARKER", "FileChange", "Plan", "resolve_ctx_command", "hook_command",
           "is_ctx_hook", "ctx_hooks", "skill_text", "plan_install", "plan_uninstall", "plan_unplugin",
           "plan_plugin", "apply_plan", "describe", "backup_path"]

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


@dataclass
class FileChange:
    """One file's planned change: ``new is None`` deletes it, ``old is None`` creates it."""

    path: Path
    old: bytes | None
    new: bytes | None
    backup: bool = False  # keep the old bytes in ``<path>.bak`` before replacing them

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
    """The changes one install/uninstall would make; empty when everything is in place."""

    changes: list[FileChange] = field(default_factory=list)
    prune_dirs: list[tuple[Path, Path]] = field(default_factory=list)  # (dir, stop) pairs

    def add(self, path: Path, new: bytes | None, *, backup: bool = False) -> None:
        """Plan writing ``new`` to ``path`` (or deleting it), unless it already holds that."""
        old = path.read_bytes() if path.is_file() else None
        if old != new:
            self.changes.append(FileChange(path, old, new, backup=backup and old is not None))


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
        try:
            first = script.read_bytes()[:512].split(b"\n", 1)[0]
        except OSError:
            first = b""
        if first.startswith(b"#!") and Path(first[2:].decode(errors="replace").strip()).resolve() \
                == Path(executable).resolve():
            return [str(script.absolute())]
    return [str(Path(executable).absolute()), "-m", "ctxstore.cli"]


def hook_command(prefix: list[str], subcommand: str) -> str:
    """The shell command line of one hook (paths quoted for ``sh -c``)."""
    return shlex.join([*prefix, "hook", subcommand])


def is_ctx_hook(command: Any) -> bool:
    """Whether a hook handler's command runs ``ctx hook ...`` (any install path of ctx)."""
    if not isinstance(command, str):
        return False
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


def ctx_hooks(prefix: list[str]) -> dict[str, list[dict[str, Any]]]:
    """ctx's ``hooks`` mapping: one matcher group with one command handler per event."""
    return {event: [{"hooks": [{"type": "command", "command": hook_command(prefix, sub),
                                "timeout": timeout}]}]
            for event, (sub, timeout) in HOOK_EVENTS.items()}


def skill_text() -> bytes:
    """The packaged SKILL.md."""
    return resources.files("ctxstore.claude").joinpath("SKILL.md").read_bytes()


# -- settings.json ---------------------------------------------------------------------


def _dump(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _load_settings(path: Path) -> tuple[bytes | None, dict[str, Any]]:
    """Read and shape-check settings.json; a missing file is ``{}``.

    Raises:
        InvalidInput: if the file is not a JSON object or its ``hooks`` are malformed.
    """
    if not path.is_file():
        return None, {}
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = ""
        if isinstance(exc, json.JSONDecodeError):
            where = f" (line {exc.lineno} column {exc.colno})"
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


def _merged_settings(data: dict[str, Any], prefix: list[str]) -> dict[str, Any]:
    """``data`` with ctx's entries in place: an old entry is replaced where it stood."""
    hooks = dict(data.get("hooks", {}))
    for event, groups in ctx_hooks(prefix).items():
        kept, first = _without_ctx(hooks.get(event, []))
        at = len(kept) if first is None else first
        hooks[event] = kept[:at] + groups + kept[at:]
    return {**data, "hooks": hooks}


def _stripped_settings(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without ctx's entries; events (and ``hooks``) left empty by that go away."""
    if "hooks" not in data:
        return data
    hooks: dict[str, Any] = {}
    for event, groups in data["hooks"].items():
        kept, first = _without_ctx(groups)
        if kept or first is None:
            hooks[event] = kept
    out = dict(data)
    if hooks or data["hooks"] == {}:
        out["hooks"] = hooks
    else:
        del out["hooks"]
    return out


def backup_path(path: Path) -> Path:
    """Where ``ctx install`` keeps the previous bytes of ``path`` (``<name>.bak``)."""
    return path.with_name(path.name + BACKUP_SUFFIX)


# -- plans -----------------------------------------------------------------------------


def plan_install(settings_path: Path, skill_path: Path, prefix: list[str]) -> Plan:
    """What ``ctx install`` changes: the skill file and ctx's hook entries in settings.json.

    Raises:
        InvalidInput: if the existing settings.json cannot be read as settings.
    """
    raw, data = _load_settings(settings_path)
    plan = Plan()
    # A SKILL.md that ctx did not write (no marker) is someone's own: keep a copy of it.
    foreign = skill_path.is_file() and SKILL_MARKER.encode() not in skill_path.read_bytes()
    plan.add(skill_path, skill_text(), backup=foreign)
    merged = _merged_settings(data, prefix)
    if raw is None or merged != data:
        # Only a file without ctx's hooks is the user's own: a reinstall (ctx moved, say)
        # must keep the pre-install backup that uninstall restores byte for byte.
        plan.add(settings_path, _dump(merged), backup=_stripped_settings(data) == data)
    return plan


def plan_uninstall(settings_path: Path, skill_path: Path) -> Plan:
    """What ``ctx uninstall`` changes: ctx's hook entries and the skill file it wrote go
    (a SKILL.md of the user's that install backed up is put back).

    A settings.json that ends up equal to its pre-install backup gets the backup's exact
    bytes back (and the then redundant backup is removed); one that ctx created and that
    is left empty is deleted.

    Raises:
        InvalidInput: if the existing settings.json cannot be read as settings.
    """
    raw, data = _load_settings(settings_path)
    plan = Plan()
    if skill_path.is_file() and SKILL_MARKER.encode() in skill_path.read_bytes():
        backup = backup_path(skill_path)
        own = backup.read_bytes() if backup.is_file() else None
        if own is not None and SKILL_MARKER.encode() not in own:
            plan.add(skill_path, own)  # the SKILL.md that install found there comes back
            plan.add(backup, None)
        else:
            plan.add(skill_path, None)
            plan.prune_dirs.append((skill_path.parent, settings_path.parent))
    if raw is None:
        return plan
    stripped = _stripped_settings(data)
    if stripped == data:
        return plan
    backup = backup_path(settings_path)
    saved = backup.read_bytes() if backup.is_file() else None
    saved_data = _parse(saved)
    if saved is not None and saved_data == stripped:
        plan.add(settings_path, saved)
        plan.add(backup, None)
    elif stripped == {} and (saved is None or (isinstance(saved_data, dict)
                                               and _stripped_settings(saved_data) == {})):
        # ctx created this file (the backup, if any, holds only an earlier ctx install).
        plan.add(settings_path, None)
        plan.add(backup, None)
        plan.prune_dirs.append((settings_path.parent, settings_path.parent))
    else:
        plan.add(settings_path, _dump(stripped))
    return plan


def _parse(raw: bytes | None) -> Any:
    """JSON of a backup, or None when there is none or it is not JSON."""
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def plan_plugin(plugin_dir: Path, prefix: list[str]) -> Plan:
    """What ``ctx install --plugin DIR`` writes: manifest, hooks/hooks.json, the skill."""
    manifest = {"name": PLUGIN_NAME, "version": ctxstore.__version__,
                "description": "Persistent, Git-friendly memory for coding agents: "
                               "context at session start, <ctx:*> command tags after each reply."}
    hooks = {"description": "ctx memory hooks (generated by `ctx install --plugin`)",
             "hooks": ctx_hooks(prefix)}
    plan = Plan()
    plan.add(plugin_dir / ".claude-plugin" / "plugin.json", _dump(manifest))
    plan.add(plugin_dir / "hooks" / "hooks.json", _dump(hooks))
    plan.add(plugin_dir / "skills" / "ctx" / "SKILL.md", skill_text())
    return plan


def plan_unplugin(plugin_dir: Path) -> Plan:
    """What ``ctx uninstall --plugin DIR`` removes: the files ``plan_plugin`` writes, each
    only if it is still ctx's (a manifest named ctx, a hooks file of ctx hooks only, the
    marked skill); directories left empty go, ``DIR`` included. Anything else stays."""
    plan = Plan()
    manifest = plugin_dir / ".claude-plugin" / "plugin.json"
    doc = _parse(manifest.read_bytes()) if manifest.is_file() else None
    if isinstance(doc, dict) and doc.get("name") == PLUGIN_NAME:
        plan.add(manifest, None)
        plan.prune_dirs.append((manifest.parent, plugin_dir))
    hooks_file = plugin_dir / "hooks" / "hooks.json"
    doc = _parse(hooks_file.read_bytes()) if hooks_file.is_file() else None
    groups = doc.get("hooks") if isinstance(doc, dict) else None
    handlers = [h for event in (groups.values() if isinstance(groups, dict) else [])
                if isinstance(event, list) for g in event if isinstance(g, dict)
                for h in g.get("hooks", []) if isinstance(g.get("hooks"), list)]
    if handlers and all(_is_ctx_handler(h) for h in handlers):
        plan.add(hooks_file, None)
        plan.prune_dirs.append((hooks_file.parent, plugin_dir))
    skill = plugin_dir / "skills" / "ctx" / "SKILL.md"
    if skill.is_file() and SKILL_MARKER.encode() in skill.read_bytes():
        plan.add(skill, None)
        plan.prune_dirs.append((skill.parent, plugin_dir))
    return plan


# -- applying --------------------------------------------------------------------------


def _prune(folder: Path, stop: Path) -> None:
    """Remove ``folder`` and its parents up to and including ``stop`` while they are empty."""
    folder, stop = folder.absolute(), stop.absolute()
    while folder == stop or stop in folder.parents:
        try:
            fsio.rmdir(folder)
        except OSError:
            return  # not empty (or already gone): leave it and everything above it
        folder = folder.parent


def apply_plan(plan: Plan) -> None:
    """Write the planned changes: backups first, each file atomically, then empty dirs go."""
    for change in plan.changes:
        # The backup and the rewritten file keep the original's mode (secrets stay private).
        mode = fsio.mode_of(change.path)
        if change.backup and change.old is not None:
            fsio.replace_atomic(backup_path(change.path), change.old, mode=mode)
        if change.new is None:
            if change.path.is_file():
                fsio.unlink(change.path)
            continue
        fsio.ensure_dir(change.path.parent)
        fsio.replace_atomic(change.path, change.new, mode=mode)
    for folder, stop in plan.prune_dirs:
        _prune(folder, stop)


def describe(changes: Iterable[FileChange]) -> list[str]:
    """One line per change: ``create PATH`` / ``update PATH`` / ``delete PATH``."""
    return [f"{c.action} {c.path}" for c in changes]
