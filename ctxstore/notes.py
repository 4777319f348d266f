"""Narrative entries as knowledge: ``ctx add note|task|decision``, human edits, session summaries.

``add_note``, ``add_task`` and ``add_decision`` write Markdown under ``narrative/`` (an
entry of today's log, a task file, a section of decisions.md) and stage the matching node,
tied together by a ``<!-- ctx:id=ULID -->`` marker on the entry's heading. The Markdown is
written first (atomically), the node second: a crash in between leaves a marker without a
node, which the next ``ingest_narrative_edits`` turns into that node (the marker names it,
so doing so twice is impossible).

``ingest_narrative_edits`` runs before every commit. It compares each entry with the hash
of the text it had when it last became a node version (node metadata ``narrative_hash``),
so an edit made with ``ctx update`` is not undone by the unchanged Markdown, and an entry
nobody edited produces nothing. Entries a person wrote without a marker are recognised by
their file and heading (``narrative_key``); ctx never writes into text a person wrote.

User text can never forge a marker: in titles, bodies and summary messages every
``<!--`` that opens a ``ctx:`` comment is written as ``&lt;!--`` (it reads the same once
rendered, and is no marker). And at ingest a marker that names a node no entry of that
kind of file can be (one not made from narrative, like a fact added with ``ctx add
--type``, or one from another kind of file) is refused and reported: the entry becomes a
node of its own and the named node is left as it is (docs/narrative.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore import narrative as nar
from ctxstore.errors import InvalidInput, StorageIOError
from ctxstore.model import ChangeBatch, Commit
from ctxstore.model.knowledge import (EdgeRecord, EdgeRemoved, KnowledgeRecord, NodeRecord,
                                      NodeRemoved, ViewRecord, ViewRemoved)
from ctxstore.nodes import (AddedNode, add_node, new_ulid, next_version, split_content,
                            stage_write, tombstones, validate_tag)
from ctxstore.objects import ObjectId
from ctxstore.replay import fold_records
from ctxstore.repo import Store, now_ms
from ctxstore.staging import FoldResult, check_commit_message, commit_stage, stage_chain

__all__ = ["NarrativeEntry", "NarrativeChange", "ROLE_TYPES", "add_note", "add_task",
           "add_decision", "ingest_narrative_edits", "commit_with_edits", "compact_session"]

ROLE_TYPES = {"log": "observation", "decision": "decision", "task": "task"}
META_PATH, META_HASH, META_KEY, META_TASK = ("narrative_path", "narrative_hash", "narrative_key",
                                             "task_number")
MAX_LISTED_NODES = 50
# The opening of an HTML comment that would read as a ctx marker (<!-- ctx:id=... -->).
_MARKER_OPEN = re.compile(r"<!--(?=\s*ctx\s*:)", re.IGNORECASE)


@dataclass(frozen=True)
class NarrativeEntry:
    """A narrative entry written by ``ctx add note|task|decision`` and its node."""

    node: NodeRecord
    path: str                 # narrative-relative, e.g. "log/2026-01-20.md"
    task_number: str | None
    added: AddedNode


@dataclass(frozen=True)
class NarrativeChange:
    """What ``ingest_narrative_edits`` turned one edit into."""

    action: str               # "added", "updated", "removed" or "tangled" (left alone)
    node_id: str
    path: str


# -- writing ---------------------------------------------------------------------------------------

def _narrative_path(store: Store, rel: str) -> Path:
    """The file for ``rel``, refusing symlinks anywhere below ``.ctx/`` (never written through)."""
    path = store.root / "narrative" / rel
    fsio.check_under(store.root, path)  # E020 naming the link or special file
    return path


def _read_text(path: Path, rel: str) -> str:
    try:
        data = fsio.read_regular(path, nar.MAX_NARRATIVE_BYTES)  # bounded; never a FIFO
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise StorageIOError(str(path), op="read", error=exc) from None
    if len(data) > nar.MAX_NARRATIVE_BYTES:
        raise InvalidInput(f"narrative/{rel} is larger than {nar.MAX_NARRATIVE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"narrative/{rel} is not UTF-8 text") from None


def _write_text(store: Store, rel: str, text: str) -> None:
    path = _narrative_path(store, rel)
    try:
        fsio.ensure_dir_under(store.root, path.parent)
        fsio.replace_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise StorageIOError(str(path), op="write", error=exc) from None


def _appended(store: Store, rel: str, header: str, entry: str) -> str:
    """The text of ``narrative/rel`` (or of a new file: ``header``) with ``entry`` appended
    after a blank line. Reads the file and writes nothing, so a caller that writes several
    files can read them all before the first write.

    Raises:
        InvalidInput: the path is a symlink, or the file is not UTF-8 text.
        StorageIOError: the file cannot be read.
    """
    existing = _read_text(_narrative_path(store, rel), rel)
    text = existing if existing.strip() else header
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


def _inert(text: str) -> str:
    """``text`` (a title, body or message a user gave) with every marker-like comment
    opening written ``&lt;!--``, so no user text can tie an entry to a node."""
    return _MARKER_OPEN.sub("&lt;!--", text)


def _hhmm(ms: int) -> str:
    return time.strftime("%H:%M", time.gmtime(ms / 1000))


def _write_entry(store: Store, *, role: str, rel: str, entry: str, header: str,
                 node_id: str, tags: Sequence[str], metadata: dict[str, Any] | None,
                 extra: dict[str, Any] | None = None,
                 log_event: tuple[str, str, str] | None = None) -> NarrativeEntry:
    """Append (or create) the Markdown, then stage the node whose content is the entry as
    ctx will read it back (so the next commit finds nothing to ingest).

    ``log_event`` = (log path, its header, entry): a record entry appended to the log after
    the Markdown and before the node (not a node itself). Every file is read before the
    first one is written, so a file that cannot be read or written through changes
    nothing."""
    clean_tags = [validate_tag(t) for t in tags]  # fail before anything is written
    section = nar.parse_entries(rel, entry)[0]
    split_content(section.content)
    with store.lock():
        for head in store.read_head().heads:  # a damaged store fails before the Markdown changes
            store.read_typed(head, Commit)
        store.staged_heads()
        if role == "task":
            if _narrative_path(store, rel).exists():
                raise InvalidInput(f"narrative/{rel} already exists")
            writes = [(rel, entry)]
        else:
            writes = [(rel, _appended(store, rel, header, entry))]
        if log_event is not None:
            log, log_header, log_entry = log_event
            writes.append((log, _appended(store, log, log_header, log_entry)))
        for target, text in writes:
            _write_text(store, target, text)
        meta = dict(metadata or {})
        meta.update({META_PATH: rel, META_HASH: nar.content_hash(section.content)}, **(extra or {}))
        added = add_node(store, ROLE_TYPES[role], section.content, tags=clean_tags, metadata=meta,
                         node_id=node_id)
    number = (extra or {}).get(META_TASK)
    return NarrativeEntry(added.node, rel, number, added)


def add_note(store: Store, text: str, *, tags: Sequence[str] = (),
             metadata: dict[str, Any] | None = None) -> NarrativeEntry:
    """Append a note to today's log (UTC) and stage it as an ``observation`` node.

    Raises:
        InvalidInput: for empty text, a bad tag, or a narrative path that is a symlink.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    body = _inert(nar.demote_headings(_check_text(text, "note"), 3))
    ms, node_id = now_ms(), new_ulid()
    rel = nar.log_rel(ms)
    entry = nar.render_template("log_entry.md", time=_hhmm(ms), kind="note",
                                marker=nar.id_marker(node_id), text=body,
                                end=nar.end_marker(node_id))
    return _write_entry(store, role="log", rel=rel, entry=entry, header=nar.log_header(ms),
                        node_id=node_id, tags=tags, metadata=metadata)


def add_decision(store: Store, title: str, body: str | None = None, *, tags: Sequence[str] = (),
                 metadata: dict[str, Any] | None = None) -> NarrativeEntry:
    """Append a decision section to decisions.md and stage it as a ``decision`` node.

    Headings in ``body`` are nested below the decision's ``##`` heading.

    Raises:
        InvalidInput: for an empty or multi-line title, an empty body, or a bad tag.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    title = _inert(_one_line(title, "title"))
    text = _inert(nar.demote_headings(_check_text(body, "body"), 3)) if body is not None else ""
    node_id = new_ulid()
    entry = nar.render_template("decision_entry.md", title=title, marker=nar.id_marker(node_id),
                                body=text, end=nar.end_marker(node_id))
    return _write_entry(store, role="decision", rel="decisions.md", entry=entry,
                        header=nar.render_template("decisions.md"), node_id=node_id, tags=tags,
                        metadata=metadata)


def add_task(store: Store, title: str, body: str | None = None, *, tags: Sequence[str] = (),
             metadata: dict[str, Any] | None = None) -> NarrativeEntry:
    """Create a task file ``tasks/task_<ULID>.md`` and stage it as a ``task`` node; today's
    log gets a "task created" entry linking to it (a record, not a node).

    The file name holds the whole node id, so two branches never create the same file;
    the heading shows the short task number derived from the id.

    Raises:
        InvalidInput: for an empty or multi-line title, an empty body, or a bad tag.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    title = _inert(_one_line(title, "title"))
    text = _inert(nar.demote_headings(_check_text(body, "body"), 2)) if body is not None else ""
    ms, node_id = now_ms(), new_ulid()
    number = nar.task_number(node_id)
    rel = nar.task_rel(node_id)
    entry = nar.render_template("task.md", number=number, title=title,
                                marker=nar.id_marker(node_id), body=text)
    key = f"task-created-{node_id}"
    event = nar.render_template("task_created.md", time=_hhmm(ms), marker=nar.event_marker(key),
                                number=number, title=title, file=Path(rel).name, path=rel,
                                end=nar.end_marker(key))
    return _write_entry(store, role="task", rel=rel, entry=entry, header="", node_id=node_id,
                        tags=tags, metadata=metadata, extra={META_TASK: number},
                        log_event=(nar.log_rel(ms), nar.log_header(ms), event))


# -- ingesting human edits ---------------------------------------------------------------------------

def _entry_text(path: Path) -> str | None:
    """A file's text, or None if it cannot be read, is too large or is not UTF-8."""
    data = nar.read_narrative_bytes(path)
    try:
        return data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        return None


def _read_entries(store: Store) -> tuple[list[nar.Section], set[str]]:
    """Every entry of the log, decision and task files, and the paths that were read.

    Raises:
        InvalidInput: if a file holds unresolved Git conflict markers.
    """
    entries: list[nar.Section] = []
    read: set[str] = set()
    for rel, path in nar.iter_narrative_files(store):
        if nar.role_of(rel) not in nar.ENTRY_ROLES:
            continue
        text = _entry_text(path)
        if text is None:
            continue  # its nodes are left as they are (never tombstoned)
        line = nar.conflict_line(text)
        if line is not None:
            raise InvalidInput(f"narrative/{rel}:{line}: unresolved merge conflict",
                               hint="resolve it (remove the <<<<<<< ======= >>>>>>> lines), "
                                    "then commit again")
        read.add(rel)
        entries.extend(e for e in nar.parse_entries(rel, text) if e.session is None and e.content)
    return entries, read


def _linked_nodes(conn) -> list[Any]:  # type: ignore[no-untyped-def]
    """Live nodes that came from a narrative entry."""
    from ctxstore.index.read import NODE_COLUMNS, load_tags, node_from_row

    rows = conn.execute(f"SELECT {NODE_COLUMNS} FROM nodes "
                        f"WHERE json_extract(metadata, '$.{META_PATH}') IS NOT NULL ORDER BY id")
    return load_tags(conn, [node_from_row(r) for r in rows])


def _new_node(entry: nar.Section, node_id: str, blobs: list[bytes]) -> NodeRecord:
    inline, blob_id, new_blobs = split_content(entry.content)
    blobs.extend(new_blobs)
    meta: dict[str, Any] = {META_PATH: entry.path, META_HASH: nar.content_hash(entry.content)}
    if entry.marker is None:
        meta[META_KEY] = entry.key
    if entry.role == "task":
        meta[META_TASK] = nar.task_number(node_id)
    stamp = now_ms()
    return NodeRecord(id=node_id, type=ROLE_TYPES[entry.role], content=inline,
                      content_blob=blob_id, summary=None, tags=(), metadata=meta,
                      status="active", superseded_by=None, created_at=stamp, updated_at=stamp,
                      author=None, prev=None)


def _edited(node: Any, entry: nar.Section, blobs: list[bytes]) -> NodeRecord | None:
    """The node's next version if the entry's text (or place) changed since it was recorded."""
    digest = nar.content_hash(entry.content)
    meta = dict(node.metadata)
    if meta.get(META_HASH) == digest and meta.get(META_PATH) == entry.path:
        return None
    meta.update({META_PATH: entry.path, META_HASH: digest})
    if entry.marker is None:
        meta[META_KEY] = entry.key
    changes: dict[str, Any] = {"metadata": meta}
    if digest != node.metadata.get(META_HASH):
        inline, blob_id, new_blobs = split_content(entry.content)
        blobs.extend(new_blobs)
        changes.update(content=inline, content_blob=blob_id)
    return next_version(node, **changes)


def _entry_gone(store: Store, path: Any, read: set[str]) -> bool:
    """True if a node's entry can no longer be there: its file was read (and the entry was
    not in it) or is deleted. An unreadable file removes nothing."""
    if not isinstance(path, str) or nar.role_of(path) not in nar.ENTRY_ROLES:
        return False
    if path in read:
        return True
    target = store.root / "narrative" / path
    return not target.exists() and not target.is_symlink()


def _match_unmarked(entries: list[nar.Section], marked: list[bool], linked: list[Any]
                    ) -> list[Any]:
    """The node each unmarked entry became at an earlier commit (None: a new entry).

    An entry whose text is unchanged finds its node wherever it moved (a union merge may
    reorder sections); an edited one finds a node of the same file and heading, the oldest
    first when several are left.
    """
    keyed = [n for n in linked if n.metadata.get(META_KEY)]
    free = {n.id for n in keyed}
    by_hash: dict[tuple[Any, Any], list[Any]] = {}
    for n in keyed:
        by_hash.setdefault((n.metadata.get(META_PATH), n.metadata.get(META_HASH)), []).append(n)
    by_key: dict[tuple[Any, Any], list[Any]] = {}
    for n in keyed:  # ``linked`` is sorted by id: oldest first
        by_key.setdefault((n.metadata.get(META_PATH), n.metadata.get(META_KEY)), []).append(n)
    found: list[Any] = [None] * len(entries)
    for i, entry in enumerate(entries):
        if not marked[i]:
            same = [n for n in by_hash.get((entry.path, nar.content_hash(entry.content)), [])
                    if n.id in free]
            if same:
                found[i] = same[0]
                free.discard(same[0].id)
    for i, entry in enumerate(entries):
        same = [n for n in by_key.get((entry.path, entry.key), []) if n.id in free]
        if not marked[i] and found[i] is None and same:
            found[i] = same[0]
            free.discard(same[0].id)
    return found


def _refuse_foreign_markers(conn: Any, entries: list[nar.Section], linked: dict[str, Any]
                            ) -> tuple[list[nar.Section], list[NarrativeChange]]:
    """The entries with every marker that may not move a node's identity taken off, and
    a ``refused`` change for each: a marker naming a live node that was not made from a
    narrative entry, or was made from another kind of file (a log entry cannot become a
    task). Such an entry is read as unmarked (a node of its own); the named node stays."""
    from ctxstore.index.read import find_node

    kept: list[nar.Section] = []
    refused: list[NarrativeChange] = []
    for entry in entries:
        if entry.marker is not None:
            node = linked.get(entry.marker) or find_node(conn, entry.marker)
            origin = node.metadata.get(META_PATH) if node is not None else None
            if node is not None and (not isinstance(origin, str)
                                     or nar.role_of(origin) != entry.role):
                refused.append(NarrativeChange("refused", entry.marker, entry.path))
                entry = replace(entry, marker=None)
        kept.append(entry)
    return kept, refused


@dataclass
class _Ingest:
    """The state of one ingestion: what the index knows and what was decided so far."""

    conn: Any
    linked: dict[str, Any]    # the live nodes that came from an entry, by id
    seen: set[str] = field(default_factory=set)
    records: list[KnowledgeRecord] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)
    changes: list[NarrativeChange] = field(default_factory=list)

    def note(self, action: str, node_id: str, entry: nar.Section) -> None:
        self.changes.append(NarrativeChange(action, node_id, entry.path))

    def entry(self, entry: nar.Section, marked: bool, known: Any) -> None:
        """Decide what one entry means (see ``ingest_narrative_edits``). ``marked``: its
        marker is the first one naming that node; ``known``: an unmarked entry's node."""
        from ctxstore.index.read import find_node, node_versions

        node = known
        if marked and entry.marker is not None:
            # The index is asked only for a node not loaded with the linked ones: one
            # without narrative metadata, or a deleted one (None).
            node = self.linked.get(entry.marker) or find_node(self.conn, entry.marker)
        else:
            entry = replace(entry, marker=None)  # a copied marker: the copy is a node of its own
        if entry.tangled:  # left as it is: its node keeps its content
            node_id = entry.marker or (node.id if node is not None else "")
            self.seen.add(node_id)
            self.note("tangled", node_id, entry)
            return
        if node is None:
            if entry.marker is not None and node_versions(self.conn, entry.marker):
                self.seen.add(entry.marker)  # deleted on purpose: never resurrected
                return
            node_id = entry.marker or new_ulid()
            self.records.append(_new_node(entry, node_id, self.blobs))
            self.seen.add(node_id)
            self.note("added", node_id, entry)
            return
        self.seen.add(node.id)
        rec = _edited(node, entry, self.blobs)
        if rec is not None:
            self.records.append(rec)
            self.note("updated", node.id, entry)


def ingest_narrative_edits(store: Store) -> list[NarrativeChange]:
    """Turn edits of the log, decision and task Markdown into staged node changes.

    * an entry whose marker names a live node and whose text changed: a new version;
    * an entry whose marker names no node ever seen (a crash between the Markdown and
      the node write, or a marker copied from another clone): that node, created;
    * an entry whose marker names a deleted node: nothing (deletions are not undone);
    * an unmarked entry: a new node the first time, recognised by file and heading after;
    * a marker naming a node not made from this kind of file (``_refuse_foreign_markers``):
      refused and reported, the entry read as unmarked;
    * a node whose entry is gone (section removed, task file deleted): a tombstone;
    * an entry a union merge interleaved with another (``tangled``): reported, unchanged.
    Nothing is staged when nothing changed.

    Raises:
        InvalidInput: a narrative file holds conflict markers (nothing is staged).
        LockConflict, StorageIOError: if the changes cannot be staged.
    """
    from ctxstore.nodes import open_index

    with store.lock():
        entries, read = _read_entries(store)
        conn = open_index(store)
        linked = _linked_nodes(conn)
        entries, refused = _refuse_foreign_markers(conn, entries, {n.id: n for n in linked})
        firsts: set[str] = set()
        marked = []
        for entry in entries:
            marked.append(entry.marker is not None and entry.marker not in firsts)
            firsts.add(entry.marker or "")
        state = _Ingest(conn, {n.id: n for n in linked}, changes=refused)
        for entry, is_marked, known in zip(entries, marked, _match_unmarked(entries, marked, linked)):
            state.entry(entry, is_marked, known)
        seen_edges: set[tuple[str, ...]] = set()
        for node in linked:
            path = node.metadata.get(META_PATH)
            if node.id not in state.seen and _entry_gone(store, path, read):
                state.records.extend(tombstones(conn, node, seen_edges))
                state.changes.append(NarrativeChange("removed", node.id, path))
        stage_write(store, state.records, "ingest narrative edits", state.blobs)
    return state.changes


def commit_with_edits(store: Store, message: str | None, *, amend: bool = False,
                      narrative: bool = True, allow_empty: bool = False
                      ) -> tuple[FoldResult, list[NarrativeChange]]:
    """``ctx commit``: ingest narrative edits (unless ``narrative`` is off), then fold STAGE
    into one canonical commit (see ``staging.commit_stage``), under one lock.

    Raises:
        InvalidInput: a narrative file holds conflict markers, or the message is missing
            or blank (see ``commit_stage``); nothing changes.
        StagingConflict, LockConflict, StorageIOError: see ``commit_stage``.
    """
    check_commit_message(message, amend=amend)  # before ingestion stages anything
    with store.lock():
        edits = ingest_narrative_edits(store) if narrative else []
        res = commit_stage(store, message, amend=amend, narrative=narrative,
                           allow_empty=allow_empty)
    return res, edits


# -- compaction: the session summary in today's log -----------------------------------------------

def _summary_counts(records: Sequence[KnowledgeRecord]) -> tuple[str, list[str]]:
    """The counts line of a session summary and the ids of the nodes it touched.

    ``records``: every record of the session, unfolded. A node whose first version is in
    the session counts as added even when a later version of it is what the fold keeps.
    """
    created = {r.id for r in records if isinstance(r, NodeRecord) and r.prev is None}
    added = updated = removed = edges = views = 0
    ids: list[str] = []
    for rec in fold_records(records):
        if isinstance(rec, NodeRecord):
            added, updated = (added + 1, updated) if rec.id in created else (added, updated + 1)
            ids.append(rec.id)
        elif isinstance(rec, NodeRemoved):
            removed += 1
            ids.append(rec.id)
        elif isinstance(rec, (EdgeRecord, EdgeRemoved)):
            edges += 1
        elif isinstance(rec, (ViewRecord, ViewRemoved)):
            views += 1
    text = (f"{added} nodes added, {updated} updated, {removed} removed, {edges} edge changes, "
            f"{views} view changes")
    return text, ids


def _has_summary(store: Store, session_id: str) -> bool:
    """True if some daily log already holds this session's summary (a re-run after a crash)."""
    needle = nar.session_marker(session_id)
    for rel, path in nar.iter_narrative_files(store):
        if rel.startswith("log/"):
            data = nar.read_narrative_bytes(path)
            if data is not None and needle in data.decode("utf-8", "replace"):
                return True
    return False


def _write_summary(store: Store, message: str) -> str | None:
    """Append the open session's summary to today's log; returns its path (None: no session)."""
    chain = stage_chain(store, store.staged_heads())
    if not chain:
        return None
    first = chain[0][1]
    session_id = first.session_id
    if _has_summary(store, session_id):
        return None
    records: list[KnowledgeRecord] = []
    for _, work in chain:
        for bid in work.change_batches:
            records.extend(store.read_typed(ObjectId(bid), ChangeBatch).records)
    counts, ids = _summary_counts(records)
    listed = ", ".join(ids[:MAX_LISTED_NODES]) or "none"
    if len(ids) > MAX_LISTED_NODES:
        listed += f" and {len(ids) - MAX_LISTED_NODES} more"
    task = first.message if first.step_kind == "session_start" else "(none)"
    ms = now_ms()
    rel = nar.log_rel(ms)
    entry = nar.render_template("session_summary.md", time=_hhmm(ms),
                                end=nar.end_marker(session_id),
                                marker=nar.session_marker(session_id),
                                message=_inert(nar.demote_headings(message.strip(), 3)),
                                session=session_id,
                                task=_inert(re.sub(r"\s+", " ", task).strip()) or "(none)",
                                counts=counts, nodes=listed)
    _write_text(store, rel, _appended(store, rel, nar.log_header(ms), entry))
    return rel


def compact_session(store: Store, message: str) -> tuple[FoldResult, list[NarrativeChange]]:
    """``ctx stage compact``: ingest narrative edits, write the session summary into today's
    log, then fold the session into one canonical commit that snapshots that log.

    The log is written before the commit pointer moves. After a crash in between, running
    it again finds the summary (by its session marker) and only folds.

    Returns:
        What was folded, and what the narrative edits became (as ``commit_with_edits``).

    Raises:
        InvalidInput: for a blank message (nothing changes) or conflict markers (see
            ``ingest_narrative_edits``).
        StagingConflict, LockConflict, StorageIOError: if the commit cannot be made.
    """
    check_commit_message(message)  # before ingestion stages anything
    with store.lock():
        edits = ingest_narrative_edits(store)
        _write_summary(store, message)
        return commit_stage(store, message, kind="compact"), edits
