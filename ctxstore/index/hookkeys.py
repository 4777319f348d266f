"""Finding the node an agent's tag already wrote, by its hook key (RELIABILITY CO-11, TR-12).

Owns the one lookup ``knowledge.remember`` needs to stay idempotent: the live node whose
metadata holds ``"hook_key": KEY``. It must not write, and it must not know how a key is
made (``claude.state.key_of`` does): the key is an opaque string here.

For now the lookup scans the ``metadata`` JSON of every live node with ``instr``, as
``claude/commands.py`` always did, because the index schema (``index/schema.py``) is
being changed by other work. Issue 12 wants an indexed lookup: once that lands, this
function reads an indexed ``hook_key`` column instead and its callers do not change.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

__all__ = ["find_node_by_hook_key"]


def find_node_by_hook_key(conn: sqlite3.Connection, key: str) -> str | None:
    """The id of a live node whose metadata records ``hook_key`` = ``key``.

    The index stores metadata as ``json.dumps(metadata, sort_keys=True)``, so the pair
    is looked for exactly as that encoder writes it (``"hook_key": "..."``, escapes
    included). This is a full scan of ``nodes`` until the indexed column exists.

    Args:
        conn: A synced index connection (``ctxstore.index.open_index``).
        key: The hook key, as the adapter computed it.

    Returns:
        The node id, or None when no live node has that key.
    """
    needle = json.dumps({"hook_key": key})[1:-1]
    row = conn.execute("SELECT id FROM nodes WHERE instr(metadata, ?) > 0 LIMIT 1",
                       (needle,)).fetchone()
    return None if row is None else str(row[0])
