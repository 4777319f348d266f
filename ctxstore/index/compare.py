"""Comparing the on-disk index with a replay of the store (``ctx debug verify --index``).

The open-time checks of ``ctxstore.index`` catch a file SQLite cannot read and a schema
or ``meta`` row ctx did not write; they cannot tell a hand-edited row from a real one.
This replays the objects into a fresh index in a temporary file, synced to the same
pointers the file says it reflects, and compares the two table by table: every table of
the schema but ``meta`` (the FTS5 shadow tables are compared through the rows their
virtual table reads back). It only reads: the file is opened read-only and nothing is
repaired (``ctx rebuild`` does that).

Rows are compared by key, streamed from both sides in key order, so memory holds one
key's rows at a time however large the tables. Rowids are not compared: they depend on
the order rows were written in, and a replay writes in another order than incremental
ingestion. The rows that refer to one (``chunks_fts``, ``file_terms``, ``file_lengths``,
``nodes_fts``, ``runs_fts``) are compared through the row they refer to instead; ``chunks_fts``
keeps no text (contentless), so its documents are compared by their token counts per field.
Each difference names its table and key: ``error E007 index:symbols: (pkg/a.py, Greeter.hello): start_line is
3, the replay has 10``.

The SCC view (``.ctx/DERIVED/scc_latest``, ``ctxstore.graph.scc``) is derived from the
same graph, so it is checked here too: the view the pointer names must equal the one
recomputed from the replay.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from itertools import groupby
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore import sqlite as db
from ctxstore.errors import CtxError, UnsafePath
from ctxstore.index import (  # the package's private helpers: one package, one schema
    INDEX_FILE,
    _connect,
    _create,
    _irregular_files,
    codedb,
    index_dir,
    inspect_index,
    parse_snapshot,
    pointer_snapshot,
    sync_index,
)
from ctxstore.index.code_counts import MAX_PER_TABLE, check_code_counts
from ctxstore.index.code_counts import short as _short
from ctxstore.model.derived import SccView
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.verify import Problem

__all__ = ["MAX_PER_TABLE", "REACHED_TABLES", "STRICT_TABLES", "TableCheck", "IndexComparison",
           "compare_index", "compared_tables"]



@dataclass(frozen=True, slots=True)
class TableCheck:
    """How one table is compared.

    Attributes:
        sql: A SELECT of the table's rows, key columns first, without ORDER BY (the
            rows are ordered by every column).
        key: How many leading columns are the key a difference is named by.
        reads: The schema tables the SELECT covers (the table itself by default).
    """

    sql: str
    key: int
    reads: tuple[str, ...] = ()


# The answers: exactly what a replay gives.
STRICT_TABLES: dict[str, TableCheck] = {
    "nodes": TableCheck("SELECT id, type, content, content_blob, summary, status, superseded_by,"
                        " created_at, updated_at, author, metadata, tokens, version, hook_key"
                        " FROM nodes", 1),
    "nodes_fts": TableCheck("SELECT n.id, f.content, f.summary FROM nodes_fts f LEFT JOIN nodes n"
                            " ON n.rowid = f.rowid", 1),
    "tags": TableCheck("SELECT node_id, tag FROM tags", 2),
    "edges": TableCheck("SELECT from_kind, from_key, to_kind, to_key, label, weight, metadata,"
                        " evidence, created_at, updated_at, version FROM edges", 5),
    "views": TableCheck("SELECT name, query, budget, description, created_at, updated_at, version"
                        " FROM views", 1),
    "winners": TableCheck("SELECT key, stamp, version, live FROM winners", 1),
    # build (index.build)
    "packages": TableCheck("SELECT workspace, package_id, name, version, manifest_path, edition,"
                           " member FROM packages", 2),
    "targets": TableCheck("SELECT workspace, target_id, package_id, name, kind, src_path,"
                          " crate_types FROM targets", 2),
    "crates": TableCheck("SELECT workspace, crate_key, target_id, name FROM crates", 2),
    "command_runs": TableCheck("SELECT name, tool, exit_code, run_at, snapshot, output_blob,"
                               " output_bytes, diagnostics, argv, notes FROM command_runs", 1),
    "diagnostics": TableCheck("SELECT id, command, tool, severity, code, message, path, line, col,"
                              " exit_code, run_at FROM diagnostics", 1),
    "build_edges": TableCheck("SELECT path, from_kind, from_key, to_kind, to_key, label,"
                              " confidence, tool, evidence FROM build_edges", 6),
}
# This clone's code index (``index.codedb``): derived from the work tree, not from objects, so
# its rows are compared with the rows ``ctx index`` derives now from each indexed file whose
# content is still the one indexed (``Rederive``). The first column is always the file's path
# (the files left out are filtered by it); a symbol or a chunk is named by its file and name or
# first line. ``stamp`` (when this clone indexed the file) and the stat cache are not compared.
CODE_TABLES: dict[str, TableCheck] = {
    "files": TableCheck("SELECT path, version, blob, language, byte_count, line_count, complete,"
                        " note FROM files", 1),
    "symbols": TableCheck("SELECT path, qualname, kind, name, visibility, parent, signature,"
                          " start_byte, end_byte, start_line, end_line FROM symbols", 2,
                          ("symbol_rows", "code_keys")),
    "code_edges": TableCheck("SELECT path, from_kind, from_key, to_kind, to_key, label, confidence,"
                             " tool, line FROM code_edges", 6,
                             ("code_edge_rows", "code_keys", "code_edge_kinds")),
    "chunks": TableCheck("SELECT path, start_line, qualname, kind, end_line, tokens, text"
                         " FROM chunks", 2,
                         ("chunk_rows", "file_text", "symbol_rows", "code_keys")),
    # Contentless (code schema 3): what it reads back is each document's token count per
    # field (its docsize row), named by the chunk of the same rowid.
    "chunks_fts": TableCheck("SELECT c.path, c.start_line, d.sz FROM chunks_fts_docsize d"
                             " LEFT JOIN chunks c ON c.rowid = d.id", 2),
    "file_terms": TableCheck("SELECT f.path, t.field, t.term, t.tf FROM file_terms t"
                             " LEFT JOIN files f ON f.rowid = t.file", 3,
                             ("file_term_rows", "terms")),
    "file_lengths": TableCheck("SELECT f.path, l.body, l.path AS path_terms FROM file_lengths l"
                               " LEFT JOIN files f ON f.rowid = l.file", 1),
}
# Kept by ctx index, checked against the code index's own rows (``code_counts``).
CODE_COUNTED = ("term_df_rows", "file_postings", "file_sccs", "code_meta", "skipped")
# Bookkeeping: everything the replay reaches must be there. More is normal, so it is not
# reported: a session folded by `ctx commit` stays applied though the new heads no
# longer reach it (and rows nothing reaches change no answer).
REACHED_TABLES: dict[str, TableCheck] = {
    "applied": TableCheck("SELECT oid, kind FROM applied", 1),
    "applied_batches": TableCheck("SELECT oid FROM applied_batches", 1),
    # Versions a purge record names, and those built on them (ctx purge): a live index may
    # also hold a descendant it skipped that a rebuild never met.
    "purged": TableCheck("SELECT version FROM purged", 1),
    # Which batch a version is filed under is the first that carried it (a session's
    # work commit, or the fold that replaced it): the version itself must match.
    "versions": TableCheck("SELECT key, version, stamp, kind, record FROM versions", 2),
    "commit_graph": TableCheck("SELECT oid, gen, kind, session, base FROM commit_graph", 1),
    "commit_parents": TableCheck("SELECT oid, parent FROM commit_parents", 2),
    "node_heads": TableCheck("SELECT node_id, version, commit_oid, prev, stamp FROM node_heads", 3),
    # One row per command_run version (index.runs), as versions: a live index may hold more.
    "runs": TableCheck("SELECT version, name, tool, exit_code, run_at, snapshot, argv, diagnostics,"
                       " diagnostic_count, summary FROM runs", 1),
    "runs_fts": TableCheck("SELECT r.version, f.name, f.status, f.text FROM runs_fts f"
                           " LEFT JOIN runs r ON r.rowid = f.rowid", 1),
    "updated_in": TableCheck("SELECT node_id, commit_oid, version, stamp FROM updated_in", 3),
    "file_versions": TableCheck("SELECT path, content, commit_oid, version, stamp, file_version"
                                " FROM file_versions", 4),
}


# Caches of what other tables hold, checked against the file's own tables (``_check_caches``):
# a replay writes none.
CACHE_TABLES = ("corpus_cache",)

# Writes into the connection's (temporary) code tables the rows ``ctx index`` derives now from
# each of the given indexed files (path -> (blob id, module name or None, note)) whose content
# in the work tree is still that blob; returns those paths. ``code.ingest.rederive_rows``.
Rederive = Callable[[sqlite3.Connection, dict[str, tuple[bytes, str | None, str | None]]], set[str]]


def compared_tables() -> frozenset[str]:
    """Every table name the comparison covers (tests hold it to the schema)."""
    return frozenset(name for tables in (STRICT_TABLES, REACHED_TABLES, CODE_TABLES)
                     for table, check in tables.items()
                     for name in (check.reads or (table,))) | set(CACHE_TABLES) \
        | set(CODE_COUNTED)


@dataclass
class IndexComparison:
    """What ``compare_index`` found."""

    tables: int = 0
    rows: int = 0
    differences: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not any(d.severity == "error" for d in self.differences)


def _key_text(key: Sequence[Any]) -> str:
    parts = [_short(v, 100) for v in key]  # a key is shown whole unless it is very long
    return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"


def _order(row: Sequence[Any]) -> tuple[tuple[int, Any], ...]:
    """A Python sort key that orders like SQLite's ORDER BY (NULL, numbers, text, blobs)."""
    return tuple((0, 0) if v is None else (1, v) if isinstance(v, int | float)
                 else (2, v) if isinstance(v, str) else (3, bytes(v)) for v in row)


def _check_files(store: Store) -> list[Problem]:
    folder = index_dir(store)
    try:
        fsio.check_under(store.root, folder)
    except UnsafePath as exc:
        return [Problem("E020", "index", exc.message)]
    return [Problem("E020", "index", f"{path} is {fsio.file_kind(st.st_mode)}, not a regular file")
            for path, st in _irregular_files(folder)]


def compare_index(store: Store, rederive: Rederive | None = None) -> IndexComparison:
    """Replay the store into a fresh index and compare the file with it.

    Args:
        store: The store (read only).
        rederive: Derives code rows from the work tree (``Rederive``); None leaves the code
            index's rows uncompared (its own consistency is still checked).

    Returns:
        The tables and rows compared, and each difference found (E007: the file or the
        SCC view differs from the replay or cannot be read; E020: an index file is a
        link or special).

    Raises:
        CtxError: (E001-E005) if the store itself cannot be replayed.
    """
    report = IndexComparison()
    report.differences = _check_files(store)
    path = index_dir(store) / INDEX_FILE
    if report.differences:
        return report
    if not path.exists():
        report.differences.append(Problem(
            "E007", "index", "no index file (the next command builds it)", "warning"))
        return report
    try:
        disk = db.connect(path, busy_seconds=5.0, read_only=True)
    except (sqlite3.Error, UnsafePath) as exc:
        report.differences.append(Problem("E007", "index", f"cannot open: {exc}"))
        return report
    try:
        _compare(store, disk, report, rederive)
    finally:
        disk.close()
    return report


def _compare(store: Store, disk: sqlite3.Connection, report: IndexComparison,
             rederive: Rederive | None) -> None:
    try:
        problem = inspect_index(disk, create=False, quick_check_max=0)
        if problem is None:
            found = [str(r[0]) for r in disk.execute("PRAGMA integrity_check(20)")]
            if found != ["ok"]:
                problem = "integrity_check: " + "; ".join(found)[:300]
        rows = dict(disk.execute("SELECT key, value FROM meta").fetchall()) if problem is None else {}
    except (sqlite3.Error, CtxError) as exc:
        problem = str(exc)
    if problem is not None:
        report.differences.append(Problem("E007", "index", f"damaged: {problem}"))
        return
    if "build_state" in rows:  # a partial index is not compared: no reader takes it as complete
        report.differences.append(Problem(
            "E024", "index", "partial: the index is only partly built (`ctx rebuild` finishes it)"))
        return
    synced = parse_snapshot(rows["synced"]) if "synced" in rows else None
    # The reference lives in a temporary file, not in memory: it holds all the code.
    with tempfile.TemporaryDirectory(prefix="ctx-verify-") as tmp:
        ref = _connect(Path(tmp) / INDEX_FILE)
        try:
            ref.execute("PRAGMA synchronous = OFF")  # thrown away at the end
            _create(ref)
            if synced is not None:
                try:
                    sync_index(store, ref, target=synced)
                except CtxError as exc:
                    report.differences.append(Problem(
                        "E007", "index", f"synced to pointers the store cannot replay: {exc.message}"))
                    return
                if synced != pointer_snapshot(store):
                    report.differences.append(Problem(
                        "E007", "index", "behind the pointers (the next command catches up)",
                        "warning"))
            for tables, exact in ((STRICT_TABLES, True), (REACHED_TABLES, False)):
                for table, check in tables.items():
                    _compare_table(table, check, disk, ref, exact, report)
            if not _attach_code(store, disk, report):
                return
            _compare_code(disk, ref, Path(tmp), rederive, report)
            report.differences.extend(_check_caches(disk))
            report.differences.extend(check_code_counts(disk))
            report.differences.extend(_check_scc(store, ref, disk))
        finally:
            ref.close()


def _attach_code(store: Store, disk: sqlite3.Connection, report: IndexComparison) -> bool:
    """Attach this clone's code index to ``disk``, read-only; False (a problem named) if bad."""
    path = index_dir(store) / codedb.CODE_FILE
    codedb.register_functions(disk)
    try:
        if not path.exists():
            disk.execute("ATTACH DATABASE ':memory:' AS code")
            disk.executescript(codedb.code_schema("code."))
            report.differences.append(Problem(
                "E007", "index:code", "no code index (`ctx index` builds it)", "warning"))
            return True
        disk.execute("ATTACH DATABASE ? AS code", (path.absolute().as_uri() + "?mode=ro",))
        problem = codedb.inspect_code(disk, create=False)
        if problem is None:
            found = [str(r[0]) for r in disk.execute("PRAGMA code.integrity_check(20)")]
            if found != ["ok"]:
                problem = "integrity_check: " + "; ".join(found)[:300]
    except sqlite3.Error as exc:
        problem = str(exc)
    if problem is not None:
        report.differences.append(Problem("E007", "index:code", f"damaged: {problem}"))
        return False
    return True


def _compare_code(disk: sqlite3.Connection, ref: sqlite3.Connection, tmp: Path,
                  rederive: Rederive | None, report: IndexComparison) -> None:
    """The code tables against what ``ctx index`` derives now from the same files."""
    codedb.attach(ref, tmp)
    codedb.inspect_code(ref)
    if rederive is None:
        return
    indexed = {str(p): (bytes(b), m, n) for p, b, m, n in disk.execute(
        "SELECT path, blob, module, note FROM files")}
    done = rederive(ref, indexed)
    for conn in (disk, ref):
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS verified (path TEXT PRIMARY KEY)")
        conn.execute("DELETE FROM temp.verified")
        conn.executemany("INSERT INTO temp.verified(path) VALUES (?)", [(p,) for p in done])
    changed = len(indexed) - len(done)
    if changed:
        report.differences.append(Problem(
            "E007", "index:code", f"{changed} indexed file(s) changed or unreadable since they "
            "were indexed: not compared (`ctx index` brings them up to date)", "warning"))
    for table, check in CODE_TABLES.items():
        col = _first(check.sql)  # NULL: a row whose file row is gone, compared as such
        filtered = TableCheck(f"SELECT * FROM ({check.sql}) WHERE {col} IS NULL OR {col} IN"
                              " (SELECT path FROM temp.verified)", check.key, check.reads)
        _compare_table(table, filtered, disk, ref, True, report)


def _first(sql: str) -> str:
    """The first selected column's name in the outer query (``path`` or ``c.path`` -> ``path``)."""
    head = sql.split(",", 1)[0].removeprefix("SELECT ").strip()
    return head.split(".")[-1]


def _check_caches(disk: sqlite3.Connection) -> list[Problem]:
    """A current ``corpus_cache`` value must be what the file's own file table gives.

    Values of an older ``code_generation`` are never read, so they are not differences.
    """
    from ctxstore.index.retrieval import (
        code_generation,
        corpus_apart,
        decode_corpus,
        encode_corpus,
        read_corpus,
    )

    problems: list[Problem] = []
    generation = code_generation(disk)
    for name, stored, data in disk.execute(
            "SELECT name, generation, data FROM corpus_cache ORDER BY name"):
        if stored != generation:
            continue
        apart = corpus_apart(str(name))
        if apart is None:
            problems.append(Problem("E007", "index:corpus_cache", f"{_short(name)}: unknown name"))
        elif decode_corpus(bytes(data)) is None:
            problems.append(Problem("E007", "index:corpus_cache",
                                    f"{name}: not a packed file table"))
        elif bytes(data) != encode_corpus(read_corpus(disk, apart)):
            problems.append(Problem("E007", "index:corpus_cache",
                                    f"{name}: differs from the file table"))
    return problems


def _groups(cur: sqlite3.Cursor, key: int) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
    for k, rows in groupby(cur, key=lambda r: tuple(r[:key])):
        yield k, list(rows)


def _paired(disk: sqlite3.Cursor, ref: sqlite3.Cursor, key: int
            ) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Both sides' rows key by key (merged in key order): ``(key, disk rows, replay rows)``."""
    have, want = _groups(disk, key), _groups(ref, key)
    h, w = next(have, None), next(want, None)
    while h is not None or w is not None:
        if w is None or (h is not None and _order(h[0]) < _order(w[0])):
            assert h is not None
            yield h[0], h[1], []
            h = next(have, None)
        elif h is None or _order(w[0]) < _order(h[0]):
            yield w[0], [], w[1]
            w = next(want, None)
        else:
            yield h[0], h[1], w[1]
            h, w = next(have, None), next(want, None)


def _row_differences(key: tuple[Any, ...], have: list[tuple[Any, ...]],
                     want: list[tuple[Any, ...]], names: Sequence[str], exact: bool
                     ) -> Iterator[str]:
    """What differs between one key's rows on disk and in the replay, one line each."""
    common = Counter(have) & Counter(want)
    extra = list((Counter(have) - common).elements())
    missing = list((Counter(want) - common).elements())
    if not extra and not missing:
        return
    where = _key_text(key)
    for got, wanted in zip(extra, missing, strict=False):
        cols = [i for i in range(len(names)) if got[i] != wanted[i]][:3]
        yield f"{where}: " + "; ".join(
            f"{names[i]} is {_short(got[i])}, the replay has {_short(wanted[i])}" for i in cols)
    paired = min(len(extra), len(missing))
    for _ in missing[paired:]:
        yield f"{where}: missing (the replay has it)"
    if exact:
        for _ in extra[paired:]:
            yield f"{where}: not in the replay"


def _compare_table(table: str, check: TableCheck, disk: sqlite3.Connection,
                   ref: sqlite3.Connection, exact: bool, report: IndexComparison) -> None:
    ordered = f"SELECT * FROM ({check.sql}) ORDER BY "  # noqa: S608 - fixed statements
    try:
        width = len(ref.execute(f"{ordered}1 LIMIT 0").description)
        sql = ordered + ", ".join(str(i) for i in range(1, width + 1))
        have = disk.execute(sql)
        names = [d[0] for d in have.description]
        found = 0
        for key, got, wanted in _paired(have, ref.execute(sql), check.key):
            report.rows += len(got)
            for line in _row_differences(key, got, wanted, names, exact):
                found += 1
                if found <= MAX_PER_TABLE:
                    report.differences.append(Problem("E007", f"index:{table}", line))
    except sqlite3.Error as exc:
        report.differences.append(Problem("E007", f"index:{table}", f"unreadable: {exc}"))
        return
    report.tables += 1
    if found > MAX_PER_TABLE:
        report.differences.append(Problem(
            "E007", f"index:{table}", f"{found - MAX_PER_TABLE} more row(s) differ from the replay"))


def _graph_edges(ref: sqlite3.Connection, disk: sqlite3.Connection) -> list[tuple[str, ...]]:
    """The graph ``index.derived.graph_edges`` reads, from the two sources.

    Knowledge and build edges come from the replay, code edges from this clone's code index
    (derived from the work tree, not replayed).
    """
    cols = "from_kind, from_key, to_kind, to_key, label"
    whole = " WHERE from_kind IS NOT NULL AND from_key IS NOT NULL AND to_kind IS NOT NULL" \
        " AND to_key IS NOT NULL"
    rows = set(ref.execute(f"SELECT {cols} FROM main.edges UNION SELECT {cols}"  # noqa: S608
                           f" FROM main.build_edges{whole}"))
    rows |= set(disk.execute(f"SELECT {cols} FROM code.code_edges{whole}"))  # noqa: S608
    return sorted(tuple(str(v) for v in r) for r in rows)


def _check_scc(store: Store, ref: sqlite3.Connection, disk: sqlite3.Connection) -> list[Problem]:
    """The SCC view ``DERIVED/scc_latest`` names against one recomputed from the replay.

    A view read at other heads than the store's is out of date, which is normal (staged
    work since; the next reader rebuilds it silently) and not reported; at the same heads
    it must be what the graph gives.
    """
    from ctxstore.graph.scc import POINTER_NAME, compute_scc, load_scc
    from ctxstore.replay import state_heads

    subject = f"derived:{POINTER_NAME}"
    try:
        found = load_scc(store.root)
    except UnsafePath as exc:
        return [Problem("E020", subject, exc.message)]
    if found.notices:
        return [Problem("E007", subject, n + " (`ctx rebuild --scc` rebuilds it)")
                for n in found.notices]
    if found.view is None:
        return []
    try:
        heads = state_heads(store)
        if found.view.heads != tuple(sorted(set(heads))):
            return []
        sync_index(store, ref)  # the view is of the current pointers, which may be ahead
    except CtxError as exc:  # the pointers' own problem, which the object check names
        return [Problem("E007", subject, f"not checked: {exc.message}", "warning")]
    want = compute_scc(_graph_edges(ref, disk), heads)  # type: ignore[arg-type]
    if want == found.view:
        return []
    assert found.oid is not None
    return [Problem("E007", subject, f"names {found.oid.hex()[:16]}, which differs from the view "
                    f"the store gives ({_scc_difference(found.view, want)}); "
                    "`ctx rebuild --scc` rebuilds it")]


def _scc_difference(have: SccView, want: SccView) -> str:
    """The first thing that differs between a stored SCC view and the recomputed one."""
    extra = sorted(set(have.nodes) - set(want.nodes))
    if extra:
        return f"{len(extra)} node(s) not in the graph, first {_short(extra[0])}"
    missing = sorted(set(want.nodes) - set(have.nodes))
    if missing:
        return f"{len(missing)} node(s) of the graph missing, first {_short(missing[0])}"
    for node, got, wanted in zip(have.nodes, have.scc_of, want.scc_of, strict=False):
        if got != wanted:
            return f"{_short(node)} is in component {got}, the replay puts it in {wanted}"
    return "the condensation edges differ"
