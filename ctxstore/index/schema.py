"""The derived index's SQLite schema (``.ctx/index/index.sqlite``).

Everything here is rebuilt from objects by ``ctx rebuild``; a schema change bumps
``INDEX_SCHEMA_VERSION`` and the next open drops and rebuilds, never migrates.
"""

from __future__ import annotations

import sqlite3

import blake3

__all__ = ["EXPECTED_SCHEMA_DIGEST", "INDEX_SCHEMA_VERSION", "SCHEMA", "SchemaRow",
           "expected_schema", "read_schema", "schema_digest"]

# (type, name, tbl_name, sql) of one row of ``sqlite_schema``.
SchemaRow = tuple[str, str, str, "str | None"]

# 2: tokens counts the stripped content; 3: commit graph and node heads (concurrent edits);
# 4: nodes.hook_key (the indexed lookup of idempotent agent writes)
INDEX_SCHEMA_VERSION = 4

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS applied (oid BLOB PRIMARY KEY, kind TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS applied_batches (oid BLOB PRIMARY KEY) WITHOUT ROWID;
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
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(content, summary, tokenize = 'unicode61');
"""


# ``schema_digest(expected_schema())`` with the SQLite ctx is tested on (tests/test_index.py
# keeps it current). An index whose schema hashes to it is what ``SCHEMA`` creates, without
# building the in-memory reference (about 1 ms, on every hook's first open); any other
# schema is compared row by row, so another SQLite version only takes the slower path.
EXPECTED_SCHEMA_DIGEST = "99547286fd2ce2f4e583ecad72758c57ac8b36e94caf497f61757bcaf64fbfdf"

_expected: frozenset[SchemaRow] | None = None


def read_schema(conn: sqlite3.Connection) -> frozenset[SchemaRow]:
    """Every table, index, trigger and view of a database, as SQLite stores them.

    ``sqlite_stat*`` tables (written by ``ANALYZE``) are left out: they change no answer.
    The SQL of FTS5's shadow tables (``nodes_fts_*``) is left out too, as FTS5 writes it
    and another SQLite version may word it differently; their presence still counts.
    """
    return frozenset(
        (kind, name, table, None if name.startswith("nodes_fts_") else sql)
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
        The BLAKE3 hex digest (rows sort by type and name, which are unique).
    """
    return blake3.blake3(repr(sorted(rows)).encode()).hexdigest()
