"""The code index of this clone's work tree: ``.ctx/index/code.sqlite``, attached as ``code``.

The derived index has two SQLite files with two sources:

- ``index.sqlite`` is derived from the objects (knowledge, history, build records): the same
  in every clone that has the same commits, rebuilt by ``ctx rebuild``;
- ``code.sqlite`` is derived from this clone's work tree by ``ctx index`` (files, symbols,
  code edges, chunks and their full-text and ranking postings, the import cycles the packs
  read): nothing of it is an object, nothing of it enters Git (DESIGN §5). It survives
  ``ctx rebuild --full`` (which recreates ``index.sqlite``) and is brought up to date with
  the work tree by the next ``ctx index``; a damaged or outdated one is dropped and rebuilt
  by ``ctx index``.

Every index connection attaches ``code.sqlite`` as the schema ``code``; its tables' names
are not in ``main``, so every query names them unqualified, joins across the two included.
A write transaction on one file must not lock the other (``ctx index`` writes the code
tables for seconds while a hook catches up the knowledge index): ``BEGIN IMMEDIATE`` would
take both, so ``write`` begins a deferred transaction and takes the one file's write lock
with a statement that changes nothing.

It must not print. SQL lives here and in the other modules of ``index/``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore import sqlite as db
from ctxstore.errors import CtxError
from ctxstore.index.schema import SchemaRow, schema_digest

__all__ = ["CODE_FILE", "CODE_SCHEMA", "CODE_SCHEMA_VERSION", "CODE_TABLES", "CODE_LOCK",
           "EXPECTED_CODE_DIGEST", "attach", "begin", "bump_generation", "commit", "rollback", "code_schema",
           "drop_code_files", "expected_code_schema", "generation", "generation_of", "inspect_code",
           "irregular_code_files", "key_hash", "meta_value", "read_code_schema", "register_functions",
           "set_meta",
           "write"]

CODE_FILE = "code.sqlite"
CODE_DAMAGE_MARKER = "code.sqlite-damaged"  # left by a read that met damage: the next open drops
CODE_LOCK = "code.lock"  # one `ctx index` (or `ctx add file`) writes the code tables at a time
# 1: the code tables move out of index.sqlite (issue 30): per clone, from the work tree; the
#    stat cache (size, mtime_ns), the module name and ``named`` on ``files``; ``skipped``;
#    ``code_meta`` (``generation``, ``fingerprint``); ``file_sccs`` (import cycles)
# 2: code edges as integers naming ``code_keys`` (``code_edge_rows``) behind the view
#    ``code_edges``; the line of an edge instead of a JSON copy of its evidence (the index
#    was 11.7x the tree it covers, more than half of it code edges)
# 3: ``chunks_fts`` contentless (``content=''``): it keeps the postings, not a second copy of
#    every chunk's terms (118 MB of 603 MB at 10,000 files); a chunk's terms are made again
#    from its ``chunks`` row to delete it (``index.code``)
# 4: a chunk's text is no longer stored with it: each file's text once, zlib-compressed
#    (``file_text``), and each chunk's lines in it (``chunk_rows``) behind the view ``chunks``,
#    whose text ``ctx_chunk_text`` cuts out again (123 MB of chunk text at 10,000 files, the
#    largest table, for a tree of 97.5 MB)
# 5: symbols name their file by ``files.rowid`` (``symbol_rows``) behind the view ``symbols``,
#    indexed by file instead of (path, kind, qualname), and by qualname alone (92 MB of
#    symbols and their indexes at 10,000 files, half of it the path repeated)
# 6: an edge's label, confidence and tool as one small integer naming ``code_edge_kinds``
#    (85 MB of edges and their three indexes at 10,000 files, 18 bytes a row of repeated
#    strings among eight distinct triples)
# 7: the retrieval postings name their terms by integer ids (``terms``): ``file_term_rows``
#    and ``term_df_rows`` behind the views ``file_terms`` and ``term_df`` (each term's text
#    was repeated in every posting, in the postings' file index and in ``term_df``)
# 8: no index of the postings by file: each file's postings once more, file-major, in one
#    compressed value (``file_postings``, ``index.postings``), which deleting a file, Tantivy's
#    copy and the explained hits read (the index was 26.5 MB at 10,000 files, the values 5 MB)
# 9: a symbol names its qualified name by its endpoint's ``code_keys`` id and its parent by
#    the length of that prefix (the text of every qualified name was in ``symbol_rows``, its
#    qualname index and ``code_keys``, 31 MB at 10,000 files, and each parent's once more)
# 10: code edges kept by (file, seq) (``WITHOUT ROWID``) instead of by rowid with an index by
#    file: the rows of a file are the table's own order (the index was 11.6 MB at 10,000 files)
# 11: ``code_keys`` found by a 64-bit hash of the key's text (``key_hash``, indexed) instead of
#    a unique index on (key, kind), which held every key's text a second time (19 MB at
#    10,000 files); the views give the hash beside each key (``qualname_hash``,
#    ``from_hash``, ``to_hash``) and a reader by key compares the text after the lookup
# 12: a chunk names its qualified name by its file's symbol of that name (``chunk_rows.symbol``)
#    instead of holding its text (6.1 MB of names in 9.4 MB of chunk rows at 10,000 files)
CODE_SCHEMA_VERSION = 12

CODE_SCHEMA = """
CREATE TABLE IF NOT EXISTS {s}code_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- size and mtime_ns: the stat cache (NULL: read again by the next run); module: the module
-- name the extractors give the path ('' none); named: added by name (ctx add file), kept
-- while the file exists even where ctx index does not list it
CREATE TABLE IF NOT EXISTS {s}files (
    path TEXT PRIMARY KEY, version BLOB NOT NULL, blob BLOB NOT NULL, language TEXT,
    byte_count INTEGER NOT NULL, line_count INTEGER NOT NULL, complete INTEGER NOT NULL,
    note TEXT, stamp INTEGER NOT NULL, size INTEGER, mtime_ns INTEGER, module TEXT,
    named INTEGER NOT NULL DEFAULT 0
);
-- files read and not indexed (binary, not UTF-8): not read again while size and mtime hold
CREATE TABLE IF NOT EXISTS {s}skipped (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL
) WITHOUT ROWID;
-- symbols: each file's by its files.rowid (symbol_rows), its qualified name by the code_keys
-- id of its endpoint (module or item, the one its Contains edge names), its parent by the
-- length of the qualified name's prefix it is (parent_len; parent only when it is no
-- prefix); symbols the view every reader queries
CREATE TABLE IF NOT EXISTS {s}symbol_rows (
    rowid INTEGER PRIMARY KEY, file INTEGER NOT NULL, qualname INTEGER NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, visibility TEXT, parent_len INTEGER, parent TEXT,
    signature TEXT, start_byte INTEGER, end_byte INTEGER, start_line INTEGER, end_line INTEGER
);
CREATE INDEX IF NOT EXISTS {s}symbol_rows_file ON symbol_rows(file);
CREATE INDEX IF NOT EXISTS {s}symbol_rows_name ON symbol_rows(name);
CREATE INDEX IF NOT EXISTS {s}symbol_rows_qualname ON symbol_rows(qualname);
CREATE VIEW IF NOT EXISTS {s}symbols(rowid, path, qualname, name, kind, visibility, parent,
    signature, start_byte, end_byte, start_line, end_line, qualname_hash) AS
    SELECT s.rowid, f.path, q.key, s.name, s.kind, s.visibility,
        CASE WHEN s.parent_len IS NULL THEN s.parent ELSE substr(q.key, 1, s.parent_len) END,
        s.signature, s.start_byte, s.end_byte, s.start_line, s.end_line, q.hash
    FROM symbol_rows s JOIN files f ON f.rowid = s.file JOIN code_keys q ON q.id = s.qualname;
-- code edges (index.code): each endpoint (kind, key) once in code_keys (which symbols name
-- too), found by key_hash(key) (hash; a reader compares the key's text too), each (label,
-- confidence, tool) once in code_edge_kinds, each edge a row of small integers naming them
-- (file = files.rowid, the file whose version produced it; seq its place among the file's
-- edges: the rows are kept by file, so no index by file is needed), and its line;
-- code_edges is the view every reader queries
CREATE TABLE IF NOT EXISTS {s}code_keys (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, hash INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS {s}code_keys_hash ON code_keys(hash);
CREATE TABLE IF NOT EXISTS {s}code_edge_kinds (
    id INTEGER PRIMARY KEY, label TEXT NOT NULL, confidence TEXT NOT NULL, tool TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS {s}code_edge_kinds_key
    ON code_edge_kinds(label, confidence, tool);
CREATE TABLE IF NOT EXISTS {s}code_edge_rows (
    file INTEGER NOT NULL, seq INTEGER NOT NULL, src INTEGER, dst INTEGER,
    kind INTEGER NOT NULL, line INTEGER, PRIMARY KEY (file, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {s}code_edge_rows_src ON code_edge_rows(src, kind);
CREATE INDEX IF NOT EXISTS {s}code_edge_rows_dst ON code_edge_rows(dst, kind);
CREATE VIEW IF NOT EXISTS {s}code_edges(path, from_kind, from_key, to_kind, to_key, label,
    confidence, tool, line, from_hash, to_hash) AS
    SELECT f.path, a.kind, a.key, b.kind, b.key, k.label, k.confidence, k.tool, e.line, a.hash,
        b.hash
    FROM code_edge_rows e JOIN files f ON f.rowid = e.file
    JOIN code_edge_kinds k ON k.id = e.kind
    LEFT JOIN code_keys a ON a.id = e.src LEFT JOIN code_keys b ON b.id = e.dst;
-- chunks (index.chunks): each file's text once, compressed (file_text, file = files.rowid), and
-- each chunk as its lines in it (spans: the lines when not all of start_line..end_line), its
-- qualified name that of its file's symbol_rows row ``symbol`` (qualname: a name no symbol of
-- the file has); chunks is the view every reader queries, its text made again by ctx_chunk_text
CREATE TABLE IF NOT EXISTS {s}file_text (file INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS {s}chunk_rows (
    rowid INTEGER PRIMARY KEY, file INTEGER NOT NULL, symbol INTEGER, qualname TEXT,
    kind TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    tokens INTEGER NOT NULL, spans TEXT
);
CREATE INDEX IF NOT EXISTS {s}chunk_rows_file ON chunk_rows(file);
CREATE VIEW IF NOT EXISTS {s}chunks(rowid, path, qualname, kind, start_line, end_line, tokens,
    text) AS
    SELECT c.rowid, f.path, coalesce(q.key, c.qualname), c.kind, c.start_line, c.end_line,
        c.tokens, ctx_chunk_text(t.data, f.byte_count, c.start_line, c.end_line, c.spans)
    FROM chunk_rows c JOIN files f ON f.rowid = c.file JOIN file_text t ON t.file = c.file
    LEFT JOIN symbol_rows s ON s.rowid = c.symbol LEFT JOIN code_keys q ON q.id = s.qualname;
CREATE VIRTUAL TABLE IF NOT EXISTS {s}chunks_fts USING fts5(path, name, text, content = '',
    tokenize = "ascii tokenchars '_'");
-- retrieval postings (index.code, index.retrieval): search.tokenize tokens per file; field 0 the
-- body, 1 the path's directories and stem; file = files.rowid; each term once in terms, the
-- postings and counts by its id (file_term_rows, term_df_rows); file_terms and term_df are the
-- views every reader queries. A term leaves terms with its last posting. file_postings: each
-- file's postings file-major in one value (index.postings), for reads by file.
CREATE TABLE IF NOT EXISTS {s}terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS {s}terms_term ON terms(term);
CREATE TABLE IF NOT EXISTS {s}file_term_rows (
    term INTEGER NOT NULL, field INTEGER NOT NULL, file INTEGER NOT NULL, tf INTEGER NOT NULL,
    PRIMARY KEY (term, field, file)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {s}file_postings (file INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE VIEW IF NOT EXISTS {s}file_terms(term, field, file, tf) AS
    SELECT t.term, r.field, r.file, r.tf FROM file_term_rows r JOIN terms t ON t.id = r.term;
CREATE TABLE IF NOT EXISTS {s}file_lengths (
    file INTEGER PRIMARY KEY, body INTEGER NOT NULL, path INTEGER NOT NULL
);
-- in how many files each (term, field) of file_terms occurs: kept by index.code with every
-- file applied, so a query learns its terms' rarity without counting their postings
CREATE TABLE IF NOT EXISTS {s}term_df_rows (
    term INTEGER NOT NULL, field INTEGER NOT NULL, df INTEGER NOT NULL, PRIMARY KEY (term, field)
) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS {s}term_df(term, field, df) AS
    SELECT t.term, d.field, d.df FROM term_df_rows d JOIN terms t ON t.id = d.term;
-- index.retrieval.file_corpus: every file's id, path and lengths, split by language, and
-- which files are tests, in one packed value, valid while code_meta 'generation' (bumped by
-- every change of the code tables) equals its own
CREATE TABLE IF NOT EXISTS {s}corpus_cache (
    name TEXT PRIMARY KEY, generation TEXT NOT NULL, data BLOB NOT NULL
) WITHOUT ROWID;
-- files in an import cycle with other files (graph.cycles): one id per strongly connected
-- component of the import graph between files; files in none are not listed
CREATE TABLE IF NOT EXISTS {s}file_sccs (
    path TEXT PRIMARY KEY, scc INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {s}file_sccs_scc ON file_sccs(scc, path);
"""

CODE_TABLES = ("code_meta", "files", "skipped", "symbol_rows", "code_keys", "code_edge_kinds",
               "code_edge_rows", "file_text", "chunk_rows", "chunks_fts", "terms", "file_term_rows",
               "file_postings", "file_lengths", "term_df_rows", "corpus_cache", "file_sccs")

_expected: frozenset[SchemaRow] | None = None
# Keys of code_meta: 'generation' (an integer bumped by every change of the code tables),
# 'fingerprint' (what the extraction depended on: a change re-reads every file), 'sccs' (the
# generation file_sccs were computed at), 'git' (what Git said at the last run over the whole
# tree: ``index.code.listing_state``), 'clone' (the copy of the store it was made for:
# ``index.meta.code_owner_problem``).
_META_KEYS = frozenset({"generation", "fingerprint", "sccs", "git", "clone"})


def code_schema(prefix: str = "") -> str:
    """The DDL of the code tables, each name preceded by ``prefix`` (``"code."`` to attach)."""
    return CODE_SCHEMA.format(s=prefix)


def read_code_schema(conn: sqlite3.Connection) -> frozenset[SchemaRow]:
    """The attached code database's tables, indexes and triggers (as ``schema.read_schema``)."""
    return frozenset(
        (kind, name, table, None if name.startswith("chunks_fts_") else sql)
        for kind, name, table, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM code.sqlite_schema"
            " WHERE name NOT LIKE 'sqlite_stat%'"))


def expected_code_schema() -> frozenset[SchemaRow]:
    """What ``read_code_schema`` gives for a code database this ctx created (computed once)."""
    global _expected
    if _expected is None:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("ATTACH DATABASE ':memory:' AS code")
            conn.executescript(code_schema("code."))
            _expected = read_code_schema(conn)
        finally:
            conn.close()
    return _expected


def irregular_code_files(folder: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """``code.sqlite`` and its companions that exist and are not regular files."""
    return db.irregular_files(folder / CODE_FILE)


class _ChunkText:
    """``ctx_chunk_text(data, size, start_line, end_line, spans)``: a chunk's text (view ``chunks``).

    ``data`` is its file's ``file_text``, ``size`` the file's ``byte_count``: no more than that
    is decompressed (a forged row cannot make a reader inflate without bound). The lines of
    the last file are kept, so the chunks
    of one file (read together, as every reader does) cost one decompression. ``index.chunks``
    is imported at the first call: a hook's connection registers this and reads no chunk.
    """

    __slots__ = ("data", "lines", "size")

    def __init__(self) -> None:
        self.data: bytes = b""
        self.size = 0
        self.lines: list[str] = []

    def __call__(self, data: bytes, size: int, start_line: int, end_line: int,
                 spans: str | None) -> str:
        import zlib

        from ctxstore.index.chunks import chunk_text, unpack_lines

        if data != self.data or size != self.size:
            try:
                lines = unpack_lines(data, size)
            except (zlib.error, UnicodeDecodeError, TypeError) as exc:
                # an OperationalError for the caller: the index is damaged (E007)
                raise ValueError(f"a file_text row is damaged ({exc})") from exc
            self.data, self.size, self.lines = data, size, lines
        return chunk_text(self.lines, start_line, end_line, spans)


_blake3: Callable[[bytes], Any] | None = None  # imported at the first key_hash


def key_hash(key: str) -> int:
    """The ``code_keys.hash`` of a key's text: its BLAKE3 digest's first 8 bytes, signed.

    Two keys may share a hash: a reader finds rows by it and compares the text as well.
    """
    global _blake3
    if _blake3 is None:
        from blake3 import blake3

        _blake3 = blake3
    return int.from_bytes(_blake3(key.encode("utf-8", "surrogatepass")).digest(8), "little",
                          signed=True)


def _sql_key_hash(key: object) -> int | None:
    """``ctx_key_hash(key)``: ``key_hash`` of a text, NULL for anything else."""
    return key_hash(key) if isinstance(key, str) else None


def register_functions(conn: sqlite3.Connection) -> None:
    """Give ``conn`` the SQL functions of the code tables.

    ``ctx_chunk_text`` (the view ``chunks``) and ``ctx_key_hash`` (``key_hash``, for readers
    that find a key by its text).
    """
    conn.create_function("ctx_chunk_text", 5, _ChunkText(), deterministic=True)
    conn.create_function("ctx_key_hash", 1, _sql_key_hash, deterministic=True)


def attach(conn: sqlite3.Connection, folder: Path | None) -> None:
    """Attach the code database of ``folder`` (``:memory:`` when None) as ``code``.

    A new database gets the schema. Nothing is checked here (``inspect_code`` does).

    Raises:
        sqlite3.Error: as SQLite reports it (the caller classifies it).
    """
    register_functions(conn)
    target = ":memory:" if folder is None else str(folder / CODE_FILE)
    conn.execute("ATTACH DATABASE ? AS code", (target,))
    if folder is not None:
        conn.execute("PRAGMA code.journal_mode = WAL")
        conn.execute("PRAGMA code.synchronous = NORMAL")  # derived: a lost tail is re-indexed


def inspect_code(conn: sqlite3.Connection, *, create: bool = True) -> str | None:
    """What is wrong with the attached code database, or None; an empty one gets the schema.

    Checks ``user_version``, the exact schema and the ``code_meta`` keys.

    Raises:
        sqlite3.DatabaseError: when SQLite cannot read the file (the caller treats the
            damage codes as damage).
    """
    version = conn.execute("PRAGMA code.user_version").fetchone()[0]
    schema = read_code_schema(conn)
    if version == 0 and not schema:
        if not create:
            return "the code index is empty"
        conn.executescript(f"BEGIN IMMEDIATE; {code_schema('code.')}; "
                           f"PRAGMA code.user_version = {CODE_SCHEMA_VERSION}; COMMIT;")
        return None
    if version != CODE_SCHEMA_VERSION:
        return f"code schema version {version}, this ctx uses {CODE_SCHEMA_VERSION}"
    if schema_digest(schema) != EXPECTED_CODE_DIGEST and schema != expected_code_schema():
        return "the code tables are not the ones this ctx creates"
    for key, value in conn.execute("SELECT key, value FROM code_meta"):
        if key not in _META_KEYS or not isinstance(value, str):
            return f"unexpected code_meta row {str(key)[:40]!r}"
    return None


def drop_code_files(root: Path, folder: Path) -> None:
    """Delete the code database and its companions, through descriptors (never a link).

    Raises:
        UnsafePath: (E020) if ``index/`` is (or was swapped for) a link or not a directory.
        OSError: if a file cannot be removed.
    """
    with fsio.open_dir(root) as top:
        # the damage marker last: a crash before it leaves it, and the next open drops again
        for name in (CODE_FILE, *(CODE_FILE + s for s in db.COMPANIONS), CODE_DAMAGE_MARKER):
            top.unlink(folder / name)


def begin(conn: sqlite3.Connection, schema: str) -> None:
    """Begin a write transaction holding the write lock of one file only (``main`` or ``code``).

    ``BEGIN IMMEDIATE`` would take the write lock of every attached database; a deferred
    ``BEGIN`` whose first statement writes (a ``DELETE`` that matches nothing) takes that
    one's, at once, so no read snapshot can go stale before the write.
    """
    probe = "code_meta" if schema == "code" else "meta"
    conn.execute("BEGIN")
    try:
        conn.execute(f"DELETE FROM {schema}.{probe} WHERE 0")  # noqa: S608 - fixed names
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def commit(conn: sqlite3.Connection) -> None:
    """Commit the write transaction ``begin`` opened."""
    conn.execute("COMMIT")


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the write transaction ``begin`` opened."""
    conn.execute("ROLLBACK")


@contextlib.contextmanager
def write(conn: sqlite3.Connection, schema: str = "code") -> Iterator[None]:
    """A write transaction on one of the two files (``code`` or ``main``), the other left free.

    Commits on leaving, rolls back on an exception.
    """
    begin(conn, schema)
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def meta_value(conn: sqlite3.Connection, key: str) -> str | None:
    """A ``code_meta`` value, or None."""
    row = conn.execute("SELECT value FROM code_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Set a ``code_meta`` value (inside the caller's transaction)."""
    conn.execute("INSERT INTO code_meta(key, value) VALUES (?, ?) ON CONFLICT (key)"
                 " DO UPDATE SET value = excluded.value", (key, value))


def generation(conn: sqlite3.Connection) -> str:
    """The code tables' generation: it changes with every change of them ("0" before any)."""
    return meta_value(conn, "generation") or "0"


def generation_of(folder: Path) -> str:
    """The generation of the code database in ``folder``, read-only ("0" when none or unreadable).

    For caches of the code tables kept elsewhere (the Tantivy index's marker).
    """
    path = folder / CODE_FILE
    if not path.is_file() or path.is_symlink():
        return "0"
    try:
        conn = db.connect(path, busy_seconds=1.0, read_only=True)
    except (sqlite3.Error, OSError, CtxError):
        return "0"
    try:
        row = conn.execute("SELECT value FROM code_meta WHERE key = 'generation'").fetchone()
    except sqlite3.Error:
        return "0"
    finally:
        conn.close()
    return str(row[0]) if row is not None else "0"


def bump_generation(conn: sqlite3.Connection) -> None:
    """Mark the code tables changed (inside the caller's transaction)."""
    conn.execute("INSERT INTO code_meta(key, value) VALUES ('generation', '1') ON CONFLICT"
                 " (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")


# ``schema_digest(expected_code_schema())`` with the SQLite ctx is tested on (a test keeps it
# current): an attached database that hashes to it needs no row-by-row comparison.
EXPECTED_CODE_DIGEST = "84bac821290b787421fd552a40bfd90e82878c610a8a02756cee78ab932b0300"
