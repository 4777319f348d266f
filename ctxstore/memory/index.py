"""Incremental indexing of transcripts into transcript memory (spec 004 §4).

Per transcript file a cursor (``index_state``): the byte offset reached, the file's device and
inode, and a hash of its first consumed bytes. Only the bytes after the offset are read; a file
that was replaced, rewritten or shrank is read again from the start, and every entry whose uuid was
indexed already is passed over (so nothing is ever duplicated). Entries are read in batches of
about ``BATCH_BYTES``; each batch and the cursor after it commit in one transaction, so a crash
loses nothing and duplicates nothing. A time or byte budget stops between batches, and a time
budget also between lines and inside a line too long to keep (``read_entries``): the next call
continues from the cursor. Under a time budget the batches are smaller (``BUDGET_BATCH_BYTES``), so
the first batch cannot overrun a hook's budget by much, and a hook that finds a large backlog
(``BACKLOG_BYTES``, e.g. the first Stop over a long session from before memory was on) may take a
shorter budget and leave the rest to the next hook, SessionEnd or ``ctx memory backfill``.

A turn is a typed prompt and every reply, tool call and tool result after it, up to the next prompt
(or the harness's end-of-turn line); a compaction summary is a turn of its own, so what a session
said survives even when its early transcript is gone. Low-value text (acknowledgements) is not
indexed; tool text is cut to a budget (the head is kept). Ideas, entities and relations come from
``memory.extract`` (rules, no model); topic spans from ``memory.segment``.

Every idea records where it was said (spec 003 Phase 4): the Git branch the harness wrote on the
line (``gitBranch``, else the work tree's) and the code's commit then, through a ``Where``. In a
hook the session is happening now: ``live_position`` reads the work tree's ``HEAD`` from the files
under ``.git`` once (no process on the Stop path). A backfill reads old sessions:
``history_position`` takes the branch's newest commit at or before the line's time (one
``git log`` per branch). A commit that cannot be known is left NULL, never guessed.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from ctxstore.memory.db import Cursor, MemoryDB, TurnRow, open_memory
from ctxstore.memory.extract import Idea, extract_entities, extract_ideas, is_low_value, relate
from ctxstore.memory.segment import boundary, span_name, terms
from ctxstore.memory.settings import OFF_NOTE, memory_settings
from ctxstore.memory.transcript import MAX_TURN_FILES, Entry, open_regular, read_entries
from ctxstore.security.secrets import redact_text

__all__ = ["BATCH_BYTES", "BUDGET_BATCH_BYTES", "BACKLOG_BYTES", "TURN_TOOL_BUDGET",
           "transcript_redactor", "Where", "live_position", "history_position",
           "MAX_IDEAS_PER_ENTRY", "FileReport", "cursor_key", "index_file", "index_transcript"]

BATCH_BYTES = 1 << 20
"""About how many transcript bytes one transaction covers."""
BUDGET_BATCH_BYTES = 128 << 10
"""The same under a time budget (a hook): one batch takes tens of milliseconds at most."""
BACKLOG_BYTES = 512 << 10
"""Unread bytes past which a transcript has a backlog (``index_transcript``'s ``backlog_seconds``)."""
TURN_TOOL_BUDGET = 8_000
"""Characters of tool calls and results kept per turn (``[memory] max_tool_output_chars``)."""
MAX_IDEAS_PER_ENTRY = 12
"""At most this many ideas are kept from one prompt or reply block (the firmest)."""
_WINDOW_TURNS = 3
_RECENT_IDEAS = 25
_HEAD = 4096
_CODE_ENTITIES = frozenset({"file", "symbol"})
_ROLE = {"prompt": "user", "assistant": "assistant"}
_MAX_BRANCHES = 64  # branches whose history one backfill reads (a transcript names few)

Where = Callable[[str | None, int | None], tuple[str | None, str | None]]
"""``(branch the line recorded or None, its time in ms or None) -> (branch, commit)`` of an idea."""


def live_position(worktree: Path | None) -> Where:
    """Where ideas extracted now were said: the work tree's branch and ``HEAD`` commit.

    Read once, at the first idea (``git.read_head_position``: files, no process). A line whose
    recorded branch is not the one checked out keeps its branch and no commit.

    Args:
        worktree: The repository the store belongs to, or None (no Git).

    Returns:
        The ``Where``.
    """
    known: list[tuple[str | None, str | None]] = []

    def where(branch: str | None, ts: int | None) -> tuple[str | None, str | None]:
        if not known:
            from ctxstore.git import read_head_position

            known.append(read_head_position(worktree) if worktree is not None else (None, None))
        head_branch, commit = known[0]
        if branch is None or branch == head_branch:
            return head_branch, commit
        return branch, None

    return where


def history_position(worktree: Path | None) -> Where:
    """Where ideas of past sessions were said: the branch's newest commit at the line's time.

    The branch is the line's (else the one checked out); its first-parent history is read
    once (``git.branch_history``). A line without a time, a branch this clone does not have,
    or a time before the branch's first commit gives no commit.

    Args:
        worktree: The repository the store belongs to, or None (no Git).

    Returns:
        The ``Where``.
    """
    from bisect import bisect_right

    from ctxstore.git import branch_history, read_head_position

    head: list[str | None] = []
    histories: dict[str, tuple[list[int], list[str]]] = {}

    def where(branch: str | None, ts: int | None) -> tuple[str | None, str | None]:
        if worktree is None:
            return branch, None
        if branch is None:
            if not head:
                head.append(read_head_position(worktree)[0])
            branch = head[0]
        if branch is None or ts is None:
            return branch, None
        if branch not in histories:
            if len(histories) >= _MAX_BRANCHES:
                return branch, None
            oldest_first = branch_history(worktree, branch)[::-1]
            histories[branch] = ([t for t, _ in oldest_first], [c for _, c in oldest_first])
        times, commits = histories[branch]
        at = bisect_right(times, ts // 1000)
        return branch, commits[at - 1] if at else None

    return where


class FileReport(NamedTuple):
    """What indexing one transcript file did.

    Attributes:
        path: The file.
        bytes: Transcript bytes consumed by this call.
        turns: Turns created.
        ideas: Ideas extracted.
        skipped: Lines passed over as malformed or too long.
        done: True when the cursor reached the end of the file.
        note: Why the file was not read (not a regular file, unreadable), or None.
    """

    path: str
    bytes: int
    turns: int
    ideas: int
    skipped: int
    done: bool
    note: str | None = None


def _head_hash(fd: int, length: int) -> str:
    try:  # built in: ``hashlib`` would load OpenSSL first (~2 ms on every Stop)
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b

    return blake2b(os.pread(fd, min(length, _HEAD), 0), digest_size=12).hexdigest()


class _Batch:
    """Applies entries to the database; turns are written once, at the end of the batch."""

    def __init__(self, db: MemoryDB, source: str, ideas: dict[str, list[tuple[int, Idea]]],
                 features: dict[tuple[int, int, int], tuple[Counter[str], set[str]]],
                 tool_budget: int, redact: Callable[[str], str] | None = None,
                 where: Where | None = None, worktree: Path | None = None) -> None:
        self.db = db
        self.where = where
        self.worktree = worktree
        self.turn_files: dict[int, list[str]] = {}  # files in play per turn, this batch
        self.redact = redact
        self.tool_budget = tool_budget
        self.features = features
        self.source = source
        self.dirty: dict[int, TurnRow] = {}
        self.ideas = ideas
        self.turns_made = 0
        self.ideas_made = 0

    def turn(self, turn_id: int) -> TurnRow | None:
        if turn_id in self.dirty:
            return self.dirty[turn_id]
        return self.db.turn(turn_id)

    def apply(self, entries: Sequence[Entry], open_turn: int | None) -> int | None:
        """Index ``entries`` in order; return the turn still open after them."""
        seen = self.db.seen([e.uuid for e in entries])
        marks: list[tuple[str, int | None]] = []
        for entry in entries:
            if entry.uuid in seen:
                known = seen[entry.uuid]
                if entry.kind in ("prompt", "summary") and known is not None:
                    open_turn = known
                elif entry.kind == "turn_end":
                    open_turn = None
                continue
            seen[entry.uuid] = None
            if entry.kind in ("boundary", "turn_end"):
                open_turn = None if entry.kind == "turn_end" else open_turn
                marks.append((entry.uuid, None))
                continue
            if self.redact is not None and entry.text:  # memory.sqlite never holds a secret
                entry = entry._replace(text=self.redact(entry.text))
            current = self.turn(open_turn) if open_turn is not None else None
            if current is None or entry.kind in ("prompt", "summary"):
                current = self._open(entry)
            current = self._add(current, entry)
            seen[entry.uuid] = current.id
            marks.append((entry.uuid, current.id))
            open_turn = current.id
        self.db.mark_seen(marks)
        self._flush()
        return open_turn

    def _window(self, session: str) -> list[TurnRow]:
        return [self.dirty.get(t.id, t) for t in self.db.last_turns(session, _WINDOW_TURNS)]

    def _open(self, entry: Entry) -> TurnRow:
        session = entry.session or Path(self.source).stem
        if entry.sidechain:  # a subagent's thread of its own: "<session>:agent-<id>"
            session = f"{session}:{Path(self.source).stem}"
        window = self._window(session)
        span = self._span_for(entry, session, window)
        seq = window[-1].seq + 1 if window else 0
        row = TurnRow(0, session, seq, span, "summary" if entry.kind == "summary" else "turn",
                      entry.sidechain, entry.timestamp, entry.timestamp, "", "", "", [],
                      self.source)
        row = row._replace(id=self.db.new_turn(row))
        self.db.extend_span(span, seq, entry.timestamp)
        self.db.touch_session(session, entry.timestamp)
        self.turns_made += 1
        return row

    def _span_for(self, entry: Entry, session: str, window: list[TurnRow]) -> int:
        seq = window[-1].seq + 1 if window else 0
        last_span = window[-1].span_id if window else None
        parent = self.db.span(last_span) if last_span is not None else None
        if parent is None:
            decision: str | None = "topic"
        elif entry.kind == "summary":
            decision = None
        else:
            last = window[-1]
            gap = (entry.timestamp - (last.ts_end or last.ts_start or entry.timestamp)
                   if entry.timestamp is not None else None)
            text = Counter[str]()
            names: set[str] = set()
            for turn in window:
                counts, found = self._features(turn)
                text.update(counts)
                names |= found
            decision = boundary(entry.text, gap, text, _code_names(entry.text), names)
        name = ("continued after a compaction" if entry.kind == "summary"
                else span_name(entry.text))
        if decision == "topic" or parent is None:
            topic = self.db.new_span(session, None, name, 0, seq, entry.timestamp)
        else:
            topic = parent[1] if parent[1] is not None else parent[0]
            if decision is None:
                return parent[0]
        return self.db.new_span(session, topic, name, 1, seq, entry.timestamp)

    def _features(self, turn: TurnRow) -> tuple[Counter[str], set[str]]:
        """Term counts and code names of a turn, computed once per version of its text."""
        key = (turn.id, len(turn.user_text), len(turn.assistant_text))
        found = self.features.get(key)
        if found is None:
            found = (terms(turn.user_text + "\n" + turn.assistant_text[:4000]),
                     _code_names(turn.user_text))
            self.features[key] = found
        return found

    def _add(self, turn: TurnRow, entry: Entry) -> TurnRow:
        role = _ROLE.get(entry.kind)
        text = entry.text
        keep = bool(text) and not (role and entry.kind != "prompt" and is_low_value(text, role))
        changes: dict[str, object] = {"uuids": [*turn.uuids, entry.uuid]}
        if entry.timestamp is not None:
            changes["ts_end"] = max(entry.timestamp, turn.ts_end or entry.timestamp)
        if keep and entry.kind in ("prompt", "summary"):
            changes["user_text"] = _join(turn.user_text, text)
        elif keep and entry.kind == "assistant":
            changes["assistant_text"] = _join(turn.assistant_text, text)
        elif keep and len(turn.tool_text) < self.tool_budget:
            changes["tool_text"] = _join(turn.tool_text, text)[:self.tool_budget]
        turn = turn._replace(**changes)  # type: ignore[arg-type]
        self.dirty[turn.id] = turn
        if entry.file is not None and self.tool_budget:
            self._file(turn, entry.file)
        if keep and role and not is_low_value(text, role):
            self._ideas(turn, entry, role)
        return turn

    def _file(self, turn: TurnRow, raw: str) -> None:
        """A file the turn's tool calls read or wrote: on its ideas, those said and to come.

        Repo-relative and only within the work tree (``relative_files``), at most
        ``MAX_TURN_FILES`` a turn, never a path the redaction changes.
        """
        files = self.turn_files.setdefault(turn.id, [])
        if self.worktree is None or len(files) >= MAX_TURN_FILES or \
                (self.redact is not None and self.redact(raw) != raw):
            return
        from ctxstore.knowledge.nodes.provenance import relative_files

        found = relative_files(self.worktree, [raw], limit=1)
        if not found or found[0] in files:
            return
        files.append(found[0])
        self.db.link_file(self.db.idea_ids_of_turn(turn.id), found[0])

    def _ideas(self, turn: TurnRow, entry: Entry, role: str) -> None:
        found = extract_ideas(entry.text, role)
        if not found:
            return
        if len(found) > MAX_IDEAS_PER_ENTRY:  # the firmest, in their order in the text
            best = sorted(found, key=lambda i: (-i.confidence, i.start))[:MAX_IDEAS_PER_ENTRY]
            found = sorted(best, key=lambda i: i.start)
        earlier = self.ideas.get(turn.session)
        if earlier is None:
            earlier = [(i, Idea(intent, content, conf, 0, len(content)))
                       for i, intent, content, conf in self.db.recent_ideas(turn.session,
                                                                            _RECENT_IDEAS)]
            self.ideas[turn.session] = earlier
        position = (self.where(entry.branch, entry.timestamp) if self.where is not None
                    else (entry.branch, None))
        for idea in found:
            idea_id = self.db.add_idea(turn.id, turn.span_id, turn.session, idea.intent, idea.text,
                                       idea.confidence, entry.uuid, entry.timestamp, position)
            names = sorted({(e.name, e.kind) for e in extract_entities(idea.text)})
            if names:
                self.db.link_entities(idea_id, names)
            for path in self.turn_files.get(turn.id, ()):
                self.db.link_file([idea_id], path)
            related = relate(idea, [old for _, old in earlier])
            self.db.add_relations(idea_id, [(earlier[index][0], label, confidence)
                                            for label, index, confidence in related
                                            if 0 <= index < len(earlier)])
            earlier.append((idea_id, idea))
            del earlier[:-_RECENT_IDEAS]
            self.ideas_made += 1

    def _flush(self) -> None:
        for turn in self.dirty.values():
            self.db.save_turn(turn)
            self.db.touch_session(turn.session, turn.ts_end)
        self.dirty.clear()


def _join(old: str, new: str) -> str:
    return f"{old}\n\n{new}" if old else new


def _code_names(text: str) -> set[str]:
    return {e.name for e in extract_entities(text) if e.kind in _CODE_ENTITIES}


def cursor_key(path: Path) -> str:
    """The name a transcript file's cursor and turns are stored under: its absolute path.

    A name that is not UTF-8 (bytes kept as lone surrogates, which SQLite cannot store) is
    written with its odd bytes as ``\\xNN``.
    """
    key = os.path.abspath(path)
    try:
        key.encode()
    except UnicodeEncodeError:
        return os.fsencode(key).decode("utf-8", "backslashreplace")
    return key


def index_file(db: MemoryDB, path: Path, *, max_bytes: int | None = None,
               deadline: float | None = None, now: int | None = None,
               progress: Callable[[int], None] | None = None,
               tool_budget: int = TURN_TOOL_BUDGET, batch_bytes: int | None = None,
               redact: Callable[[str], str] | None = None,
               where: Where | None = None, worktree: Path | None = None) -> FileReport:
    """Index the new bytes of one transcript file, batch by batch.

    Secrets are redacted from every entry's text before anything of it is stored (turns,
    ideas, entities, the full-text index): ``redact`` (``transcript_redactor``).

    Args:
        db: The open memory.
        path: The transcript (a ``.jsonl`` file; anything else is noted and skipped).
        max_bytes: Stop after about this many bytes (the next call continues).
        deadline: A ``time.monotonic()`` value after which no further batch starts.
        now: Seconds since the epoch recorded with the cursor (default: the clock).
        progress: Called with the bytes consumed by each batch.
        tool_budget: Characters of tool calls and results kept per turn (0: none).
        batch_bytes: About how many bytes one transaction covers (default ``BATCH_BYTES``).
        redact: The text to store for an entry's text; the built-in rules' redaction when
            None (``[security] transcripts``).
        where: The branch and commit each idea records (``live_position``,
            ``history_position``); the line's branch and no commit when None.
        worktree: The project's work tree: the files a turn's tool calls read or wrote in it
            are recorded on the turn's ideas (none when None).

    Returns:
        What was done.
    """
    key = cursor_key(path)
    if redact is None:
        redact = redact_text
    fd = open_regular(Path(os.path.abspath(path)))
    if fd is None:
        return FileReport(key, 0, 0, 0, 0, True, "not a readable regular file")
    try:
        return _index_fd(db, fd, key, max_bytes, deadline, int(time.time()) if now is None else now,
                         progress, tool_budget, BATCH_BYTES if batch_bytes is None else batch_bytes,
                         redact, where, worktree)
    except OSError as exc:
        return FileReport(key, 0, 0, 0, 0, False, f"unreadable: {exc.strerror or exc}")
    finally:
        os.close(fd)


def _start(db: MemoryDB, fd: int, key: str, st: os.stat_result) -> tuple[int, int | None]:
    """Where to resume: the cursor's offset if the file is the one indexed, else 0."""
    cursor = db.get_cursor(key)
    if cursor is None:
        return 0, None
    same = ((cursor.dev, cursor.ino) == (st.st_dev, st.st_ino) and st.st_size >= cursor.offset
            and _head_hash(fd, cursor.offset) == cursor.head_hash)
    return (cursor.offset if same else 0), cursor.open_turn


def _index_fd(db: MemoryDB, fd: int, key: str, max_bytes: int | None, deadline: float | None,
              now: int, progress: Callable[[int], None] | None, tool_budget: int,
              batch_bytes: int, redact: Callable[[str], str], where: Where | None,
              worktree: Path | None) -> FileReport:
    st = os.fstat(fd)
    size = st.st_size
    start, open_turn = _start(db, fd, key, st)
    consumed = turns = ideas = skipped = 0
    recent: dict[str, list[tuple[int, Idea]]] = {}
    features: dict[tuple[int, int, int], tuple[Counter[str], set[str]]] = {}
    while start < size:
        if deadline is not None and consumed and time.monotonic() > deadline:
            break
        limit = batch_bytes if max_bytes is None else min(batch_bytes, max_bytes - consumed)
        if limit <= 0:
            break
        read = read_entries(fd, start, limit=limit, size=size, deadline=deadline)
        if read.end <= start:
            break  # only a line still being written is left
        if len(features) > 64:
            features.clear()
        batch = _Batch(db, key, recent, features, tool_budget, redact, where, worktree)
        with db.batch():
            if _start(db, fd, key, st) != (start, open_turn):  # another process moved on
                start, open_turn = _start(db, fd, key, st)
                recent.clear()
                continue
            open_turn = batch.apply(read.entries, open_turn)
            db.save_cursor(key, Cursor(st.st_dev, st.st_ino, size, read.end,
                                       _head_hash(fd, read.end), open_turn), now)
        consumed += read.end - start
        if progress is not None:
            progress(read.end - start)
        start = read.end
        turns += batch.turns_made
        ideas += batch.ideas_made
        skipped += read.skipped
    return FileReport(key, consumed, turns, ideas, skipped, start >= size)


def index_transcript(ctx_dir: Path, path: Path, *, seconds: float | None = None,
                     max_bytes: int | None = None, backlog_seconds: float | None = None) -> FileReport:
    """Open the memory of the store at ``ctx_dir`` (creating it) and index one transcript.

    Nothing is read or created when the store's ``[memory] enabled`` is false (the report's note
    says so).

    Args:
        ctx_dir: The store's ``.ctx`` directory.
        path: The transcript file.
        seconds: A time budget; past it no further batch starts (batches are then
            ``BUDGET_BATCH_BYTES``).
        max_bytes: A byte budget.
        backlog_seconds: A shorter time budget that replaces ``seconds`` when more than
            ``BACKLOG_BYTES`` of the file are unread (or it was never read).

    Returns:
        What was done.

    Raises:
        MemoryDamaged: (E023) the memory file is damaged.
        UnsafePath: (E020) ``.ctx/local`` is a link.
        sqlite3.OperationalError: another writer held the memory longer than the budget allows.
    """
    settings = memory_settings(ctx_dir)
    if not settings.enabled:
        return FileReport(cursor_key(path), 0, 0, 0, 0, True, OFF_NOTE)
    began = time.monotonic()
    db = open_memory(ctx_dir, create=True, busy_seconds=10.0 if seconds is None else seconds + 0.5)
    assert db is not None
    with db:
        if seconds is not None and backlog_seconds is not None and _backlog(db, path) > BACKLOG_BYTES:
            seconds = min(seconds, backlog_seconds)
        return index_file(db, path, max_bytes=max_bytes,
                          deadline=began + seconds if seconds is not None else None,
                          tool_budget=settings.tool_budget,
                          batch_bytes=None if seconds is None else BUDGET_BATCH_BYTES,
                          redact=transcript_redactor(ctx_dir),
                          where=live_position(ctx_dir.parent), worktree=ctx_dir.parent)


def transcript_redactor(ctx_dir: Path) -> Callable[[str], str]:
    """What transcript memory stores of a text: its redaction (``[security] transcripts``).

    ``allow`` applies only with ``ctx trust`` in a clone (``consent.policy_for_dir``); a
    config.toml that cannot be read gives the built-in rules (fail closed).
    """
    from ctxstore.config import load_config
    from ctxstore.errors import CtxError
    from ctxstore.security.secrets import policy_from_config

    try:
        config = load_config(ctx_dir / "config.toml")
    except CtxError:
        return redact_text
    pol = policy_from_config(config)
    if pol.weakenings():  # only then is consent read (a git process): never on a default store
        from ctxstore.security.consent import policy_for_dir

        pol = policy_for_dir(ctx_dir, config)
    if pol.action("transcripts") == "allow":
        return lambda text: text
    return lambda text: redact_text(text, pol)


def _backlog(db: MemoryDB, path: Path) -> int:
    """The bytes of ``path`` past its cursor (the whole file when it has none; 0 if unreadable)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return 0
    cursor = db.get_cursor(cursor_key(path))
    return size - cursor.offset if cursor is not None and cursor.offset <= size else size
