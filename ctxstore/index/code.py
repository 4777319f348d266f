"""Code rows of the index: files, symbols, code_edges, chunks, chunks_fts, file_terms.

They live in this clone's ``code.sqlite`` (``index.codedb``), derived from the work tree by
``ctx index`` and ``ctx add file``, which write them here directly: ``apply_version`` replaces
the rows of one path with what its ``file_version`` says (the version need not be an object:
its id is the hash of its encoding), ``remove_path`` deletes them. ``file_terms`` and
``file_lengths`` are the retrieval postings of each file: its ``search.tokenize`` tokens (body and
path) with their counts, read by ``ctx pack``. ``term_df`` counts the files of each term: a
run gathers the changes in a ``DocumentFrequencies`` and writes them once (``flush``), one row
per term it touched, and bumps ``code_meta`` ``generation`` (which invalidates
``corpus_cache``). ``code_edges.path`` is the file whose version produced the edge. The
SELECTs the code layer needs (``file_rows``, ``stat_rows``, ``symbols_by``) live here too:
SQL stays in ``index/``.

How a file is cut into chunks is ``index.chunks`` (re-exported here).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

from ctxstore.errors import IndexCorrupt
from ctxstore.index.chunks import CLASS_SPLIT_TOKENS, WINDOW_LINES, Chunk, chunk_file, pack_text
from ctxstore.index.code_ids import (
    drop_unused_keys,
    edge_kind,
    file_postings,
    key_id,
    parent_columns,
    term_ids,
)
from ctxstore.index.codedb import bump_generation, key_hash
from ctxstore.index.listing import ListingState, listing_state, set_listing_state
from ctxstore.index.postings import BODY, PATH, pack_postings
from ctxstore.model.code import FileVersion
from ctxstore.records import dataclass
from ctxstore.search.tokenize import index_text, path_tokens, term_counts
from ctxstore.tokens import estimate_tokens

__all__ = ["DocumentFrequencies", "FileRow", "FileRows", "StatRow", "SymbolHit", "Chunk",
           "apply_version", "apply_rows", "prepare_rows", "recount_term_df", "replace_file_sccs",
           "clear_code_rows", "mark_file_sccs_current",
           "remove_path", "set_stat", "set_skipped", "file_rows", "file_row", "stat_rows",
           "IndexedPaths", "indexed_paths",
           "snapshot_heads", "import_shape", "names_imported",
           "skipped_rows", "symbols_by", "symbols_in", "task_node_ids", "chunk_file",
           "ListingState", "listing_state", "set_listing_state",
           "WINDOW_LINES", "CLASS_SPLIT_TOKENS"]


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


class DocumentFrequencies:
    """Changes to ``term_df`` gathered over one apply, written by ``flush``.

    A full index touches each term in thousands of files: counting in memory and writing
    one row per term costs what the vocabulary costs, not what every posting does.
    """

    __slots__ = ("delta", "edge_kinds", "files", "keys", "released", "terms")

    def __init__(self) -> None:
        self.delta: Counter[tuple[int, int]] = Counter()  # (terms id, field) -> change of df
        self.terms: dict[str, int] = {}  # terms ids by term, looked up or made by this apply
        self.files = 0
        # code_keys ids looked up or made by this apply; ids whose edges were deleted (a key
        # no edge names any more leaves code_keys at ``flush``)
        self.keys: dict[tuple[str, str], int] = {}
        self.released: set[int] = set()
        # code_edge_kinds ids by (label, confidence, tool): a handful, never deleted
        self.edge_kinds: dict[tuple[str, str, str], int] = {}

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write the gathered counts and bump the code generation (when a file changed).

        Args:
            conn: The index connection (the caller's transaction on the code tables).
        """
        if not self.files:
            return
        self.edge_kinds.clear()  # ids of a transaction that may not commit
        if self.released:
            drop_unused_keys(conn, self.released)
            self.released.clear()
            self.keys.clear()
        changed = [(t, f, n) for (t, f), n in self.delta.items() if n]
        conn.executemany("INSERT INTO term_df_rows(term, field, df) VALUES (?, ?, ?) ON CONFLICT"
                         " (term, field) DO UPDATE SET df = df + excluded.df", changed)
        fewer = [(t, f) for t, f, n in changed if n < 0]
        if fewer:
            conn.executemany("DELETE FROM term_df_rows WHERE term = ? AND field = ? AND df <= 0",
                             fewer)
            # a term in no file's postings any more leaves terms
            conn.executemany("DELETE FROM terms WHERE id = ? AND NOT EXISTS (SELECT 1 FROM"
                             " term_df_rows WHERE term = ?)",
                             [(t, t) for t in dict.fromkeys(t for t, _ in fewer)])
            self.terms.clear()
        bump_generation(conn)
        self.delta.clear()
        self.files = 0


@dataclass(frozen=True, slots=True)
class FileRows:
    """The code rows of one file, ready to insert (``prepare_rows``; ``apply_rows`` writes them).

    Built where the file was extracted (a forked worker of ``ctx index``): chunking, the
    retrieval tokens and the edges' evidence cost more than the inserts, and run there in
    parallel. Only plain tuples, so a worker sends them back cheaply.
    """

    path: str
    version: bytes
    blob: bytes
    language: str | None
    byte_count: int
    line_count: int
    complete: bool
    note: str | None
    symbols: list[tuple[Any, ...]]
    # (from_kind, from_key, to_kind, to_key, label, confidence, tool, line)
    edges: list[tuple[Any, ...]]
    # (qualname, kind, start_line, end_line, tokens, spans, name terms, text terms): the
    # full-text fields hold the terms of ``search.tokenize`` (``index_text``)
    chunks: list[tuple[Any, ...]]
    body_terms: dict[str, int]
    path_terms: dict[str, int]
    text: bytes  # the file's text as ``file_text`` keeps it (``index.chunks.pack_text``)


def prepare_rows(fv: FileVersion, text: str, version: bytes) -> FileRows:
    """The rows of a file's version (pure: no SQL).

    Args:
        fv: The file's version (symbols, relations).
        text: The file's text, as its blob holds it.
        version: The version's id (the hash of its encoding).

    Returns:
        The rows.
    """
    symbols = fv.symbols
    chunks = []
    for chunk in chunk_file(text, symbols):
        chunks.append((chunk.qualname, chunk.kind, chunk.start_line, chunk.end_line,
                       estimate_tokens(chunk.text), chunk.spans, index_text(chunk.qualname or ""),
                       index_text(chunk.text)))
    return FileRows(
        fv.path, bytes(version), bytes(fv.blob_id), fv.language, fv.byte_count, fv.line_count,
        fv.complete, fv.note,
        [(fv.path, s.qualname, s.name, s.kind, s.visibility, s.parent, s.signature,
          s.start_byte, s.end_byte, s.start_line, s.end_line) for s in symbols],
        [(r.from_kind, r.from_key, r.to_kind, r.to_key, r.label, r.confidence, r.tool,
          r.start_line) for r in fv.relations],
        chunks, dict(term_counts(text)), dict(Counter(path_tokens(fv.path))),
        pack_text(text) if chunks else b"")


def apply_version(conn: sqlite3.Connection, fv: FileVersion, text: str, *, version: bytes,
                  stamp: int, frequencies: DocumentFrequencies, size: int | None = None,
                  mtime_ns: int | None = None, module: str = "", named: bool = False) -> None:
    """Replace the code rows of ``fv.path`` with what the version says (``apply_rows``)."""
    apply_rows(conn, prepare_rows(fv, text, version), stamp=stamp, frequencies=frequencies,
               size=size, mtime_ns=mtime_ns, module=module, named=named)


def apply_rows(conn: sqlite3.Connection, rows: FileRows, *, stamp: int,
               frequencies: DocumentFrequencies, size: int | None = None,
               mtime_ns: int | None = None, module: str = "", named: bool = False) -> None:
    """Replace the code rows of ``rows.path`` with ``rows``.

    Args:
        conn: The index connection (the caller's transaction on the code tables).
        rows: The file's rows (``prepare_rows``).
        stamp: When it was indexed (ms).
        frequencies: Where the ``term_df`` changes are gathered (its ``flush`` writes them).
        size: The file's size for the stat cache (None: read it again next run).
        mtime_ns: Its modification time for the stat cache.
        module: The module name the extractors give the path ("" none).
        named: Added by name (``ctx add file``): kept while it exists.
    """
    path = rows.path
    remove_path(conn, path, frequencies)
    file_id = int(conn.execute(
        "INSERT INTO files(path, version, blob, language, byte_count, line_count, complete,"
        " note, stamp, size, mtime_ns, module, named) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
        " ?, ?)",
        (path, rows.version, rows.blob, rows.language, rows.byte_count, rows.line_count,
         int(rows.complete), rows.note, stamp, size, mtime_ns, module, int(named))).lastrowid
        or 0)
    keys, kinds = frequencies.keys, frequencies.edge_kinds
    conn.executemany(
        "INSERT INTO symbol_rows(file, qualname, name, kind, visibility, parent_len, parent,"
        " signature, start_byte, end_byte, start_line, end_line)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(file_id, key_id(conn, keys, "module" if kind == "module" else "item", qualname),
          name, kind, visibility, *parent_columns(qualname, parent), *rest)
         for _, qualname, name, kind, visibility, parent, *rest in rows.symbols])
    conn.executemany(
        "INSERT INTO code_edge_rows(file, seq, src, dst, kind, line) VALUES (?, ?, ?, ?, ?, ?)",
        [(file_id, seq, key_id(conn, keys, fk, fkey), key_id(conn, keys, tk, tkey),
          edge_kind(conn, kinds, label, conf, tool), line)
         for seq, (fk, fkey, tk, tkey, label, conf, tool, line) in enumerate(rows.edges)])
    body, where = rows.body_terms, rows.path_terms
    ids = term_ids(conn, frequencies.terms, [*body, *where])
    frequencies.delta.update(zip(map(ids.__getitem__, body), repeat(0)))
    frequencies.delta.update(zip(map(ids.__getitem__, where), repeat(1)))
    conn.execute("INSERT INTO file_lengths(file, body, path) VALUES (?, ?, ?)",
                 (file_id, sum(body.values()), sum(where.values())))
    body_ids = {ids[t]: n for t, n in body.items()}
    path_ids = {ids[t]: n for t, n in where.items()}
    conn.executemany("INSERT INTO file_term_rows(term, field, file, tf) VALUES (?, ?, ?, ?)",
                     [*((t, BODY, file_id, n) for t, n in body_ids.items()),
                      *((t, PATH, file_id, n) for t, n in path_ids.items())])
    conn.execute("INSERT INTO file_postings(file, data) VALUES (?, ?)",
                 (file_id, pack_postings(body_ids, path_ids)))
    fts: list[tuple[int | None, str, str, str]] = []  # each field's terms (search.tokenize)
    path_text = index_text(path)
    if rows.chunks:
        conn.execute("INSERT INTO file_text(file, data) VALUES (?, ?)", (file_id, rows.text))
    # a chunk names its qualified name by the file's symbol of that name (the first)
    by_name = {} if not rows.chunks or not rows.symbols else _symbols_by_name(conn, file_id)
    for qualname, kind, start, end, tokens, spans, name_terms, text_terms in rows.chunks:
        symbol = by_name.get(qualname) if qualname is not None else None
        cur = conn.execute("INSERT INTO chunk_rows(file, symbol, qualname, kind, start_line,"
                           " end_line, tokens, spans) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (file_id, symbol, None if symbol is not None else qualname, kind,
                            start, end, tokens, spans))
        fts.append((cur.lastrowid, path_text, name_terms, text_terms))
    conn.executemany("INSERT INTO chunks_fts(rowid, path, name, text) VALUES (?, ?, ?, ?)", fts)
    conn.execute("DELETE FROM skipped WHERE path = ?", (path,))


def _symbols_by_name(conn: sqlite3.Connection, file_id: int) -> dict[str, int]:
    """The ``symbol_rows`` rowid of each qualified name of one file's symbols (the first)."""
    named: dict[str, int] = {}
    for rowid, qualname in conn.execute(
            "SELECT s.rowid, q.key FROM symbol_rows s JOIN code_keys q ON q.id = s.qualname"
            " WHERE s.file = ? ORDER BY s.rowid", (file_id,)):
        named.setdefault(str(qualname), int(rowid))
    return named


def remove_path(conn: sqlite3.Connection, path: str, frequencies: DocumentFrequencies) -> None:
    """Delete every code row of ``path`` (inside the caller's transaction)."""
    frequencies.files += 1
    _delete_path(conn, path, frequencies)


def set_stat(conn: sqlite3.Connection, path: str, size: int | None, mtime_ns: int | None) -> None:
    """Record an indexed file's size and modification time (None: read it again next run)."""
    conn.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))


def set_skipped(conn: sqlite3.Connection, path: str, size: int | None, mtime_ns: int | None
                ) -> None:
    """Remember a file read and not indexed (binary, not UTF-8); None forgets it."""
    if size is None or mtime_ns is None:
        conn.execute("DELETE FROM skipped WHERE path = ?", (path,))
    else:
        conn.execute("INSERT OR REPLACE INTO skipped(path, size, mtime_ns) VALUES (?, ?, ?)",
                     (path, size, mtime_ns))


def _delete_path(conn: sqlite3.Connection, path: str, frequencies: DocumentFrequencies) -> None:
    found = file_postings(conn, path)
    if found is not None:
        file_id, pairs = found
        frequencies.delta.subtract(pairs)
        conn.executemany("DELETE FROM file_term_rows WHERE term = ? AND field = ? AND file = ?",
                         [(t, f, file_id) for t, f in pairs])
        for table in ("file_postings", "file_lengths"):
            conn.execute(f"DELETE FROM {table} WHERE file = ?", (file_id,))  # noqa: S608
    # chunks_fts is contentless: a document goes by the 'delete' command with the very terms
    # it was indexed with, made again from its chunk (the tokeniser is deterministic).
    path_text = index_text(path)
    try:
        old = conn.execute("SELECT rowid, qualname, text FROM chunks WHERE path = ?",
                           (path,)).fetchall()
    except (sqlite3.OperationalError, IndexCorrupt) as exc:  # a file_text row that does not decompress
        raise IndexCorrupt(f"the indexed text of {path} is unreadable ({exc})",
                           in_code_index=True) from exc
    conn.executemany(
        "INSERT INTO chunks_fts(chunks_fts, rowid, path, name, text) VALUES ('delete', ?, ?, ?, ?)",
        [(rowid, path_text, index_text(qualname or ""), index_text(text))
         for rowid, qualname, text in old])
    file_ids = "SELECT rowid FROM files WHERE path = ?"
    for src, dst in conn.execute(f"SELECT src, dst FROM code_edge_rows WHERE file IN ({file_ids})",  # noqa: S608
                                 (path,)):
        frequencies.released.update(k for k in (src, dst) if k is not None)
    frequencies.released.update(k for (k,) in conn.execute(
        f"SELECT qualname FROM symbol_rows WHERE file IN ({file_ids})", (path,)))  # noqa: S608
    for table in ("code_edge_rows", "chunk_rows", "file_text", "symbol_rows"):
        conn.execute(f"DELETE FROM {table} WHERE file IN ({file_ids})", (path,))  # noqa: S608
    conn.execute("DELETE FROM files WHERE path = ?", (path,))


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


@dataclass(frozen=True, slots=True)
class StatRow:
    """What a run needs of an indexed file: its content ids, stat cache and module name."""

    version: bytes
    blob: bytes
    note: str | None
    stamp: int
    size: int | None
    mtime_ns: int | None
    module: str | None
    named: bool


_STAT_COLUMNS = "path, version, blob, note, stamp, size, mtime_ns, module, named"


def stat_rows(conn: sqlite3.Connection, paths: Iterable[str] | None = None) -> dict[str, StatRow]:
    """The ``StatRow`` of every indexed file (or of those of ``paths`` that are), by path."""
    if paths is None:  # fetchall: one call, not 10,000
        rows = conn.execute(f"SELECT {_STAT_COLUMNS} FROM files").fetchall()  # noqa: S608
    else:
        rows = []
        wanted = list(dict.fromkeys(paths))
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            rows += conn.execute(f"SELECT {_STAT_COLUMNS} FROM files WHERE path IN "  # noqa: S608
                                 f"({','.join('?' * len(part))})", part).fetchall()
    return {str(p): StatRow(bytes(v), bytes(b), n, int(st), sz, mt, mod, bool(nm))
            for p, v, b, n, st, sz, mt, mod, nm in rows}


@dataclass(frozen=True, slots=True)
class IndexedPaths:
    """What a run needs of every indexed file without its ``StatRow`` (``indexed_paths``).

    A run over the whole tree that Git says changed in one file reads the stat rows of the
    files it looks at only (building 10,000 of them cost about 25 ms of CPU).

    Attributes:
        modules: Path -> module name, for every indexed path (None: not recorded).
        named: The paths added by name (``ctx add file``).
        look: The paths a run looks at whatever Git says: the stat cache does not vouch for
            them (a racy time), they were added by name, or indexed without semantics.
    """

    modules: dict[str, str | None]
    named: frozenset[str]
    look: frozenset[str]


def indexed_paths(conn: sqlite3.Connection, no_semantics: str) -> IndexedPaths:
    """Every indexed path with its module name, and which are ``named`` and ``look``.

    Args:
        conn: A current index connection.
        no_semantics: The ``note`` of a file indexed without semantics.
    """
    modules: dict[str, str | None] = {}
    named: list[str] = []
    look: list[str] = []
    for path, module, flags in conn.execute(
            "SELECT path, module, named + 2 * (size IS NULL OR named OR note IS ?) FROM files",
            (no_semantics,)).fetchall():
        modules[path] = module
        if flags:
            if flags & 1:
                named.append(path)
            if flags & 2:
                look.append(path)
    return IndexedPaths(modules, frozenset(named), frozenset(look))


SnapshotHead = tuple[bytes, int, bytes | None, bytes | None, bytes]


def snapshot_heads(conn: sqlite3.Connection, paths: Iterable[str]) -> dict[str, SnapshotHead]:
    """The newest ``file`` record (a ``ctx add file`` snapshot) of each path.

    From the knowledge index (``winners``, ``versions``), not the code tables: a snapshot is
    history. Each is (the record's version id, its stamp, the ``file_version`` it names, the
    content blob it names, the change batch carrying it).
    """
    from ctxstore.model import codec
    from ctxstore.model.knowledge import key_text  # a snapshot's (ctx add file) only

    out: dict[str, SnapshotHead] = {}
    for path in paths:
        key = key_text(("file", path))
        row = conn.execute("SELECT version, stamp, live FROM winners WHERE key = ?",
                           (key,)).fetchone()
        if row is None or not row[2]:
            continue
        rec = conn.execute("SELECT record, batch FROM versions WHERE key = ? AND version = ?",
                           (key, row[0])).fetchone()
        wire = codec.decode(bytes(rec[0])) if rec is not None else {}
        named, blob = wire.get("version"), wire.get("blob")
        out[path] = (bytes(row[0]), int(row[1]), bytes(named) if named is not None else None,
                     bytes(blob) if blob is not None else None,
                     bytes(rec[1]) if rec is not None else b"")
    return out


def import_shape(conn: sqlite3.Connection, path: str) -> tuple[frozenset[tuple[str, str]],
                                                               frozenset[str]]:
    """What of one indexed file the import graph between files depends on.

    Returns:
        Its ``Imports`` targets ``(kind, key)`` and its symbols' qualified names (empty
        when the file is not indexed).
    """
    targets = frozenset((str(k), str(v)) for k, v in conn.execute(
        "SELECT to_kind, to_key FROM code_edges WHERE path = ? AND label = 'Imports'", (path,)))
    names = frozenset(str(q) for (q,) in conn.execute(
        "SELECT qualname FROM symbols WHERE path = ?", (path,)))
    return targets, names


def names_imported(conn: sqlite3.Connection, names: Iterable[str]) -> bool:
    """Whether an indexed file imports one of ``names`` (qualified names) by name."""
    wanted = list(dict.fromkeys(names))
    for start in range(0, len(wanted), 500):
        part = wanted[start:start + 500]
        marks = ",".join("?" * len(part))  # found by the keys' hashes, then their text
        if conn.execute(f"SELECT 1 FROM code_edges WHERE to_kind = 'item' AND label = 'Imports'"  # noqa: S608
                        f" AND to_hash IN ({marks}) AND to_key IN ({marks}) LIMIT 1",
                        [*(key_hash(k) for k in part), *part]).fetchone():
            return True
    return False


def skipped_rows(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """Files read and not indexed, by path: (size, mtime_ns) when they were read."""
    return {str(p): (int(s), int(m)) for p, s, m in conn.execute(
        "SELECT path, size, mtime_ns FROM skipped")}


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
    args: tuple[object, ...]
    if qualname is not None:  # found by the key's hash, then its text
        where, args = "qualname_hash = ? AND qualname = ?", (key_hash(qualname), qualname)
    else:
        where, args = "name = ?", (name,)
    return _hits(conn.execute(
        f"SELECT path, qualname, name, kind, start_line, end_line FROM symbols WHERE {where}"  # noqa: S608
        " ORDER BY path, start_line LIMIT ?", (*args, limit)).fetchall())


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


def replace_file_sccs(conn: sqlite3.Connection, components: Sequence[Sequence[str]]) -> None:
    """Replace ``file_sccs`` with ``components`` (one id each), in one write of the code tables.

    Records the code generation they were computed at (``code_meta`` ``sccs``).
    """
    from ctxstore.index import codedb

    with codedb.write(conn, "code"):
        conn.execute("DELETE FROM file_sccs")
        conn.executemany("INSERT INTO file_sccs(path, scc) VALUES (?, ?)",
                         [(path, n) for n, comp in enumerate(components) for path in comp])
        codedb.set_meta(conn, "sccs", codedb.generation(conn))


def recount_term_df(conn: sqlite3.Connection) -> None:
    """Count ``term_df`` again from ``file_terms``, dropping terms in no posting (in a transaction)."""
    conn.execute("DELETE FROM term_df_rows")
    conn.execute("INSERT INTO term_df_rows(term, field, df) SELECT term, field, count(*)"
                 " FROM file_term_rows GROUP BY term, field")
    conn.execute("DELETE FROM terms WHERE id NOT IN (SELECT term FROM term_df_rows)")
    bump_generation(conn)


def clear_code_rows(conn: sqlite3.Connection) -> None:
    """Delete every row of the code tables but ``code_meta`` (inside the caller's transaction)."""
    from ctxstore.index.codedb import CODE_TABLES

    for table in CODE_TABLES:
        if table == "chunks_fts":  # contentless: no DELETE, one command empties it
            conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")
        elif table != "code_meta":
            conn.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed names
    bump_generation(conn)


def mark_file_sccs_current(conn: sqlite3.Connection) -> None:
    """Record ``file_sccs`` as current at this generation (the import graph did not change)."""
    from ctxstore.index import codedb

    with codedb.write(conn, "code"):
        codedb.set_meta(conn, "sccs", codedb.generation(conn))
