"""The MCP front end: ``ctx mcp``, a stdio Model Context Protocol server (``server``).

The official ``mcp`` SDK (a core dependency) is imported only inside ``server`` functions,
so nothing else in ctx (hooks above all) pays for it. ``probe`` checks a server from the
outside (``ctx doctor``), speaking JSON-RPC itself.
"""

from __future__ import annotations

__all__: list[str] = []
