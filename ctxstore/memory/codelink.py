"""Linking transcript entities to the code graph: the project files and symbols they name.

A file or symbol entity ("src/cache.py", "MemoryDB.forget", "search_memory") is linked to the
file (``code_path``) and symbol (``code_qualname``) of the project's code index
(read only, through ``index.code``) when the name picks out exactly one:

- a file by its path; else by the longest tail of its path that is an indexed path
  ("/home/me/repo/src/cache.py", "./src/cache.py" → ``src/cache.py``); a bare file name
  ("cache.py") only when one indexed file has it;
- a symbol by its qualified name; else by its bare name (the last part after ``.`` or ``::``)
  among the symbols whose qualified name ends with the name as written, when one is left.

An entity no file or symbol matches stays unlinked and is tried again on the next run (the code
may be indexed later). Runs at the end of ``ctx memory backfill``, not in the hooks: opening the
code index costs more than a turn's budget allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.memory.db import MemoryDB

__all__ = ["link_code", "resolve_file", "resolve_symbol"]

_MAX_CANDIDATES = 50


def resolve_file(name: str, paths: set[str], by_base: dict[str, list[str]]) -> str | None:
    """The indexed path a file name picks out, or None.

    Args:
        name: The file as written in a conversation.
        paths: Every indexed path.
        by_base: Indexed paths by their last component.
    """
    parts = [p for p in name.replace("\\", "/").split("/") if p and p != "."]
    if not parts:
        return None
    if len(parts) == 1:
        found = by_base.get(parts[0], [])
        return found[0] if len(found) == 1 else None
    for start in range(len(parts) - 1):  # the longest tail first, at least two components
        tail = "/".join(parts[start:])
        if tail in paths:
            return tail
    return None


def resolve_symbol(conn: sqlite3.Connection, name: str) -> tuple[str, str] | None:
    """``(path, qualname)`` of the one indexed symbol a name picks out, or None."""
    from ctxstore.index.code import symbols_by

    written = name.strip().removesuffix("()").replace("::", ".")
    if not written:
        return None
    exact = symbols_by(conn, qualname=written, limit=2)
    if len(exact) == 1:
        return exact[0].path, exact[0].qualname
    bare = written.rsplit(".", 1)[-1]
    found = {(s.path, s.qualname) for s in symbols_by(conn, name=bare, limit=_MAX_CANDIDATES)
             if s.qualname.replace("::", ".") == written
             or s.qualname.replace("::", ".").endswith("." + written)}
    return found.pop() if len(found) == 1 else None


def link_code(db: MemoryDB, conn: sqlite3.Connection) -> int:
    """Link the not yet linked file and symbol entities of memory to the code index.

    Args:
        db: The open memory.
        conn: The project's index connection (only read).

    Returns:
        How many entities were linked.
    """
    from ctxstore.index.code import file_rows

    entities = db.code_entities(unlinked_only=True)
    if not entities:
        return 0
    paths = set(file_rows(conn))
    by_base: dict[str, list[str]] = {}
    for path in paths:
        by_base.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    links = _links(conn, entities, paths, by_base)
    if links:
        with db.batch():
            db.set_code_links(links)
    return len(links)


def _links(conn: sqlite3.Connection, entities: Sequence[tuple[int, str, str]], paths: set[str],
           by_base: dict[str, list[str]]) -> list[tuple[int, str | None, str | None]]:
    out: list[tuple[int, str | None, str | None]] = []
    for entity, name, kind in entities:
        if kind == "file":
            path = resolve_file(name, paths, by_base)
            if path is not None:
                out.append((entity, path, None))
        else:
            symbol = resolve_symbol(conn, name)
            if symbol is not None:
                out.append((entity, symbol[0], symbol[1]))
    return out
