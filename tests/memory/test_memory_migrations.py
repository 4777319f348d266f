"""A transcript memory file an older ctx wrote goes through the ordered migrations, losing nothing.

Before ``schema_version``, ``memory.sqlite`` named its schema in ``meta`` only (1: the first
release; 2: entities linked to the code index). Such a file is built here from the DDL those
releases shipped, frozen below, and filled with the rows a real backfill produced; the installed
CLI then opens it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ctxstore.errors import UnsupportedStoreVersion
from ctxstore.memory.db import SCHEMA_VERSION, memory_path, open_memory
from ctxstore.repo import Store
from ctxstore.search.tokenize import PROSE
from tests.memory.test_memory_cli import cj
from tests.memory.test_memory_codelink import NOW, _project, _talk

# The schema of transcript memory as ctx created it before ``schema_version`` existed (frozen:
# never edit). Schema 2 added ``entities.code_path``/``code_qualname`` and their index.
_LEGACY_TABLES = """
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
{entities}
CREATE TABLE idea_entities (idea_id INTEGER NOT NULL REFERENCES ideas(id),
    entity_id INTEGER NOT NULL REFERENCES entities(id), PRIMARY KEY (idea_id, entity_id))
    WITHOUT ROWID;
CREATE TABLE relations (from_id INTEGER NOT NULL REFERENCES ideas(id),
    to_id INTEGER NOT NULL REFERENCES ideas(id), relation_type TEXT NOT NULL,
    confidence REAL NOT NULL, PRIMARY KEY (from_id, to_id, relation_type)) WITHOUT ROWID;
CREATE INDEX relations_to ON relations(to_id);
"""
LEGACY = {
    1: _LEGACY_TABLES.format(entities="""CREATE TABLE entities (id INTEGER PRIMARY KEY,
    name TEXT NOT NULL, type TEXT NOT NULL, UNIQUE(name, type));"""),
    2: _LEGACY_TABLES.format(entities="""CREATE TABLE entities (id INTEGER PRIMARY KEY,
    name TEXT NOT NULL, type TEXT NOT NULL, code_path TEXT, code_qualname TEXT, UNIQUE(name, type));
CREATE INDEX entities_code_path ON entities(code_path);"""),
}


def _tables(conn: sqlite3.Connection, schema: str = "main") -> list[str]:
    """The tables of the legacy schema (FTS5's shadow tables are its own business)."""
    return [r[0] for r in conn.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = "
                                       "'table' AND name NOT LIKE 'turns\\_fts\\_%' ESCAPE '\\' "
                                       "ORDER BY name")]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")]


def _rows(path: Path, columns: dict[str, list[str]]) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every legacy table, in those tables' columns (``rowid`` for the full text)."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return {table: sorted(conn.execute(
            f"SELECT {'rowid, ' if table == 'turns_fts' else ''}{', '.join(cols)} FROM {table}"),
            key=repr) for table, cols in columns.items()}
    finally:
        conn.close()


def _write_legacy(store: Store, version: int) -> dict[str, list[str]]:
    """Rewrite the store's memory as a ctx of ``version`` wrote it, with the same rows.

    Returns each legacy table's columns.
    """
    path = memory_path(store.root)
    current = path.with_name("current.sqlite")
    path.rename(current)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(LEGACY[version])
    conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
    columns = {table: _columns(conn, table) for table in _tables(conn)}
    conn.execute("BEGIN")
    for table, cols in columns.items():
        names = ", ".join(cols)
        if table == "turns_fts":
            conn.execute(f"INSERT INTO main.{table} (rowid, {names}) SELECT rowid, {names} "
                         f"FROM cur.{table}")
        else:
            conn.execute(f"INSERT INTO main.{table} ({names}) SELECT {names} FROM cur.{table}")
    conn.execute("UPDATE main.meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE cur")
    assert "schema_version" not in _tables(conn)
    conn.close()
    current.unlink()
    return columns


@pytest.mark.parametrize("version", [1, 2])
def test_memory_migrations_an_older_memory_file_is_migrated_and_nothing_is_lost(
        store: Store, tmp_path: Path, version: int) -> None:
    if version == 2:
        _project(store)  # schema 2 holds code links: they must survive too
    cj(store, "memory", "backfill", str(_talk(tmp_path)))
    columns = _write_legacy(store, version)
    path = memory_path(store.root)
    before = _rows(path, columns)
    assert len(before["turns"]) == 3 and len(before["turns_fts"]) == 3 and before["ideas"]
    assert before["entities"] and before["idea_entities"] and before["seen"]
    if version == 2:
        assert any(row[3] is not None for row in before["entities"])  # code_path set

    stats = cj(store, "memory", "stats")  # the installed CLI opens it: the migrations run
    assert stats["turns"] == 3 and stats["sessions"] == 1

    after = _rows(path, columns)  # every row, every column it had; meta names the new schema
    # the full text is made again from the turns, with memory's terms (schemas 3 and 4)
    cols = columns["turns"]
    fields = [cols.index(name) for name in ("user_text", "assistant_text", "tool_text")]
    assert after.pop("turns_fts") == sorted(
        [(row[cols.index("id")], *(PROSE.index_text(str(row[f])) for f in fields))
         for row in before["turns"]], key=repr)
    del before["turns_fts"]
    assert after == {**before, "meta": sorted(
        [(k, str(SCHEMA_VERSION) if k == "schema_version" else v) for k, v in before["meta"]],
        key=repr)}
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY 1")] == list(
        range(1, SCHEMA_VERSION + 1))
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    # step 5: ideas record their branch and commit; those said before are unknown, not guessed
    assert conn.execute("SELECT count(*), count(branch), count(git_commit) FROM ideas"
                        ).fetchone() == (len(before["ideas"]), 0, 0)
    if version == 1:  # the step to 2 added the code links, empty until the next backfill links
        assert conn.execute("SELECT count(*) FROM entities WHERE code_path IS NOT NULL"
                            ).fetchone() == (0,)
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'entities_code_path'"
                            ).fetchone() == ("entities_code_path",)
    conn.close()
    # search reads the migrated full text
    found = cj(store, "memory", "search", "evict entries", "--now", NOW)["results"]
    assert found and "drops the oldest key" in found[0]["text"]
    if version == 1:
        _project(store)
        assert cj(store, "memory", "backfill", str(tmp_path / "s.jsonl"))["linked"] == 3


def test_memory_migrations_a_newer_memory_file_is_refused_and_left_as_it_was(
        store: Store, tmp_path: Path) -> None:
    cj(store, "memory", "backfill", str(_talk(tmp_path)))
    path = memory_path(store.root)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (?, '2099-01-01T00:00:00Z')",
                 (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(UnsupportedStoreVersion,
                       match=f"has schema {SCHEMA_VERSION + 1}, newer than this ctx"):
        open_memory(store.root, create=False)
    assert path.read_bytes() == before


def test_memory_migrations_a_new_memory_file_records_every_step(store: Store) -> None:
    db = open_memory(store.root, create=True)
    assert db is not None
    with db:
        assert [r[0] for r in db.conn.execute("SELECT version FROM schema_version")] == list(
            range(1, SCHEMA_VERSION + 1))
        columns = [r[1] for r in db.conn.execute("PRAGMA table_info(entities)")]
        assert columns == ["id", "name", "type", "code_path", "code_qualname"]
