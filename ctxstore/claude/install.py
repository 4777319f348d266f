"""Installing ctx into Claude Code: the skill file, settings.json hooks, or a plugin.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import ctxstore
from ctxstore import fsio
from ctxstore.errors import InvalidInput, UnsafePath

__all__ = [
    "FILE_LIMIT",
    "HOOK_EVENTS",
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

    def read(self, path: Path) -> bytes | None:
        """The bytes of ``path`` (checked by ``resolve``), or None if there is no such file.

        Raises:
            UnsafePath: (E020) see ``resolve``.
            InvalidInput: if the file is larger than ``FILE_LIMIT``.
        """
        target = self.resolve(path)
        try:
            data = fsio.read_regular(target, FILE_LIMIT)
        except FileNotFoundError:
            return None
        if len(data) > FILE_LIMIT:
            raise InvalidInput(f"{path} is larger than {FILE_LIMIT // (1024 * 1024)} MiB; "
                               "nothing was changed")
        return data

    def ensure_dir(self, folder: Path) -> None:
        """Create ``folder`` and the missing folders between it and ``root``.

        Raises:
            UnsafePath: (E020) if a component is a link (project, plugin) or not a folder.
            OSError: if a folder cannot be created.
        """
        if not self.follow_links:
            fsio.ensure_dir_under(self.root, folder)
            return
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
        return self.boundary.read(path)

    def add(self, path: Path, new: bytes | None, *, backup: bool = False) -> None:
        """Plan writing ``new`` to ``path`` (or deleting it), unless it already holds that.

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
        self.changes.append(FileChange(path, old, new, backup=backup, target=self.checked[path]))


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
    """The ``hooks`` mapping ctx installs: one matcher group with one command handler per event."""
    return {event: [{"hooks": [{"type": "command", "command": hook_command(prefix, sub),
                                "timeout": timeout}]}]
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


def _claude_paths(claude_dir: Path) -> tuple[Path, Path]:
    return claude_dir / "settings.json", claude_dir / "skills" / "ctx" / "SKILL.md"


def _checked_plan(claude_dir: Path, follow_links: bool) -> Plan:
    """A plan for ``claude_dir`` with every path install/uninstall may touch checked."""
    plan = Plan(Boundary(claude_dir.parent, follow_links=follow_links))
    settings_path, skill_path = _claude_paths(claude_dir)
    plan.check(settings_path, backup_path(settings_path), skill_path, backup_path(skill_path))
    return plan


def plan_install(claude_dir: Path, prefix: list[str], *, follow_links: bool = False) -> Plan:
    """What ``ctx install`` changes: the skill file and ctx's hook entries in settings.json.

    Args:
        claude_dir: the ``.claude`` folder (a project's, or the user's own).
        prefix: the argv prefix that runs ctx (``resolve_ctx_command``).
        follow_links: True for the user's own configuration (links followed and written
            through); False for a project, whose ``.claude`` a clone may bring.

    Raises:
        UnsafePath: (E020) if any path the install may read or write fails the boundary
            (nothing has been written then).
        InvalidInput: if the existing settings.json cannot be read as settings.
    """
    plan = _checked_plan(claude_dir, follow_links)
    settings_path, skill_path = _claude_paths(claude_dir)
    raw, data = _load_settings(plan, settings_path)
    # A SKILL.md that ctx did not write (no marker) is someone's own: keep a copy of it.
    skill = plan.read(skill_path)
    foreign = skill is not None and SKILL_MARKER.encode() not in skill
    plan.add(skill_path, skill_text(), backup=foreign)
    merged = _merged_settings(data, prefix)
    if raw is None or merged != data:
        # Only a file without ctx's hooks is the user's own: a reinstall (ctx moved, say)
        # must keep the pre-install backup that uninstall restores byte for byte.
        plan.add(settings_path, _dump(merged), backup=_stripped_settings(data) == data)
    return plan


def plan_uninstall(claude_dir: Path, *, follow_links: bool = False) -> Plan:
    """What ``ctx uninstall`` changes.

    The hook entries and the skill file ctx wrote go (a SKILL.md of the user's that install backed
    up is put back).

    A settings.json that ends up equal to its pre-install backup gets the backup's exact
    bytes back (and the then redundant backup is removed); one that ctx created and that
    is left empty is deleted (or, if it is a link, rewritten as ``{}``).

    Raises:
        UnsafePath: (E020) if any path the uninstall may read, write or delete fails the
            boundary (see ``plan_install``), or a file to delete is a link.
        InvalidInput: if the existing settings.json cannot be read as settings.
    """
    plan = _checked_plan(claude_dir, follow_links)
    settings_path, skill_path = _claude_paths(claude_dir)
    raw, data = _load_settings(plan, settings_path)
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
    if raw is None:
        return plan
    stripped = _stripped_settings(data)
    if stripped == data:
        return plan
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
    return plan


def _parse(raw: bytes | None) -> Any:
    """JSON of a backup, or None when there is none or it is not JSON."""
    if raw is None:
        return None
    try:
        return _loads(raw)
    except ValueError:
        return None


def _plugin_paths(plugin_dir: Path) -> tuple[Path, Path, Path]:
    return (plugin_dir / ".claude-plugin" / "plugin.json", plugin_dir / "hooks" / "hooks.json",
            plugin_dir / "skills" / "ctx" / "SKILL.md")


def _checked_plugin_plan(plugin_dir: Path, root: Path | None) -> Plan:
    # The folder may sit in a clone (or be a committed link): nothing below ``root`` (its
    # parent unless the caller names a higher folder) is followed, the folder included.
    plan = Plan(Boundary(plugin_dir.parent if root is None else root))
    plan.check(*_plugin_paths(plugin_dir))
    return plan


def plan_plugin(plugin_dir: Path, prefix: list[str], *, root: Path | None = None) -> Plan:
    """What ``ctx install --plugin DIR`` writes: manifest, hooks/hooks.json, the skill.

    ``root`` (default: DIR's parent) is the folder below which no link is followed; the
    CLI passes the current directory for a relative DIR inside it.

    Raises:
        UnsafePath: (E020) if ``DIR`` or anything below it on the way is a symbolic link
            or a special file (nothing has been written then).
        InvalidInput: if a file there is too large.
    """
    manifest = {"name": PLUGIN_NAME, "version": ctxstore.__version__,
                "description": "Persistent, Git-friendly memory for coding agents: "
                               "context at session start, <ctx:*> command tags after each reply."}
    hooks = {"description": "ctx memory hooks (generated by `ctx install --plugin`)",
             "hooks": ctx_hooks(prefix)}
    plan = _checked_plugin_plan(plugin_dir, root)
    manifest_path, hooks_path, skill_path = _plugin_paths(plugin_dir)
    plan.add(manifest_path, _dump(manifest))
    plan.add(hooks_path, _dump(hooks))
    plan.add(skill_path, skill_text())
    return plan


def plan_unplugin(plugin_dir: Path, *, root: Path | None = None) -> Plan:
    """What ``ctx uninstall --plugin DIR`` removes.

    The files ``plan_plugin`` writes, each only if it is still ctx's (a manifest named ctx, a hooks
    file of ctx hooks only, the marked skill); directories left empty go, ``DIR`` included. Anything
    else stays.

    Raises:
        UnsafePath: (E020) as for ``plan_plugin``: nothing is deleted through a link.
        InvalidInput: if a file there is too large.
    """
    plan = _checked_plugin_plan(plugin_dir, root)
    manifest, hooks_file, skill = _plugin_paths(plugin_dir)
    doc = _parse(plan.read(manifest))
    if isinstance(doc, dict) and doc.get("name") == PLUGIN_NAME:
        plan.add(manifest, None)
        plan.prune_dirs.append((manifest.parent, plugin_dir))
    doc = _parse(plan.read(hooks_file))
    groups = doc.get("hooks") if isinstance(doc, dict) else None
    handlers = [h for event in (groups.values() if isinstance(groups, dict) else [])
                if isinstance(event, list) for g in event if isinstance(g, dict)
                for h in g.get("hooks", []) if isinstance(g.get("hooks"), list)]
    if handlers and all(_is_ctx_handler(h) for h in handlers):
        plan.add(hooks_file, None)
        plan.prune_dirs.append((hooks_file.parent, plugin_dir))
    text = plan.read(skill)
    if text is not None and SKILL_MARKER.encode() in text:
        plan.add(skill, None)
        plan.prune_dirs.append((skill.parent, plugin_dir))
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
        mode = fsio.mode_of(target)
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
