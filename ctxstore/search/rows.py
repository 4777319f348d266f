"""The index rows search reads by key: what Tantivy's hits name, and what keeps Tantivy current.

Tantivy (``search.tantivy_index``) holds terms and rowids only; the rows its hits name come
from the SQLite index here, and so do the listings its incremental sync compares with what
it holds. A SQLite error becomes ``IndexCorrupt`` (``ranked.run_select``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence

from ctxstore.errors import IndexCorrupt
from ctxstore.search.ranked import ChunkRow, NodeText, has_table, run_select

__all__ = ["meta_value", "corpus_size", "superseded_count", "node_versions", "node_texts", "file_versions",
           "chunks_of_paths", "file_terms_of", "nodes_at", "chunks_at", "terms_held"]

_BATCH = 500


def meta_value(conn: sqlite3.Connection, key: str) -> str | None:
    """A ``meta`` value of the index, or None.

    Args:
        conn: An index connection.
        key: The key (``synced``, ``code_generation``).

    Returns:
        The value.
    """
    rows = run_select(conn, "SELECT value FROM meta WHERE key = ?", (key,))
    return str(rows[0][0]) if rows else None


def corpus_size(conn: sqlite3.Connection) -> int:
    """How many file chunks the index holds.

    Counted, not read from the span of their rowids: a re-indexed file's chunks get new
    rowids, so after enough one-file ``ctx index`` runs the span of a store far below
    ``TANTIVY_MIN_CHUNKS`` passed it, and every later run built and synced Tantivy. SQLite
    counts the rows on the narrowest index of ``chunk_rows`` (about a millisecond for
    100,000 chunks).

    Args:
        conn: An index connection.

    Returns:
        The count; 0 without code tables.
    """
    if not has_table(conn, "chunk_rows"):
        return 0
    rows = run_select(conn, "SELECT count(*) FROM chunk_rows", ())
    return int(rows[0][0] or 0) if rows else 0


def superseded_count(conn: sqlite3.Connection) -> int:
    """How many nodes are superseded (a search that leaves them out asks for as many more).

    Args:
        conn: An index connection.

    Returns:
        The count.
    """
    rows = run_select(conn, "SELECT count(*) FROM nodes WHERE superseded_by IS NOT NULL", ())
    return int(rows[0][0])


def node_versions(conn: sqlite3.Connection) -> dict[int, bytes]:
    """Every live node's rowid and the version (record id) that won it.

    Args:
        conn: An index connection.

    Returns:
        Rowid -> version.
    """
    return {int(r): bytes(v) for r, v in run_select(conn, "SELECT rowid, version FROM nodes", ())}


def node_texts(conn: sqlite3.Connection, rowids: Sequence[int]
               ) -> Iterator[tuple[int, str, str, str]]:
    """``(rowid, id, content, summary)`` of the given nodes (those still there), in batches.

    Args:
        conn: An index connection.
        rowids: The nodes.

    Yields:
        One tuple per node.
    """
    for start in range(0, len(rowids), _BATCH):
        chunk = rowids[start:start + _BATCH]
        yield from ((int(r), str(i), str(c), str(s or "")) for r, i, c, s in run_select(
            conn, f"SELECT rowid, id, content, summary FROM nodes WHERE rowid IN "
                  f"({','.join('?' * len(chunk))})", chunk))


def file_versions(conn: sqlite3.Connection) -> dict[str, tuple[int, bytes, str | None]]:
    """Every indexed file: path -> ``(rowid, version, language)``.

    Args:
        conn: An index connection with the code tables.

    Returns:
        The files; empty without code tables.
    """
    if not has_table(conn, "files"):
        return {}
    return {str(p): (int(r), bytes(v), lang) for r, p, v, lang in run_select(
        conn, "SELECT rowid, path, version, language FROM files", ())}


def chunks_of_paths(conn: sqlite3.Connection, paths: Sequence[str]
                    ) -> Iterator[tuple[int, str, str, str]]:
    """``(rowid, path, qualname or "", text)`` of every chunk of the given files.

    Args:
        conn: An index connection with the code tables.
        paths: The files.

    Yields:
        One tuple per chunk.
    """
    for start in range(0, len(paths), _BATCH):
        chunk = paths[start:start + _BATCH]
        yield from ((int(r), str(p), str(q or ""), str(t)) for r, p, q, t in run_select(
            conn, "SELECT rowid, path, qualname, text FROM chunks WHERE path IN "
                  f"({','.join('?' * len(chunk))})", chunk))


def file_terms_of(conn: sqlite3.Connection, files: Sequence[int]
                  ) -> dict[int, tuple[list[str], list[str]]]:
    """The postings of the given files: file -> (body terms, path terms), a term once per use.

    Read from each file's own term list (``file_postings``), its term ids named by ``terms``.

    Args:
        conn: An index connection with the code tables.
        files: ``files.rowid`` values.

    Returns:
        Each file's terms, repeated as often as they occur (``file_terms.tf``).

    Raises:
        IndexCorrupt: A file's term list is damaged.
    """
    from ctxstore.index.postings import posting_limit, unpack_postings

    out: dict[int, tuple[list[str], list[str]]] = {f: ([], []) for f in files}
    for start in range(0, len(files), _BATCH):
        chunk = files[start:start + _BATCH]
        lists: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
        for file, size, data in run_select(
                conn, "SELECT p.file, f.byte_count, p.data FROM file_postings p JOIN files f"
                      f" ON f.rowid = p.file WHERE p.file IN ({','.join('?' * len(chunk))})",
                chunk):
            try:
                lists[int(file)] = unpack_postings(bytes(data), posting_limit(int(size)))
            except ValueError as exc:
                _mark(conn, f"the term list of file {int(file)} is unreadable")
                raise IndexCorrupt(f"the term list of file {int(file)} is unreadable ({exc})",
                                   in_code_index=True) from exc
        ids = sorted({t for body, where in lists.values() for t, _ in (*body, *where)})
        names: dict[int, str] = {}
        for at in range(0, len(ids), _BATCH * 20):
            part = ids[at:at + _BATCH * 20]
            names.update((int(i), str(t)) for i, t in run_select(
                conn, "SELECT id, term FROM terms WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(part),)))
        for file, (body, where) in lists.items():
            for field, postings in ((0, body), (1, where)):
                terms = out[file][field]
                for term, tf in postings:
                    name = names.get(term)
                    if name is None:
                        _mark(conn, f"the term list of file {file} names a term the index lacks")
                        raise IndexCorrupt(f"the term list of file {file} names term {term},"
                                           " which the index lacks", in_code_index=True)
                    terms.extend([name] * tf)
    return out


def _mark(conn: sqlite3.Connection, reason: str) -> None:
    """Leave the code index's damage marker: the next command drops it (``ctx index`` remakes it)."""
    from ctxstore.index.connection import mark_code_damaged

    mark_code_damaged(conn, reason)


def nodes_at(conn: sqlite3.Connection, rowids: Sequence[int], *, flag: str,
             include_superseded: bool) -> dict[int, NodeText]:
    """The nodes at the given rowids as ranked search reads them (score 0: the caller's).

    Args:
        conn: An index connection.
        rowids: The nodes.
        flag: A JSON path into node metadata; ``NodeText.flagged`` says whether it is set.
        include_superseded: Also superseded nodes.

    Returns:
        Rowid -> node, for those still there (and live, unless ``include_superseded``).
    """
    where = "" if include_superseded else " AND superseded_by IS NULL"
    out: dict[int, NodeText] = {}
    for start in range(0, len(rowids), _BATCH):
        chunk = rowids[start:start + _BATCH]
        for r, i, content, summary, flagged in run_select(
                conn, "SELECT rowid, id, content, coalesce(summary, ''), "
                      "json_extract(metadata, ?) IS NOT NULL FROM nodes WHERE rowid IN "
                      f"({','.join('?' * len(chunk))}){where}", (flag, *chunk)):
            out[int(r)] = NodeText(str(i), f"{content}\n{summary}", bool(flagged), 0.0)
    return out


def chunks_at(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, ChunkRow]:
    """The chunks at the given rowids.

    Args:
        conn: An index connection with the code tables.
        rowids: The chunks.

    Returns:
        Rowid -> chunk, for those still there.
    """
    out: dict[int, ChunkRow] = {}
    for start in range(0, len(rowids), _BATCH):
        chunk = rowids[start:start + _BATCH]
        for row in run_select(conn, "SELECT rowid, path, qualname, kind, start_line, end_line, "
                                 "tokens, text FROM chunks WHERE rowid IN "
                                 f"({','.join('?' * len(chunk))})", chunk):
            out[int(row[0])] = ChunkRow(*row)
    return out


def terms_held(conn: sqlite3.Connection, files: Iterable[int], terms: Iterable[str]
               ) -> list[tuple[int, str]]:
    """Which of ``terms`` each of ``files`` holds in its postings (body or path).

    Args:
        conn: An index connection with the code tables.
        files: ``files.rowid`` values (a few: the explained hits).
        terms: Terms.

    Returns:
        ``(file, term)`` pairs.
    """
    ids, words = list(dict.fromkeys(files)), list(dict.fromkeys(terms))[:_BATCH]
    if not ids or not words:
        return []
    # term-major: each term's id, then its postings of these files in either field (the
    # primary key (term, field, file) of file_term_rows; there is no index by file)
    return [(int(f), str(t)) for f, t in run_select(
        conn, "SELECT DISTINCT r.file, t.term FROM terms t JOIN file_term_rows r"
              " ON r.term = t.id AND r.field IN (0, 1)"
              f" AND r.file IN ({','.join('?' * len(ids))})"
              f" WHERE t.term IN ({','.join('?' * len(words))})", (*ids, *words))]
