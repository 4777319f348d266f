"""Installing ctx into Claude Code's settings: the hooks, ``CTX_BIN``, the ``.gitignore`` block.

Where the hooks go, by scope:

- ``--user`` (``~/.claude/settings.json``, this machine only): ctx by absolute path.
- ``--project --shared`` (the default): the committed ``.claude/settings.json`` holds the
  portable command (``commands.portable_hook_command``); this machine's absolute ctx goes
  into the uncommitted ``.claude/settings.local.json`` as ``env.CTX_BIN``, which Claude Code
  passes to the hooks, so they keep working whatever PATH Claude Code was started with.
- ``--project --local``: the absolute commands go into ``settings.local.json`` only.

``.claude/.gitignore`` gets a marked block naming the machine-specific files (the local
settings and ctx's backups). The skills are planned by ``skills``; everything goes through
``plan.Plan``. settings.json is merged, never replaced: ctx's entries are recognised by
their command (``commands.is_ctx_hook``), so a reinstall replaces them in place and an
uninstall removes exactly them, restoring the pre-install bytes when nothing else changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxstore.claude.install.commands import (
    CTX_BIN_ENV,
    ctx_hooks,
    is_ctx_handler,
    portable_hook_command,
)
from ctxstore.claude.install.plan import Plan, backup_path, dump_json, load_json, parse_json
from ctxstore.claude.install.skills import (
    SKILL_MARKER,
    SKILL_NAMES,
    plan_skills,
    plan_unskills,
    skill_text,
)
from ctxstore.errors import InvalidInput

__all__ = ["LOCAL_SETTINGS", "gitignore_text", "plan_install", "plan_uninstall"]

LOCAL_SETTINGS = "settings.local.json"
_GITIGNORE_BEGIN = "# >>> ctx install: machine-specific files, never committed >>>"
_GITIGNORE_END = "# <<< ctx install <<<"


def _load_settings(plan: Plan, path: Path) -> tuple[bytes | None, dict[str, Any]]:
    """Read (through the plan) and shape-check settings.json; missing is ``{}``.

    Raises:
        UnsafePath: (E020) if the path fails the plan's checks.
        InvalidInput: if the file is not a JSON object or its ``hooks`` are malformed.
    """
    raw = plan.read(path)
    if raw is None:
        return None, {}
    try:
        data = load_json(raw)
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



def _without_ctx(groups: list[Any]) -> tuple[list[Any], int | None]:
    """The groups with ctx's handlers removed, and the index where the first one was."""
    kept: list[Any] = []
    first: int | None = None
    for group in groups:
        handlers = group.get("hooks", [])
        if not any(is_ctx_handler(h) for h in handlers):
            kept.append(group)
            continue
        if first is None:
            first = len(kept)
        others = [h for h in handlers if not is_ctx_handler(h)]
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


def gitignore_text(old: bytes | None, lines: list[str] | None) -> bytes | None:
    """A ``.gitignore`` (``.claude/``'s, an agent folder's) with ctx's block set to ``lines``.

    ``lines`` None removes the block; the rest of the file stays as it was.

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


# -- plans -----------------------------------------------------------------------------


def _claude_paths(claude_dir: Path) -> tuple[Path, Path]:
    return claude_dir / "settings.json", claude_dir / "skills" / "ctx" / "SKILL.md"


def _checked_plan(claude_dir: Path, follow_links: bool) -> Plan:
    """A plan for ``claude_dir`` with every path install/uninstall may touch checked."""
    plan = Plan(claude_dir.parent, follow_links=follow_links)
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
        lines += ["/skills/ctx/", *(f"/skills/{name}/" for name in SKILL_NAMES), "/.gitignore"]
    return lines


def _plan_settings(plan: Plan, path: Path, hooks: list[str] | Callable[[str], str] | None,
                   ctx_bin: str | None = None) -> None:
    """Plan ctx's entries of one settings file: ``hooks`` and ``env.CTX_BIN`` (None: none).

    Raises:
        UnsafePath: (E020) if the path fails the plan's checks.
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
        plan.add(path, dump_json(merged), backup=_stripped_settings(data) == data)


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
        UnsafePath: (E020) if any path the install may read or write fails the checks
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
    plan.add(gitignore, gitignore_text(plan.read(gitignore), _ignored(claude_dir, mode)))
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
            checks (see ``plan_install``), or a file to delete is a link.
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
    plan_unskills(plan, skill_path.parent.parent, settings_path.parent)
    _plan_strip(plan, settings_path)
    _plan_strip(plan, claude_dir / LOCAL_SETTINGS)
    gitignore = claude_dir / ".gitignore"
    old = plan.read(gitignore)
    if old is not None:
        plan.add(gitignore, gitignore_text(old, None))
        plan.prune_dirs.append((claude_dir, claude_dir))
    return plan


def _plan_strip(plan: Plan, settings_path: Path) -> None:
    """Plan removing ctx's entries from one settings file (see ``plan_uninstall``).

    Raises:
        UnsafePath: (E020) if the path fails the plan's checks, or a file to delete is a link.
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
    saved_data = parse_json(saved)
    if saved is not None and saved_data == stripped:
        plan.add(settings_path, saved)
        plan.add(backup, None)
    elif stripped == {} and not plan.is_link(settings_path) and (
            saved is None or (isinstance(saved_data, dict)
                              and _stripped_settings(saved_data) == {})):
        # ctx created this file (the backup, if any, holds only an earlier ctx install).
        plan.add(settings_path, None)
        plan.add(backup, None)
        plan.prune_dirs.append((settings_path.parent, settings_path.parent))
    else:
        plan.add(settings_path, dump_json(stripped))
