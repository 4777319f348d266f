"""The SELECTs of prompt packs (``packs.pack``), read from the code tables (docs/code.md).

File lengths, term postings, definitions, import edges and chunks; and the Mentions edges of
knowledge nodes with the current state of the files they name (stale memory, ``code.stale``).

Postings come from ``file_terms`` (filled by ``index.code`` with ``search.tokenize`` tokens:
whole identifiers and their camel/snake parts, one row per term and file), read by primary
key only for the query's terms: a query costs what its terms' postings cost, not a scan of
every file's text; their document counts come from ``term_df``. An index built before code
ingestion (no ``chunks``) answers with nothing.

Every pack needs every file's id, path and lengths (BM25's statistics, the test prior).
``file_corpus`` reads them from ``corpus_cache``: one packed value (a header, three arrays
of 64-bit integers, the paths joined by NUL), written by the first pack after the files
changed and valid while ``code_meta`` ``generation`` equals the generation stored with it.
Decoding it costs a fraction of reading the 10,000 rows of a large tree. That write is the
only one here; the rest reads.
"""

from __future__ import annotations

import sqlite3
import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import TypeVar

from ctxstore.index.codedb import key_hash
from ctxstore.records import dataclass
from ctxstore.search.ranked import ChunkRow, has_table
from ctxstore.search.tokenize import cached_is_test_path

__all__ = ["BODY", "PATH", "PACK_APART", "warm_corpus", "FileCorpus", "has_code", "has_diagnostics",
           "has_command_runs",
           "file_table",
           "file_corpus", "read_corpus", "encode_corpus", "decode_corpus", "corpus_name",
           "corpus_apart", "code_generation", "all_import_edges", "file_components",
           "file_sccs_current", "file_versions", "file_blobs", "has_files",
           "document_counts", "postings", "symbols_with_names", "import_edges", "chunks_of",
           "chunk_texts",
           "mention_rows"]

BODY, PATH = 0, 1  # ``file_terms.field``
_BATCH = 500  # host parameters per statement, well under SQLite's limit
_T = TypeVar("_T")
_CORPUS = "files:"  # the prefix of a corpus_cache name
_MAGIC = b"ctxG"  # bumped when the layout or what it derives from paths (test files) changes
_HEADER = struct.Struct("<4sQQQ")  # magic, files, files before the split, test files


def has_code(conn: sqlite3.Connection) -> bool:
    """Whether the index has the code tables (``files``, ``chunks``, ``chunks_fts``, ``file_terms``).

    Args:
        conn: An index connection.

    Returns:
        True when all four exist.
    """
    return all(has_table(conn, name) for name in ("files", "chunks", "chunks_fts", "file_terms"))


def file_table(conn: sqlite3.Connection) -> list[tuple[int, str, str | None, int, int]]:
    """Every indexed file with its language and retrieval lengths.

    Args:
        conn: An index connection with the code tables.

    Returns:
        ``(file id, path, language, body tokens, path tokens)`` in no particular order; a
        file without postings (written by an older ctx) has lengths 0.
    """
    rows: list[tuple[int, str, str | None, int, int]] = conn.execute(
        "SELECT f.rowid, f.path, f.language, coalesce(l.body, 0), coalesce(l.path, 0) "
        "FROM files f LEFT JOIN file_lengths l ON l.file = f.rowid").fetchall()
    return rows


@dataclass(frozen=True, slots=True)
class FileCorpus:
    """Every indexed file's id, path and retrieval lengths, split in two groups.

    Attributes:
        ids: ``files.rowid`` of each file.
        paths: Their paths.
        body: Body tokens of each (0 for a file without postings).
        path_terms: Path tokens of each.
        split: The files before it have a language outside the ``apart`` set it was read
            with; the rest (that set, or no language) come after. Each group by id.
        tests: Positions (ascending) of the test, benchmark and example files
            (``search.tokenize.is_test_path``): the ranking's test prior, judged once per change
            instead of per pack.
    """

    ids: Sequence[int]
    paths: Sequence[str]
    body: Sequence[int]
    path_terms: Sequence[int]
    split: int
    tests: Sequence[int]


def corpus_name(apart: Iterable[str]) -> str:
    """The ``corpus_cache`` name of a corpus split by ``apart`` (its languages, sorted)."""
    return _CORPUS + ",".join(sorted(apart))


def corpus_apart(name: str) -> frozenset[str] | None:
    """The ``apart`` languages a ``corpus_cache`` name was made from; None if it is not one."""
    if not name.startswith(_CORPUS):
        return None
    return frozenset(filter(None, name[len(_CORPUS):].split(",")))


def read_corpus(conn: sqlite3.Connection, apart: frozenset[str]) -> FileCorpus:
    """Every indexed file from the file table itself (what ``corpus_cache`` holds).

    Args:
        conn: An index connection with the code tables.
        apart: Languages whose files go to the second group (with files of no language).

    Returns:
        The files, each group by id.
    """
    rows = sorted(file_table(conn), key=lambda r: (r[2] is None or r[2] in apart, r[0]))
    split = sum(1 for r in rows if not (r[2] is None or r[2] in apart))
    is_test = cached_is_test_path()
    return FileCorpus([r[0] for r in rows], [r[1] for r in rows], [r[3] for r in rows],
                      [r[4] for r in rows], split,
                      [i for i, r in enumerate(rows) if is_test(r[1])])


def encode_corpus(corpus: FileCorpus) -> bytes:
    """The packed ``corpus_cache`` value of a corpus.

    Args:
        corpus: The corpus.

    Returns:
        Header, ids, body and path lengths, test positions (little-endian signed 64-bit),
        NUL-joined paths.
    """
    parts = [_HEADER.pack(_MAGIC, len(corpus.ids), corpus.split, len(corpus.tests))]
    for values in (corpus.ids, corpus.body, corpus.path_terms, corpus.tests):
        packed = array("q", values)
        if sys.byteorder != "little":
            packed.byteswap()
        parts.append(packed.tobytes())
    parts.append("\0".join(corpus.paths).encode("utf-8", "surrogatepass"))
    return b"".join(parts)


def decode_corpus(data: bytes) -> FileCorpus | None:
    """A corpus from its packed value, or None when the value is not one.

    Args:
        data: What ``encode_corpus`` wrote (or anything: a damaged row decodes to None).

    Returns:
        The corpus, or None.
    """
    if len(data) < _HEADER.size:
        return None
    magic, n, split, tests = _HEADER.unpack_from(data)
    end = _HEADER.size + 24 * n + 8 * tests
    if magic != _MAGIC or split > n or tests > n or len(data) < end:
        return None
    arrays = []
    start = _HEADER.size
    for count in (n, n, n, tests):
        values = array("q")
        values.frombytes(data[start:start + 8 * count])
        start += 8 * count
        if sys.byteorder != "little":
            values.byteswap()
        arrays.append(values)
    positions = arrays[3].tolist()
    if positions and (positions[0] < 0 or positions[-1] >= n or positions != sorted(set(positions))):
        return None  # not strictly ascending within the files: damaged
    try:
        paths = data[end:].decode("utf-8", "surrogatepass").split("\0") if n else []
    except UnicodeDecodeError:
        return None
    if len(paths) != n:
        return None
    return FileCorpus(arrays[0], paths, arrays[1], arrays[2], split, positions)


def code_generation(conn: sqlite3.Connection) -> str:
    """``code_meta`` ``generation``: it changes with every change of the code tables ("0" before any)."""
    row = conn.execute("SELECT value FROM code_meta WHERE key = 'generation'").fetchone()
    return str(row[0]) if row is not None else "0"


# The languages a pack ranks apart from source files (``packs.pack``): its corpus, which
# ``ctx index`` writes before it returns (``warm_corpus``).
PACK_APART = frozenset({"markdown"})


def warm_corpus(conn: sqlite3.Connection, *, since: str | None = None,
                changed: Iterable[str] = ()) -> None:
    """Write the packs' ``corpus_cache`` value now, if it is not current (``ctx index``).

    When the value held is the one of generation ``since`` (the code tables as they were
    before a run) and the run changed only ``changed`` (paths written or removed), it is
    patched: those paths' entries are dropped and the files' rows read again, instead of
    reading and judging every file (a third of a one-file ``ctx index`` at 10,000 files).
    """
    if since is not None and not conn.in_transaction:
        name = corpus_name(PACK_APART)
        row = conn.execute("SELECT generation, data FROM corpus_cache WHERE name = ?",
                           (name,)).fetchone()
        old = decode_corpus(bytes(row[1])) if row is not None and row[0] == since else None
        if old is not None:
            generation = code_generation(conn)
            if generation != since:
                _write_corpus(conn, name, generation, _patched(conn, old, set(changed)))
            return
    file_corpus(conn, PACK_APART)


def _patched(conn: sqlite3.Connection, old: FileCorpus, changed: set[str]) -> FileCorpus:
    """``old`` with the entries of ``changed`` read again from the file table (or dropped).

    Those few are taken out and put back in place (each group in id order), the others
    copied, not rebuilt one by one; a value not in that order is read again whole.
    """
    is_test = cached_is_test_path()
    ids, paths, body, where = list(old.ids), list(old.paths), list(old.body), list(old.path_terms)
    split = old.split
    if not (all(a < b for a, b in zip(ids[:split], ids[1:split], strict=False))
            and all(a < b for a, b in zip(ids[split:], ids[split + 1:], strict=False))):
        return read_corpus(conn, PACK_APART)
    flags = bytearray(len(ids))
    for i in old.tests:
        flags[i] = 1
    for i in sorted((i for i, p in enumerate(paths) if p in changed), reverse=True):
        for column in (ids, paths, body, where, flags):
            del column[i]
        split -= i < split
    for batch in _batches(sorted(changed)):
        for fid, path, language, length, path_length in conn.execute(
                "SELECT f.rowid, f.path, f.language, coalesce(l.body, 0), coalesce(l.path, 0)"
                " FROM files f LEFT JOIN file_lengths l ON l.file = f.rowid"
                f" WHERE f.path IN ({','.join('?' * len(batch))})", tuple(batch)).fetchall():
            apart = language is None or language in PACK_APART
            at = bisect_left(ids, fid, split, len(ids)) if apart else bisect_left(ids, fid, 0, split)
            ids.insert(at, fid)
            paths.insert(at, path)
            body.insert(at, length)
            where.insert(at, path_length)
            flags.insert(at, is_test(path))
            split += not apart
    return FileCorpus(ids, paths, body, where, split, [i for i, f in enumerate(flags) if f])


def file_corpus(conn: sqlite3.Connection, apart: frozenset[str]) -> FileCorpus:
    """Every indexed file, from ``corpus_cache`` when it is current (written when it is not).

    The write is conditional on the generation it was read at, in one statement, so a
    catch-up in between leaves nothing stale; when another process holds the write lock it
    is skipped (the next pack writes it).

    Args:
        conn: A current index connection with the code tables.
        apart: Languages whose files go to the second group (with files of no language).

    Returns:
        The files, each group by id.
    """
    name = corpus_name(apart)
    generation = code_generation(conn)
    row = conn.execute("SELECT generation, data FROM corpus_cache WHERE name = ?",
                       (name,)).fetchone()
    if row is not None and row[0] == generation:
        cached = decode_corpus(bytes(row[1]))
        if cached is not None:
            return cached
    corpus = read_corpus(conn, apart)
    _write_corpus(conn, name, generation, corpus)
    return corpus


def _write_corpus(conn: sqlite3.Connection, name: str, generation: str, corpus: FileCorpus) -> None:
    """Store a corpus as the value of ``generation``, unless the tables moved on since (or busy)."""
    if conn.in_transaction:
        return  # the caller's transaction: not ours to write in
    timeout = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute(
            "INSERT OR REPLACE INTO corpus_cache(name, generation, data) SELECT ?, ?, ?"
            " WHERE coalesce((SELECT value FROM code_meta WHERE key = 'generation'), '0') = ?",
            (name, generation, encode_corpus(corpus), generation))
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xff not in (5, 6, 8):  # BUSY, LOCKED, READONLY: skip
            raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def file_versions(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, bytes]:
    """The ``file_version`` object id of some indexed files (a light ``index.code.file_rows``).

    Args:
        conn: An index connection with the code tables.
        paths: The files.

    Returns:
        Path -> version id; files not indexed are absent.
    """
    found: dict[str, bytes] = {}
    for batch in _batches(list(dict.fromkeys(paths))):
        found.update((str(p), bytes(v)) for p, v in conn.execute(
            f"SELECT path, version FROM files WHERE path IN ({','.join('?' * len(batch))})",
            tuple(batch)).fetchall())
    return found


def file_blobs(conn: sqlite3.Connection, paths: Sequence[str]
               ) -> list[tuple[str, bytes, int, tuple[int, int] | None]]:
    """``(path, blob id, byte count, stat)`` of the indexed files among ``paths``, by path.

    ``stat`` is ``ctx index``'s stat cache, ``(size, mtime_ns)`` of the file it read (None
    when it recorded none: a file changed while it was read, which the next run reads again).

    Args:
        conn: An index connection with the code tables.
        paths: The files.

    Returns:
        One row per indexed file; files not indexed are absent.
    """
    found: list[tuple[str, bytes, int, tuple[int, int] | None]] = []
    for batch in _batches(list(dict.fromkeys(paths))):
        found += [(str(p), bytes(b), int(n), None if size is None or mtime is None
                   else (int(size), int(mtime))) for p, b, n, size, mtime in conn.execute(
            "SELECT path, blob, byte_count, size, mtime_ns FROM files WHERE path IN "
            f"({','.join('?' * len(batch))})", tuple(batch)).fetchall()]
    return sorted(found)


def has_files(conn: sqlite3.Connection) -> bool:
    """Whether any file is indexed (``ctx index`` ran and found something).

    Args:
        conn: An index connection.

    Returns:
        True when the code tables exist and ``files`` holds a row.
    """
    return has_code(conn) and conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None


def has_command_runs(conn: sqlite3.Connection) -> bool:
    """Whether any command's run is stored (``ctx add command``; docs/code.md).

    Args:
        conn: An index connection.

    Returns:
        True when the ``command_runs`` table holds a row.
    """
    return has_table(conn, "command_runs") and \
        conn.execute("SELECT 1 FROM command_runs LIMIT 1").fetchone() is not None


def has_diagnostics(conn: sqlite3.Connection) -> bool:
    """Whether any stored command reported a diagnostic (``ctx add command``; docs/code.md).

    Args:
        conn: An index connection.

    Returns:
        True when the ``diagnostics`` table holds a row.
    """
    return has_table(conn, "diagnostics") and \
        conn.execute("SELECT 1 FROM diagnostics LIMIT 1").fetchone() is not None


def _batches(items: Sequence[_T]) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), _BATCH):
        yield items[start:start + _BATCH]


def document_counts(conn: sqlite3.Connection, terms: Sequence[str], field: int = BODY
                    ) -> dict[str, int]:
    """In how many files each term occurs (absent terms left out).

    Args:
        conn: An index connection with the code tables.
        terms: ``search.tokenize`` tokens.
        field: ``BODY`` or ``PATH``.

    Returns:
        Term -> document frequency.
    """
    found: dict[str, int] = {}
    for batch in _batches(list(dict.fromkeys(terms))):
        found.update((str(t), int(n)) for t, n in conn.execute(
            f"SELECT term, df FROM term_df WHERE field = ? AND df > 0 AND term IN "
            f"({','.join('?' * len(batch))})", (field, *batch)).fetchall())
    return found


def postings(conn: sqlite3.Connection, terms: Sequence[str], field: int = BODY
             ) -> dict[str, list[tuple[int, int]]]:
    """The files holding each term and how often (the ``file_terms`` rows).

    Args:
        conn: An index connection with the code tables.
        terms: ``search.tokenize`` tokens.
        field: ``BODY`` or ``PATH``.

    Returns:
        Term -> ``(file id, term frequency)`` pairs; absent terms left out.
    """
    out: dict[str, list[tuple[int, int]]] = {}
    for term in dict.fromkeys(terms):  # one primary-key range each: rows come back as the lists
        rows = conn.execute("SELECT file, tf FROM file_terms WHERE term = ? AND field = ?",
                            (term, field)).fetchall()
        if rows:
            out[term] = rows
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
               "(SELECT s.path FROM symbols s WHERE s.qualname_hash = e.to_hash AND s.qualname = e.to_key "
               "ORDER BY s.path LIMIT 1) END)")
    for batch in _batches(list(dict.fromkeys(paths))):
        marks = ",".join("?" * len(batch))
        rows = conn.execute(
            f"SELECT e.path, {resolve} FROM code_edges e WHERE e.label = 'Imports' "
            f"AND e.path IN ({marks})", tuple(batch)).fetchall()
        rows += conn.execute(  # the keys found by their hashes, then their text
            f"SELECT e.path, e.to_key FROM code_edges e WHERE e.label = 'Imports' AND e.to_key IN ({marks}) "
            f"AND e.to_kind = 'file' AND e.to_hash IN ({marks})", (*batch, *map(key_hash, batch))).fetchall()
        rows += conn.execute(
            # CROSS JOIN keeps symbols (by path) outside: the planner would scan every item edge.
            # Methods, impl blocks and headings are never imported by name: skipping them
            # (read from the covering symbols_path) leaves a third of the probes.
            f"SELECT e.path, s.path FROM symbols s CROSS JOIN code_edges e ON e.to_kind = 'item' "
            "AND e.to_hash = s.qualname_hash AND e.to_key = s.qualname AND e.label = 'Imports' WHERE "
            f"s.path IN ({marks}) AND s.kind NOT IN ('method', 'impl', 'heading')", tuple(batch)).fetchall()
        found.update((str(a), str(b)) for a, b in rows if a and b and a != b)
    return sorted(found)


def all_import_edges(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Every ``Imports`` edge between two indexed files, as ``import_edges`` resolves them.

    Returns:
        ``(importing file, imported file)`` pairs, distinct, sorted.
    """
    rows = conn.execute(
        "SELECT e.path, e.to_key FROM code_edges e WHERE e.label = 'Imports'"
        " AND e.to_kind = 'file'").fetchall()
    rows += conn.execute(
        "SELECT e.path, (SELECT s.path FROM symbols s WHERE s.qualname_hash = e.to_hash"
        " AND s.qualname = e.to_key ORDER BY s.path LIMIT 1) FROM code_edges e"
        " WHERE e.label = 'Imports' AND e.to_kind = 'item'").fetchall()
    return sorted({(str(a), str(b)) for a, b in rows if a and b and a != b})


def file_components(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, str]:
    """Files in an import cycle with one of ``paths``: file -> the one of ``paths`` it is with.

    Read from ``file_sccs`` (``graph.cycles``); nothing when no such table is attached.
    """
    if not paths or not has_table(conn, "file_sccs"):
        return {}
    out: dict[str, str] = {}
    for batch in _batches(list(dict.fromkeys(paths))):
        marks = ",".join("?" * len(batch))
        for member, seed in conn.execute(
                f"SELECT m.path, s.path FROM file_sccs s JOIN file_sccs m ON m.scc = s.scc"  # noqa: S608
                f" WHERE s.path IN ({marks}) AND m.path != s.path ORDER BY s.path, m.path",
                tuple(batch)):
            out.setdefault(str(member), str(seed))
    return out


def file_sccs_current(conn: sqlite3.Connection) -> bool:
    """Whether ``file_sccs`` was computed at the code index's current generation."""
    if not has_table(conn, "file_sccs"):
        return False
    row = conn.execute("SELECT (SELECT value FROM code_meta WHERE key = 'sccs') ="
                       " coalesce((SELECT value FROM code_meta WHERE key = 'generation'),"
                       " '0')").fetchone()
    return bool(row and row[0])


def chunks_of(conn: sqlite3.Connection, paths: Sequence[str], *, text: bool = True
              ) -> dict[str, list[ChunkRow]]:
    """The chunks of some files, in file order.

    Args:
        conn: An index connection with the code tables.
        paths: The files.
        text: False: every column but the text, which is left empty (``chunk_texts``
            reads it for the chunks wanted).

    Returns:
        Path -> its chunks by start line; files without chunks are absent.
    """
    out: dict[str, list[ChunkRow]] = {}
    body = "text" if text else "''"
    for batch in _batches(list(dict.fromkeys(paths))):
        for row in conn.execute(
                f"SELECT rowid, path, qualname, kind, start_line, end_line, tokens, {body} FROM"
                f" chunks WHERE path IN ({','.join('?' * len(batch))})"
                " ORDER BY path, start_line, rowid", tuple(batch)).fetchall():
            chunk = ChunkRow(*row)  # the columns' types (NOT NULL INTEGER / TEXT) as declared
            out.setdefault(chunk.path, []).append(chunk)
    return out


def chunk_texts(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, str]:
    """The text of some chunks.

    Args:
        conn: An index connection with the code tables.
        rowids: ``chunks.rowid`` of each.

    Returns:
        Rowid -> text; chunks that do not exist are absent.
    """
    found: dict[int, str] = {}
    for part in _batches(list(dict.fromkeys(rowids))):
        found.update(conn.execute(
            f"SELECT rowid, text FROM chunks WHERE rowid IN ({','.join('?' * len(part))})",
            tuple(part)).fetchall())
    return found


def mention_rows(conn: sqlite3.Connection, node_ids: Sequence[str] | None
                 ) -> list[tuple[str, str, str, str | None, str | None, bytes | None, int | None]]:
    """Mentions edges from knowledge nodes to code, with the mentioned file's current state.

    Args:
        conn: A current index connection.
        node_ids: Only edges from these nodes; None for every node.

    Returns:
        ``(node id, to_kind, to_key, evidence JSON, file path, current blob, file stamp)``
        per edge; the path, blob and stamp are None when the file is not indexed (any
        more).
    """
    sql = ("SELECT e.from_key, e.to_kind, e.to_key, e.evidence, f.path, f.blob, f.stamp"
           " FROM edges e LEFT JOIN files f ON f.path = CASE WHEN e.to_kind = 'file' THEN e.to_key"
           " ELSE (SELECT s.path FROM symbols s WHERE s.qualname_hash = ctx_key_hash(e.to_key)"
           " AND s.qualname = e.to_key LIMIT 1) END WHERE e.label = 'Mentions' AND e.from_kind = 'node'"
           " AND e.to_kind IN ('file', 'item', 'module')")
    if node_ids is None:
        return conn.execute(sql + " ORDER BY e.from_key, e.to_key").fetchall()
    rows = []
    for part in _batches(list(dict.fromkeys(node_ids))):
        rows += conn.execute(sql + f" AND e.from_key IN ({','.join('?' * len(part))})"
                             " ORDER BY e.from_key, e.to_key", tuple(part)).fetchall()
    return rows
