"""Installing ctx into Claude Code: settings hooks, skills, the MCP entry, or a plugin.

One module per job, none importing this package (so none imports another through it):

- ``plan``: the file changes an install makes, checked and applied through one directory
  handle (``fsio.Dir``), with backups, dry runs and exact uninstalls;
- ``commands``: the hook commands, and how ctx recognises its own entries;
- ``skills``: the ``ctx`` skill and the slash-command skills;
- ``settings``: ``settings.json`` / ``settings.local.json`` hooks and ``.claude/.gitignore``;
- ``mcp``: the ``ctx mcp`` server entry in ``.mcp.json`` / ``~/.claude.json``;
- ``plugin``: ``ctx install --plugin DIR``.

The names below are re-exported for the front ends and tests.
"""

from __future__ import annotations

from ctxstore.claude.install.commands import (
    CTX_BIN_ENV,
    HOOK_EVENTS,
    MISSING_NOTICE,
    PLUGIN_HOOK_SCRIPT,
    ctx_hooks,
    hook_command,
    is_ctx_handler,
    is_ctx_hook,
    plugin_hook_command,
    portable_hook_command,
    resolve_ctx_command,
)
from ctxstore.claude.install.mcp import (
    CLAUDE_JSON_LIMIT,
    MCP_SERVER_NAME,
    mcp_entry,
    plan_mcp,
    plan_unmcp,
)
from ctxstore.claude.install.plan import (
    FILE_LIMIT,
    FileChange,
    Plan,
    apply_plan,
    backup_path,
    describe,
    dump_json,
    load_json,
)
from ctxstore.claude.install.plugin import LICENSE_TEXT, plan_plugin, plan_unplugin
from ctxstore.claude.install.settings import LOCAL_SETTINGS, plan_install, plan_uninstall
from ctxstore.claude.install.skills import SKILL_MARKER, SKILL_NAMES, skill_files, skill_text

__all__ = [
    "CLAUDE_JSON_LIMIT",
    "CTX_BIN_ENV",
    "FILE_LIMIT",
    "HOOK_EVENTS",
    "LICENSE_TEXT",
    "LOCAL_SETTINGS",
    "MCP_SERVER_NAME",
    "MISSING_NOTICE",
    "PLUGIN_HOOK_SCRIPT",
    "SKILL_MARKER",
    "SKILL_NAMES",
    "FileChange",
    "Plan",
    "apply_plan",
    "backup_path",
    "ctx_hooks",
    "describe",
    "dump_json",
    "hook_command",
    "is_ctx_handler",
    "is_ctx_hook",
    "load_json",
    "mcp_entry",
    "plan_install",
    "plan_mcp",
    "plan_plugin",
    "plan_uninstall",
    "plan_unmcp",
    "plan_unplugin",
    "plugin_hook_command",
    "portable_hook_command",
    "resolve_ctx_command",
    "skill_files",
    "skill_text",
]
