"""``ctx doctor``: the checks of everything that silently breaks a ctx setup, each with its fix.

One ``Check`` per concern, in the order a person would fix them: the hooks are
installed, they find a working ctx (the one on the hooks' PATH, ``CTX_BIN`` or an absolute
path), the store is found from the repository root, the merge driver is registered in
this clone, its config.toml is valid, the index is current, ``ctx mcp`` starts and answers
``tools/list``, and the installed skill and plugin match this ctx.
The checks read; the only thing written is the derived index, brought up to date as any
read command would.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

from ctxstore.claude.hooks import find_store_root
from ctxstore.claude.install import (
    CTX_BIN_ENV,
    HOOK_EVENTS,
    LOCAL_SETTINGS,
    SKILL_MARKER,
    Plan,
    is_ctx_hook,
    skill_text,
)
from ctxstore.config import load_config
from ctxstore.errors import CtxError, ObjectNotFound, RefNotFound, StoreCorrupt
from ctxstore.git import DRIVER_NAME, find_git_toplevel
from ctxstore.history.rebuild import check_index
from ctxstore.mcp.probe import probe_server
from ctxstore.records import dataclass
from ctxstore.repo import open_store
from ctxstore.security.purge import find_secrets
from ctxstore.session import Session

__all__ = ["Check", "Setup", "run_checks"]

_VERSION_TIMEOUT = 30.0


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``ok``, what was found, and (when not ok) the fix."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The check as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class Setup:
    """Where to look, as the CLI found it (only the CLI reads the environment).

    Attributes:
        cwd: the directory ``ctx doctor`` runs in (Claude Code's launch folder).
        home: the user's home (for ``~/.ctx`` and ``~/.local/bin``).
        claude_config: ``~/.claude`` or ``CLAUDE_CONFIG_DIR``.
        path: the PATH the hooks get (Claude Code passes its own environment on).
        ctx_bin: ``CTX_BIN`` of that environment, if set.
        ctx_dir: an explicit ``--ctx-dir`` / ``CTX_DIR``, if any.
        version: the version of this ctx.
        ctx_command: the argv prefix that runs this ctx (the MCP check starts ``ctx mcp``
            with it); empty: that check is left out.
    """

    cwd: Path
    home: Path
    claude_config: Path
    path: str
    ctx_bin: str | None = None
    ctx_dir: str | None = None
    version: str = ""
    ctx_command: tuple[str, ...] = ()


@dataclass
class _Hooks:
    """ctx's hook commands found in one settings source."""

    source: str
    commands: dict[str, str] = field(default_factory=dict)  # ctx hook subcommand -> command
    env_bin: str | None = None


# -- reading the installed configuration -------------------------------------------------------
def _read(root: Path, path: Path, *, own: bool = False) -> bytes | None:
    """A file as ``ctx install`` reads it (``install.Plan``); None when absent or refused.

    Below ``root`` no link is followed (a project's ``.claude`` may come from a clone) unless
    ``own`` (the user's ``~/.claude``, perhaps linked into a dotfiles repository); either way
    only a regular file, bounded, is read. Doctor never fails on it.
    """
    try:
        return Plan(root, follow_links=own).read(path)
    except (OSError, CtxError):  # an unsafe path (E020), too large: reported as unreadable
        return None


def _read_json(root: Path, path: Path, *, own: bool = False) -> Any:
    """A JSON file's content (see ``_read``); None when absent, unreadable or not JSON."""
    raw = _read(root, path, own=own)
    try:
        return None if raw is None else json.loads(raw.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None


def _hooks_of(source: str, doc: Any) -> _Hooks:

    found = _Hooks(source)
    if not isinstance(doc, dict):
        return found
    env = doc.get("env")
    if isinstance(env, dict) and isinstance(env.get(CTX_BIN_ENV), str):
        found.env_bin = env[CTX_BIN_ENV]
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for event, (sub, _timeout) in HOOK_EVENTS.items():
        groups = hooks.get(event)
        for group in groups if isinstance(groups, list) else []:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler in handlers if isinstance(handlers, list) else []:
                command = handler.get("command") if isinstance(handler, dict) else None
                if isinstance(command, str) and is_ctx_hook(command):
                    found.commands.setdefault(sub, command)
    return found


def _is_program(path: Path) -> bool:
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except OSError:
        return False


def _resolve_portable(setup: Setup, env_bin: str | None) -> tuple[list[str] | None, str]:
    """What the portable command (or the plugin wrapper) runs here, and how it was found."""
    for name, how in ((env_bin, "CTX_BIN"), ("ctx", "PATH"),
                      (str(setup.home / ".local" / "bin" / "ctx"), "~/.local/bin")):
        if not name:
            continue
        found = shutil.which(name, path=setup.path) if "/" not in name else \
            (name if _is_program(Path(name)) else None)
        if found:
            return [found], f"{found} (from {how})"
    return None, "no ctx: CTX_BIN unset or missing, none on the hooks' PATH or in ~/.local/bin"


def _resolve_absolute(command: str) -> tuple[list[str] | None, str]:
    try:
        argv = shlex.split(command)
    except ValueError:
        return None, f"cannot read the command {command[:80]!r}"
    prefix = argv[:3] if len(argv) >= 3 and argv[1:3] == ["-m", "ctxstore.cli"] else argv[:1]
    if not prefix or not _is_program(Path(prefix[0])):
        return None, f"{prefix[0] if prefix else command!r} does not exist (ctx moved or removed?)"
    return prefix, prefix[0]


def _run_version(prefix: list[str], setup: Setup) -> str | None:
    """``ctx --version`` of the ctx at ``prefix`` (its version), or None if it does not run."""
    try:
        out = subprocess.run([*prefix, "--version"], capture_output=True, text=True,
                             timeout=_VERSION_TIMEOUT, cwd=setup.cwd, check=False,
                             env={"PATH": setup.path, "HOME": str(setup.home)})
    except (OSError, subprocess.SubprocessError):
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and words else None


# -- the checks --------------------------------------------------------------------------------
def _project_root(setup: Setup) -> Path:

    return find_git_toplevel(setup.cwd) or setup.cwd


def _check_hooks(setup: Setup, root: Path) -> list[Check]:
    """Hooks installed, and every set of them runs a working ctx of this version."""
    project = root / ".claude"
    sources = [_hooks_of(".claude/settings.json", _read_json(root, project / "settings.json")),
               _hooks_of(f".claude/{LOCAL_SETTINGS}", _read_json(root, project / LOCAL_SETTINGS)),
               _hooks_of("~/.claude/settings.json", _read_json(
                   setup.claude_config, setup.claude_config / "settings.json", own=True))]
    plugins = _plugins(setup)
    # Claude Code's precedence for env: local over project over user settings.
    env_bin = next((s.env_bin for s in sources if s.env_bin), None) or setup.ctx_bin
    installed = [s for s in sources if s.commands]
    names = [s.source for s in installed] + [f"plugin {p}" for p, _v, _d in plugins]
    checks: list[Check] = []
    if not names:
        return [Check("hooks", False, "no ctx hooks in .claude/settings*.json, "
                      "~/.claude/settings.json or an installed plugin",
                      "ctx install (this project, shared through Git) or ctx install --user")]
    missing = [sub for s in installed for sub, _t in HOOK_EVENTS.values() if sub not in s.commands]
    detail = "installed in " + ", ".join(names)
    if len(names) > 1:
        detail += " (more than one: session context is injected once per set)"
    checks.append(Check("hooks", not missing, detail if not missing else
                        f"{detail}; missing: {', '.join(sorted(set(missing)))}",
                        "" if not missing else "ctx install (again) where they are missing"))
    for source in installed:
        command = next(iter(source.commands.values()))
        portable = 'exec "$c" hook ' in command or "${CLAUDE_PLUGIN_ROOT}" in command
        prefix, how = _resolve_portable(setup, env_bin) if portable else _resolve_absolute(command)
        name = f"ctx for {source.source}"
        if prefix is None:
            fix = ("ctx install --project (sets this machine's ctx as CTX_BIN in "
                   ".claude/settings.local.json), or put ctx on PATH") if portable else \
                "ctx install again (the hooks name a ctx that is gone)"
            checks.append(Check(name, False, how, fix))
            continue
        version = _run_version(prefix, setup)
        if version is None:
            checks.append(Check(name, False, f"{how} does not run (`--version` failed)",
                                "reinstall ctx (pipx install --force ctxstore), then ctx install"))
        elif setup.version and version != setup.version:
            checks.append(Check(name, False, f"{how} is ctx {version}, this is ctx {setup.version}",
                                "upgrade the older one, or ctx install to point the hooks here"))
        else:
            checks.append(Check(name, True, f"{how}, ctx {version}"))
    return checks


def _plugins(setup: Setup) -> list[tuple[str, str, Path]]:
    """Installed ctx plugins: (id, version, install path) from Claude Code's plugin registry."""
    doc = _read_json(setup.claude_config, setup.claude_config / "plugins" / "installed_plugins.json",
                     own=True)
    found: list[tuple[str, str, Path]] = []
    entries = doc.get("plugins") if isinstance(doc, dict) else None
    for key, installs in (entries.items() if isinstance(entries, dict) else []):
        if not (isinstance(key, str) and key.startswith("ctx@") and isinstance(installs, list)):
            continue
        for item in installs:
            if isinstance(item, dict):
                found.append((key, str(item.get("version", "?")),
                              Path(str(item.get("installPath", "")))))
    return found


def _check_versions(setup: Setup, root: Path) -> list[Check]:
    """The installed skill files and ctx plugins are this ctx's."""
    want = skill_text()
    stale: list[str] = []
    for where, fix in ((root / ".claude", "ctx install"), (setup.claude_config, "ctx install --user")):
        path = where / "skills" / "ctx" / "SKILL.md"
        own = where == setup.claude_config
        data = _read(where if own else root, path, own=own)
        if data is not None and SKILL_MARKER.encode() in data and data != want:
            stale.append(f"{path} ({fix})")
    for key, version, _path in _plugins(setup):
        if setup.version and version != setup.version:
            stale.append(f"plugin {key} is {version} (ctx install --plugin DIR, then "
                         f"/plugin update {key})")
    if stale:
        return [Check("skill and plugin versions", False, "from another ctx version: "
                      + "; ".join(stale), "run the command given for each")]
    return [Check("skill and plugin versions", True, f"match ctx {setup.version}")]


def _check_store(setup: Setup, root: Path) -> tuple[list[Check], Path | None]:
    """The store the hooks find from the repository root (the folder Claude Code starts in)."""
    try:
        at_root = find_store_root(str(root), setup.ctx_dir, setup.home)
        here = find_store_root(str(setup.cwd), setup.ctx_dir, setup.home)
    except CtxError as exc:
        return [Check("store", False, exc.message, "ctx debug verify")], None
    user = setup.home / ".ctx"
    if at_root is None:
        return [Check("store", False, f"none found from {root} (no .ctx there, no user store)",
                      f"ctx init in {root} (or ctx install --user for a user store)")], None
    if here is not None and here.absolute() != at_root.absolute():
        return [Check("store", False, f"{here} is found from here, {at_root} from the repository "
                      "root, where Claude Code starts", f"move {here} to {root / '.ctx'}")], here
    if at_root.absolute() == user.absolute():
        return [Check("store", True, f"the user store {user} (this project has none; "
                      f"`ctx init` in {root} makes one)")], at_root
    return [Check("store", True, str(at_root))], at_root


def _check_merge_driver(store: Path, root: Path) -> list[Check]:
    """The clone-local merge driver registration of a store committed to Git."""
    top = find_git_toplevel(store.parent)
    if top is None:
        return [Check("merge driver", True, "not in a Git repository: not needed")]
    try:
        out = subprocess.run(["git", "config", "--local", "--get", f"merge.{DRIVER_NAME}.driver"],
                             cwd=top, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return [Check("merge driver", False, "git did not run", "install git")]
    driver = out.stdout.strip()
    if out.returncode != 0 or not driver:
        return [Check("merge driver", False, f"not registered in this clone ({top})",
                      f"ctx init in {store.parent} (registers it; the store stays as it is)")]
    prefix, _how = _resolve_absolute(driver.split(" merge-ref ", 1)[0] + " x")
    if prefix is None:
        return [Check("merge driver", False, f"registered, but runs a ctx that is gone: {driver}",
                      f"ctx init in {store.parent}")]
    return [Check("merge driver", True, f"registered ({prefix[0]})")]


def _check_config(store: Path) -> list[Check]:
    """``config.toml`` reads and every value is valid: every command (a rebuild too) needs it."""
    path = store / "config.toml"
    try:
        load_config(path)
    except CtxError as exc:
        return [Check("config", False, f"{exc.code}: {exc.message}",
                      f"correct {path} (`git log -p -- {path}` shows who changed it); "
                      "every ctx command stops until then")]
    return [Check("config", True, str(path))]


def _check_index(store: Path) -> list[Check]:
    """The derived index opens and matches HEAD and STAGE (brought up to date if behind)."""
    try:
        with Session.open(store) as db:
            health = check_index(db)
        behind, repaired = health.behind, health.repaired
    except (StoreCorrupt, ObjectNotFound, RefNotFound) as exc:
        # The objects or pointers, not the derived index: a rebuild would stop the same way.
        return [Check("index", False, f"{exc.code}: {exc.message}",
                      exc.hint or "ctx debug verify (names what is damaged)")]
    except CtxError as exc:
        return [Check("index", False, f"{exc.code}: {exc.message}", "ctx rebuild")]
    if repaired is not None:
        return [Check("index", True, f"was damaged ({repaired}); rebuilt")]
    return [Check("index", True, "was behind the store; brought up to date" if behind else "current")]


def _check_mcp(setup: Setup, store: Path) -> list[Check]:
    """``ctx mcp`` starts on the store and answers ``tools/list``: what every other agent uses."""
    if not setup.ctx_command:
        return []

    # On the store found (never a new ~/.ctx), with the environment the hooks get.
    result = probe_server([*setup.ctx_command, "--ctx-dir", str(store), "mcp"], cwd=store.parent,
                          env={"PATH": setup.path, "HOME": str(setup.home)}, client="ctx-doctor")
    if result.ok:
        return [Check("mcp server", True, f"ctx mcp answers tools/list ({len(result.tools)} tools)")]
    return [Check("mcp server", False, f"ctx mcp does not answer: {result.detail}",
                  "reinstall ctx (pipx reinstall ctxstore): the MCP SDK, package mcp, is one of "
                  "its dependencies")]


def _check_secrets(store: Path) -> list[Check]:
    """No secret in what the store holds (``security.purge.find_secrets``, ``ctx debug secrets``)."""
    try:
        report = find_secrets(open_store(store))
    except CtxError as exc:
        return [Check("secrets", False, f"{exc.code}: {exc.message}", "ctx debug verify")]
    if not report.findings:
        return [Check("secrets", True, f"none in {report.objects} objects and {report.files} files")]
    rules = sorted({f.rule for f in report.findings})
    places = sorted({f.place for f in report.findings})
    return [Check("secrets", False, f"{len(report.findings)} found ({', '.join(rules)}) in "
                  f"{', '.join(places)}",
                  "ctx debug secrets (names each), then ctx purge ID --yes; rotate the credential")]


def run_checks(setup: Setup) -> list[Check]:
    """Every check of ``ctx doctor``, in order.

    Args:
        setup: where to look (see ``Setup``).

    Returns:
        The checks; the setup is sound when every one is ``ok``.
    """
    root = _project_root(setup)
    checks = _check_hooks(setup, root)
    store_checks, store = _check_store(setup, root)
    checks += store_checks
    if store is not None and store.absolute() != (setup.home / ".ctx").absolute():
        checks += _check_merge_driver(store, root)
    if store is not None:
        config = _check_config(store)
        checks += config
        if config[0].ok:  # without a valid config nothing opens: one failure, not two
            index = _check_index(store)
            checks += index
            if index[0].ok:  # a damaged store is named once, by the index check
                checks += _check_secrets(store)
            checks += _check_mcp(setup, store)
    checks += _check_versions(setup, root)
    return checks
