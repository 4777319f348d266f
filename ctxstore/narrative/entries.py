"""Narrative entries written by ctx: ``ctx add note|task|decision``.

``add_note``, ``add_task`` and ``add_decision`` write Markdown under ``narrative/`` (an
entry of today's log, a task file, a section of decisions.md) and stage the matching node,
tied together by a ``<!-- ctx:id=ULID -->`` marker on the entry's heading. A new log,
task file or decisions.md gets the metadata block of spec 002 §8.6 below its title;
appending to a file that has one moves its ``updated:`` time. The Markdown is
written first (atomically), the node second: a crash in between leaves a marker without a
node, which the next ``ingest_narrative_edits`` (``narrative.ingest``) turns into that node
(the marker names it, so doing so twice is impossible).

User text can never forge a marker: in titles, bodies and summary messages every
``<!--`` that opens a ``ctx:`` comment is written as ``&lt;!--`` (it reads the same once
rendered, and is no marker). The helpers that read, append and write narrative files
(``_read_text``, ``_appended``, ``_write_text``, ``_inert``) are shared with
``narrative.summary`` inside this package.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore import fsio
from ctxstore.errors import InvalidInput, StorageIOError
from ctxstore.ids import new_ulid
from ctxstore.knowledge.nodes import AddedNode, add_node, split_content, validate_tag
from ctxstore.model.knowledge import NodeRecord
from ctxstore.narrative.markdown import (
    content_hash,
    demote_headings,
    end_marker,
    event_marker,
    id_marker,
    log_header,
    log_rel,
    metadata_block,
    parse_entries,
    step_event_key,
    task_number,
    task_rel,
    touch_metadata,
    with_metadata,
)
from ctxstore.narrative.snapshot import MAX_NARRATIVE_BYTES
from ctxstore.records import dataclass
from ctxstore.repo import Store, now_ms
from ctxstore.security.guard import guard, guard_fields, guard_metadata
from ctxstore.templates import render_template

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["NarrativeEntry", "ROLE_TYPES", "META_PATH", "META_HASH", "META_KEY", "META_TASK",
           "add_note", "add_task", "add_decision", "log_event"]

ROLE_TYPES = {"log": "observation", "decision": "decision", "task": "task"}
META_PATH, META_HASH, META_KEY, META_TASK = ("narrative_path", "narrative_hash", "narrative_key",
                                             "task_number")
# The opening of an HTML comment that would read as a ctx marker (<!-- ctx:id=... -->).
_MARKER_OPEN = re.compile(r"<!--(?=\s*ctx\s*:)", re.IGNORECASE)


@dataclass(frozen=True)
class NarrativeEntry:
    """A narrative entry written by ``ctx add note|task|decision`` and its node."""

    node: NodeRecord
    path: str                 # narrative-relative, e.g. "log/2026-01-20.md"
    task_number: str | None
    added: AddedNode


# -- writing ---------------------------------------------------------------------------------------

def _narrative_path(store: Store, rel: str) -> Path:
    """The file for ``rel``, refusing symlinks anywhere below ``.ctx/`` (never written through)."""
    path = store.root / "narrative" / rel
    fsio.check_under(store.root, path)  # E020 naming the link or special file
    return path


def _read_text(path: Path, rel: str) -> str:
    try:
        data = fsio.read_regular(path, MAX_NARRATIVE_BYTES)  # bounded; never a FIFO
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise StorageIOError(str(path), op="read", error=exc) from None
    if len(data) > MAX_NARRATIVE_BYTES:
        raise InvalidInput(f"narrative/{rel} is larger than {MAX_NARRATIVE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"narrative/{rel} is not UTF-8 text") from None


def _write_text(store: Store, rel: str, text: str) -> None:
    """Durably write ``narrative/rel``, through directory descriptors (E020 for a link on the way).

    The check and the write are one step (``fsio.Dir.replace_atomic``): a directory swapped
    for a link in between is refused, never written through (PS-10).
    """
    path = store.root / "narrative" / rel
    try:
        with fsio.open_dir(store.root) as store_dir:
            store_dir.replace_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise StorageIOError(str(path), op="write", error=exc) from None


def _appended(store: Store, rel: str, header: str, entry: str) -> str:
    """The text of ``narrative/rel`` with ``entry`` appended after a blank line.

    A new file starts with ``header``. Reads the file and writes nothing, so a caller that writes
    several files can read them all before the first write.

    Raises:
        InvalidInput: the path is a symlink, or the file is not UTF-8 text.
        StorageIOError: the file cannot be read.
    """
    existing = _read_text(_narrative_path(store, rel), rel)
    # An existing file's metadata block (if it has one) records the change.
    text = touch_metadata(existing, now_ms()) if existing.strip() else header
    text = text.rstrip("\n") + "\n\n"
    return text + entry.strip("\n") + "\n"


def _one_line(value: str, what: str) -> str:
    value = value.strip()
    if not value:
        raise InvalidInput(f"the {what} is empty")
    if "\n" in value or "\r" in value:
        raise InvalidInput(f"the {what} must be one line", hint="put the details in --body")
    return value


def _check_text(value: str, what: str) -> str:
    if not value.strip():
        raise InvalidInput(f"the {what} is empty")
    if "\x00" in value:
        raise InvalidInput(f"the {what} contains a NUL character")
    return value.replace("\r\n", "\n").strip("\n")


def _title_and_body(title: str, body: str | None, level: int) -> tuple[str, str]:
    """A titled entry's title (one line) and body (headings nested from ``level``), made inert.

    Raises:
        InvalidInput: for an empty or multi-line title, or an empty body.
    """
    title = _inert(_one_line(title, "title"))  # the title first: its error wins
    return title, _inert(demote_headings(_check_text(body, "body"), level)) if body is not None else ""


def _inert(text: str) -> str:
    """``text`` with every marker-like comment opening written ``&lt;!--``.

    ``text`` is a title, body or message a user gave; no user text can tie an entry to a node.
    """
    return _MARKER_OPEN.sub("&lt;!--", text)


def _hhmm(ms: int) -> str:
    return time.strftime("%H:%M", time.gmtime(ms / 1000))


def _write_entry(db: Session, *, role: str, rel: str, entry: str, header: str,
                 node_id: str, tags: Sequence[str], metadata: dict[str, Any] | None,
                 extra: dict[str, Any] | None = None,
                 log_event: tuple[str, str, str] | None = None,
                 texts: Sequence[tuple[str, str | None]] = (),
                 allow_secret: bool = False) -> NarrativeEntry:
    """Append (or create) the Markdown, then stage the node whose content is the entry.

    The content is the entry as ctx will read it back, so the next commit finds nothing to ingest.

    ``log_event`` = (log path, its header, entry): a record entry appended to the log after
    the Markdown and before the node (not a node itself). Every file is read before the
    first one is written, so a file that cannot be read or written through changes
    nothing.
    """
    store = db.store
    clean_tags = [validate_tag(t) for t in tags]  # fail before anything is written
    # The secret policy before any Markdown is written: the text as the user gave it
    # (``texts``: the note, a title, a body; lines as they numbered them), the tags and the
    # metadata (docs/security.md).
    guard_fields(store, "explicit", [*texts, *[("tag", t) for t in clean_tags]],
                 allow_secret=allow_secret)
    metadata = guard_metadata(store, "explicit", metadata, allow_secret=allow_secret)
    section = parse_entries(rel, entry)[0]
    split_content(section.content)
    with store.lock():
        store.check_head_commits()  # a damaged store fails before the Markdown changes
        store.staged_heads()
        if role == "task":
            if _narrative_path(store, rel).exists():
                raise InvalidInput(f"narrative/{rel} already exists")
            writes = [(rel, entry)]
        else:
            writes = [(rel, _appended(store, rel, header, entry))]
        if log_event is not None:
            log, log_head, log_entry = log_event
            writes.append((log, _appended(store, log, log_head, log_entry)))
        for target, text in writes:
            _write_text(store, target, text)
        meta = dict(metadata or {})
        meta.update({META_PATH: rel, META_HASH: content_hash(section.content)}, **(extra or {}))
        added = add_node(db, ROLE_TYPES[role], section.content, tags=clean_tags, metadata=meta,
                         node_id=node_id, channel=None)
        # Mentions edges to the indexed files and symbols the entry names (docs/code.md).
        from ctxstore.code.relate import stage_mentions

        stage_mentions(db, node_id, [section.content])
    number = (extra or {}).get(META_TASK)
    return NarrativeEntry(added.node, rel, number, added)


def log_event(store: Store, kind: str, text: str, session_id: str) -> str:
    """Append a one-line event entry to today's log: a record of a step, not a node.

    ``ctx add file`` and ``ctx add command`` call it (spec 002 A.5 steps 4 and 8, "appends
    to log"). The caller holds the store lock: it runs inside the step's transaction, after
    the work commit is written and before STAGE names it. A crash in between leaves an
    event line and no step, which is harmless (the event is no node). The key names the
    staging session (``step_event_key``), so ``ctx stage abort`` removes the entry with
    the session's other work.

    Args:
        store: The store.
        kind: The event's kind, lower-case letters and hyphens (``file-read``,
            ``command-run``): its heading and the prefix of its key.
        text: What happened (runs of white space, line ends included, become one space).
        session_id: The staging session of the step (``StageResult.session_id``).

    Returns:
        The narrative-relative path of the log.

    Raises:
        InvalidInput: for empty text, or a log path that is a symlink.
        StorageIOError: if the log cannot be read or written.
    """
    # An event is automatic capture (a command's name and status, files read): redacted.
    text = guard(store, "commands", text, what="the event")
    ms = now_ms()
    unique = new_ulid()
    # A session id no marker can hold (never one ctx made) gives a key abort cannot find.
    key = step_event_key(kind, session_id, unique[-12:]) or f"{kind}-{unique}"
    rel = log_rel(ms)
    entry = render_template("log_entry.md", time=_hhmm(ms), kind=kind.replace("-", " "),
                            marker=event_marker(key), text=_inert(_one_line(" ".join(text.split()), "event")),
                            end=end_marker(key))
    _write_text(store, rel, _appended(store, rel, log_header(ms), entry))
    return rel


def add_note(db: Session, text: str, *, tags: Sequence[str] = (),
             metadata: dict[str, Any] | None = None, allow_secret: bool = False) -> NarrativeEntry:
    """Append a note to today's log (UTC) and stage it as an ``observation`` node.

    Raises:
        InvalidInput: for empty text, a bad tag, or a narrative path that is a symlink.
        SecretRefused: (E025) if the text, a tag or metadata holds a secret (and not
            ``allow_secret``).
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    body = _inert(demote_headings(_check_text(text, "note"), 3))
    ms, node_id = now_ms(), new_ulid()
    rel = log_rel(ms)
    entry = render_template("log_entry.md", time=_hhmm(ms), kind="note",
                                marker=id_marker(node_id), text=body,
                                end=end_marker(node_id))
    return _write_entry(db, role="log", rel=rel, entry=entry, header=log_header(ms),
                        node_id=node_id, tags=tags, metadata=metadata,
                        texts=[("the note", text)], allow_secret=allow_secret)


def add_decision(db: Session, title: str, body: str | None = None, *, tags: Sequence[str] = (),
                 metadata: dict[str, Any] | None = None, allow_secret: bool = False) -> NarrativeEntry:
    """Append a decision section to decisions.md and stage it as a ``decision`` node.

    Headings in ``body`` are nested below the decision's ``##`` heading.

    Raises:
        InvalidInput: for an empty or multi-line title, an empty body, or a bad tag.
        SecretRefused: (E025) if the title, body, a tag or metadata holds a secret (and
            not ``allow_secret``).
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    title, text = _title_and_body(title, body, 3)
    node_id = new_ulid()
    entry = render_template("decision_entry.md", title=title, marker=id_marker(node_id),
                                body=text, end=end_marker(node_id))
    header = with_metadata(render_template("decisions.md"), metadata_block(now_ms()))
    return _write_entry(db, role="decision", rel="decisions.md", entry=entry,
                        header=header, node_id=node_id, tags=tags, metadata=metadata,
                        texts=[("the title", title), ("the body", body)], allow_secret=allow_secret)


def add_task(db: Session, title: str, body: str | None = None, *, tags: Sequence[str] = (),
             metadata: dict[str, Any] | None = None, allow_secret: bool = False) -> NarrativeEntry:
    """Create a task file ``tasks/task_<ULID>.md`` and stage it as a ``task`` node.

    Today's log gets a "task created" entry linking to it (a record, not a node).

    The file name holds the whole node id, so two branches never create the same file;
    the heading shows the short task number derived from the id.

    Raises:
        InvalidInput: for an empty or multi-line title, an empty body, or a bad tag.
        SecretRefused: (E025) if the title, body, a tag or metadata holds a secret (and
            not ``allow_secret``).
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    title, text = _title_and_body(title, body, 2)
    ms, node_id = now_ms(), new_ulid()
    number = task_number(node_id)
    rel = task_rel(node_id)
    entry = with_metadata(render_template("task.md", number=number, title=title,
                                          marker=id_marker(node_id), body=text),
                          metadata_block(ms, tags=[validate_tag(t) for t in tags]))
    key = f"task-created-{node_id}"
    event = render_template("task_created.md", time=_hhmm(ms), marker=event_marker(key),
                                number=number, title=title, file=Path(rel).name, path=rel,
                                end=end_marker(key))
    return _write_entry(db, role="task", rel=rel, entry=entry, header="", node_id=node_id,
                        tags=tags, metadata=metadata, extra={META_TASK: number},
                        log_event=(log_rel(ms), log_header(ms), event),
                        texts=[("the title", title), ("the body", body)], allow_secret=allow_secret)
