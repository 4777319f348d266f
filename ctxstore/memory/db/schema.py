"""The schema of ``memory.sqlite``: schema 1 as first made, and the ordered migrations after it.

It cannot be rebuilt, so every file, new or made by an older ctx, goes through the same steps,
each recorded in ``schema_version`` in the transaction that applies it.
"""

from __future__ import annotations

import sqlite3

from ctxstore.search.fts5 import TOKENIZE
from ctxstore.search.tokenize import PROSE
from ctxstore.sqlite import Migration

__all__ = ["MEMORY_FILE", "SCHEMA_VERSION"]

MEMORY_FILE = "memory.sqlite"
# Schema 1, as the first ctx with transcript memory made it (never edited: later versions are
# migrations below).
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, first_ts INTEGER, last_ts INTEGER);
CREATE TABLE index_state (file_path TEXT PRIMARY KEY, dev INTEGER NOT NULL, ino INTEGER NOT NULL,
    size INTEGER NOT NULL, offset INTEGER NOT NULL, head_hash TEXT NOT NULL,
    open_turn INTEGER, last_indexed INTEGER NOT NULL);
CREATE TABLE seen (uuid TEXT PRIMARY KEY, turn_id INTEGER) WITHOUT ROWID;
CREATE TABLE spans (id INTEGER PRIMARY KEY, session TEXT NOT NULL,
    parent_id INTEGER REFERENCES spans(id), name TEXT NOT NULL, summary TEXT,
    start_seq INTEGER NOT NULL, end_seq INTEGER NOT NULL, depth INTEGER NOT NULL,
    ts_start INTEGER, ts_end INTEGER);
CREATE INDEX spans_session ON spans(session);
CREATE INDEX spans_parent ON spans(parent_id);
CREATE TABLE turns (id INTEGER PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL,
    span_id INTEGER REFERENCES spans(id), kind TEXT NOT NULL, sidechain INTEGER NOT NULL,
    ts_start INTEGER, ts_end INTEGER, user_text TEXT NOT NULL, assistant_text TEXT NOT NULL,
    tool_text TEXT NOT NULL, uuids TEXT NOT NULL, source_file TEXT NOT NULL);
CREATE INDEX turns_session ON turns(session, seq);
CREATE INDEX turns_time ON turns(ts_start);
CREATE VIRTUAL TABLE turns_fts USING fts5(user_text, assistant_text, tool_text,
    tokenize = 'unicode61 remove_diacritics 2');
CREATE TABLE ideas (id INTEGER PRIMARY KEY, turn_id INTEGER NOT NULL REFERENCES turns(id),
    span_id INTEGER REFERENCES spans(id), session TEXT NOT NULL, content TEXT NOT NULL,
    intent TEXT NOT NULL CHECK(intent IN ('decision', 'conclusion', 'question', 'problem',
        'solution', 'todo', 'context')),
    confidence REAL NOT NULL CHECK(confidence >= 0 AND confidence <= 1),
    answered INTEGER, source_uuid TEXT NOT NULL, ts INTEGER);
CREATE INDEX ideas_turn ON ideas(turn_id);
CREATE INDEX ideas_session ON ideas(session, id);
CREATE INDEX ideas_intent ON ideas(intent);
CREATE TABLE entities (id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
    UNIQUE(name, type));
CREATE TABLE idea_entities (idea_id INTEGER NOT NULL REFERENCES ideas(id),
    entity_id INTEGER NOT NULL REFERENCES entities(id), PRIMARY KEY (idea_id, entity_id))
    WITHOUT ROWID;
CREATE TABLE relations (from_id INTEGER NOT NULL REFERENCES ideas(id),
    to_id INTEGER NOT NULL REFERENCES ideas(id), relation_type TEXT NOT NULL,
    confidence REAL NOT NULL, PRIMARY KEY (from_id, to_id, relation_type)) WITHOUT ROWID;
CREATE INDEX relations_to ON relations(to_id);
INSERT INTO meta VALUES ('schema_version', '1');
"""
# Each version's step, in order (spec 001 §15): every file, new or made by an older ctx, goes
# through the same steps, each recorded in ``schema_version`` in the transaction that applies it.
# ``meta.schema_version`` follows along: what a ctx from before ``schema_version`` reads, so that
# it refuses (E014) a file a later step changed.
_MIGRATIONS = [
    Migration(1, _SCHEMA),
    # entities gain the code file and symbol they name
    Migration(2, """
        ALTER TABLE entities ADD COLUMN code_path TEXT;
        ALTER TABLE entities ADD COLUMN code_qualname TEXT;
        CREATE INDEX entities_code_path ON entities(code_path);
        UPDATE meta SET value = '2' WHERE key = 'schema_version';
    """),
    # turns_fts holds the terms of search.tokenize (it held FTS5's unicode61 words): made again
    # from turns, whose text is kept whole
    Migration(3, lambda conn: _retokenize_turns(conn, 3)),
    # turns_fts holds stemmed terms (tokenize.PROSE): "retries" finds "retry"
    Migration(4, lambda conn: _retokenize_turns(conn, 4)),
    # ideas record where they came from (spec 003 Phase 4): the Git branch and the code's commit
    # when they were said; NULL for the ideas of older files (unknown, never guessed)
    Migration(5, """
        ALTER TABLE ideas ADD COLUMN branch TEXT;
        ALTER TABLE ideas ADD COLUMN git_commit TEXT;
        UPDATE meta SET value = '5' WHERE key = 'schema_version';
    """),
    # a new table only: the vectors of turns for hybrid search ([memory] vectors), per model;
    # derived (``ctx memory vectors --rebuild`` makes them again from the turns)
    Migration(6, """
        CREATE TABLE turn_vectors (turn_id INTEGER NOT NULL REFERENCES turns(id),
            model TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (turn_id, model)) WITHOUT ROWID;
        UPDATE meta SET value = '6' WHERE key = 'schema_version';
    """),
    # two new tables only: the vectors of ideas and of topic spans, per model, beside the
    # turns'; derived like them (empty until the next fill, which embeds what has none)
    Migration(7, """
        CREATE TABLE idea_vectors (idea_id INTEGER NOT NULL REFERENCES ideas(id),
            model TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (idea_id, model)) WITHOUT ROWID;
        CREATE TABLE span_vectors (span_id INTEGER NOT NULL REFERENCES spans(id),
            model TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (span_id, model)) WITHOUT ROWID;
        UPDATE meta SET value = '7' WHERE key = 'schema_version';
    """),
]
SCHEMA_VERSION = _MIGRATIONS[-1].version
_LEGACY_TABLES = frozenset({"meta", "sessions", "index_state", "seen", "spans", "turns",
                            "turns_fts", "ideas", "entities", "idea_entities", "relations"})
_TABLES = _LEGACY_TABLES | {"schema_version", "turn_vectors", "idea_vectors", "span_vectors"}


_TURNS_FTS = ("CREATE VIRTUAL TABLE turns_fts USING fts5(user_text, assistant_text, tool_text, "
              f"{TOKENIZE})")


def _retokenize_turns(conn: sqlite3.Connection, version: int) -> None:
    """Schemas 3 and 4: ``turns_fts`` made again from ``turns`` with memory's terms (``PROSE``).

    Both steps write the terms of this ctx (step 3's unstemmed terms are not kept anywhere), so
    a file of schema 2 or older is made over once more by step 4, at no other cost.
    """
    index_text = PROSE.index_text
    conn.execute("DROP TABLE turns_fts")
    conn.execute(_TURNS_FTS)
    rows = conn.execute("SELECT id, user_text, assistant_text, tool_text FROM turns")
    while batch := rows.fetchmany(500):
        conn.executemany("INSERT INTO turns_fts(rowid, user_text, assistant_text, tool_text)"
                         " VALUES (?, ?, ?, ?)",
                         [(i, index_text(u), index_text(a), index_text(t)) for i, u, a, t in batch])
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
