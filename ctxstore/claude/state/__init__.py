"""Per-clone hook state in ``.ctx/local/state.sqlite`` (never the derived index).

It holds what the hooks pass to each other and what must not happen twice:
- ``pending``: results waiting for the next prompt of a session (recall, status,
  expand, notices), delivered exactly once: taking them deletes them in the same
  write transaction, so two concurrent prompt-submits cannot both deliver one;
- ``executed``: keys of the commands already run, so a repeated Stop does nothing;
- ``claims``: commands being run right now, each claimed by one process (pid, time) in
  a write transaction before it runs, so identical Stop hooks running at once (ctx
  installed at user and project level) run each command once; a claim whose process
  died is taken over, so a killed hook loses no command;
- ``replies``: for each command run from Stop's ``last_assistant_message`` (a reply the
  transcript did not hold yet), the reply's key and when it was read: a transcript line
  with that reply, created before then, is the reply that ran (claude/hooks/on_stop.py);
- ``queue``: commands deferred because another process held the writer lock;
- ``kv``: small values (the cached default view,
  the notice that a damaged state was replaced, the count of prompts per session that
  tells turns apart when nothing else does, what each session was shown and its last
  prompts); a session's values go once it has been idle ``EXECUTED_KEEP_DAYS`` (``prune``);
- ``access``: how often each node was retrieved by ``<ctx:recall>`` or ``<ctx:expand>``
  and when last (spec 003's access tracking, an input of the CLAUDE.md ranking).

This file cannot be rebuilt from the objects, so its schema has ordered migrations
recorded in ``schema_version`` (spec 001 §15). A damaged file (not a database, malformed
pages, a table missing, a directory, a FIFO or a symbolic link in its place) is moved
aside to ``state.sqlite.damaged-<time>-<pid>`` and recreated, with a one-time notice:
losing it loses pending results, and ``executed`` is backed by the ``hook_key`` stored
with every node a ``remember`` creates (RELIABILITY.md CO-11, TR-12). A link is moved,
never followed; ``local/`` itself must be a real directory (a symbolic link there is
refused). Session ids are only ever column values, never file names (HK-05).

Its modules: ``schema`` (the file's name, tables, migrations and keys), ``handle`` (an open
state, ``HookState``: every read and write of its tables) and ``files`` (opening, checking,
repairing, the read-only peek). The names below are re-exported for the hooks and tests.
"""

from __future__ import annotations

from ctxstore.claude.state.files import open_state, peek_state, read_access_counts, repair_state
from ctxstore.claude.state.handle import HookState, StateDamaged, key_of
from ctxstore.claude.state.schema import (
    CLAIM_STALE_SECONDS,
    EXECUTED_KEEP_DAYS,
    NOTICE_KEY,
    PROMPTS_PREFIX,
    SESSION_PREFIXES,
    STATE_FILE,
    TASK_KEY,
    state_path,
)

__all__ = ["STATE_FILE", "EXECUTED_KEEP_DAYS", "CLAIM_STALE_SECONDS", "NOTICE_KEY", "TASK_KEY",
           "PROMPTS_PREFIX", "SESSION_PREFIXES", "HookState", "StateDamaged", "key_of",
           "open_state", "peek_state", "state_path", "repair_state", "read_access_counts"]
