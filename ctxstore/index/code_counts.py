"""The code index's own references and counts, checked against its other rows.

Part of ``ctx debug verify --index`` (``index.compare``): the views of ``code.sqlite`` join a
row to what it names (a symbol to its file and key, an edge to its file, keys and kind, a
posting to its term), so a row naming nothing is read by no one and is named here; counts
kept as files are applied (``term_df``) and each file's term list (``file_postings``) are
compared with the rows they summarise. It only reads.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ctxstore.verify import Problem

__all__ = ["MAX_PER_TABLE", "check_code_counts", "short"]

MAX_PER_TABLE = 10  # differences named per table; the rest are counted in one more line


def short(value: Any, limit: int = 40) -> str:
    """``value`` as a difference names it: at most ``limit`` characters, bytes in hex."""
    if isinstance(value, bytes):
        return value.hex()[:16]
    if value is None:
        return "NULL"
    text = str(value)
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return text.replace("\n", "\\n")


def check_code_counts(disk: sqlite3.Connection) -> list[Problem]:
    """The code index's own counts and references, checked against its other rows.

    ``term_df`` must count the files of each term as ``file_terms`` holds them; every
    ``code_keys`` row is named by an edge, once, with the hash of its text, and every edge
    names an indexed file; every chunk
    row names an indexed file with its text, every text a file with chunks.
    """
    # (table, rows naming a problem, what the value is, what is wrong)
    checks: tuple[tuple[str, str, str, str], ...] = (
        ("code_keys", "SELECT kind || ':' || key FROM code_keys k WHERE NOT EXISTS (SELECT 1 FROM"
         " code_edge_rows e WHERE e.src = k.id) AND NOT EXISTS (SELECT 1 FROM code_edge_rows e"
         " WHERE e.dst = k.id) AND NOT EXISTS (SELECT 1 FROM symbol_rows s WHERE s.qualname"
         " = k.id)", "key", "named by no edge or symbol"),
        # A key is found by the hash of its text (code schema 11): a wrong hash hides it from
        # every reader by key, and a key made twice splits its edges between two ids.
        ("code_keys", "SELECT kind || ':' || key FROM code_keys WHERE hash IS NOT"
         " ctx_key_hash(key)", "key", "its hash is not its text's"),
        ("code_keys", "SELECT kind || ':' || key FROM code_keys GROUP BY kind, key"
         " HAVING count(*) > 1", "key", "stored twice"),
        ("code_edge_rows", "SELECT DISTINCT file FROM code_edge_rows WHERE file NOT IN (SELECT"
         " rowid FROM files)", "file", "edges of a file not indexed"),
        ("code_edge_rows", "SELECT DISTINCT kind FROM code_edge_rows WHERE kind NOT IN (SELECT id"
         " FROM code_edge_kinds)",
         "kind", "edges of a kind code_edge_kinds lacks"),
        # The views ``symbols`` and ``chunks`` join a row to its file (and a chunk to its
        # file's text): a row either lacks is read by no one, so it is named here.
        ("symbol_rows", "SELECT DISTINCT file FROM symbol_rows WHERE file NOT IN (SELECT"
         " rowid FROM files)", "file", "symbols of a file not indexed"),
        ("symbol_rows", "SELECT DISTINCT file FROM symbol_rows WHERE qualname NOT IN (SELECT"
         " id FROM code_keys)", "file", "symbols whose name code_keys lacks"),
        # a chunk's qualified name is its file's symbol's (code schema 12)
        ("chunk_rows", "SELECT DISTINCT c.file FROM chunk_rows c WHERE c.symbol IS NOT NULL"
         " AND NOT EXISTS (SELECT 1 FROM symbol_rows s WHERE s.rowid = c.symbol"
         " AND s.file = c.file)", "file", "chunks naming no symbol of their file"),
        ("chunk_rows", "SELECT DISTINCT file FROM chunk_rows WHERE file NOT IN (SELECT rowid"
         " FROM files) OR file NOT IN (SELECT file FROM file_text)",
         "file", "chunks of a file not indexed or without its text"),
        ("file_text", "SELECT file FROM file_text WHERE file NOT IN (SELECT file FROM"
         " chunk_rows)", "file", "the text of a file without chunks"),
        # Postings and counts name their term by its terms id (code schema 7): the views join
        # them, so a row naming no term, or a term no posting names, is named here.
        ("file_term_rows", "SELECT DISTINCT term FROM file_term_rows WHERE term NOT IN"
         " (SELECT id FROM terms)", "term", "postings of a term terms lacks"),
        ("term_df_rows", "SELECT DISTINCT term FROM term_df_rows WHERE term NOT IN"
         " (SELECT id FROM terms)", "term", "counts of a term terms lacks"),
        ("terms", "SELECT id FROM terms WHERE id NOT IN (SELECT term FROM file_term_rows)",
         "term", "a term in no posting"))
    problems = [Problem("E007", f"index:{table}",
                        f"{short(value) if named == 'key' else f'{named} {short(str(value))}'}"
                        f": {what}")
                for table, sql, named, what in checks
                for (value,) in disk.execute(f"{sql} ORDER BY 1 LIMIT ?", (MAX_PER_TABLE,))]
    problems += _check_term_lists(disk)
    found = 0
    for term, field_, have, want in disk.execute(
            "SELECT coalesce(t.term, c.term), c.field, c.have, c.want FROM ("
            " SELECT term, field, max(have) AS have, max(want) AS want FROM ("
            " SELECT term, field, df AS have, 0 AS want FROM term_df_rows"
            " UNION ALL SELECT term, field, 0, count(*) FROM file_term_rows GROUP BY term, field)"
            " GROUP BY term, field HAVING max(have) != max(want)) c"
            " LEFT JOIN terms t ON t.id = c.term ORDER BY 1, 2"):
        found += 1
        if found <= MAX_PER_TABLE:
            problems.append(Problem("E007", "index:term_df", f"({short(str(term))}, {field_}): "
                                    f"df is {have}, file_terms hold {want}"))
    if found > MAX_PER_TABLE:
        problems.append(Problem("E007", "index:term_df",
                                f"{found - MAX_PER_TABLE} more row(s) differ from file_terms"))
    return problems


def _check_term_lists(disk: sqlite3.Connection) -> list[Problem]:
    """Each file's term list (``file_postings``) must hold exactly its postings.

    The postings have no index by file (code schema 8): what reads a file's postings reads
    its list, so a list that disagrees with ``file_term_rows``, or is missing or damaged,
    is named (by the file's path, or its rowid when no file has it).
    """
    from ctxstore.index.postings import posting_limit, unpack_postings

    rows = disk.execute("SELECT file, field, term, tf FROM file_term_rows"
                        " ORDER BY file, field, term")
    lists = disk.execute("SELECT p.file, f.path, f.byte_count, p.data FROM file_postings p"
                         " LEFT JOIN files f ON f.rowid = p.file ORDER BY p.file")
    held: dict[int, list[tuple[int, int, int]]] = {}
    problems: list[Problem] = []

    def name(file_id: int, path: object) -> str:
        return short(str(path)) if path is not None else f"file {file_id}"

    def report(file_id: int, path: object, what: str) -> None:
        if len(problems) < MAX_PER_TABLE:
            problems.append(Problem("E007", "index:file_postings", f"{name(file_id, path)}: {what}"))

    pending = next(rows, None)
    for file_id, path, size, data in lists:
        while pending is not None and pending[0] < file_id:  # postings of a file without a list
            held.setdefault(int(pending[0]), []).append(pending[1:])
            pending = next(rows, None)
        mine: list[tuple[int, int, int]] = []
        while pending is not None and pending[0] == file_id:
            mine.append((int(pending[1]), int(pending[2]), int(pending[3])))
            pending = next(rows, None)
        if path is None:
            report(file_id, None, "the term list of a file not indexed")
            continue
        try:
            body, where = unpack_postings(bytes(data), posting_limit(int(size)))
        except (ValueError, TypeError) as exc:
            report(file_id, path, f"its term list is damaged ({exc})")
            continue
        listed = [*((0, t, n) for t, n in body), *((1, t, n) for t, n in where)]
        if listed != mine:
            report(file_id, path, f"its term list holds {len(listed)} posting(s) that differ "
                   f"from the {len(mine)} of file_terms")
    while pending is not None:
        held.setdefault(int(pending[0]), []).append(pending[1:])
        pending = next(rows, None)
    for file_id in sorted(held):
        path = disk.execute("SELECT path FROM files WHERE rowid = ?", (file_id,)).fetchone()
        report(file_id, path[0] if path else None, "postings without a term list")
    return problems
