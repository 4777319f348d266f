"""The ``meta`` values every open of the index and every full build read.

Apart from the package so that the full build (``index.rebuild``), which the package loads
only to build, imports them without importing the package that imports it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from ctxstore.index import codedb

__all__ = ["BUILD_STATE", "NOT_THIS_COPY", "clone_id", "code_owner_problem", "owner_problem",
           "parse_snapshot"]

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


# What an index file made for another copy of the store is said to be (``IndexRepair.message``).
NOT_THIS_COPY = "was not made for this copy of the store"


def owner_problem(recorded: str | None, owner: str) -> str | None:
    """Why an index file whose ``clone`` record is ``recorded`` is not this copy's, or None.

    The one identity check of both index files: ``meta`` ``clone`` of ``index.sqlite`` and
    ``code_meta`` ``clone`` of ``code.sqlite`` each record the ``clone_id`` of the copy they
    were made for. Another value means the file was copied or cloned in; none means an older
    ctx made it, or it came from elsewhere (the caller decides whether an empty file counts).

    Args:
        recorded: The file's ``clone`` record, or None when it has none.
        owner: ``clone_id`` of this copy ("" when it cannot be read).
    """
    if recorded == owner:
        return None
    return "it names none: an older ctx made it, or it came from elsewhere" if recorded is None \
        else "it names another copy: it was copied or cloned in"


def code_owner_problem(conn: sqlite3.Connection, owner: str) -> tuple[str | None, bool]:
    """Why the attached code index is not this copy's (None if it is); whether it holds rows.

    ``owner_problem`` on its ``code_meta`` ``clone`` record. One that records another (copied in with the
    store, or committed with ``git add -f`` and cloned), or records none while its tables hold
    rows (an older ctx's, or made by hand), is never read: the caller drops it and ``ctx
    index`` makes it again from this work tree. A new one (no record, no rows) is stamped.

    Raises:
        sqlite3.Error: as SQLite reports it (the caller classifies it).
    """
    recorded = codedb.meta_value(conn, "clone")
    if recorded == owner:
        return None, True
    held = any(conn.execute(f"SELECT EXISTS (SELECT 1 FROM code.{table})").fetchone()[0]  # noqa: S608
               for table in codedb.CODE_TABLES if table != "code_meta")
    if recorded is None and not held:
        with codedb.write(conn):
            codedb.set_meta(conn, "clone", owner)
        return None, False
    return owner_problem(recorded, owner), held


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
