"""The ``meta`` values every open of the index and every full build read.

Apart from the package so that the full build (``index.rebuild``), which the package loads
only to build, imports them without importing the package that imports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["BUILD_STATE", "clone_id", "parse_snapshot"]

# The meta row of a partial index (index.rebuild.BUILD_STATE; that module loads only to build).
BUILD_STATE = "build_state"


def clone_id(root: Path) -> str | None:
    """The identity of this copy of the store: the device and inode of its ``.ctx`` directory.

    An index records it when it syncs. An index file that arrived some other way (committed
    to Git with ``git add -f`` and cloned, or copied with the store) names another directory,
    so its rows are never trusted: the next sync rebuilds it from the objects, which are checked
    on every read. None when the directory cannot be read (the store's own open reports it).
    """
    try:
        st = os.stat(root)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def parse_snapshot(text: str) -> dict[str, list[str]] | None:
    """A ``meta.synced`` value as ``pointer_snapshot`` wrote it, or None if it is not one."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, TypeError):
        return None
    if not isinstance(value, dict) or set(value) != {"ref", "main", "stage"}:
        return None
    if not (isinstance(value["ref"], list) and len(value["ref"]) == 1
            and isinstance(value["ref"][0], str)):
        return None
    for key in ("main", "stage"):
        heads = value[key]
        if not isinstance(heads, list) or not all(
                isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)
                for h in heads):
            return None
    return value
