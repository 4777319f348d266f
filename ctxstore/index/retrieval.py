"""The SELECTs of prompt packs (``retrieval.pack``), read from the code tables (docs/code.md).

File sizes, term postings, definitions, import edges and chunks.

Postings come from FTS5's own index of ``chunks_fts`` through an ``fts5vocab`` table of
type ``instance`` (a temp table on this connection), only for the query's terms: a query
costs what its terms' postings cost, not a scan of every file's text. An index built
before code ingestion (no ``chunks``) answers with nothing. Reads only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxstore.index.fulltext.ranked import has_table

__all__ = ["PackChunk", "has_code", "file_sizes", "term_counts", "term_postings", "symbols_with_names",
           "import_edges", "chunks_of"]

_VOCAB = "temp.ctx_chunks_instances"
_ROWS = "temp.ctx_chunks_rows"
_BATCH = 500  # host parameters per statement, well under SQLite's limit


@dataclass(frozen=True, slots=True)
class PackChunk:
    """A chunk of an indexed file (a row of ``chunks``)."""

    rowid: int
    path: str
    qualname: str | None
    kind: str
    start_line: int
    end_line: int
    tokens: int
    text: str


def has_code(conn: sqlite3.Connection) -> bool:
    """Whether the index has the code tables (``files``, ``chunks``, ``chunks_fts``).

    Args:
        conn: An index connection.

    Returns:
        True when all three exist.
    """
    return all(has_table(conn, name) for name in ("files", "chunks", "chunks_fts"))


def file_sizes(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """Every indexed file with its size in bytes, by path.

    Args:
        conn: An index connection with the code tables.

    Returns:
        ``(path, byte_count)`` pairs, sorted by path.
    """
    return [(str(p), int(n)) for p, n in
            conn.execute("SELECT path, byte_count FROM files ORDER BY path").fetchall()]


def _batches(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _BATCH):
        yield items[start:start + _BATCH]


def _vocabularies(conn: sqlite3.Connection) -> None:
    """The ``fts5vocab`` tables over ``chunks_fts`` (temp tables of this connection)."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} "
                 "USING fts5vocab(main, 'chunks_fts', 'instance')")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_ROWS} "
                 "USING fts5vocab(main, 'chunks_fts', 'row')")


def term_counts(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
    """How many times each term occurs in all chunks (FTS5's vocabulary; absent terms left out).

    Args:
        conn: An index connection with the code tables.
        terms: Terms as FTS5's ``unicode61`` tokenizer stores them (lower case words).

    Returns:
        Term -> occurrences.
    """
    _vocabularies(conn)
    found: dict[str, int] = {}
    for batch in _batches(list(dict.fromkeys(terms))):
        found.update((str(t), int(n)) for t, n in conn.execute(
            f"SELECT term, cnt FROM {_ROWS} WHERE term IN ({','.join('?' * len(batch))})",
            tuple(batch)).fetchall())
    return found


def term_postings(conn: sqlite3.Connection, terms: Sequence[str]
                  ) -> dict[str, list[tuple[str, str, int]]]:
    """How often each term occurs in each file's chunk text and path (FTS5's tokens).

    Args:
        conn: An index connection with the code tables.
        terms: Terms as FTS5's ``unicode61`` tokenizer stores them (lower case words).

    Returns:
        Term -> ``(path, column, count)`` with column ``text`` (summed over the file's
        chunks) or ``path`` (once per file); absent terms are left out.
    """
    _vocabularies(conn)
    out: dict[str, list[tuple[str, str, int]]] = {}
    for term in dict.fromkeys(terms):
        rows = conn.execute(
            f"SELECT c.path, v.col, count(*), count(DISTINCT v.doc) FROM {_VOCAB} v "
            "JOIN chunks c ON c.rowid = v.doc WHERE v.term = ? AND v.col IN ('text', 'path') "
            "GROUP BY c.path, v.col", (term,)).fetchall()
        if rows:
            # The path column repeats in every chunk of a file: count it per chunk.
            out[term] = [(str(path), str(col), int(n) if col == "text" else max(int(n) // int(d), 1))
                         for path, col, n, d in rows]
    return out


def symbols_with_names(conn: sqlite3.Connection, names: Sequence[str]
                       ) -> list[tuple[str, str, str, str]]:
    """Symbols whose bare name is one of ``names`` (exact spelling; the name index).

    Args:
        conn: An index connection with the code tables.
        names: Names as they may be spelled.

    Returns:
        ``(path, qualname, name, kind)`` rows, by path and qualname.
    """
    if not names or not has_table(conn, "symbols"):
        return []
    found: list[tuple[str, str, str, str]] = []
    for batch in _batches(list(dict.fromkeys(names))):
        found += [(str(a), str(b), str(c), str(d)) for a, b, c, d in conn.execute(
            "SELECT path, qualname, name, kind FROM symbols WHERE name IN "
            f"({','.join('?' * len(batch))})", tuple(batch)).fetchall()]
    return sorted(found)


def import_edges(conn: sqlite3.Connection, paths: Sequence[str]) -> list[tuple[str, str]]:
    """``Imports`` edges between files that touch ``paths`` (either end).

    Ingestion resolves an import of a module to ``("file", path)`` and of a name inside
    one to ``("item", qualname)`` (docs/code.md); an item is resolved here to the file
    defining it.

    Args:
        conn: An index connection with the code tables.
        paths: The files whose edges are wanted.

    Returns:
        ``(importing file, imported file)`` pairs, distinct, sorted.
    """
    if not paths or not has_table(conn, "code_edges"):
        return []
    found: set[tuple[str, str]] = set()
    resolve = ("(CASE WHEN e.to_kind = 'file' THEN e.to_key ELSE "
               "(SELECT s.path FROM symbols s WHERE s.qualname = e.to_key "
               "ORDER BY s.path LIMIT 1) END)")
    for batch in _batches(list(dict.fromkeys(paths))):
        marks = ",".join("?" * len(batch))
        rows = conn.execute(
            f"SELECT e.path, {resolve} FROM code_edges e WHERE e.label = 'Imports' "
            f"AND e.path IN ({marks})", tuple(batch)).fetchall()
        rows += conn.execute(
            f"SELECT e.path, e.to_key FROM code_edges e WHERE e.label = 'Imports' "
            f"AND e.to_kind = 'file' AND e.to_key IN ({marks})", tuple(batch)).fetchall()
        rows += conn.execute(
            f"SELECT e.path, s.path FROM symbols s JOIN code_edges e ON e.to_kind = 'item' "
            f"AND e.to_key = s.qualname AND e.label = 'Imports' WHERE s.path IN ({marks})",
            tuple(batch)).fetchall()
        found.update((str(a), str(b)) for a, b in rows if a and b and a != b)
    return sorted(found)


def chunks_of(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, list[PackChunk]]:
    """The chunks of some files, in file order.

    Args:
        conn: An index connection with the code tables.
        paths: The files.

    Returns:
        Path -> its chunks by start line; files without chunks are absent.
    """
    out: dict[str, list[PackChunk]] = {}
    for batch in _batches(list(dict.fromkeys(paths))):
        for row in conn.execute(
                "SELECT rowid, path, qualname, kind, start_line, end_line, tokens, text FROM chunks "
                f"WHERE path IN ({','.join('?' * len(batch))}) ORDER BY path, start_line, rowid",
                tuple(batch)).fetchall():
            chunk = PackChunk(int(row[0]), str(row[1]), row[2], str(row[3]), int(row[4]),
                              int(row[5]), int(row[6]), str(row[7]))
            out.setdefault(chunk.path, []).append(chunk)
    return out
