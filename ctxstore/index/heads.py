"""Concurrent edits: the version heads of every node, kept at apply time.

Two versions of one node are *concurrent* when neither descends from the other: each
side of a Git merge edited (or deleted) the node after the fork. Replay keeps the one
with the greatest ``(stamp, version id)``; the other stays in the history, and
``ctx status`` reports the pair.

A version descends from another when its ``prev`` names it, or when the commit that
carries it descends from the other's commit. ``prev`` alone is not enough: a fold
(``ctx commit``) keeps only the newest version of each node, whose ``prev`` then names
a version no longer in the history. So the index keeps the commit graph with Git-style
generation numbers (``gen`` = 1 + the largest parent's), which bounds every ancestry
walk to the commits between the two versions; the common case (``prev`` names the
current head) needs no walk at all.

A fold's parent is the session's base, not its last work commit, so the graph alone
does not show that the fold absorbed the session's work commits (they stay visible
when STAGE was committed to Git before the fold, and the other branch continued the
session). A work commit of the same session and base counts as an ancestor of a fold
when the fold's records are consistent with having folded it (``_absorbed``). A node's
first version (``prev`` empty) precedes all its others.

Limitation: when a staged (unfolded) session was committed to Git, continued on both
branches and folded on at least one, the steps folded away are in no history any more,
and a version both branches could have seen cannot always be told apart from one only
one branch wrote. The newer version is then taken to descend from the older unless the
``prev`` fields say otherwise (both name the same version, or the newer one's visible
chain leads elsewhere). So in that situation an edit made on both branches, more than
once in the fold whose version is newer, can go unreported (the newer version still
wins, and the other stays in the history).

``node_heads`` holds, per node, the versions no other applied version descends from.
One head is the normal case; several heads are the concurrent edits. Reading them is
one indexed query, so ``ctx status`` never walks history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ctxstore.model import Commit, WorkCommit, codec
from ctxstore.model.knowledge import KnowledgeRecord, key_text, record_key, record_stamp, version_id
from ctxstore.objects import ObjectId
from ctxstore.records import dataclass
from ctxstore.replay import read_batch_unless_purged
from ctxstore.repo import Store

__all__ = ["ConcurrentEdit", "FoldReads", "record_commit_graph", "update_node_heads",
           "concurrent_edits"]


@dataclass(frozen=True, slots=True)
class ConcurrentEdit:
    """A node edited on both sides of a merge: the version replay kept and another head."""

    node_id: str
    kept: bytes
    other: bytes
    kept_removed: bool


def _parents(obj: Commit | WorkCommit) -> tuple[bytes, ...]:
    # A work commit builds on its base commit as much as on its previous step.
    return obj.parents + ((obj.base,) if isinstance(obj, WorkCommit) else ())


def _fold_key(obj: Commit | WorkCommit) -> tuple[str, str | None, bytes | None]:
    """(kind, session, base) as the commit graph stores them.

    A work commit's session and base, a fold's session (its base is its parent).
    """
    if isinstance(obj, WorkCommit):
        return "work", obj.session_id, obj.base
    # Unlike ``plan_sync``, a fold counts here only with one parent: the graph matches a
    # fold to its session's work commits by base, and only a single parent names it (an
    # amend keeps the amended commit's parents, which may be several or none).
    if obj.is_fold and len(obj.parents) == 1:
        return "fold", obj.session_id, obj.parents[0]
    return "commit", None, None


def record_commit_graph(conn: sqlite3.Connection,
                        commits: Sequence[tuple[bytes, Commit | WorkCommit]]) -> None:
    """Add ``commits`` to the index's commit graph with their generation numbers.

    Any order; their parents are applied before or among them.
    """
    batch = dict(commits)
    gens: dict[bytes, int] = {}

    def known(oid: bytes) -> int | None:
        if oid in gens:
            return gens[oid]
        row = conn.execute("SELECT gen FROM commit_graph WHERE oid = ?", (oid,)).fetchone()
        return None if row is None else row[0]

    for start in batch:
        stack = [start]
        while stack:  # iterative post-order: deep histories need no recursion
            oid = stack[-1]
            if known(oid) is not None:
                stack.pop()
                continue
            missing = [p for p in _parents(batch[oid]) if known(p) is None and p in batch]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            # A parent neither applied nor in this batch cannot happen for a reachable
            # history; count it as generation 0 rather than fail a read.
            gens[oid] = 1 + max((known(p) or 0 for p in _parents(batch[oid])), default=0)
    conn.executemany("INSERT OR IGNORE INTO commit_graph(oid, gen, kind, session, base)"
                     " VALUES (?, ?, ?, ?, ?)",
                     [(oid, gen, *_fold_key(batch[oid])) for oid, gen in gens.items()])
    conn.executemany("INSERT OR IGNORE INTO commit_parents(oid, parent) VALUES (?, ?)",
                     [(oid, p) for oid in gens for p in _parents(batch[oid])])


def _gen(conn: sqlite3.Connection, oid: bytes) -> int:
    row = conn.execute("SELECT gen FROM commit_graph WHERE oid = ?", (oid,)).fetchone()
    return 0 if row is None else row[0]


class FoldReads:
    """The records of folds and of session chains, each read once per ``apply_commits``.

    ``_absorbed`` is asked for every (head, new version) pair of a node; what a fold
    holds and what a chain of work commits wrote never change (objects are immutable),
    so one apply reads and decodes each commit's batches once. What the index has seen
    grows during the apply, so the ``versions`` lookups are not cached.
    """

    def __init__(self, store: Store) -> None:
        """Read through ``store``; keep everything until the object is dropped."""
        self._store = store
        self._folded: dict[bytes, dict[tuple[str, ...], KnowledgeRecord]] = {}
        self._chains: dict[bytes, list[KnowledgeRecord]] = {}

    def _records(self, commit: Commit | WorkCommit) -> list[KnowledgeRecord]:
        out: list[KnowledgeRecord] = []
        for bid in commit.change_batches:
            batch = read_batch_unless_purged(self._store, ObjectId(bid))  # None: purged
            out += batch.records if batch is not None else ()
        return out

    def folded(self, fold: bytes) -> dict[tuple[str, ...], KnowledgeRecord]:
        """The records of fold commit ``fold`` by replay key (one per key)."""
        if fold not in self._folded:
            commit = self._store.read_typed(ObjectId(fold), Commit)
            self._folded[fold] = {record_key(r): r for r in self._records(commit)}
        return self._folded[fold]

    def chain(self, work: bytes) -> list[KnowledgeRecord]:
        """The records of work commit ``work`` and of its earlier steps in the same session."""
        if work not in self._chains:
            read = self._store.read_typed
            session = read(ObjectId(work), WorkCommit).session_id
            out: list[KnowledgeRecord] = []
            todo, seen = [work], {work}
            while todo:
                step = read(ObjectId(todo.pop()), WorkCommit)
                out += self._records(step)
                for parent in step.parents:
                    if parent not in seen and \
                            read(ObjectId(parent), WorkCommit).session_id == session:
                        seen.add(parent)
                        todo.append(parent)
            self._chains[work] = out
        return self._chains[work]


def _descends(reads: FoldReads, conn: sqlite3.Connection, ancestor: bytes,
              descendant: bytes) -> bool:
    """True if commit ``descendant`` descends from commit ``ancestor``.

    Through parents, or through a fold that absorbed ``ancestor``, a work commit.
    """
    if _reaches(conn, ancestor, descendant):
        return True
    row = conn.execute("SELECT kind, session, base FROM commit_graph WHERE oid = ?",
                       (ancestor,)).fetchone()
    if row is None or row[0] != "work":
        return False
    folds = [r[0] for r in conn.execute(
        "SELECT oid FROM commit_graph WHERE kind = 'fold' AND session = ? AND base = ?",
        (row[1], row[2]))]
    return any((fold == descendant or _reaches(conn, fold, descendant))
               and _absorbed(reads, conn, ancestor, fold) for fold in folds)


def _absorbed(reads: FoldReads, conn: sqlite3.Connection, work: bytes, fold: bytes) -> bool:
    """Whether ``fold`` folded the session chain ending in ``work``.

    A fold keeps the newest record of each key of its chain, so for every record of
    ``work`` and of its earlier steps the fold holds the same version or a newer one
    whose ``prev`` is that record, or names a version the history no longer has (a
    step folded away). A step made on another branch fails this as soon as the fold
    lacks one of its keys or holds a version that descends from something else.
    """
    folded = reads.folded(fold)
    for rec in reads.chain(work):
        have = folded.get(record_key(rec))
        if have is None:
            return False
        if have == rec:
            continue
        if record_stamp(have) < record_stamp(rec) or \
                not _prev_leads_to(conn, record_key(rec), have.prev, version_id(rec)):
            return False
    return True


def _prev_leads_to(conn: sqlite3.Connection, key: tuple[str, ...], start: bytes | None,
                   target: bytes) -> bool:
    """Whether following ``prev`` from version ``start`` can reach ``target``.

    It does, or it reaches a version the index never saw (folded away: it may have).
    """
    text = key_text(key)
    seen: set[bytes] = set()
    while start is not None and start not in seen:
        if start == target:
            return True
        seen.add(start)
        row = conn.execute("SELECT record FROM versions WHERE key = ? AND version = ?",
                           (text, start)).fetchone()
        if row is None:
            return True
        start = codec.decode(row[0]).get("prev")
    return False


def _reaches(conn: sqlite3.Connection, ancestor: bytes, descendant: bytes) -> bool:
    """True if commit ``descendant`` reaches commit ``ancestor`` through its parents.

    One recursive query (the walk runs inside SQLite); commits of a generation not above
    ``ancestor``'s cannot lead to it and are not followed.
    """
    floor = _gen(conn, ancestor)
    if floor == 0 or _gen(conn, descendant) <= floor:
        return False
    row = conn.execute(
        "WITH RECURSIVE up(oid) AS (SELECT ? UNION SELECT p.parent FROM commit_parents p "
        "JOIN up ON p.oid = up.oid JOIN commit_graph g ON g.oid = p.parent WHERE g.gen >= ?) "
        "SELECT 1 FROM up WHERE oid = ? LIMIT 1", (descendant, floor, ancestor)).fetchone()
    return row is not None


def _before(reads: FoldReads, conn: sqlite3.Connection, node_id: str,
            old: tuple[bytes, bytes, bytes | None, int],
            new: tuple[bytes, bytes, bytes | None, int]) -> bool:
    """True if version ``old`` is an ancestor of version ``new`` (tuples: version, commit, prev, stamp)."""
    if new[2] == old[0]:
        return True
    if old[2] is None:
        return True  # a node's first version (ids are new ULIDs) precedes all others
    if old[1] == new[1]:  # one commit carrying both (an amended commit): newer wins
        return (old[3], old[0]) < (new[3], new[0])
    if _descends(reads, conn, old[1], new[1]):
        return True
    if old[2] == new[2]:
        return False  # two edits of the same version: siblings, whatever the commits say
    return old[3] < new[3] and _sibling_folds(conn, old[1], new[1]) \
        and _prev_leads_to(conn, ("node", node_id), new[2], old[0])


def _sibling_folds(conn: sqlite3.Connection, one: bytes, other: bytes) -> bool:
    """Both commits fold the same session on the same base.

    One staged session that was committed to Git and then folded on two branches. Their shared first
    steps are in neither history any more, so which versions both saw cannot be told apart from one
    that only one branch wrote: the newer version is taken to descend from the older (see the module
    docstring).
    """
    folds, sessions, bases = conn.execute(
        "SELECT count(*), count(DISTINCT session), count(DISTINCT base) FROM commit_graph "
        "WHERE kind = 'fold' AND oid IN (?, ?)", (one, other)).fetchone()
    return (folds, sessions, bases) == (2, 1, 1)


def update_node_heads(reads: FoldReads, conn: sqlite3.Connection, node_id: str, version: bytes,
                      commit: bytes, prev: bytes | None, stamp: int, *, known: bool) -> None:
    """Account for one version of a node carried by ``commit``.

    A version can be carried by several commits (a staged work commit and the folds
    that copied it, on either branch): a head keeps one row per carrying commit, and it
    is an ancestor of a new version when any of them is. ``known``: the index had seen
    this version before, so only a carrier is added (if it is still a head).
    """
    rows = conn.execute("SELECT version, commit_oid, prev, stamp FROM node_heads "
                        "WHERE node_id = ?", (node_id,)).fetchall()
    if known:
        if any(row[0] == version for row in rows):
            _insert_head(conn, node_id, version, commit, prev, stamp)
        return
    new = (version, commit, prev, stamp)
    heads: dict[bytes, list[tuple[bytes, bytes, bytes | None, int]]] = {}
    for row in rows:
        heads.setdefault(row[0], []).append((row[0], row[1], row[2], row[3]))
    is_head = True
    for old, carriers in heads.items():
        if any(_before(reads, conn, node_id, head, new) for head in carriers):
            conn.execute("DELETE FROM node_heads WHERE node_id = ? AND version = ?", (node_id, old))
        elif any(_before(reads, conn, node_id, new, head) for head in carriers):
            is_head = False  # applied out of order: a descendant is already here
    if is_head:
        _insert_head(conn, node_id, version, commit, prev, stamp)


def _insert_head(conn: sqlite3.Connection, node_id: str, version: bytes, commit: bytes,
                 prev: bytes | None, stamp: int) -> None:
    conn.execute("INSERT OR IGNORE INTO node_heads(node_id, version, commit_oid, prev, stamp)"
                 " VALUES (?, ?, ?, ?, ?)", (node_id, version, commit, prev, stamp))


def concurrent_edits(conn: sqlite3.Connection) -> list[ConcurrentEdit]:
    """Every node with more than one head.

    The kept (winning) version and each other head, sorted by node id.
    """
    rows = conn.execute(
        "SELECT DISTINCT h.node_id, w.version, w.live, h.version FROM node_heads h "
        "JOIN winners w ON w.key = ? || h.node_id "
        "WHERE h.node_id IN (SELECT node_id FROM node_heads GROUP BY node_id "
        "HAVING count(DISTINCT version) > 1) AND h.version != w.version "
        "ORDER BY h.node_id, h.version", (key_text(("node", "")),))  # a node's key, less its id
    return [ConcurrentEdit(node_id, kept, other, not live) for node_id, kept, live, other in rows]
