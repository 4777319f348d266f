"""The layout of ``local/state.sqlite``: its file name, tables, migrations and ``kv`` keys.

The file cannot be rebuilt from the objects, so its schema has ordered migrations recorded in
``schema_version`` (spec 001 §15); ``files`` applies them when it opens the file.
"""

from __future__ import annotations

from pathlib import Path

from ctxstore.sqlite import COMPANIONS, Migration

__all__ = ["STATE_FILE", "EXECUTED_KEEP_DAYS", "CLAIM_STALE_SECONDS", "NOTICE_KEY", "TASK_KEY",
           "PROMPTS_PREFIX", "SESSION_PREFIXES", "state_path"]

STATE_FILE = "state.sqlite"
EXECUTED_KEEP_DAYS = 90
# A claim older than this is taken over even if its pid is alive (the pid may have been
# reused); Claude Code kills a hook after 600 s by default.
CLAIM_STALE_SECONDS = 900
NOTICE_KEY = "notice"
# kv key where an older ctx kept the current task; ``knowledge.tasks`` owns it now
# (``local/current-task``), and ``open_state`` moves a value found here there once.
TASK_KEY = "current_task"
# kv keys ``prompts:<session>``: how many prompts of a session were submitted, and when the
# session last wrote anything here (a prompt, or a value under ``SESSION_PREFIXES``).
PROMPTS_PREFIX = "prompts:"
# kv keys ``<prefix><session>`` of one session's values (claude.hooks: what it was shown, its
# last prompts), written by ``put_session`` and pruned with the session. ``compacted:`` marks,
# written by older versions' PreCompact and read by nothing, are pruned the same way.
SESSION_PREFIXES = ("injected:", "recent_prompts:", "compacted:")
_LOCK_FILE = "state.lock"
_SIDE_FILES = ("", *COMPANIONS)
_TABLES = frozenset({"schema_version", "pending", "executed", "queue", "kv", "access", "claims",
                     "replies"})
_MIGRATIONS = [
    Migration(1, """
        CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL,
                              kind TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL);
        CREATE INDEX pending_session ON pending(session);
        CREATE TABLE executed (key TEXT PRIMARY KEY, session TEXT NOT NULL, at INTEGER NOT NULL);
        CREATE TABLE queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,
                            session TEXT NOT NULL, command TEXT NOT NULL,
                            created_at INTEGER NOT NULL);
        CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """),
    Migration(2, """
        CREATE TABLE access (node_id TEXT PRIMARY KEY, count INTEGER NOT NULL,
                             last_at INTEGER NOT NULL) WITHOUT ROWID;
    """),
    Migration(3, """
        CREATE TABLE claims (key TEXT PRIMARY KEY, session TEXT NOT NULL, pid INTEGER NOT NULL,
                             at INTEGER NOT NULL) WITHOUT ROWID;
    """),
    Migration(4, """
        CREATE TABLE replies (key TEXT PRIMARY KEY, session TEXT NOT NULL,
                              read_ms INTEGER NOT NULL) WITHOUT ROWID;
    """),
]


def state_path(store_root: Path) -> Path:
    """Where the hook state of the store at ``store_root`` lives."""
    return store_root / "local" / STATE_FILE
