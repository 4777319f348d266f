"""Knowledge state = replay of every change batch reachable from HEAD and STAGE.

For each key (node id; edge (from, to, label); view name) the record with the greatest
``(stamp, version id)`` wins, tombstones included. The rule is a pure function of the
*set* of reachable records, so every topological order and every merge order of the
same batches gives the same state (DESIGN §4). Deep histories are walked iteratively.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import field

import blake3

from ctxstore.ids import ObjectId
from ctxstore.model import ChangeBatch, Commit, WorkCommit, codec
from ctxstore.model.knowledge import (
    EdgeRecord,
    KnowledgeRecord,
    NodeRecord,
    ViewRecord,
    record_key,
    record_stamp,
    record_to_wire,
    version_id,
)
from ctxstore.records import dataclass
from ctxstore.repo import Store

__all__ = ["KnowledgeState", "Winner", "state_heads", "iter_batch_ids", "replay_batches",
           "replay", "fold_records"]


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

    def offer(self, rec: KnowledgeRecord) -> None:
        """Let ``rec`` compete for its key (last writer wins)."""
        cand = Winner(rec, version_id(rec))
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


def replay_batches(store: Store, batch_ids: Iterable[ObjectId]) -> KnowledgeState:
    """Replay the given batches (any order gives the same state)."""
    state = KnowledgeState()
    for bid in batch_ids:
        batch = store.read_typed(bid, ChangeBatch)
        state.batches += 1
        for rec in batch.records:
            state.offer(rec)
    return state


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
