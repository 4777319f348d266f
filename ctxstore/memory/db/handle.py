"""An open transcript memory, ``MemoryDB``: every SQL statement run on its tables.

Cursors per transcript file, the entries seen, turns and their full-text index, topic spans,
ideas, entities and relations; ``forget`` and the counts of ``ctx memory stats``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, NamedTuple

from ctxstore.search.tokenize import PROSE

__all__ = ["STATS", "VECTOR_KINDS", "VectorKind", "Cursor", "TurnRow", "MemoryDB"]

VectorKind = Literal["turn", "idea", "span"]
VECTOR_KINDS: tuple[VectorKind, ...] = ("turn", "idea", "span")
"""What has vectors (each in its ``<kind>_vectors`` table, per model)."""


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
        self.conn.execute("DELETE FROM turn_vectors WHERE turn_id = ?", (turn.id,))  # stale
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
        # a span that grows is embedded again by the next fill (its vector is of fewer turns)
        self.conn.execute("DELETE FROM span_vectors WHERE span_id = ? OR span_id = (SELECT "
                          "parent_id FROM spans WHERE id = ?)", (span_id, span_id))

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

    def span_text(self, span_id: int, chars: int) -> str:
        """The words of a span's turns (and its sub-spans'), in order, up to ``chars``."""
        inner = "(SELECT ? UNION SELECT id FROM spans WHERE parent_id = ?)"
        parts: list[str] = []
        size = 0
        for user, reply in self.conn.execute(
                f"SELECT user_text, assistant_text FROM turns WHERE span_id IN {inner} "
                "ORDER BY seq", (span_id, span_id)):
            parts.append(f"{user}\n{reply}".strip())
            size += len(parts[-1]) + 1
            if size >= chars:
                break
        return "\n".join(parts)[:chars]

    def sessions_like(self, prefix: str) -> list[str]:
        """``[prefix]`` when a session has exactly that id, else up to two starting with it."""
        if self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (prefix,)).fetchone():
            return [prefix]
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM sessions WHERE substr(id, 1, ?) = ? LIMIT 2", (len(prefix), prefix))]

    # -- ideas, entities, relations ----------------------------------------------------------
    def add_idea(self, turn_id: int, span_id: int | None, session: str, intent: str, content: str,
                 confidence: float, source_uuid: str, ts: int | None,
                 position: tuple[str | None, str | None] = (None, None)) -> int:
        """Insert an idea said on ``position`` (Git branch, commit); return its id."""
        answered = 0 if intent == "question" else None
        cur = self.conn.execute("INSERT INTO ideas (turn_id, span_id, session, content, intent, "
                                "confidence, answered, source_uuid, ts, branch, git_commit) VALUES "
                                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                (turn_id, span_id, session, content, intent, confidence, answered,
                                 source_uuid, ts, *position))
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

    def link_file(self, idea_ids: Sequence[int], path: str) -> None:
        """Attach the work tree's file ``path`` (repo-relative) to ideas, as a linked file entity.

        A file a turn's tool calls read or wrote is a file of the project: the entity is linked
        to it (``code_path``) as ``codelink`` links a name the code index knows.
        """
        self.conn.execute("INSERT INTO entities (name, type, code_path) VALUES (?, 'file', ?) "
                          "ON CONFLICT (name, type) DO UPDATE SET code_path = "
                          "coalesce(entities.code_path, excluded.code_path)", (path, path))
        self.conn.executemany("INSERT OR IGNORE INTO idea_entities SELECT ?, id FROM entities "
                              "WHERE name = ? AND type = 'file'", [(i, path) for i in idea_ids])

    def idea_ids_of_turn(self, turn_id: int) -> list[int]:
        """The ids of a turn's ideas."""
        return [int(r[0]) for r in self.conn.execute("SELECT id FROM ideas WHERE turn_id = ?",
                                                     (turn_id,))]

    def add_relations(self, from_id: int, relations: Sequence[tuple[int, str, float]]) -> None:
        """Record an idea's relations ``(to_id, label, confidence)``; answers mark questions answered."""
        self.conn.executemany("INSERT OR IGNORE INTO relations VALUES (?, ?, ?, ?)",
                              [(from_id, to_id, label, confidence) for to_id, label, confidence in relations])
        self.conn.executemany("UPDATE ideas SET answered = 1 WHERE id = ? AND intent = 'question'",
                              [(to_id,) for to_id, label, _ in relations if label == "answers"])

    def ideas_of_turns(self, turn_ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """Turns' ideas.

        Rows: ``(id, turn_id, intent, content, confidence, ts, session, answered, branch,
        commit)``.
        """
        marks = ",".join("?" * len(turn_ids))
        return self.conn.execute("SELECT id, turn_id, intent, content, confidence, ts, session, "
                                 "answered, branch, git_commit "
                                 f"FROM ideas WHERE turn_id IN ({marks}) ORDER BY id",
                                 list(turn_ids)).fetchall() if turn_ids else []

    def idea(self, idea_id: int) -> tuple[Any, ...] | None:
        """``(id, turn_id, span_id, session, intent, content, confidence, ts, branch, commit)``."""
        row = self.conn.execute("SELECT id, turn_id, span_id, session, intent, content, "
                                "confidence, ts, branch, git_commit FROM ideas WHERE id = ?",
                                (idea_id,)).fetchone()
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
            self.conn.execute(f"DELETE FROM idea_vectors WHERE idea_id IN ({ideas})", args)
            self.conn.execute(f"DELETE FROM ideas WHERE {where}", args)
            self.conn.execute("DELETE FROM entities WHERE id NOT IN (SELECT entity_id FROM "
                              "idea_entities)")
            self.conn.execute(f"UPDATE seen SET turn_id = NULL WHERE turn_id IN ({turns})", args)
            self.conn.execute(f"DELETE FROM turns_fts WHERE rowid IN ({turns})", args)
            self.conn.execute(f"DELETE FROM turn_vectors WHERE turn_id IN ({turns})", args)
            count = self.conn.execute(f"DELETE FROM turns WHERE {where}", args).rowcount
            self.conn.execute(f"DELETE FROM span_vectors WHERE span_id IN (SELECT id FROM spans "
                              f"WHERE {where})", args)
            self.conn.execute(f"DELETE FROM spans WHERE {where}", args)
            self.conn.execute(f"DELETE FROM sessions WHERE {where.replace('session', 'id')}", args)
            # the full-text index keeps deleted terms in its segments until they are merged
            self.conn.execute("INSERT INTO turns_fts(turns_fts) VALUES ('optimize')")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(count)

    # -- vectors (derived: hybrid search) ------------------------------------------------------
    def turns_without_vector(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        """``(id, user text, assistant text)`` of turns that have no vector of ``model`` yet."""
        return [(r[0], r[1], r[2]) for r in self.conn.execute(
            "SELECT id, user_text, assistant_text FROM turns t WHERE NOT EXISTS (SELECT 1 FROM "
            "turn_vectors v WHERE v.turn_id = t.id AND v.model = ?) ORDER BY id LIMIT ?",
            (model, limit))]

    def ideas_without_vector(self, model: str, limit: int) -> list[tuple[int, str]]:
        """``(id, content)`` of ideas that have no vector of ``model`` yet."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT id, content FROM ideas i WHERE NOT EXISTS (SELECT 1 FROM idea_vectors v "
            "WHERE v.idea_id = i.id AND v.model = ?) ORDER BY id LIMIT ?", (model, limit))]

    def spans_without_vector(self, model: str, limit: int) -> list[int]:
        """Ids of spans that have no vector of ``model`` yet."""
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM spans s WHERE NOT EXISTS (SELECT 1 FROM span_vectors v "
            "WHERE v.span_id = s.id AND v.model = ?) ORDER BY id LIMIT ?", (model, limit))]

    def save_vectors(self, model: str, rows: Sequence[tuple[int, bytes]],
                     kind: VectorKind = "turn") -> None:
        """Store the vectors (``(id, blob)``) of turns, ideas or spans for ``model``."""
        self.conn.executemany(f"INSERT OR REPLACE INTO {kind}_vectors ({kind}_id, model, vec) "
                              "VALUES (?, ?, ?)", [(i, model, blob) for i, blob in rows])

    def drop_vectors(self) -> int:
        """Delete every stored vector (of every model, turns, ideas and spans); return how many."""
        return sum(int(self.conn.execute(f"DELETE FROM {kind}_vectors").rowcount)
                   for kind in VECTOR_KINDS)

    def turn_vectors(self, model: str, *, since: int | None, until: int | None,
                     session: str | None, intent: str | None) -> list[tuple[int, bytes]]:
        """``(turn id, blob)`` of the stored vectors of ``model`` of the turns the filters keep."""
        where, args = _turn_filters("t", since, until, session, intent)
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT t.id, v.vec FROM turn_vectors v JOIN turns t ON t.id = v.turn_id WHERE "
            f"v.model = ? AND {' AND '.join(where)}", [model, *args])]

    def idea_vectors(self, model: str, intents: Sequence[str], *, since: int | None,
                     until: int | None, session: str | None, intent: str | None
                     ) -> list[tuple[int, bytes]]:
        """``(turn id, blob)`` of the stored vectors of ideas of ``intents``, their turns kept.

        The vectors are of ``model``; the turns, those the filters keep.
        """
        where, args = _turn_filters("t", since, until, session, intent)
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT t.id, v.vec FROM idea_vectors v JOIN ideas i ON i.id = v.idea_id JOIN turns t "
            f"ON t.id = i.turn_id WHERE v.model = ? AND i.intent IN ({','.join('?' * len(intents))})"
            f" AND {' AND '.join(where)}", [model, *intents, *args])]

    def span_vectors(self, model: str, *, since: int | None, until: int | None,
                     session: str | None, intent: str | None
                     ) -> tuple[list[tuple[int, bytes]], list[tuple[int, int]]]:
        """Span vectors of ``model``: ``(span id, blob)``, and the spans of the kept turns.

        The second list is ``(turn id, span id)`` of the turns the filters keep, each under
        its sub-span and its topic span.
        """
        where, args = _turn_filters("t", since, until, session, intent)
        turns = [(r[0], r[1]) for r in self.conn.execute(
            "SELECT t.id, s.id FROM turns t JOIN spans s ON s.id = t.span_id OR s.id = (SELECT "
            f"parent_id FROM spans WHERE id = t.span_id) WHERE {' AND '.join(where)}", args)]
        spans = [(r[0], r[1]) for r in self.conn.execute(
            "SELECT span_id, vec FROM span_vectors WHERE model = ?", (model,))]
        return spans, turns

    def vector_count(self, model: str, kinds: Sequence[VectorKind] = ("turn",)) -> tuple[int, int]:
        """How many rows of ``kinds`` have a vector of ``model``, and how many there are."""
        have = total = 0
        for kind in kinds:
            table = "turns" if kind == "turn" else f"{kind}s"
            row = self.conn.execute(f"SELECT (SELECT count(*) FROM {kind}_vectors WHERE model = ?), "
                                    f"(SELECT count(*) FROM {table})", (model,)).fetchone()
            have, total = have + int(row[0]), total + int(row[1])
        return have, total

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
