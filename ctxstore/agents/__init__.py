"""Other coding agents: ``ctx mcp`` registered in each agent's own configuration file.

``registry`` lists the agents (Codex CLI, Gemini CLI, Cursor, Claude Desktop, VS Code,
Windsurf), their files and formats; ``install`` plans the entry in and out of a file with the
guarantees of the Claude Code install; ``jsonc`` and ``tomltext`` edit JSON (with comments)
and TOML as text, so every other byte of the file stays. ``agentsmd`` writes the ranked memory
section into ``AGENTS.md``.
"""

from __future__ import annotations

__all__: list[str] = []
