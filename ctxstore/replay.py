"""Knowledge state = replay of every change batch reachable from HEAD and STAGE.

For each key (node id; edge (from, to, label); view name) the record with the greatest
``(stamp, version id)`` wins, tombstones included. The rule is a pure function of the
*set* of reachable records, so every topological order and every merge order of the
same batches gives the same state (DESIGN §4). Deep histories are walked iteratively.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from dataclasses import field

import blake3

from ctxstore.errors import ObjectNotFound
from ctxstore.ids import ObjectId
from ctxstore.model import ChangeBatch, Commit, WorkCommit, codec
from ctxstore.model.knowledge import (
    EdgeRecord,
    KnowledgeRecord,
    NodeRecord,
    PurgeRecord,
    ViewRecord,
    record_key,
    record_stamp,
    record_to_wire,
    version_id,
)
from ctxstore.records import dataclass
from ctxstore.repo import Store

__all__ = ["KnowledgeState", "Winner", "state_heads", "iter_batch_ids", "replay_batches",
           "replay", "fold_records", "purged_objects", "purged_descendants",
           "read_batch_unless_purged"]

# Per open store: the objects the reachable purge records name (``purged_objects``).
_PURGED: weakref.WeakKeyDictionary[Store, tuple[tuple[bytes, ...], frozenset[bytes]]] = \
    weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Winner:
    """The winning record of one key and its version id."""

    record: KnowledgeRecord
    version: bytes

    @property
    def order(self) -> tuple[int, bytes]:
        """The sort key of the replay: the record's stamp, then the version id."""
        return record_stamp(self.record), self.version


@dataclass
class KnowledgeState:
    """Replayed state: the winner of every key (tombstones kept, see ``live``)."""

    winners: dict[tuple[str, ...], Winner] = field(default_factory=dict)
    batches: int = 0

    def offer(self, rec: KnowledgeRecord, version: bytes | None = None) -> None:
        """Let ``rec`` compete for its key (last writer wins); ``version``: its id, if known."""
        cand = Winner(rec, version if version is not None else version_id(rec))
        key = record_key(rec)
        cur = self.winners.get(key)
        if cur is None or cand.order > cur.order:
            self.winners[key] = cand

    @property
    def nodes(self) -> dict[str, NodeRecord]:
        """Live nodes by id."""
        return {w.record.id: w.record for w in self.winners.values()
                if isinstance(w.record, NodeRecord)}

    @property
    def edges(self) -> list[EdgeRecord]:
        """Live edges."""
        return [w.record for w in self.winners.values() if isinstance(w.record, EdgeRecord)]

    @property
    def views(self) -> dict[str, ViewRecord]:
        """Live views by name."""
        return {w.record.name: w.record for w in self.winners.values()
                if isinstance(w.record, ViewRecord)}

    def to_json(self) -> dict[str, object]:
        """A canonical, JSON-ready description of the state (winners with versions)."""
        out: list[dict[str, object]] = []
        for key in sorted(self.winners):
            w = self.winners[key]
            wire = record_to_wire(w.record)
            out.append({"key": list(key), "version": w.version.hex(), "record": codec.jsonable(wire)})
        return {"version": 1, "records": out}

    def digest(self) -> str:
        """BLAKE3 over the canonical encoding of every winner (tombstones included)."""
        items = [[list(k), self.winners[k].version] for k in sorted(self.winners)]
        return blake3.blake3(codec.encode(items)).hexdigest()



def state_heads(store: Store) -> list[ObjectId]:
    """Every head the state is read from: all heads of HEAD's ref, and STAGE's staged work.

    STAGE after a fold names the canonical commit the fold made: that commit is in HEAD's
    history until a ``git checkout`` moves HEAD's ref to another branch, and from then on it
    is the other branch's, not this state's. So only STAGE's work commits count.
    """
    heads = list(store.read_head().heads)
    for head in heads:
        store.read_typed(head, Commit)  # E001/E004: a ref must name a canonical commit
    return heads + store.staged_heads()


def iter_batch_ids(store: Store, heads: Iterable[ObjectId]) -> Iterator[ObjectId]:
    """Yield each change batch id reachable from ``heads`` once."""
    seen: set[bytes] = set()
    for _, obj in store.iter_history(heads):
        assert isinstance(obj, (Commit, WorkCommit))
        for bid in obj.change_batches:
            if bid not in seen:
                seen.add(bid)
                yield ObjectId(bid)


def purged_objects(store: Store, heads: Iterable[ObjectId] | None = None) -> frozenset[bytes]:
    """The objects that ``purge`` records reachable from ``heads`` name (default: HEAD + STAGE).

    ``ctx purge`` rewrote them and ``ctx gc`` deleted them: a history that still names one
    (a clone that merged its old history back) is not broken there, the object is purged.
    Read on the rare path of a missing object only; kept per open store.

    Raises:
        CtxError: (E001-E009) if a pointer or a commit on the way is missing or damaged.
    """
    roots = tuple(state_heads(store) if heads is None else heads)
    known = _PURGED.get(store)
    if known is not None and known[0] == roots:
        return known[1]
    found: set[bytes] = set()
    for _, obj in store.iter_history([ObjectId(r) for r in roots]):
        for bid in obj.change_batches:
            try:
                batch = store.read_typed(ObjectId(bid), ChangeBatch)
            except ObjectNotFound:
                continue
            for rec in batch.records:
                if isinstance(rec, PurgeRecord):
                    found.update(rec.objects)
    result = frozenset(found)
    _PURGED[store] = (roots, result)
    return result


def read_batch_unless_purged(store: Store, bid: ObjectId) -> ChangeBatch | None:
    """A change batch, or None when it is missing because ``ctx purge`` removed it.

    Raises:
        ObjectNotFound: (E001) if it is missing and no reachable purge names it.
        CtxError: (E002-E004) if it is damaged.
    """
    try:
        return store.read_typed(bid, ChangeBatch)
    except ObjectNotFound:
        if bid in purged_objects(store):
            return None
        raise


def replay_batches(store: Store, batch_ids: Iterable[ObjectId]) -> KnowledgeState:
    """Replay the given batches (any order gives the same state).

    A record whose version a reachable ``purge`` record names takes no part (``ctx purge``):
    the purges are gathered first, so the order of the batches still does not matter. A
    batch a purge removed (named by one, and deleted by ``ctx gc``) is skipped.
    """
    batches = [b for bid in batch_ids if (b := read_batch_unless_purged(store, bid)) is not None]
    purged: set[bytes] = {bytes(v) for batch in batches for rec in batch.records
                           if isinstance(rec, PurgeRecord) for v in rec.versions}
    versions = [(rec, version_id(rec)) for batch in batches for rec in batch.records]
    if purged:
        purged = purged_descendants(purged, [(v, rec.prev) for rec, v in versions])
    state = KnowledgeState(batches=len(batches))
    for rec, version in versions:
        if version not in purged:
            state.offer(rec, version)
    return state


def purged_descendants(purged: set[bytes], links: Iterable[tuple[bytes, bytes | None]]
                       ) -> set[bytes]:
    """``purged`` with every version built on one of them (through ``prev``, transitively).

    An edit another clone made on top of a version ``ctx purge`` replaced carries the purged
    content with it (an update keeps the fields it does not change): it is purged too.

    Args:
        purged: The version ids purge records name.
        links: (version id, its ``prev``) of every record.

    Returns:
        The versions replay ignores.
    """
    children: dict[bytes, list[bytes]] = {}
    for version, prev in links:
        if prev is not None:
            children.setdefault(bytes(prev), []).append(version)
    out = set(purged)
    todo = list(purged)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def replay(store: Store, heads: Iterable[ObjectId] | None = None) -> KnowledgeState:
    """Replay the knowledge state visible from ``heads`` (default: HEAD + STAGE).

    Raises:
        CtxError: (E001-E005) if a pointer, commit or batch on the way is missing or damaged.
    """
    return replay_batches(store, iter_batch_ids(store, state_heads(store) if heads is None else heads))


def fold_records(records: Iterable[KnowledgeRecord]) -> list[KnowledgeRecord]:
    """Keep only the winning record of each key, sorted by key (for curated batches)."""
    state = KnowledgeState()
    for rec in records:
        state.offer(rec)
    return [state.winners[k].record for k in sorted(state.winners)]
