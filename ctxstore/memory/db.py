"""The transcript memory database ``.ctx/local/memory.sqlite``: schema and every SQL statement.

Transcript memory is private and per clone: it lives in the store's ``local/`` folder, which Git
never sees, and it is a primary store (Claude Code deletes transcripts after
``cleanupPeriodDays``), so a damaged file is named (``MemoryDamaged``, E023), never wiped. The
file and its WAL and shared-memory files must be regular files: a link or a FIFO in their place is
refused before SQLite opens anything. WAL mode, ``synchronous=FULL``: a batch of entries and the
cursor that follows it commit together, durably.

Tables (spec 004 §3, without embeddings): ``sessions``; ``index_state`` (per transcript file: byte
offset, inode, size, a hash of its first line, the turn still open); ``seen`` (every entry uuid
indexed, with its turn: re-reading a file never duplicates); ``turns`` (a prompt and its reply,
with the entry uuids) and ``turns_fts`` (FTS5 over their user, assistant and tool text);
``spans`` (topic → sub-span); ``ideas``, ``entities`` (a file or symbol entity carries the
project file and symbol it names in the code index, ``code_path``/``code_qualname``: schema 2),
``idea_entities``, ``relations``. ``turns_fts`` holds each field's terms (``search.tokenize``,
the tokeniser of every index and query: schema 3), stemmed (``tokenize.PROSE``: schema 4), so a
turn is found by the words that find a node or a file, in any inflection.

It cannot be rebuilt, so its schema is the ordered migrations ``_MIGRATIONS``, each recorded in
``schema_version`` in the transaction that applies it (``ctxstore.sqlite.migrate``). A file an
older ctx made, before ``schema_version``, is adopted at the version its ``meta`` row names and
goes through the remaining steps; nothing in it is lost.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from ctxstore.errors import MemoryDamaged, UnsupportedStoreVersion
from ctxstore.fsio import check_under, file_kind
from ctxstore.search.fts5 import TOKENIZE
from ctxstore.search.tokenize import PROSE
from ctxstore.sqlite import CANTOPEN, Migration, connect, irregular_files, is_damage, migrate, primary_code

__all__ = ["MEMORY_FILE", "SCHEMA_VERSION", "STATS", "Cursor", "TurnRow", "MemoryDB", "memory_path",
           "open_memory"]

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
]
SCHEMA_VERSION = _MIGRATIONS[-1].version
_LEGACY_TABLES = frozenset({"meta", "sessions", "index_state", "seen", "spans", "turns",
                            "turns_fts", "ideas", "entities", "idea_entities", "relations"})
_TABLES = _LEGACY_TABLES | {"schema_version"}


class Cursor(NamedTuple):
    """Where indexing of one transcript file stopped (spec 004 ``index_state``)."""

    dev: int
    ino: int
    size: int
    offset: int
    head_hash: str
    open_turn: int | None


class TurnRow(NamedTuple):
    """A turn as stored: a prompt (or a compaction summary) and the reply that followed."""

    id: int
    session: str
    seq: int
    span_id: int | None
    kind: str
    sidechain: bool
    ts_start: int | None
    ts_end: int | None
    user_text: str
    assistant_text: str
    tool_text: str
    uuids: list[str]
    source_file: str


_TURN_COLUMNS = ("id, session, seq, span_id, kind, sidechain, ts_start, ts_end, user_text, "
                 "assistant_text, tool_text, uuids, source_file")


def _turn(row: Sequence[Any]) -> TurnRow:
    return TurnRow(row[0], row[1], row[2], row[3], row[4], bool(row[5]), row[6], row[7], row[8],
                   row[9], row[10], json.loads(row[11]), row[12])


def memory_path(ctx_dir: Path) -> Path:
    """Where the transcript memory of the store at ``ctx_dir`` lives."""
    return ctx_dir / "local" / MEMORY_FILE


def _check_files(path: Path) -> None:
    check_under(path.parent.parent, path.parent)  # local/ itself: a real directory
    for entry, st in irregular_files(path):
        raise MemoryDamaged(f".ctx/local/{entry.name} is {file_kind(st.st_mode)}",
                            hint="move it aside, then run `ctx memory backfill`")


def _damaged(reason: object) -> MemoryDamaged:
    return MemoryDamaged(f".ctx/local/{MEMORY_FILE} is damaged ({reason})",
                         hint="move it aside, then run `ctx memory backfill` to rebuild what "
                              "transcripts remain")


def open_memory(ctx_dir: Path, *, create: bool, busy_seconds: float = 10.0,
                durable: bool = True, read_only: bool = False) -> MemoryDB | None:
    """Open (creating it if ``create``) the transcript memory of the store at ``ctx_dir``.

    Args:
        ctx_dir: The store's ``.ctx`` directory.
        create: Create ``local/memory.sqlite`` when it does not exist.
        busy_seconds: How long to wait for another writer (a backfill) before giving up.
        durable: ``synchronous=FULL`` (every commit on disk before it returns); False for a
            backfill: ``NORMAL`` (still atomic: a batch and its cursor commit together, so a
            power loss only makes the last batches be read again), synced by ``checkpoint``.
        read_only: Open with SQLite's ``mode=ro`` and migrate nothing (the memory browser,
            ``ctx ui``): a file at an older schema is refused instead of upgraded.

    Returns:
        The database, or None when it does not exist and ``create`` is False.

    Raises:
        MemoryDamaged: (E023) the file is not a database, is malformed, lacks a table, or it or a
            side file is a link or special file.
        UnsupportedStoreVersion: (E014) a newer ctx wrote it; with ``read_only``, also a file
            an older ctx wrote that the next write of memory upgrades (its hint says so).
        UnsafePath: (E020) ``local/`` is a link or not a directory.
    """
    from ctxstore import fsio

    path = memory_path(ctx_dir)
    _check_files(path)
    if not path.exists():
        if not create or read_only:
            return None
        with fsio.open_dir(ctx_dir) as store_dir:
            store_dir.ensure_dir(path.parent)
    if read_only:
        return _open_read_only(path, busy_seconds)
    try:
        conn = connect(path, busy_seconds=busy_seconds, synchronous="FULL" if durable else "NORMAL")
    except sqlite3.Error as exc:
        if is_damage(exc) or primary_code(exc) == CANTOPEN:
            raise _damaged(exc) from exc
        raise
    return _checked(conn, _migrated)


def _migrated(conn: sqlite3.Connection) -> None:
    """Bring a writable memory file to this ctx's schema (its ordered migrations)."""
    version = migrate(conn, _MIGRATIONS, adopt=_legacy_version)
    if version > SCHEMA_VERSION:
        raise UnsupportedStoreVersion(f".ctx/local/{MEMORY_FILE} has schema {version}, newer "
                                      f"than this ctx ({SCHEMA_VERSION})", hint="upgrade ctx")


def _checked(conn: sqlite3.Connection, prepare: Callable[[sqlite3.Connection], None]
             ) -> MemoryDB:
    """``prepare`` the open file, check its tables, and hand it out; closed on any error.

    Raises:
        MemoryDamaged: if SQLite calls the file damaged.
    """
    try:
        prepare(conn)
        _check_tables(conn)
    except sqlite3.Error as exc:
        conn.close()
        if is_damage(exc):
            raise _damaged(exc) from exc
        raise
    except BaseException:
        conn.close()
        raise
    return MemoryDB(conn)


def _open_read_only(path: Path, busy_seconds: float) -> MemoryDB:
    """``open_memory(read_only=True)``: the file as it is, at this ctx's schema, or refused."""
    try:
        conn = connect(path, busy_seconds=busy_seconds, read_only=True)
    except sqlite3.Error as exc:
        if is_damage(exc) or primary_code(exc) == CANTOPEN:
            raise _damaged(exc) from exc
        raise
    def at_this_schema(conn: sqlite3.Connection) -> None:
        if "schema_version" in _tables(conn):
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
            version = int(row[0] or 0)
        else:  # made before versions were recorded (checked; the next write records them)
            _legacy_version(conn)
            version = 0
        if version != SCHEMA_VERSION:
            newer = version > SCHEMA_VERSION
            raise UnsupportedStoreVersion(
                f".ctx/local/{MEMORY_FILE} was written by {'a newer' if newer else 'an older'} "
                f"ctx (schema {version or 'unrecorded'}, this ctx reads {SCHEMA_VERSION}); it is "
                "read without a write only at this ctx's schema",
                hint="upgrade ctx" if newer else "any `ctx memory` command (stats) upgrades it")

    return _checked(conn, at_this_schema)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _check_tables(conn: sqlite3.Connection) -> None:
    if missing := sorted(_TABLES - _tables(conn)):
        raise _damaged(f"table {missing[0]} is missing")


def _legacy_version(conn: sqlite3.Connection) -> int:
    """The schema of a file made before ``schema_version``: ``meta.schema_version`` (0: empty).

    Raises:
        MemoryDamaged: (E023) a table or the version is missing.
    """
    tables = _tables(conn)
    if not tables:
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise _damaged("it holds no table")  # an index or a view alone: not ctx's
        return 0
    if missing := sorted(_LEGACY_TABLES - tables):
        raise _damaged(f"table {missing[0]} is missing")
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or not str(row[0]).isdigit() or len(str(row[0])) > 9:
        raise _damaged("no schema version")
    return int(row[0])


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


def _turn_filters(alias: str, since: int | None, until: int | None, session: str | None,
                  intent: str | Sequence[str] | None, unanswered: bool = False
                  ) -> tuple[list[str], list[Any]]:
    """SQL conditions on turns ``alias`` for a time range, a session and an intent (or several).

    ``unanswered``: a question idea counts only while nothing has answered it.
    """
    where, args = ["1"], list[Any]()
    for clause, value in ((f"{alias}.ts_start >= ?", since), (f"{alias}.ts_start < ?", until),
                          (f"{alias}.session = ?", session or None)):
        if value is not None:
            where.append(clause)
            args.append(value)
    if intent:
        wanted = [intent] if isinstance(intent, str) else list(intent)
        still = " AND (f.intent != 'question' OR f.answered = 0)" if unanswered else ""
        where.append(f"EXISTS (SELECT 1 FROM ideas f WHERE f.turn_id = {alias}.id AND "
                     f"f.intent IN ({','.join('?' * len(wanted))}){still})")
        args.extend(wanted)
    return where, args


# What ``MemoryDB.stats`` counts: name -> table.
STATS = {"sessions": "sessions", "turns": "turns", "spans": "spans", "ideas": "ideas",
         "entities": "entities", "relations": "relations", "files": "index_state"}


class MemoryDB:
    """An open transcript memory; every method is one or a few SQL statements."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> MemoryDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database file, synced (the end of a backfill)."""
        self.conn.execute("PRAGMA wal_checkpoint(FULL)")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``): all of it commits, or none.

        Inside another batch, a savepoint: it is undone alone on an error, and commits with the
        outer batch (a backfill groups small files into one transaction).
        """
        nested = self.conn.in_transaction
        self.conn.execute("SAVEPOINT inner" if nested else "BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK TO inner" if nested else "ROLLBACK")
            if nested:
                self.conn.execute("RELEASE inner")
            raise
        self.conn.execute("RELEASE inner" if nested else "COMMIT")

    # -- cursors -------------------------------------------------------------------------
    def get_cursor(self, file_path: str) -> Cursor | None:
        """The stored cursor of a transcript file, or None."""
        row = self.conn.execute("SELECT dev, ino, size, offset, head_hash, open_turn FROM "
                                "index_state WHERE file_path = ?", (file_path,)).fetchone()
        return Cursor(*row) if row else None

    def save_cursor(self, file_path: str, cursor: Cursor, now: int) -> None:
        """Store the cursor of a transcript file (inside the batch it follows)."""
        self.conn.execute("INSERT OR REPLACE INTO index_state VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (file_path, *cursor, now))

    # -- seen entries ----------------------------------------------------------------------
    def seen(self, uuids: Sequence[str]) -> dict[str, int | None]:
        """Which of ``uuids`` were indexed already, with the turn each went to."""
        out: dict[str, int | None] = {}
        for start in range(0, len(uuids), 500):
            part = uuids[start:start + 500]
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(f"SELECT uuid, turn_id FROM seen WHERE uuid IN ({marks})",
                                         part).fetchall())
        return out

    def mark_seen(self, rows: Sequence[tuple[str, int | None]]) -> None:
        """Record entry uuids as indexed (into the given turns)."""
        self.conn.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", rows)

    # -- sessions and turns ----------------------------------------------------------------
    def touch_session(self, session: str, ts: int | None) -> None:
        """Create the session row or widen its time range."""
        self.conn.execute("INSERT INTO sessions VALUES (?, NULL, ?, ?) ON CONFLICT(id) DO UPDATE "
                          "SET first_ts = coalesce(min(first_ts, excluded.first_ts), first_ts, "
                          "excluded.first_ts), last_ts = coalesce(max(last_ts, excluded.last_ts), "
                          "last_ts, excluded.last_ts)", (session, ts, ts))

    def next_seq(self, session: str) -> int:
        """The sequence number of a session's next turn."""
        row = self.conn.execute("SELECT max(seq) FROM turns WHERE session = ?", (session,)).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def new_turn(self, turn: TurnRow) -> int:
        """Insert a turn (its ``id`` is ignored); return its id."""
        cur = self.conn.execute(
            f"INSERT INTO turns ({_TURN_COLUMNS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (turn.session, turn.seq, turn.span_id, turn.kind, int(turn.sidechain), turn.ts_start,
             turn.ts_end, turn.user_text, turn.assistant_text, turn.tool_text,
             json.dumps(turn.uuids), turn.source_file))
        return int(cur.lastrowid or 0)

    def save_turn(self, turn: TurnRow) -> None:
        """Write a turn's text, uuids and times, and its full-text row."""
        self.conn.execute("UPDATE turns SET ts_end = ?, user_text = ?, assistant_text = ?, "
                          "tool_text = ?, uuids = ?, span_id = ? WHERE id = ?",
                          (turn.ts_end, turn.user_text, turn.assistant_text, turn.tool_text,
                           json.dumps(turn.uuids), turn.span_id, turn.id))
        self.conn.execute("DELETE FROM turns_fts WHERE rowid = ?", (turn.id,))
        self.conn.execute("INSERT INTO turns_fts(rowid, user_text, assistant_text, tool_text) "
                          "VALUES (?, ?, ?, ?)", (turn.id, PROSE.index_text(turn.user_text),
                                                    PROSE.index_text(turn.assistant_text),
                                                    PROSE.index_text(turn.tool_text)))

    def turn(self, turn_id: int) -> TurnRow | None:
        """One turn by id."""
        row = self.conn.execute(f"SELECT {_TURN_COLUMNS} FROM turns WHERE id = ?",
                                (turn_id,)).fetchone()
        return _turn(row) if row else None

    def turns_by_id(self, ids: Sequence[int]) -> dict[int, TurnRow]:
        """Turns by id (those that exist)."""
        out: dict[int, TurnRow] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start:start + 500])
            marks = ",".join("?" * len(part))
            for row in self.conn.execute(f"SELECT {_TURN_COLUMNS} FROM turns WHERE id IN ({marks})",
                                         part):
                out[row[0]] = _turn(row)
        return out

    def last_turns(self, session: str, count: int) -> list[TurnRow]:
        """A session's latest turns, oldest first."""
        rows = self.conn.execute(f"SELECT {_TURN_COLUMNS} FROM turns WHERE session = ? "
                                 "ORDER BY seq DESC LIMIT ?", (session, count)).fetchall()
        return [_turn(r) for r in reversed(rows)]

    def neighbour_ids(self, session: str, seq: int) -> list[int]:
        """Ids of the turns just before and after ``seq`` in a session."""
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM turns WHERE session = ? AND seq IN (?, ?)", (session, seq - 1, seq + 1))]

    # -- spans ---------------------------------------------------------------------------
    def new_span(self, session: str, parent: int | None, name: str, depth: int, seq: int,
                 ts: int | None) -> int:
        """Open a span at turn ``seq``; return its id."""
        cur = self.conn.execute("INSERT INTO spans (session, parent_id, name, start_seq, end_seq, "
                                "depth, ts_start, ts_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                (session, parent, name, seq, seq, depth, ts, ts))
        return int(cur.lastrowid or 0)

    def extend_span(self, span_id: int, seq: int, ts: int | None) -> None:
        """Widen a span (and its parent) to turn ``seq``."""
        self.conn.execute("UPDATE spans SET end_seq = max(end_seq, ?), ts_end = coalesce(?, ts_end) "
                          "WHERE id = ? OR id = (SELECT parent_id FROM spans WHERE id = ?)",
                          (seq, ts, span_id, span_id))

    def span(self, span_id: int) -> tuple[int, int | None, str, int] | None:
        """``(id, parent_id, name, depth)`` of a span."""
        row = self.conn.execute("SELECT id, parent_id, name, depth FROM spans WHERE id = ?",
                                (span_id,)).fetchone()
        return (row[0], row[1], row[2], row[3]) if row else None

    def topics(self, session: str | None, limit: int) -> list[tuple[Any, ...]]:
        """Spans, newest topic first, each followed by its sub-spans.

        Rows: id, session, parent, name, depth, first and last turn, times, ideas.
        """
        where = "WHERE s.session = ?" if session else ""
        args: tuple[Any, ...] = (session, limit) if session else (limit,)
        return self.conn.execute(
            "SELECT s.id, s.session, s.parent_id, s.name, s.depth, s.start_seq, s.end_seq, "
            "s.ts_start, s.ts_end, (SELECT count(*) FROM ideas i WHERE i.span_id = s.id OR i.span_id "
            "IN (SELECT c.id FROM spans c WHERE c.parent_id = s.id)) "
            f"FROM spans s LEFT JOIN spans p ON p.id = s.parent_id {where} "
            "ORDER BY coalesce(p.ts_start, s.ts_start) DESC, coalesce(s.parent_id, s.id) DESC, "
            "s.depth, s.start_seq LIMIT ?", args).fetchall()

    def span_content(self, span_id: int) -> tuple[list[str], list[tuple[str, str, int | None]]]:
        """A span's (and its sub-spans') prompts in order, and its ideas ``(intent, content, answered)``.

        For ``memory.spans.summarize``; at most 200 prompts and 500 ideas (a span is read whole
        only up to that).
        """
        inner = "(SELECT ? UNION SELECT id FROM spans WHERE parent_id = ?)"
        prompts = [r[0] for r in self.conn.execute(
            f"SELECT user_text FROM turns WHERE span_id IN {inner} ORDER BY seq LIMIT 200",
            (span_id, span_id))]
        ideas = [(r[0], r[1], r[2]) for r in self.conn.execute(
            f"SELECT intent, content, answered FROM ideas WHERE span_id IN {inner} "
            "ORDER BY id LIMIT 500", (span_id, span_id))]
        return prompts, ideas

    def sessions_like(self, prefix: str) -> list[str]:
        """``[prefix]`` when a session has exactly that id, else up to two starting with it."""
        if self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (prefix,)).fetchone():
            return [prefix]
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM sessions WHERE substr(id, 1, ?) = ? LIMIT 2", (len(prefix), prefix))]

    # -- ideas, entities, relations ----------------------------------------------------------
    def add_idea(self, turn_id: int, span_id: int | None, session: str, intent: str, content: str,
                 confidence: float, source_uuid: str, ts: int | None) -> int:
        """Insert an idea; return its id."""
        answered = 0 if intent == "question" else None
        cur = self.conn.execute("INSERT INTO ideas (turn_id, span_id, session, content, intent, "
                                "confidence, answered, source_uuid, ts) VALUES (?, ?, ?, ?, ?, ?, ?, "
                                "?, ?)", (turn_id, span_id, session, content, intent, confidence,
                                          answered, source_uuid, ts))
        return int(cur.lastrowid or 0)

    def recent_ideas(self, session: str, count: int) -> list[tuple[int, str, str, float]]:
        """A session's latest ideas, oldest first: ``(id, intent, content, confidence)``."""
        rows = self.conn.execute("SELECT id, intent, content, confidence FROM ideas WHERE "
                                 "session = ? ORDER BY id DESC LIMIT ?", (session, count)).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in reversed(rows)]

    def link_entities(self, idea_id: int, entities: Sequence[tuple[str, str]]) -> None:
        """Attach ``(name, type)`` entities to an idea, creating them as needed."""
        for name, kind in entities:
            self.conn.execute("INSERT OR IGNORE INTO entities (name, type) VALUES (?, ?)",
                              (name, kind))
            self.conn.execute("INSERT OR IGNORE INTO idea_entities SELECT ?, id FROM entities "
                              "WHERE name = ? AND type = ?", (idea_id, name, kind))

    def add_relations(self, from_id: int, relations: Sequence[tuple[int, str, float]]) -> None:
        """Record an idea's relations ``(to_id, label, confidence)``; answers mark questions answered."""
        self.conn.executemany("INSERT OR IGNORE INTO relations VALUES (?, ?, ?, ?)",
                              [(from_id, to_id, label, confidence) for to_id, label, confidence in relations])
        self.conn.executemany("UPDATE ideas SET answered = 1 WHERE id = ? AND intent = 'question'",
                              [(to_id,) for to_id, label, _ in relations if label == "answers"])

    def ideas_of_turns(self, turn_ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """``(id, turn_id, intent, content, confidence, ts, session, answered)`` of turns' ideas."""
        marks = ",".join("?" * len(turn_ids))
        return self.conn.execute("SELECT id, turn_id, intent, content, confidence, ts, session, "
                                 "answered "
                                 f"FROM ideas WHERE turn_id IN ({marks}) ORDER BY id",
                                 list(turn_ids)).fetchall() if turn_ids else []

    def idea(self, idea_id: int) -> tuple[Any, ...] | None:
        """``(id, turn_id, span_id, session, intent, content, confidence, ts)`` of one idea."""
        row = self.conn.execute("SELECT id, turn_id, span_id, session, intent, content, "
                                "confidence, ts FROM ideas WHERE id = ?", (idea_id,)).fetchone()
        return tuple(row) if row else None

    def superseded_by(self, idea_ids: Sequence[int]) -> list[tuple[int, int, str, str, int | None]]:
        """``(newer, older, older intent, older content, older ts)`` for ideas that supersede."""
        if not idea_ids:
            return []
        marks = ",".join("?" * len(idea_ids))
        return self.conn.execute(
            "SELECT r.from_id, i.id, i.intent, i.content, i.ts FROM relations r JOIN ideas i ON "
            f"i.id = r.to_id WHERE r.relation_type = 'supersedes' AND r.from_id IN ({marks}) "
            "ORDER BY i.id", list(idea_ids)).fetchall()

    def idea_entities(self, idea_id: int) -> list[tuple[str, str]]:
        """``(name, type)`` of an idea's entities."""
        return self.conn.execute("SELECT e.name, e.type FROM idea_entities x JOIN entities e ON "
                                 "e.id = x.entity_id WHERE x.idea_id = ? ORDER BY e.name",
                                 (idea_id,)).fetchall()

    def turn_entities(self, turn_ids: Sequence[int]
                      ) -> dict[int, list[tuple[str, str, str | None, str | None]]]:
        """``(name, type, code_path, code_qualname)`` of the entities of each turn's ideas."""
        out: dict[int, list[tuple[str, str, str | None, str | None]]] = {}
        if not turn_ids:
            return out
        marks = ",".join("?" * len(turn_ids))
        for row in self.conn.execute(
                "SELECT DISTINCT i.turn_id, e.name, e.type, e.code_path, e.code_qualname FROM ideas "
                "i JOIN idea_entities x ON x.idea_id = i.id JOIN entities e ON e.id = x.entity_id "
                f"WHERE i.turn_id IN ({marks}) ORDER BY i.turn_id, e.type, e.name", list(turn_ids)):
            out.setdefault(row[0], []).append((row[1], row[2], row[3], row[4]))
        return out

    def code_entities(self, *, unlinked_only: bool) -> list[tuple[int, str, str]]:
        """``(id, name, type)`` of the file and symbol entities (only those not linked yet)."""
        extra = " AND code_path IS NULL" if unlinked_only else ""
        return self.conn.execute("SELECT id, name, type FROM entities WHERE type IN ('file', "
                                 f"'symbol'){extra} ORDER BY id").fetchall()

    def set_code_links(self, links: Sequence[tuple[int, str | None, str | None]]) -> None:
        """Store ``(entity id, code_path, code_qualname)`` links (None: not in the code index)."""
        self.conn.executemany("UPDATE entities SET code_path = ?, code_qualname = ? WHERE id = ?",
                              [(path, qualname, entity) for entity, path, qualname in links])

    def turns_naming(self, names: Sequence[str], *, since: int | None, until: int | None,
                     session: str | None, intent: str | None) -> list[int]:
        """Ids of the turns whose ideas name one of these files or symbols (filtered like ``fts``).

        An entity counts when its name is one of ``names`` or it is linked to a code file or
        symbol of that name (``src/cache.py`` finds a turn that wrote ``./src/cache.py``).
        """
        if not names:
            return []
        marks = ",".join("?" * len(names))
        where, args = _turn_filters("t", since, until, session, intent)
        return [r[0] for r in self.conn.execute(
            "SELECT DISTINCT t.id FROM entities e JOIN idea_entities x ON x.entity_id = e.id "
            "JOIN ideas i ON i.id = x.idea_id JOIN turns t ON t.id = i.turn_id WHERE e.type IN "
            f"('file', 'symbol') AND (e.name IN ({marks}) OR e.code_path IN ({marks}) OR "
            f"e.code_qualname IN ({marks})) AND {' AND '.join(where)} LIMIT 1000",
            [*names, *names, *names, *args])]

    # -- forgetting --------------------------------------------------------------------------
    def forget(self, session: str | None) -> int:
        """Delete what memory holds of a session (and its subagent threads), or of every session.

        Turns, their full text, spans, ideas, relations, and entities no idea names any more go,
        overwritten on disk (``secure_delete``). The cursors and the uuids of the entries read stay
        (no text): the hooks do not index the same transcript lines again, only new ones.

        Args:
            session: The full session id, or None for all.

        Returns:
            How many turns were deleted.
        """
        self.conn.execute("PRAGMA secure_delete = ON")
        where, args = (("session = ? OR substr(session, 1, ?) = ?",
                        [session, len(session) + 1, f"{session}:"]) if session else ("1", []))
        with self.batch():
            ideas = f"SELECT id FROM ideas WHERE {where}"
            turns = f"SELECT id FROM turns WHERE {where}"
            self.conn.execute(f"DELETE FROM relations WHERE from_id IN ({ideas}) OR to_id IN "
                              f"({ideas})", [*args, *args])
            self.conn.execute(f"DELETE FROM idea_entities WHERE idea_id IN ({ideas})", args)
            self.conn.execute(f"DELETE FROM ideas WHERE {where}", args)
            self.conn.execute("DELETE FROM entities WHERE id NOT IN (SELECT entity_id FROM "
                              "idea_entities)")
            self.conn.execute(f"UPDATE seen SET turn_id = NULL WHERE turn_id IN ({turns})", args)
            self.conn.execute(f"DELETE FROM turns_fts WHERE rowid IN ({turns})", args)
            count = self.conn.execute(f"DELETE FROM turns WHERE {where}", args).rowcount
            self.conn.execute(f"DELETE FROM spans WHERE {where}", args)
            self.conn.execute(f"DELETE FROM sessions WHERE {where.replace('session', 'id')}", args)
            # the full-text index keeps deleted terms in its segments until they are merged
            self.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES ('optimize')")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(count)

    # -- search ----------------------------------------------------------------------------
    def fts(self, match: str, weights: tuple[float, float, float], limit: int, *,
            since: int | None, until: int | None, session: str | None, intent: str | None
            ) -> list[tuple[int, float]]:
        """``(turn id, bm25)`` of the turns matching an FTS5 query (lower bm25 is better)."""
        where, args = _turn_filters("t", since, until, session, intent)
        where, args = ["turns_fts MATCH ?", *where], [match, *args]
        sql = ("SELECT t.id, bm25(turns_fts, ?, ?, ?) AS r FROM turns_fts JOIN turns t ON "
               f"t.id = turns_fts.rowid WHERE {' AND '.join(where)} ORDER BY r LIMIT ?")
        return [(r[0], r[1]) for r in self.conn.execute(sql, [*weights, *args, limit])]

    def recent_turn_ids(self, limit: int, *, since: int | None, until: int | None,
                        session: str | None, intent: str | Sequence[str] | None,
                        unanswered: bool = False) -> list[int]:
        """Ids of the latest turns in a time range (a query with no words: "what did we do").

        With an intent, the turns holding an idea of it ("open questions": ``unanswered``).
        """
        where, args = _turn_filters("t", since, until, session, intent, unanswered)
        return [r[0] for r in self.conn.execute(
            f"SELECT id FROM turns t WHERE {' AND '.join(where)} ORDER BY ts_start DESC LIMIT ?",
            [*args, limit])]

    def sessions(self, limit: int) -> list[tuple[str, int | None, int | None, int, str | None]]:
        """Sessions, the latest first: id, first and last time, turns, the first topic's name.

        Subagent threads (``<session>:agent-<id>``) are sessions of their own here.
        """
        return [(str(r[0]), r[1], r[2], int(r[3]), r[4]) for r in self.conn.execute(
            "SELECT s.id, s.first_ts, s.last_ts, "
            "(SELECT count(*) FROM turns t WHERE t.session = s.id), "
            "(SELECT p.name FROM spans p WHERE p.session = s.id AND p.depth = 0 "
            " ORDER BY p.start_seq LIMIT 1) "
            "FROM sessions s ORDER BY coalesce(s.last_ts, s.first_ts) DESC, s.id LIMIT ?",
            (limit,))]

    def stats(self) -> dict[str, int]:
        """Counts of sessions, turns, spans, ideas, entities, relations, files (``STATS``)."""
        return {name: int(self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                for name, table in STATS.items()}

    def intent_counts(self) -> dict[str, int]:
        """How many ideas of each intent."""
        return dict(self.conn.execute("SELECT intent, count(*) FROM ideas GROUP BY intent"))

    def time_range(self) -> tuple[int | None, int | None]:
        """The earliest and latest turn times."""
        row = self.conn.execute("SELECT min(ts_start), max(ts_end) FROM turns").fetchone()
        return row[0], row[1]
