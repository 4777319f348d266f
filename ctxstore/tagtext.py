"""Command tags made inert in text shown to a model: ``<ctx:`` written ``&lt;ctx:``.

A model that echoes text it was shown must never issue a ``<ctx:*>`` command, nor close a
``<ctx-data>`` frame early (RELIABILITY.md PI-08, PI-09). Every output that carries stored
or repository text to an agent escapes it here: the hooks' injected context
(``claude.inject``), the read commands, prompt packs (``packs.pack``) and the MCP
tools' results. The escape is idempotent: escaped text has no ``<ctx`` left.

This module is text only: no I/O, no imports of ctx.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["escape_tags", "escape_tree"]

# Compiled on first use (through ``re``'s cache): a Stop hook without tags needs none.
_ESCAPE = r"(?i)<(/?)(ctx)(?=[:\-])"


def escape_tags(text: str) -> str:
    """Make ``<ctx:`` / ``</ctx:`` / ``<ctx-`` inert (``&lt;ctx:``) in text shown to the model.

    Echoing it back can then never issue a command (PI-08, PI-09).

    Args:
        text: Any text.

    Returns:
        The text with every such opening escaped (case-insensitively).
    """
    if "<" not in text:
        return text
    return re.sub(_ESCAPE, r"&lt;\1\2", text)


def escape_tree(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, tuples, strings, scalars) with every string escaped.

    Keys are escaped too (a node's metadata keys are anyone's text).

    Args:
        value: The value.

    Returns:
        A copy with ``escape_tags`` applied to every string; other values as they are.
    """
    if isinstance(value, str):
        return escape_tags(value)
    if isinstance(value, dict):
        return {escape_tree(k): escape_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escape_tree(v) for v in value]
    return value
