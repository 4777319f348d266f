"""The MCP front end: ``ctx mcp``, a stdio Model Context Protocol server (``server``).

The official ``mcp`` SDK is imported only inside ``server`` functions, so nothing else in
ctx (hooks above all) pays for it, and ctx works without it installed.
"""

from __future__ import annotations

__all__: list[str] = []
