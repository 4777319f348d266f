"""The coding agents ``ctx install --agent`` knows: where each keeps its MCP servers, in what format.

Each agent is one ``Agent`` record: the file of each scope it has (a project's, committed with
the code; the user's own), the format (JSON, JSON with comments, TOML), the key that holds the
servers and the shape of one stdio server entry. Every format was taken from the agent's own
documentation (docs/agents.md cites it). A new agent is one more record in ``AGENTS``.

Nothing here reads the environment: the user's locations depend on the home folder, the
platform and a few variables (``CODEX_HOME``, ``XDG_CONFIG_HOME``, ``APPDATA``), which the
caller passes in a ``Where``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from ctxstore.errors import InvalidInput
from ctxstore.records import dataclass

__all__ = ["AGENTS", "Agent", "Format", "Scope", "Where", "find_agent"]

Format = Literal["json", "jsonc", "toml"]
Scope = Literal["project", "user"]


@dataclass(frozen=True, slots=True)
class Where:
    """The facts the user's locations depend on (the CLI gathers them).

    Attributes:
        home: The user's home folder.
        platform: ``sys.platform`` (``linux``, ``darwin``, ``win32``).
        env: The variables an agent's location depends on (``CODEX_HOME``,
            ``XDG_CONFIG_HOME``, ``APPDATA``), when set.
    """

    home: Path
    platform: str = "linux"
    env: Mapping[str, str] | None = None

    def var(self, name: str) -> str | None:
        """The variable ``name``, or None when unset or empty."""
        value = (self.env or {}).get(name)
        return value or None

    def config_home(self) -> Path:
        """``$XDG_CONFIG_HOME``, else ``~/.config`` (Linux and other Unix)."""
        given = self.var("XDG_CONFIG_HOME")
        return Path(given) if given else self.home / ".config"

    def app_support(self, name: str) -> Path:
        """An application's own folder, by platform.

        macOS ``~/Library/Application Support/NAME``, Windows ``%APPDATA%\\NAME``, else the
        XDG configuration folder.
        """
        if self.platform == "darwin":
            return self.home / "Library" / "Application Support" / name
        if self.platform == "win32":
            appdata = self.var("APPDATA")
            return (Path(appdata) if appdata else self.home / "AppData" / "Roaming") / name
        return self.config_home() / name


def _stdio(command: str, args: list[str]) -> dict[str, Any]:
    return {"command": command, "args": args}


def _typed_stdio(command: str, args: list[str]) -> dict[str, Any]:
    return {"type": "stdio", "command": command, "args": args}


@dataclass(frozen=True, slots=True)
class Agent:
    """One agent: its files, their format, and one stdio server entry.

    Attributes:
        name: The name ``--agent`` takes.
        title: The agent's name as its makers write it.
        format: ``json`` (strict), ``jsonc`` (comments allowed, kept) or ``toml``.
        servers_key: The key of the servers table (``mcpServers``, ``servers``,
            ``mcp_servers``).
        project_file: The project's file, relative to the project root; None when the
            agent has none.
        user_file: The user's file, from a ``Where``; None when the agent has none.
        entry: The server entry for a command and its arguments.
        note: What a user should know (shown by ``ctx install --agent``).
    """

    name: str
    title: str
    format: Format
    servers_key: str
    project_file: str | None
    user_file: Callable[[Where], Path] | None
    entry: Callable[[str, list[str]], dict[str, Any]] = _stdio
    note: str = ""

    def scopes(self) -> tuple[Scope, ...]:
        """The scopes this agent has, the project first."""
        found: list[Scope] = []
        if self.project_file is not None:
            found.append("project")
        if self.user_file is not None:
            found.append("user")
        return tuple(found)

    def config_path(self, scope: Scope, project: Path, where: Where) -> Path:
        """The file of ``scope``: below ``project``, or the user's own.

        Raises:
            InvalidInput: (E011) if the agent has no file of that scope.
        """
        if scope == "project":
            if self.project_file is None:
                raise InvalidInput(f"{self.title} has no project configuration",
                                   hint=f"use --user: ctx install --agent {self.name} --user")
            return project / self.project_file
        if self.user_file is None:
            raise InvalidInput(f"{self.title} has no user configuration",
                               hint=f"use --project: ctx install --agent {self.name} --project")
        return self.user_file(where)


def _codex_home(where: Where) -> Path:
    given = where.var("CODEX_HOME")
    return (Path(given) if given else where.home / ".codex") / "config.toml"


def _vscode_user(where: Where) -> Path:
    return where.app_support("Code") / "User" / "mcp.json"


AGENTS: dict[str, Agent] = {agent.name: agent for agent in (
    # developers.openai.com/codex/mcp, /codex/config-basic: [mcp_servers.<name>] tables in
    # ~/.codex/config.toml ($CODEX_HOME), or .codex/config.toml of a trusted project.
    Agent("codex", "Codex CLI", "toml", "mcp_servers", ".codex/config.toml", _codex_home,
          note="Codex reads a project's .codex/config.toml only once you trust the project."),
    # geminicli.com/docs/cli/configuration, docs/tools/mcp-server.md: mcpServers in
    # ~/.gemini/settings.json or .gemini/settings.json (comments allowed).
    Agent("gemini", "Gemini CLI", "jsonc", "mcpServers", ".gemini/settings.json",
          lambda where: where.home / ".gemini" / "settings.json"),
    # cursor.com/docs/mcp: mcpServers in .cursor/mcp.json (project) or ~/.cursor/mcp.json.
    Agent("cursor", "Cursor", "jsonc", "mcpServers", ".cursor/mcp.json",
          lambda where: where.home / ".cursor" / "mcp.json"),
    # modelcontextprotocol.io quickstart (user): mcpServers in claude_desktop_config.json,
    # ~/Library/Application Support/Claude (macOS), %APPDATA%\Claude (Windows).
    Agent("claude-desktop", "Claude Desktop", "json", "mcpServers", None,
          lambda where: where.app_support("Claude") / "claude_desktop_config.json",
          note="Claude Desktop starts servers outside any project: ctx mcp serves the user "
               "store ~/.ctx, or the store named with ctx --ctx-dir DIR install ..."),
    # code.visualstudio.com/docs/copilot/reference/mcp-configuration: "servers" (type stdio)
    # in .vscode/mcp.json or the user profile's mcp.json.
    Agent("vscode", "VS Code", "jsonc", "servers", ".vscode/mcp.json", _vscode_user,
          entry=_typed_stdio),
    # docs.windsurf.com/windsurf/cascade/mcp: mcpServers in ~/.codeium/windsurf/mcp_config.json.
    Agent("windsurf", "Windsurf", "json", "mcpServers", None,
          lambda where: where.home / ".codeium" / "windsurf" / "mcp_config.json"),
)}


def find_agent(name: str) -> Agent:
    """The agent called ``name``.

    Raises:
        InvalidInput: (E011) naming the agents there are.
    """
    agent = AGENTS.get(name)
    if agent is None:
        raise InvalidInput(f"unknown agent {name!r}", hint="one of " + ", ".join(AGENTS))
    return agent
