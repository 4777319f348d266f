"""The derived index's SQLite schema (``.ctx/index/index.sqlite``).

Everything here is rebuilt from objects by ``ctx rebuild``; a schema change bumps
``INDEX_SCHEMA_VERSION`` and the next open drops and rebuilds, never migrates.
"""

from __future__ import annotations

import sqlite3

__all__ = ["EXPECTED_SCHEMA_DIGEST", "INDEX_SCHEMA_VERSION", "SCHEMA", "SchemaRow",
           "expected_schema", "read_schema", "schema_digest"]

# (type, name, tbl_name, sql) of one row of ``sqlite_schema``.
SchemaRow = tuple[str, str, str, "str | None"]

# 2: tokens counts the stripped content; 3: commit graph and node heads (concurrent edits);
# 4: nodes.hook_key (the indexed lookup of idempotent agent writes);
# 5: code intelligence: files, symbols, code_edges, chunks, chunks_fts (index.code); packages,
#    targets, crates, command_runs, diagnostics (index.build)
# 6: file_terms, file_lengths (retrieval postings over search.tokenize tokens)
# 7: term_df (document frequencies of file_terms), corpus_cache (a pack's file table, packed);
#    import edges read from covering indexes: symbols_path (path, kind, qualname),
#    symbols_qualname (qualname, path), code_edges_path (path, label, to_kind, to_key),
#    code_edges_to (to_kind, to_key, label, path)
# 8: Markdown sections over CLASS_SPLIT_TOKENS are chunked by subsection, or in windows when
#    they have none (index.code.chunk_file)
# 9: one tokeniser (search.tokenize): nodes_fts and chunks_fts hold each field's terms
#    (identifiers whole and in parts, folded) under FTS5's ascii tokenizer with _ a token
#    character; file_terms hold its significant terms (non-ASCII words folded, one stop list)
# 10: purged (version ids a reachable ``purge`` record names: never applied, ctx purge)
# 11: the code tables (files, symbols, code_edges, chunks, chunks_fts, file_terms, file_lengths,
#    term_df, corpus_cache) move to this clone's code.sqlite (index.codedb), derived from the
#    work tree; build edges (cargo, command runs) get their own table, build_edges
# 12: runs, runs_fts (every stored run of a command, searchable: index.runs)
# 13: updated_in (spec 002 §9 UpdatedIn: the canonical commits whose change batches hold a
#    version of a node, derived from history), read through the view updated_in_edges
# 14: file_versions (spec 002 §9 HasVersion and UpdatedIn of files: each content of a path a
#    canonical commit recorded, by a ctx add file snapshot or a Mentions edge's evidence),
#    read through the views has_version_edges and file_updated_in_edges
# 15: file_updated_in_edges takes the first commit by time, then by generation in the commit
#    graph: a commit's time has whole seconds, so two commits of one second were both "first"
INDEX_SCHEMA_VERSION = 15

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS applied (oid BLOB PRIMARY KEY, kind TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS applied_batches (oid BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS purged (version BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS winners (
    key TEXT PRIMARY KEY, stamp INTEGER NOT NULL, version BLOB NOT NULL, live INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nodes (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    content TEXT NOT NULL,
    content_blob BLOB,
    summary TEXT,
    status TEXT NOT NULL,
    superseded_by TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    author TEXT,
    metadata TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    version BLOB NOT NULL,
    hook_key TEXT
);
CREATE INDEX IF NOT EXISTS nodes_type ON nodes(type);
CREATE INDEX IF NOT EXISTS nodes_created ON nodes(created_at);
CREATE INDEX IF NOT EXISTS nodes_updated ON nodes(updated_at);
CREATE INDEX IF NOT EXISTS nodes_superseded ON nodes(superseded_by);
CREATE INDEX IF NOT EXISTS nodes_hook_key ON nodes(hook_key) WHERE hook_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS tags (
    node_id TEXT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (node_id, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tags_tag ON tags(tag, node_id);
CREATE TABLE IF NOT EXISTS edges (
    from_kind TEXT NOT NULL, from_key TEXT NOT NULL,
    to_kind TEXT NOT NULL, to_key TEXT NOT NULL,
    label TEXT NOT NULL,
    weight REAL,
    metadata TEXT NOT NULL,
    evidence TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version BLOB NOT NULL,
    PRIMARY KEY (from_kind, from_key, to_kind, to_key, label)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS edges_to ON edges(to_kind, to_key, label);
CREATE TABLE IF NOT EXISTS views (
    name TEXT PRIMARY KEY, query TEXT NOT NULL, budget INTEGER NOT NULL, description TEXT,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, version BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    key TEXT NOT NULL, version BLOB NOT NULL, stamp INTEGER NOT NULL, kind TEXT NOT NULL,
    batch BLOB NOT NULL, record BLOB NOT NULL, PRIMARY KEY (key, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commit_graph (
    oid BLOB PRIMARY KEY, gen INTEGER NOT NULL, kind TEXT NOT NULL, session TEXT, base BLOB
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS commit_graph_session ON commit_graph(session, base)
    WHERE session IS NOT NULL;
CREATE TABLE IF NOT EXISTS commit_parents (
    oid BLOB NOT NULL, parent BLOB NOT NULL, PRIMARY KEY (oid, parent)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS node_heads (
    node_id TEXT NOT NULL, version BLOB NOT NULL, commit_oid BLOB NOT NULL, prev BLOB,
    stamp INTEGER NOT NULL, PRIMARY KEY (node_id, version, commit_oid)
) WITHOUT ROWID;
-- UpdatedIn (spec 002 §9): each canonical commit (commit_oid, its time in ms) whose change
-- batches hold a version of a node (its creation, edits, deletion): derived, never an object
-- (the key's columns first: SQLite 3.40's quick_check misreads a WITHOUT ROWID table whose
-- key skips a column)
CREATE TABLE IF NOT EXISTS updated_in (
    node_id TEXT NOT NULL, commit_oid BLOB NOT NULL, version BLOB NOT NULL,
    stamp INTEGER NOT NULL, PRIMARY KEY (node_id, commit_oid, version)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS updated_in_commit ON updated_in(commit_oid);
CREATE VIEW IF NOT EXISTS updated_in_edges(from_kind, from_key, to_kind, to_key, label, stamp) AS
    SELECT DISTINCT 'node', node_id, 'commit', lower(hex(commit_oid)), 'UpdatedIn', stamp
    FROM updated_in;
-- HasVersion / UpdatedIn of files (spec 002 §9): each content (blob id) of a path a canonical
-- commit recorded (commit_oid, its time in ms), by a `ctx add file` snapshot (file_version: its
-- FileVersion object) or a Mentions edge to the file whose evidence names the blob it read:
-- derived, never an object. A version is named by its content; a file is UpdatedIn the commit
-- that first recorded each of its versions (the earliest; within one second, the fewest commits
-- from the root).
CREATE TABLE IF NOT EXISTS file_versions (
    path TEXT NOT NULL, content BLOB NOT NULL, commit_oid BLOB NOT NULL, version BLOB NOT NULL,
    stamp INTEGER NOT NULL, file_version BLOB,
    PRIMARY KEY (path, content, commit_oid, version)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS file_versions_version ON file_versions(version);
CREATE VIEW IF NOT EXISTS has_version_edges(from_kind, from_key, to_kind, to_key, label, stamp) AS
    SELECT 'file', path, 'version', lower(hex(content)), 'HasVersion', min(stamp)
    FROM file_versions GROUP BY path, content;
CREATE VIEW IF NOT EXISTS file_updated_in_edges(from_kind, from_key, to_kind, to_key, label,
                                                stamp) AS
    SELECT DISTINCT 'file', f.path, 'commit', lower(hex(f.commit_oid)), 'UpdatedIn', f.stamp
    FROM file_versions f LEFT JOIN commit_graph c ON c.oid = f.commit_oid
    WHERE NOT EXISTS (SELECT 1 FROM file_versions g LEFT JOIN commit_graph d ON d.oid = g.commit_oid
                      WHERE g.path = f.path AND g.content = f.content
                        AND (g.stamp < f.stamp OR (g.stamp = f.stamp
                                                   AND coalesce(d.gen, 0) < coalesce(c.gen, 0))));
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(content, summary,
    tokenize = "ascii tokenchars '_'");
-- build rows (index.build): cargo packages/targets/crates, command runs, diagnostics
CREATE TABLE IF NOT EXISTS packages (
    workspace TEXT NOT NULL, package_id TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL,
    manifest_path TEXT NOT NULL, edition TEXT NOT NULL, member INTEGER NOT NULL,
    PRIMARY KEY (workspace, package_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS targets (
    workspace TEXT NOT NULL, target_id TEXT NOT NULL, package_id TEXT NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, src_path TEXT NOT NULL, crate_types TEXT NOT NULL,
    PRIMARY KEY (workspace, target_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS crates (
    workspace TEXT NOT NULL, crate_key TEXT NOT NULL, target_id TEXT NOT NULL,
    name TEXT NOT NULL, PRIMARY KEY (workspace, crate_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS command_runs (
    name TEXT PRIMARY KEY, tool TEXT NOT NULL, exit_code INTEGER, run_at INTEGER NOT NULL,
    snapshot BLOB NOT NULL, output_blob BLOB NOT NULL, output_bytes INTEGER NOT NULL,
    diagnostics INTEGER NOT NULL, argv TEXT NOT NULL, notes TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS diagnostics (
    id TEXT PRIMARY KEY, command TEXT NOT NULL, tool TEXT NOT NULL, severity TEXT NOT NULL,
    code TEXT, message TEXT NOT NULL, path TEXT, line INTEGER, col INTEGER, exit_code INTEGER,
    run_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS diagnostics_command ON diagnostics(command);
CREATE INDEX IF NOT EXISTS diagnostics_path ON diagnostics(path);
-- edges of the build records (index.build): path is cargo:<manifest path> or cmd:<name>
CREATE TABLE IF NOT EXISTS build_edges (
    path TEXT NOT NULL, from_kind TEXT, from_key TEXT, to_kind TEXT, to_key TEXT,
    label TEXT NOT NULL, confidence TEXT NOT NULL, tool TEXT NOT NULL, evidence TEXT
);
CREATE INDEX IF NOT EXISTS build_edges_from ON build_edges(from_kind, from_key, label);
CREATE INDEX IF NOT EXISTS build_edges_to ON build_edges(to_kind, to_key, label, path);
CREATE INDEX IF NOT EXISTS build_edges_path ON build_edges(path);
-- every stored run of a command, one per command_run version (index.runs), and its terms
-- stemmed as prose (search.tokenize.PROSE)
CREATE TABLE IF NOT EXISTS runs (
    rowid INTEGER PRIMARY KEY, version BLOB NOT NULL UNIQUE, name TEXT NOT NULL,
    tool TEXT NOT NULL, exit_code INTEGER, run_at INTEGER NOT NULL, snapshot BLOB NOT NULL,
    argv TEXT NOT NULL, diagnostics TEXT NOT NULL, diagnostic_count INTEGER NOT NULL,
    summary TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_name ON runs(name, run_at);
CREATE VIRTUAL TABLE IF NOT EXISTS runs_fts USING fts5(name, status, text,
    tokenize = "ascii tokenchars '_'");
"""


# ``schema_digest(expected_schema())`` with the SQLite ctx is tested on (tests/index/test_index.py
# keeps it current). An index whose schema hashes to it is what ``SCHEMA`` creates, without
# building the in-memory reference (about 1 ms, on every hook's first open); any other
# schema is compared row by row, so another SQLite version only takes the slower path.
EXPECTED_SCHEMA_DIGEST = "d897a744317302ef6c248a22236a1e003ac324106f6570dc217b56bd399182cc"

_expected: frozenset[SchemaRow] | None = None


def read_schema(conn: sqlite3.Connection) -> frozenset[SchemaRow]:
    """Every table, index, trigger and view of a database, as SQLite stores them.

    ``sqlite_stat*`` tables (written by ``ANALYZE``) are left out: they change no answer.
    The SQL of FTS5's shadow tables (``nodes_fts_*``, ``runs_fts_*``) is left out too, as FTS5 writes it
    and another SQLite version may word it differently; their presence still counts.
    """
    return frozenset(
        (kind, name, table, None if name.startswith(("nodes_fts_", "runs_fts_")) else sql)
        for kind, name, table, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_stat%'"))


def expected_schema() -> frozenset[SchemaRow]:
    """What ``read_schema`` gives for an index created by ``SCHEMA`` with this SQLite.

    FTS5's shadow tables included; computed once per process in memory.
    """
    global _expected
    if _expected is None:
        conn = sqlite3.connect(":memory:")
        try:
            conn.executescript(SCHEMA)
            _expected = read_schema(conn)
        finally:
            conn.close()
    return _expected


def schema_digest(rows: frozenset[SchemaRow]) -> str:
    """A hex digest of ``read_schema`` rows, independent of their order.

    Args:
        rows: The rows.

    Returns:
        The BLAKE2b-256 hex digest (rows sort by type and name, which are unique). BLAKE2b
        is built in: ``blake3`` (~0.8 ms to import) or ``hashlib`` (which loads OpenSSL)
        would cost every open of the index, a prompt hook's included.
    """
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b
    return blake2b(repr(sorted(rows)).encode(), digest_size=32).hexdigest()
