"""The ids of the code index's shared rows, looked up or made as a file's rows are written.

``code_keys`` (each endpoint once, named by edges and symbols), ``terms`` (each ranking term
once), ``code_edge_kinds`` (each label, confidence and tool once), and a file's own term
list (``file_postings``) read back to delete its postings. Used by ``index.code`` inside the
caller's transaction on the code tables; SQL stays in ``index/``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from ctxstore.errors import IndexCorrupt
from ctxstore.index.codedb import key_hash
from ctxstore.index.postings import BODY, PATH, posting_limit, unpack_postings

__all__ = ["drop_unused_keys", "edge_kind", "file_postings", "key_id", "parent_columns",
           "term_ids"]


def key_id(conn: sqlite3.Connection, keys: dict[tuple[str, str], int], kind: str | None,
            key: str | None) -> int | None:
    """The ``code_keys`` id of an endpoint, made when new (None for an incomplete endpoint)."""
    if kind is None or key is None:
        return None
    found = keys.get((kind, key))
    if found is None:
        digest = key_hash(key)  # found by its hash, then its text (two keys may share one)
        row = conn.execute("SELECT id FROM code_keys WHERE hash = ? AND key = ? AND kind = ?",
                           (digest, key, kind)).fetchone()
        found = int(row[0]) if row is not None else int(conn.execute(
            "INSERT INTO code_keys(kind, key, hash) VALUES (?, ?, ?)",
            (kind, key, digest)).lastrowid or 0)
        keys[(kind, key)] = found
    return found


def parent_columns(qualname: str, parent: str | None) -> tuple[int | None, str | None]:
    """``(parent_len, parent)`` of a symbol row: the parent as a prefix's length when it is one."""
    if parent is not None and qualname.startswith(parent):
        return len(parent), None
    return None, parent


def term_ids(conn: sqlite3.Connection, known: dict[str, int], terms: Sequence[str]
              ) -> dict[str, int]:
    """The ``terms`` id of each of ``terms``, made when new (``known`` caches them)."""
    missing = [t for t in dict.fromkeys(terms) if t not in known]
    for start in range(0, len(missing), 500):  # the terms held already, then the new ones
        part = missing[start:start + 500]
        known.update(conn.execute(
            f"SELECT term, id FROM terms WHERE term IN ({','.join('?' * len(part))})",  # noqa: S608
            part).fetchall())
    for term in [t for t in missing if t not in known]:
        known[term] = int(conn.execute("INSERT INTO terms(term) VALUES (?)", (term,)).lastrowid or 0)
    return known


def edge_kind(conn: sqlite3.Connection, kinds: dict[tuple[str, str, str], int], label: str,
               confidence: str, tool: str) -> int:
    """The ``code_edge_kinds`` id of an edge's (label, confidence, tool), made when new."""
    found = kinds.get((label, confidence, tool))
    if found is None:
        row = conn.execute("SELECT id FROM code_edge_kinds WHERE label = ? AND confidence = ?"
                           " AND tool = ?", (label, confidence, tool)).fetchone()
        found = int(row[0]) if row is not None else int(conn.execute(
            "INSERT INTO code_edge_kinds(label, confidence, tool) VALUES (?, ?, ?)",
            (label, confidence, tool)).lastrowid or 0)
        kinds[(label, confidence, tool)] = found
    return found


def drop_unused_keys(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    """Delete the ``code_keys`` among ``ids`` that no edge or symbol names any more."""
    wanted = sorted(ids)
    for start in range(0, len(wanted), 500):
        part = wanted[start:start + 500]
        conn.execute(f"DELETE FROM code_keys WHERE id IN ({','.join('?' * len(part))})"  # noqa: S608
                     " AND NOT EXISTS (SELECT 1 FROM code_edge_rows WHERE src = code_keys.id)"
                     " AND NOT EXISTS (SELECT 1 FROM code_edge_rows WHERE dst = code_keys.id)"
                     " AND NOT EXISTS (SELECT 1 FROM symbol_rows WHERE qualname = code_keys.id)",
                     part)


def file_postings(conn: sqlite3.Connection, path: str
                   ) -> tuple[int, list[tuple[int, int]]] | None:
    """The rowid of the indexed file at ``path`` and its postings' ``(term, field)``, or None."""
    row = conn.execute("SELECT f.rowid, f.byte_count, p.data FROM files f LEFT JOIN file_postings"
                       " p ON p.file = f.rowid WHERE f.path = ?", (path,)).fetchone()
    if row is None:
        return None
    if row[2] is None:  # a file whose postings were never written: none to delete
        return int(row[0]), []
    try:
        body, where = unpack_postings(row[2], posting_limit(int(row[1])))
    except ValueError as exc:
        from ctxstore.index.connection import mark_code_damaged

        mark_code_damaged(conn, f"the postings of {path} are unreadable")
        raise IndexCorrupt(f"the postings of {path} are unreadable ({exc})",
                           in_code_index=True) from exc
    return int(row[0]), [*((t, BODY) for t, _ in body), *((t, PATH) for t, _ in where)]
