"""``ctx ui``: a local, read-only memory browser (a front end beside ``claude`` and ``mcp``).

``pages`` is the page table: each API answer is one use case of ``ctxstore.browse`` (or
``packs``), rendered as JSON. ``server`` serves the pages, their assets and those answers on
127.0.0.1 only, behind a random token in the URL, GET only. ``export`` writes the same pages
as files with the answers embedded. ``assets/`` (HTML, CSS, JS: the graph drawing is plain
SVG with a force layout of its own) ships in the wheel; nothing is fetched from elsewhere.
Nothing here opens a database, prints or reads the environment.
"""

from __future__ import annotations

__all__: list[str] = []
