"""``ctx install --plugin DIR``: a complete, portable, publishable Claude Code plugin.

``.claude-plugin/plugin.json`` (name, version, author, license), ``.claude-plugin/
marketplace.json`` (DIR is a marketplace listing this one plugin), ``hooks/hooks.json``
(every hook runs ``${CLAUDE_PLUGIN_ROOT}/bin/ctx-hook``, which finds ctx on the machine that
runs it), ``bin/ctx-hook``, the skills, ``.mcp.json`` (the ``ctx mcp`` server), README.md
and LICENSE. Nothing in it names this machine. ``plan_unplugin`` removes each file only if
it is still ctx's. The folder may sit in a clone: nothing below the root is followed.
"""

from __future__ import annotations

from pathlib import Path

import ctxstore
from ctxstore.claude.install.commands import (
    PLUGIN_HOOK_SCRIPT,
    ctx_hooks,
    is_ctx_handler,
    plugin_hook_command,
    plugin_script,
)
from ctxstore.claude.install.mcp import plan_mcp, plan_unmcp
from ctxstore.claude.install.plan import Plan, dump_json, parse_json
from ctxstore.claude.install.skills import SKILL_MARKER, plan_skills, plan_unskills, skill_text

__all__ = ["AUTHOR", "LICENSE_TEXT", "PLUGIN_NAME", "plan_plugin", "plan_unplugin"]

PLUGIN_NAME = "ctx"
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
_README_MARK = "<!-- written by `ctx install --plugin`; `ctx uninstall --plugin` removes it -->"

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
    plan = Plan(plugin_dir.parent if root is None else root)
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
    plan.add(paths["manifest"], dump_json(manifest))
    plan.add(paths["marketplace"], dump_json(market))
    plan.add(paths["hooks"], dump_json(hooks))
    plan.add(paths["script"], plugin_script(), mode=0o755)
    plan.add(paths["skill"], skill_text())
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
        doc = parse_json(plan.read(paths[key]))
        if isinstance(doc, dict) and doc.get("name") == PLUGIN_NAME:
            drop(paths[key])
    doc = parse_json(plan.read(paths["hooks"]))
    groups = doc.get("hooks") if isinstance(doc, dict) else None
    handlers = [h for event in (groups.values() if isinstance(groups, dict) else [])
                if isinstance(event, list) for g in event if isinstance(g, dict)
                for h in g.get("hooks", []) if isinstance(g.get("hooks"), list)]
    if handlers and all(is_ctx_handler(h) for h in handlers):
        drop(paths["hooks"])
    for key, mark in (("skill", SKILL_MARKER), ("readme", _README_MARK)):
        text = plan.read(paths[key])
        if text is not None and mark.encode() in text:
            drop(paths[key])
    for key, ours in (("script", plugin_script()), ("license", LICENSE_TEXT.encode())):
        if plan.read(paths[key]) == ours:
            drop(paths[key])
    plan_unskills(plan, paths["skill"].parent.parent, plugin_dir)
    plan_unmcp(plan, plugin_dir / ".mcp.json")
    plan.prune_dirs.append((plugin_dir, plugin_dir))
    return plan
