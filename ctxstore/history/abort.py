"""``ctx stage abort``: drop the staging session, and the narrative entries it wrote.

``ctx add note|task|decision`` writes Markdown and stages a node tied to it by a
``<!-- ctx:id=ULID -->`` marker (``narrative.entries``). Aborting only the node would leave
the entry behind, and the next ``ctx commit`` would read it back as a new node
(``narrative.ingest``): the aborted work would come back. So ``abort`` removes, for every
node the session created from a narrative entry, that entry: its section of a log or of
decisions.md, a task file, and the task's "task created" event in the log. It also removes
the "file read" and "command run" events the session's steps wrote (``ctx add file``,
``ctx add command``): their key names the session (``markdown.step_event_key``). A daily
log left with nothing but its header goes too. Entries of nodes that existed before the
session, events of other sessions (and those an older ctx wrote, whose key names no
session), and text people wrote without a marker, are never touched.

``plan_abort`` lists what an abort would drop (the CLI shows it and asks); the session is
then recorded by an abort commit (``staging.abort_session``) and the entries are removed,
all under the store's lock. A crash between the two leaves the entries: they come back at
the next commit as nodes, the behaviour before this module, and nothing is lost. The abort
commit is a canonical commit: ``commit.after_commit`` follows it once the lock is released.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import TYPE_CHECKING

from ctxstore import fsio
from ctxstore.errors import CtxError, NothingToDo, StorageIOError
from ctxstore.history.commit import PostCommit, after_commit
from ctxstore.model import ChangeBatch
from ctxstore.model.knowledge import KnowledgeRecord, NodeRecord
from ctxstore.narrative.entries import (
    META_PATH,
    _narrative_path,
    _read_text,
    _write_text,
)
from ctxstore.narrative.markdown import (
    is_step_event_of,
    parse_entries,
    role_of,
    without_entry,
    without_metadata,
)
from ctxstore.objects import ObjectId
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.staging import FoldResult, abort_session, stage_chain
from ctxstore.templates import render_template

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["DroppedEntry", "AbortPlan", "AbortResult", "plan_abort", "abort"]

_LOG_DATE = re.compile(r"log/(\d{4}-\d{2}-\d{2})\.md")


@dataclass(frozen=True)
class DroppedEntry:
    """A narrative entry the aborted session wrote."""

    path: str      # narrative-relative: "log/2026-01-20.md", "tasks/task_<ULID>.md"
    key: str       # the node id of its marker, or the event key ("task-created-<ULID>",
    #                "file-read-<session>-<unique>")
    kind: str      # "entry" (a section of a file) or "file" (a task file)


@dataclass
class AbortPlan:
    """What ``ctx stage abort`` drops."""

    session_id: str
    task: str | None
    work_commits: int
    records: int
    nodes: list[str] = field(default_factory=list)          # nodes the session created
    entries: list[DroppedEntry] = field(default_factory=list)


def plan_abort(store: Store) -> AbortPlan:
    """What aborting the open staging session would drop; changes nothing.

    Args:
        store: The store.

    Returns:
        The session, its counts, the nodes it created and the narrative entries they have.

    Raises:
        NothingToDo: (E018) if nothing is staged.
        CtxError: (E001-E005) if STAGE or the staged work is damaged.
    """
    store.check_head_commits()  # a damaged HEAD is reported before anything else
    chain = stage_chain(store, store.staged_heads())
    if not chain:
        raise NothingToDo("no staging session to abort")
    first = chain[0][1]
    task = first.message if first.step_kind == "session_start" else None
    records: list[KnowledgeRecord] = []
    for _, work in chain:
        for bid in work.change_batches:
            records.extend(store.read_typed(ObjectId(bid), ChangeBatch).records)
    plan = AbortPlan(first.session_id, task, len(chain), len(records))
    # A node the session created: its first version is staged here (no earlier version).
    created = {r.id: r for r in records if isinstance(r, NodeRecord) and r.prev is None}
    plan.nodes = sorted(created)
    for node_id, rec in sorted(created.items()):
        path = rec.metadata.get(META_PATH)
        if not isinstance(path, str) or role_of(path) not in ("log", "decision", "task"):
            continue
        if role_of(path) == "task":
            if _task_file_of(store, path, node_id):
                plan.entries.append(DroppedEntry(path, node_id, "file"))
            key = f"task-created-{node_id}"
            for log in _logs_holding(store, key):
                plan.entries.append(DroppedEntry(log, key, "entry"))
        elif _holds(store, path, node_id):
            plan.entries.append(DroppedEntry(path, node_id, "entry"))
    plan.entries.extend(_step_events(store, plan.session_id))
    return plan


def _text(store: Store, rel: str) -> str | None:
    """A narrative file's text, or None if it is missing or cannot be read."""
    path = _narrative_path(store, rel)
    if not path.is_file():
        return None
    try:
        return _read_text(path, rel)
    except CtxError:  # unreadable or not text: left alone, never an abort failure
        return None


def _holds(store: Store, rel: str, key: str) -> bool:
    text = _text(store, rel)
    return text is not None and without_entry(text, key) is not None


def _task_file_of(store: Store, rel: str, node_id: str) -> bool:
    """True if the task file exists and is this node's (its marker names it)."""
    text = _text(store, rel)
    if text is None:
        return False
    entries = parse_entries(rel, text)
    return bool(entries) and entries[0].marker == node_id


def _logs(store: Store) -> list[str]:
    """The daily logs, narrative-relative.

    Links are left out (none if the folder is one): ctx never writes through a link, so
    none holds an entry of the session, and one must not stop the abort.
    """
    folder = store.root / "narrative" / "log"
    if not folder.is_dir() or folder.is_symlink():
        return []
    return [f"log/{p.name}" for p in sorted(folder.glob("*.md")) if not p.is_symlink()]


def _logs_holding(store: Store, key: str) -> list[str]:
    return [rel for rel in _logs(store) if _holds(store, rel, key)]


def _step_events(store: Store, session_id: str) -> list[DroppedEntry]:
    """The event entries (file read, command run) the session's steps wrote to the logs."""
    found: list[DroppedEntry] = []
    for rel in _logs(store):
        text = _text(store, rel)
        if text is None:
            continue
        found.extend(DroppedEntry(rel, e.session, "entry") for e in parse_entries(rel, text)
                     if e.session is not None and is_step_event_of(e.session, session_id))
    return found


def _drop(store: Store, entry: DroppedEntry) -> None:
    """Remove one entry (or task file); a log left with only its header goes too."""
    path = _narrative_path(store, entry.path)  # E020: never through a link
    if entry.kind == "file":
        try:
            with fsio.open_dir(store.root) as store_dir:  # through descriptors (PS-10)
                store_dir.unlink(path)
        except OSError as exc:
            raise StorageIOError(str(path), op="unlink", error=exc) from None
        return
    text = _text(store, entry.path)
    new = without_entry(text, entry.key) if text is not None else None
    if new is None:
        return
    date = _LOG_DATE.fullmatch(entry.path)
    if date and not parse_entries(entry.path, new) and \
            without_metadata(new).split() == render_template("log.md", date=date.group(1)).split():
        try:  # a log the session created holds nothing else now
            with fsio.open_dir(store.root) as store_dir:
                store_dir.unlink(path)
        except OSError as exc:
            raise StorageIOError(str(path), op="unlink", error=exc) from None
        return
    _write_text(store, entry.path, new)


@dataclass(frozen=True, slots=True)
class AbortResult:
    """What ``abort`` did.

    Attributes:
        fold: The abort commit (``commit``) and the session it recorded.
        dropped: What was dropped (``plan_abort``, as carried out).
        after: The steps that followed the abort commit.
    """

    fold: FoldResult
    dropped: AbortPlan
    after: PostCommit


def abort(db: Session, reason: str | None) -> AbortResult:
    """``ctx stage abort``: record the session by an abort commit, then remove its entries.

    Args:
        db: The open session.
        reason: Why the session is abandoned (in the abort commit's message).

    Returns:
        The abort commit, what was dropped (``plan_abort``) and what followed the commit.

    Raises:
        NothingToDo: (E018) if nothing is staged.
        InvalidInput: if the reason is not valid Unicode text.
        LockConflict, StagingConflict, StorageIOError: if the abort cannot be made.
    """
    store = db.store
    with store.lock():
        plan = plan_abort(store)
        res = abort_session(store, reason)
        for entry in plan.entries:
            _drop(store, entry)
    return AbortResult(res, plan, after_commit(db, res))
