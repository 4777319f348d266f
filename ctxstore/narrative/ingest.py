"""Hand edits of narrative entries, read back at commit: ``ingest_narrative_edits``.

``ingest_narrative_edits`` runs before every commit (``history.commit``). It compares
each entry with the hash of the text it had when it last became a node version (node
metadata ``narrative_hash``), so an edit made with ``ctx update`` is not undone by the
unchanged Markdown, and an entry nobody edited produces nothing. Entries a person wrote
without a marker are recognised by their file and heading (``narrative_key``); ctx never
writes into text a person wrote.

At ingest a marker that names a node no entry of that kind of file can be (one not made
from narrative, like a fact added with ``ctx add --type``, or one from another kind of
file) is refused and reported: the entry becomes a node of its own and the named node is
left as it is (docs/narrative.md).
"""

from __future__ import annotations

from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore.errors import InvalidInput
from ctxstore.git import head_position
from ctxstore.ids import new_ulid
from ctxstore.knowledge.nodes import next_version, split_content, stage_write, tombstones
from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Origin, provenance_metadata
from ctxstore.model.knowledge import KnowledgeRecord, NodeRecord
from ctxstore.narrative.entries import META_HASH, META_KEY, META_PATH, META_TASK, ROLE_TYPES
from ctxstore.narrative.markdown import (
    ENTRY_ROLES,
    Section,
    conflict_line,
    content_hash,
    parse_entries,
    role_of,
    task_number,
)
from ctxstore.narrative.snapshot import iter_narrative_files, read_narrative_bytes
from ctxstore.records import dataclass
from ctxstore.repo import Store, now_ms
from ctxstore.security.guard import guard, policy
from ctxstore.security.secrets import apply_redactions, describe

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["NarrativeChange", "ingest_narrative_edits", "redact_narrative"]


@dataclass(frozen=True)
class NarrativeChange:
    """What ``ingest_narrative_edits`` turned one edit into."""

    action: str               # "added", "updated", "removed", "tangled" (left alone),
    node_id: str              # "skipped" (a file not read as knowledge: no node_id) or
    path: str                 # "redacted" (secrets redacted in place: node_id says which)


# -- ingesting human edits ---------------------------------------------------------------------------

def _entry_text(path: Path) -> str | None:
    """A file's text, or None if it cannot be read, is too large or is not UTF-8."""
    data = read_narrative_bytes(path)
    try:
        return data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        return None


def _read_entries(store: Store, skipped: list[str] | None = None
                  ) -> tuple[list[Section], set[str]]:
    """Every entry of the log, decision and task files, and the paths that were read.

    ``skipped`` (when given) collects the regular files that were not read as knowledge:
    larger than ``MAX_NARRATIVE_BYTES`` or not UTF-8 (a link or FIFO is refused elsewhere).

    Raises:
        InvalidInput: if a file holds unresolved Git conflict markers.
    """
    entries: list[Section] = []
    read: set[str] = set()
    for rel, path in iter_narrative_files(store):
        if role_of(rel) not in ENTRY_ROLES:
            continue
        text = _entry_text(path)
        if text is None:
            if skipped is not None and not path.is_symlink() and path.is_file():
                skipped.append(rel)
            continue  # its nodes are left as they are (never tombstoned)
        line = conflict_line(text)
        if line is not None:
            raise InvalidInput(f"narrative/{rel}:{line}: unresolved merge conflict",
                               hint="resolve it (remove the <<<<<<< ======= >>>>>>> lines), "
                                    "then commit again")
        read.add(rel)
        entries.extend(e for e in parse_entries(rel, text) if e.session is None and e.content)
    return entries, read


def _linked_nodes(conn) -> list[Any]:  # type: ignore[no-untyped-def]
    """Live nodes that came from a narrative entry."""
    from ctxstore.index.read import nodes_with_metadata

    return nodes_with_metadata(conn, META_PATH)


def _new_node(entry: Section, node_id: str, blobs: list[bytes], store: Store,
              position: tuple[str | None, str | None]) -> NodeRecord:
    inline, blob_id, new_blobs = split_content(entry.content)
    blobs.extend(new_blobs)
    meta: dict[str, Any] = {META_PATH: entry.path, META_HASH: content_hash(entry.content),
                            META_PROVENANCE: provenance_metadata(store, Origin("narrative"),
                                                                 entry.content, position=position)}
    if entry.marker is None:
        meta[META_KEY] = entry.key
    if entry.role == "task":
        meta[META_TASK] = task_number(node_id)
    stamp = now_ms()
    return NodeRecord(id=node_id, type=ROLE_TYPES[entry.role], content=inline,
                      content_blob=blob_id, summary=None, tags=(), metadata=meta,
                      status="active", superseded_by=None, created_at=stamp, updated_at=stamp,
                      author=None, prev=None)


def _edited(node: Any, entry: Section, blobs: list[bytes]) -> NodeRecord | None:
    """The node's next version if the entry's text (or place) changed since it was recorded."""
    digest = content_hash(entry.content)
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
    """True if a node's entry can no longer be there.

    Its file was read (and the entry was not in it) or is deleted. An unreadable file removes
    nothing.
    """
    if not isinstance(path, str) or role_of(path) not in ENTRY_ROLES:
        return False
    if path in read:
        return True
    target = store.root / "narrative" / path
    return not target.exists() and not target.is_symlink()


def _match_unmarked(entries: list[Section], marked: list[bool], linked: list[Any]
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
            same = [n for n in by_hash.get((entry.path, content_hash(entry.content)), [])
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


def _refuse_foreign_markers(conn: Any, entries: list[Section], linked: dict[str, Any]
                            ) -> tuple[list[Section], list[NarrativeChange]]:
    """The entries with every marker that may not move a node's identity taken off.

    Each gets a ``refused`` change: a marker naming a live node that was not made from a narrative
    entry, or was made from another kind of file (a log entry cannot become a task). Such an entry
    is read as unmarked (a node of its own); the named node stays.
    """
    from ctxstore.index.read import find_node

    kept: list[Section] = []
    refused: list[NarrativeChange] = []
    for entry in entries:
        if entry.marker is not None:
            node = linked.get(entry.marker) or find_node(conn, entry.marker)
            origin = node.metadata.get(META_PATH) if node is not None else None
            if node is not None and (not isinstance(origin, str)
                                     or role_of(origin) != entry.role):
                refused.append(NarrativeChange("refused", entry.marker, entry.path))
                entry = replace(entry, marker=None)
        kept.append(entry)
    return kept, refused


@dataclass
class _Ingest:
    """The state of one ingestion: what the index knows and what was decided so far."""

    conn: Any
    store: Store
    linked: dict[str, Any]    # the live nodes that came from an entry, by id
    seen: set[str] = field(default_factory=set)
    records: list[KnowledgeRecord] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)
    changes: list[NarrativeChange] = field(default_factory=list)
    position: tuple[str | None, str | None] | None = None  # Git's branch and HEAD, asked once

    def note(self, action: str, node_id: str, entry: Section) -> None:
        self.changes.append(NarrativeChange(action, node_id, entry.path))

    def _position(self) -> tuple[str | None, str | None]:
        if self.position is None:
            self.position = head_position(self.store.worktree)
        return self.position

    def entry(self, entry: Section, marked: bool, known: Any) -> None:
        """Decide what one entry means (see ``ingest_narrative_edits``).

        ``marked``: its marker is the first one naming that node; ``known``: an unmarked entry's
        node.
        """
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
            self.records.append(_new_node(entry, node_id, self.blobs, self.store, self._position()))
            self.seen.add(node_id)
            self.note("added", node_id, entry)
            return
        self.seen.add(node.id)
        rec = _edited(node, entry, self.blobs)
        if rec is not None:
            self.records.append(rec)
            self.note("updated", node.id, entry)


def redact_narrative(store: Store) -> list[NarrativeChange]:
    """Redact secrets in place in every narrative file, before it is read or snapshotted.

    Narrative Markdown is edited by hand and committed to Git with ``.ctx/``: a secret a
    person pasted into a log entry is replaced by ``[REDACTED:<rule>]`` in the file itself
    (``[security] narrative``), so neither the snapshot, the node made from the entry nor
    the next ``git add`` carries it. The caller holds the store lock.

    Returns:
        One ``redacted`` change per file rewritten (``node_id``: the rules and lines).

    Raises:
        SecretRefused: if ``[security] narrative = "refuse"`` and a file holds a secret.
        StorageIOError: if a file cannot be rewritten.
    """
    from ctxstore.narrative.entries import _write_text

    pol = policy(store)
    if pol.action("narrative") == "allow":
        return []
    scanner = pol.scanner()
    changes: list[NarrativeChange] = []
    for rel, path in iter_narrative_files(store):
        text = _entry_text(path)
        if text is None:
            continue
        findings = scanner.scan(text)
        if not findings:
            continue
        guard(store, "narrative", text, what=f"narrative/{rel}", policy_=pol)  # refuse mode
        _write_text(store, rel, apply_redactions(text, findings))
        changes.append(NarrativeChange("redacted", describe(findings), rel))
    return changes


def ingest_narrative_edits(db: Session) -> list[NarrativeChange]:
    """Turn edits of the log, decision and task Markdown into staged node changes.

    * an entry whose marker names a live node and whose text changed: a new version;
    * an entry whose marker names no node ever seen (a crash between the Markdown and
      the node write, or a marker copied from another clone): that node, created;
    * an entry whose marker names a deleted node: nothing (deletions are not undone);
    * an unmarked entry: a new node the first time, recognised by file and heading after;
    * a marker naming a node not made from this kind of file (``_refuse_foreign_markers``):
      refused and reported, the entry read as unmarked;
    * a node whose entry is gone (section removed, task file deleted): a tombstone;
    * an entry a union merge interleaved with another (``tangled``): reported, unchanged;
    * a file too large or not UTF-8 (``skipped``): reported, its nodes left as they are;
    * a secret in any narrative file: redacted in place first (``redact_narrative``).
    Nothing is staged when nothing changed.

    Raises:
        InvalidInput: a narrative file holds conflict markers (nothing is staged).
        LockConflict, StorageIOError: if the changes cannot be staged.
    """
    store = db.store

    with store.lock():
        redacted = redact_narrative(store)  # before any entry is read: nodes never hold one
        skipped: list[str] = []
        entries, read = _read_entries(store, skipped)
        conn = db.index()
        linked = _linked_nodes(conn)
        entries, refused = _refuse_foreign_markers(conn, entries, {n.id: n for n in linked})
        refused = redacted + [NarrativeChange("skipped", "", rel) for rel in skipped] + refused
        firsts: set[str] = set()
        marked = []
        for entry in entries:
            marked.append(entry.marker is not None and entry.marker not in firsts)
            firsts.add(entry.marker or "")
        state = _Ingest(conn, store, {n.id: n for n in linked}, changes=refused)
        matches = _match_unmarked(entries, marked, linked)
        for entry, is_marked, known in zip(entries, marked, matches, strict=True):
            state.entry(entry, is_marked, known)
        seen_edges: set[tuple[str, ...]] = set()
        for node in linked:
            path = node.metadata.get(META_PATH)
            if node.id not in state.seen and _entry_gone(store, path, read):
                state.records.extend(tombstones(conn, node, seen_edges))
                state.changes.append(NarrativeChange("removed", node.id, path))
        stage_write(store, state.records, "ingest narrative edits", state.blobs)
    return state.changes
