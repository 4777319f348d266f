"""The transcript memory database ``.ctx/local/memory.sqlite``: schema and every SQL statement.

Transcript memory is private and per clone: it lives in the store's ``local/`` folder, which Git
never sees, and it is a primary store (Claude Code deletes transcripts after
``cleanupPeriodDays``), so a damaged file is named (``MemoryDamaged``, E023), never wiped. The
file and its WAL and shared-memory files must be regular files: a link or a FIFO in their place is
refused before SQLite opens anything. WAL mode, ``synchronous=FULL``: a batch of entries and the
cursor that follows it commit together, durably.

Tables (spec 004 §3): ``sessions``; ``index_state`` (per transcript file: byte
offset, inode, size, a hash of its first line, the turn still open); ``seen`` (every entry uuid
indexed, with its turn: re-reading a file never duplicates); ``turns`` (a prompt and its reply,
with the entry uuids) and ``turns_fts`` (FTS5 over their user, assistant and tool text);
``spans`` (topic → sub-span); ``ideas``, ``entities`` (a file or symbol entity carries the
project file and symbol it names in the code index, ``code_path``/``code_qualname``: schema 2),
``idea_entities``, ``relations``. ``turns_fts`` holds each field's terms (``search.tokenize``,
the tokeniser of every index and query: schema 3), stemmed (``tokenize.PROSE``: schema 4), so a
turn is found by the words that find a node or a file, in any inflection. ``turn_vectors``
(schema 6): a turn's vector per embedding model, derived (``memory.vectors``);
``idea_vectors`` and ``span_vectors`` (schema 7): the same for ideas and topic spans.

It cannot be rebuilt, so its schema is the ordered migrations ``_MIGRATIONS``, each recorded in
``schema_version`` in the transaction that applies it (``ctxstore.sqlite.migrate``). A file an
older ctx made, before ``schema_version``, is adopted at the version its ``meta`` row names and
goes through the remaining steps; nothing in it is lost.

Its modules: ``schema`` (schema 1 and the migrations), ``files`` (opening: checks, migration,
read-only) and ``handle`` (``MemoryDB``: every SQL statement on the tables). The names below
are re-exported for the memory operations.
"""

from __future__ import annotations

from ctxstore.memory.db.files import memory_path, open_memory
from ctxstore.memory.db.handle import STATS, Cursor, MemoryDB, TurnRow
from ctxstore.memory.db.schema import MEMORY_FILE, SCHEMA_VERSION

__all__ = ["MEMORY_FILE", "SCHEMA_VERSION", "STATS", "Cursor", "TurnRow", "MemoryDB", "memory_path",
           "open_memory"]
