"""Code rows of the index: files, symbols, code_edges, chunks, chunks_fts, file_terms.

``file_terms`` and ``file_lengths`` are the retrieval postings of each file: its
``search.tokenize`` tokens (body and path) with their counts, read by ``ctx pack``. ``term_df``
counts the files of each term: an apply gathers the changes in a ``DocumentFrequencies``
and writes them once at its end (``flush``), one row per term it touched, and bumps
``meta`` ``code_generation`` (which invalidates ``corpus_cache``).

``apply_file`` runs when a ``file`` or ``file_removed`` record wins its key
(``index.apply``): the rows of that path are deleted and, for a ``file`` record, made
again from its ``file_version`` object, so ``ctx rebuild`` gives the same rows as
incremental ingestion. ``code_edges.path`` is the file whose snapshot produced the
edge. The SELECTs the code layer needs (``file_rows``, ``symbols_by``, ``file_blobs``)
live here too: SQL stays in ``index/``.

Chunks are at symbol granularity: one per top-level definition (a class over
``CLASS_SPLIT_TOKENS`` is split into a header chunk and one chunk per method), plus one
module-header chunk for the lines outside them; a file without symbols (no extractor, or
ingested without ``--extract-semantics``) gets windows of ``WINDOW_LINES`` lines.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

from ctxstore.ids import ObjectId
from ctxstore.model.code import CodeRelation, CodeSymbol, FileRecord, FileRemoved, FileVersion
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.search.tokenize import index_text, path_tokens, term_counts
from ctxstore.tokens import estimate_tokens

__all__ = ["CODE_TABLES", "DocumentFrequencies", "FileRow", "SymbolHit", "Chunk", "apply_file",
           "file_rows", "file_row", "symbols_by", "symbols_in", "task_node_ids",
           "chunk_file", "WINDOW_LINES", "CLASS_SPLIT_TOKENS"]

CODE_TABLES = ("files", "symbols", "code_edges", "chunks", "chunks_fts", "file_terms",
               "file_lengths", "term_df", "corpus_cache")
WINDOW_LINES = 60
CLASS_SPLIT_TOKENS = 1500
# Symbols split into their children when larger than CLASS_SPLIT_TOKENS: a class into its
# methods, a Markdown section into its subsections.
_CONTAINERS = frozenset({"class", "impl", "trait", "interface", "struct", "enum", "heading"})


@dataclass(frozen=True, slots=True)
class FileRow:
    """An indexed file (a row of ``files``)."""

    path: str
    version: bytes
    blob: bytes
    language: str | None
    byte_count: int
    line_count: int
    complete: bool
    note: str | None
    stamp: int


@dataclass(frozen=True, slots=True)
class SymbolHit:
    """A symbol found by name (a row of ``symbols``)."""

    path: str
    qualname: str
    name: str
    kind: str
    start_line: int | None
    end_line: int | None


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a file for full-text retrieval."""

    qualname: str | None
    kind: str
    start_line: int
    end_line: int
    text: str


class DocumentFrequencies:
    """Changes to ``term_df`` gathered over one apply, written by ``flush``.

    A full index touches each term in thousands of files: counting in memory and writing
    one row per term costs what the vocabulary costs, not what every posting does.
    """

    __slots__ = ("delta", "files")

    def __init__(self) -> None:
        self.delta: Counter[tuple[str, int]] = Counter()
        self.files = 0

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write the gathered counts and bump ``code_generation`` (when a file was applied).

        Args:
            conn: The index connection (the caller's transaction).
        """
        if not self.files:
            return
        changed = [(t, f, n) for (t, f), n in self.delta.items() if n]
        conn.executemany("INSERT INTO term_df(term, field, df) VALUES (?, ?, ?) ON CONFLICT"
                         " (term, field) DO UPDATE SET df = df + excluded.df", changed)
        conn.executemany("DELETE FROM term_df WHERE term = ? AND field = ? AND df <= 0",
                         [(t, f) for t, f, n in changed if n < 0])
        conn.execute("INSERT INTO meta(key, value) VALUES ('code_generation', '1') ON CONFLICT"
                     " (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")
        self.delta.clear()
        self.files = 0


def apply_file(store: Store, conn: sqlite3.Connection, rec: FileRecord | FileRemoved,
               frequencies: DocumentFrequencies) -> None:
    """Replace the code rows of ``rec.path`` with what the winning record says.

    Args:
        store: The store (the ``file_version`` object and the file's blob are read).
        conn: The index connection (the caller's transaction).
        rec: The record that won the path's key.
        frequencies: Where the apply gathers the ``term_df`` changes (its ``flush`` writes them).
    """
    frequencies.files += 1
    _delete_path(conn, rec.path, frequencies)
    if isinstance(rec, FileRemoved):
        return
    fv = store.read_typed(ObjectId(rec.version), FileVersion)
    symbols = fv.symbols
    blob_hex = fv.blob_id.hex()
    file_id = conn.execute(
        "INSERT INTO files(path, version, blob, language, byte_count, line_count,"
        " complete, note, stamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (fv.path, rec.version, fv.blob_id, fv.language, fv.byte_count, fv.line_count,
         int(fv.complete), fv.note, rec.updated_at)).lastrowid
    conn.executemany(
        "INSERT INTO symbols(path, qualname, name, kind, visibility, parent, signature,"
        " start_byte, end_byte, start_line, end_line) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(fv.path, s.qualname, s.name, s.kind, s.visibility, s.parent, s.signature,
          s.start_byte, s.end_byte, s.start_line, s.end_line) for s in symbols])
    conn.executemany(
        "INSERT INTO code_edges(path, from_kind, from_key, to_kind, to_key, label, confidence,"
        " tool, evidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(fv.path, r.from_kind, r.from_key, r.to_kind, r.to_key, r.label, r.confidence, r.tool,
          _evidence(r, blob_hex)) for r in fv.relations])
    text = store.read_blob(ObjectId(fv.blob_id)).decode("utf-8", "replace")
    _file_terms(conn, int(file_id or 0), fv.path, text, frequencies)
    fts: list[tuple[int | None, str, str, str]] = []  # each field's terms (search.tokenize)
    path_text = index_text(fv.path)
    for chunk in chunk_file(text, symbols):
        cur = conn.execute("INSERT INTO chunks(path, qualname, kind, start_line, end_line, tokens,"
                           " text) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (fv.path, chunk.qualname, chunk.kind, chunk.start_line, chunk.end_line,
                            estimate_tokens(chunk.text), chunk.text))
        fts.append((cur.lastrowid, path_text, index_text(chunk.qualname or ""),
                    index_text(chunk.text)))
    conn.executemany("INSERT INTO chunks_fts(rowid, path, name, text) VALUES (?, ?, ?, ?)", fts)


def _evidence(r: CodeRelation, blob_hex: str) -> str:
    """The ``code_edges.evidence`` JSON of a relation, keys sorted.

    The same text as ``json.dumps({...}, sort_keys=True)`` of the map, built directly: one
    edge of a full index is otherwise a fresh encoder per edge (a quarter of an apply).
    """
    detail = f'"detail": {json.dumps(dict(r.detail), sort_keys=True)}, ' if r.detail else ""
    return (f'{{"blob": "{blob_hex}", "confidence": {json.dumps(r.confidence)}, {detail}'
            f'"lines": [{r.start_line}, {r.end_line}], "span": [{r.start_byte}, {r.end_byte}], '
            f'"target": {json.dumps(r.target)}, "tool": {json.dumps(r.tool)}}}')


def _file_terms(conn: sqlite3.Connection, file_id: int, path: str, text: str,
                frequencies: DocumentFrequencies) -> None:
    """The retrieval postings of one file: ``search.tokenize`` tokens of its text and its path."""
    body = term_counts(text)
    where = Counter(path_tokens(path))
    frequencies.delta.update(zip(body, repeat(0)))
    frequencies.delta.update(zip(where, repeat(1)))
    conn.execute("INSERT INTO file_lengths(file, body, path) VALUES (?, ?, ?)",
                 (file_id, sum(body.values()), sum(where.values())))
    conn.executemany("INSERT INTO file_terms(term, field, file, tf) VALUES (?, ?, ?, ?)",
                     [*((t, 0, file_id, n) for t, n in body.items()),
                      *((t, 1, file_id, n) for t, n in where.items())])


def _delete_path(conn: sqlite3.Connection, path: str, frequencies: DocumentFrequencies) -> None:
    frequencies.delta.subtract(conn.execute(
        "SELECT term, field FROM file_terms WHERE file IN (SELECT rowid FROM files WHERE path = ?)",
        (path,)).fetchall())
    for table in ("file_terms", "file_lengths"):
        conn.execute(f"DELETE FROM {table} WHERE file IN (SELECT rowid FROM files WHERE path = ?)",  # noqa: S608
                     (path,))
    conn.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE path = ?)",
                 (path,))
    for table in ("chunks", "code_edges", "symbols", "files"):
        conn.execute(f"DELETE FROM {table} WHERE path = ?", (path,))  # noqa: S608 - fixed names


def chunk_file(text: str, symbols: Sequence[CodeSymbol]) -> list[Chunk]:
    """Cut a file into retrieval chunks (see the module docstring).

    Args:
        text: The file's text.
        symbols: Its symbols, in order of appearance (none: line windows).

    Returns:
        The chunks in file order, the module header first.
    """
    lines = text.splitlines(keepends=True)
    if not lines:
        return []
    if not symbols:
        return [Chunk(None, "window", i + 1, min(i + WINDOW_LINES, len(lines)),
                      "".join(lines[i:i + WINDOW_LINES])) for i in range(0, len(lines), WINDOW_LINES)]
    modules = {s.qualname for s in symbols if s.kind == "module"}
    top = [s for s in symbols if s.kind != "module" and (s.parent is None or s.parent in modules)]
    covered = [False] * len(lines)
    out: list[Chunk] = []
    children_of: dict[str, list[CodeSymbol]] = {}  # once: a scan per symbol was quadratic
    for s in symbols:
        if s.parent is not None:
            children_of.setdefault(s.parent, []).append(s)

    def take(sym: CodeSymbol, start: int, end: int, kind: str) -> None:
        end = min(end, len(lines))
        for i in range(start - 1, end):
            covered[i] = True
        out.append(Chunk(sym.qualname, kind, start, end, "".join(lines[start - 1:end])))

    def place(sym: CodeSymbol) -> None:
        """One chunk for ``sym``, or, for a large container, its header and its children."""
        if sym.start_line > len(lines) or any(covered[sym.start_line - 1:sym.end_line]):
            return
        body = "".join(lines[sym.start_line - 1:sym.end_line])
        children = children_of.get(sym.qualname, [])
        if sym.kind in _CONTAINERS and children and estimate_tokens(body) > CLASS_SPLIT_TOKENS:
            first = min(c.start_line for c in children)
            if first > sym.start_line:
                take(sym, sym.start_line, first - 1, "header")
            for child in children:
                place(child)  # a large section's subsections split in turn
            for i in range(sym.start_line - 1, min(sym.end_line, len(lines))):
                covered[i] = True  # what lies between methods belongs to the class
        elif sym.kind == "heading" and estimate_tokens(body) > CLASS_SPLIT_TOKENS:
            # A long section with no subsections (a table, a log): its lines in windows.
            end = min(sym.end_line, len(lines))
            for start in range(sym.start_line, end + 1, WINDOW_LINES):
                take(sym, start, min(start + WINDOW_LINES - 1, end), sym.kind)
        else:
            take(sym, sym.start_line, sym.end_line, sym.kind)

    for sym in top:
        place(sym)
    rest = [i for i, c in enumerate(covered) if not c]
    header = "".join(lines[i] for i in rest)
    if header.strip():
        module = next(iter(sorted(modules)), None)
        out.insert(0, Chunk(module, "module", rest[0] + 1, rest[-1] + 1, header))
    out.sort(key=lambda c: (c.kind != "module", c.start_line))
    return out


# -- reads ------------------------------------------------------------------------------------

def _file_row(row: tuple[Any, ...]) -> FileRow:
    path, version, blob, language, byte_count, line_count, complete, note, stamp = row
    return FileRow(path, bytes(version), bytes(blob), language, int(byte_count), int(line_count),
                   bool(complete), note, int(stamp))


_FILE_COLUMNS = "path, version, blob, language, byte_count, line_count, complete, note, stamp"


def file_rows(conn: sqlite3.Connection, paths: Iterable[str] | None = None) -> dict[str, FileRow]:
    """Indexed files by path (all of them, or only ``paths``).

    Args:
        conn: A current index connection.
        paths: The paths wanted; None for every indexed file.

    Returns:
        The rows found, by path.
    """
    if paths is None:
        rows = conn.execute(f"SELECT {_FILE_COLUMNS} FROM files").fetchall()
    else:
        rows = []
        wanted = list(dict.fromkeys(paths))
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            rows += conn.execute(f"SELECT {_FILE_COLUMNS} FROM files WHERE path IN "
                                 f"({','.join('?' * len(part))})", part).fetchall()
    return {r.path: r for r in map(_file_row, rows)}


def file_row(conn: sqlite3.Connection, path: str) -> FileRow | None:
    """The indexed file at ``path``, or None."""
    return file_rows(conn, [path]).get(path)


def _hits(rows: Iterable[tuple[object, ...]]) -> list[SymbolHit]:
    return [SymbolHit(str(p), str(q), str(n), str(k), s if isinstance(s, int) else None,
                      e if isinstance(e, int) else None) for p, q, n, k, s, e in rows]


def symbols_by(conn: sqlite3.Connection, *, qualname: str | None = None,
               name: str | None = None, limit: int = 50) -> list[SymbolHit]:
    """Symbols with this qualified name, or with this bare name.

    Args:
        conn: A current index connection.
        qualname: The exact qualified name.
        name: The exact bare name (used when ``qualname`` is None).
        limit: At most this many.

    Returns:
        The symbols, by path and line.
    """
    column, value = ("qualname", qualname) if qualname is not None else ("name", name)
    return _hits(conn.execute(
        f"SELECT path, qualname, name, kind, start_line, end_line FROM symbols WHERE {column} = ?"
        " ORDER BY path, start_line LIMIT ?", (value, limit)).fetchall())


def symbols_in(conn: sqlite3.Connection, path: str) -> list[SymbolHit]:
    """Every symbol of one indexed file, in order."""
    return _hits(conn.execute(
        "SELECT path, qualname, name, kind, start_line, end_line FROM symbols WHERE path = ?"
        " ORDER BY start_line, rowid", (path,)).fetchall())


def task_node_ids(conn: sqlite3.Connection, number: str) -> list[str]:
    """Ids of the live task nodes with this task number (``ctx relate task_004312 ...``)."""
    return [str(r[0]) for r in conn.execute(
        "SELECT id FROM nodes WHERE type = 'task' AND json_extract(metadata, '$.task_number') = ?"
        " ORDER BY id", (number,)).fetchall()]
