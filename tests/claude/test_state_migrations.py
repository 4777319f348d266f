"""A hook state an older ctx wrote goes through the remaining migrations, losing nothing.

``local/state.sqlite`` cannot be rebuilt: its schema is ordered migrations recorded in
``schema_version`` (spec 001 §15; ``ctxstore.sqlite.migrate``). Schema 2 (before the ``claims``
and ``replies`` tables) is built here from the DDL that release shipped, frozen below.
"""

from __future__ import annotations

import sqlite3

from ctxstore.claude.state import STATE_FILE, open_state
from ctxstore.knowledge.tasks import read_current_task
from ctxstore.repo import Store
from tests.claude.test_hooks import hook, payload

# The hook state as a ctx of schema 2 made it (frozen: never edit).
SCHEMA_2 = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
                      kind TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE INDEX pending_session ON pending(session);
CREATE TABLE executed (key TEXT PRIMARY KEY, session TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TABLE queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,
                    session TEXT NOT NULL, command TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE access (node_id TEXT PRIMARY KEY, count INTEGER NOT NULL,
                     last_at INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO schema_version VALUES (1, '2026-01-05T10:00:00Z'), (2, '2026-01-20T10:00:00Z');
INSERT INTO pending (session, kind, value, created_at)
    VALUES ('s1', 'recall', 'RECALLED BEFORE THE UPGRADE', 1767607200);
INSERT INTO executed VALUES ('k1', 's1', 1767607200);
INSERT INTO kv VALUES ('current_task', 'parser');
INSERT INTO access VALUES ('01J0000000000000000000000A', 3, 1767607200);
"""


def test_state_migrations_an_older_state_is_migrated_and_its_pending_result_delivered(
        store: Store) -> None:
    path = store.root / "local" / STATE_FILE
    path.parent.mkdir(exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_2)
    conn.close()

    state = open_state(store.root, create=False)
    assert state is not None
    with state:
        # the current task moves to its one owner (local/current-task), losing nothing
        assert read_current_task(store.root) == "parser" and state.get("current_task") is None
        assert state.access_counts() == {"01J0000000000000000000000A": 3}
        assert state.unexecuted(["k1", "k2"]) == {"k2"}
        assert state.claim("k3", "s1")  # a table of schema 3
        versions = state.conn.execute("SELECT version, applied_at FROM schema_version "
                                      "ORDER BY version").fetchall()
    assert [v for v, _ in versions] == [1, 2, 3, 4]
    assert versions[:2] == [(1, "2026-01-05T10:00:00Z"), (2, "2026-01-20T10:00:00Z")]

    out = hook("prompt-submit", payload(store, "s1", prompt="go on"))
    assert "RECALLED BEFORE THE UPGRADE" in out["hookSpecificOutput"]["additionalContext"]
