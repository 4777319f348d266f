"""What ``ctx gc`` pruned: the code index an older ctx committed, and the list naming it.

Before the code index became per clone (issue 30), ``ctx index`` followed by ``ctx commit``
stored the code index as canonical objects: each indexed file's content blob and its
``file_version`` (symbols and relations), named by a ``file`` record in the fold's change
batch, and one ``tree`` per directory under the commit's ``root_tree`` (commit v1). Nothing
reads them any more (``ctx index`` derives the code index from the work tree), but history
names them, so ``ctx gc`` could not drop them.

**What knowledge needs** (``needed_objects``): everything the pointers reach, except through
the old code-index roots. From a commit: its parents, change batches, edge batches, narrative
snapshots, Cargo and diagnostics snapshots and aborted work, not ``root_tree`` (the copy of
the indexed files) nor ``code_snapshot``; an empty root tree (``ctx init``'s) is kept. From a
change batch: node content blobs, Cargo and command-run snapshots, and the version and blob of
a ``file`` record when that record is a ``ctx add file`` snapshot. An older ctx wrote the
records of ``ctx index`` and of ``ctx add file`` alike, so in a batch a commit v1 carries a
``file`` record counts as a snapshot only when knowledge refers to it: an edge's evidence
(a ``Mentions`` or ``ctx relate`` edge records the file's content hash as ``blob``) names its
blob or version. Since commit v2 only ``ctx add file`` writes ``file`` records, so every one
a v2 commit or a staged step carries is kept, as is every object an edge's evidence names.
Everything else the pointers reach is prunable.

**The list** (``ctxstore.prunedlist``): before deleting, ``ctx gc`` writes the ids it is about
to prune to a new file ``.ctx/pruned/<BLAKE3 of the content>`` (atomically, fsynced), one
lowercase hex id per line, sorted, after a comment line. The files are committed with the
store: each gc adds one new file (two clones pruning the same objects write the same file),
so Git never has to merge one.

A missing object is *pruned* when a list names it and knowledge does not need it: ``ctx debug
verify``, ``ctx gc`` and the promotion of a new commit's closure treat it as such (``verify``
counts it, never as an error); a missing object no list names, or one knowledge needs, is
still corruption (E001).

It must not print.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ctxstore.errors import CtxError, ObjectNotFound
from ctxstore.ids import ObjectId
from ctxstore.model import ChangeBatch, Commit, CommitV2, Tree, decode_typed
from ctxstore.model.code import FileRecord
from ctxstore.model.knowledge import EdgeRecord
from ctxstore.model.references import iter_references, record_references
from ctxstore.objects import KIND_TYPED
from ctxstore.prunedlist import is_object_id, read_pruned

if TYPE_CHECKING:
    from ctxstore.repo import Store

__all__ = ["needed_objects", "pruned_missing", "v1_batches"]


def _load(store: Store, oid: bytes) -> Any:
    """The decoded object (None for a blob); raises ObjectNotFound / CtxError."""
    cached = store._cache.get(oid)
    if cached is not None:
        return cached
    stored = store.objects.read(ObjectId(oid))
    return decode_typed(stored.payload, oid=oid) if stored.kind == KIND_TYPED else None


def _evidence_ids(rec: EdgeRecord) -> Iterator[str]:
    """The object ids (hex) an edge's evidence names (``blob``, and any other id-like value)."""
    for value in (rec.evidence or {}).values():
        if isinstance(value, str) and is_object_id(value):
            yield value


def needed_objects(store: Store, roots: Iterable[tuple[bytes, Any, str]]) -> set[bytes]:
    """Every object the knowledge reachable from ``roots`` needs (see the module docstring).

    Missing objects on the way are in the result too (a needed object that is missing is
    corruption, whatever a list says); damaged ones are not followed.
    """
    needed: set[bytes] = set()
    batches_v1: set[bytes] = set()  # batches seen only under a commit v1 so far
    deferred: list[tuple[bytes, bytes]] = []  # (version, blob) of file records of v1 batches
    evidence: set[str] = set()
    stack: list[tuple[bytes, bool]] = [(oid, False) for oid, _, _ in roots]

    def walk() -> None:
        while stack:
            oid, under_v1 = stack.pop()
            if oid in needed and not (oid in batches_v1 and not under_v1):
                continue
            needed.add(oid)
            try:
                obj = _load(store, oid)
            except ObjectNotFound:
                continue
            except CtxError:
                continue  # damage is the object scan's to report
            if isinstance(obj, ChangeBatch):
                if under_v1:
                    batches_v1.add(oid)
                else:
                    batches_v1.discard(oid)
                for rec in obj.records:
                    if isinstance(rec, EdgeRecord):
                        evidence.update(_evidence_ids(rec))
                    elif isinstance(rec, FileRecord) and under_v1:
                        deferred.append((bytes(rec.version), bytes(rec.blob)))
                        continue
                    stack.extend((ref, False) for ref, _ in record_references(rec))
                continue
            if isinstance(obj, Commit):
                v1 = not isinstance(obj, CommitV2)
                skip = {obj.root_tree, obj.code_snapshot} - {None}
                for ref, want in iter_references(obj):
                    if ref in skip:
                        continue
                    stack.append((ref, v1 and want is ChangeBatch))
                if obj.root_tree is not None and _empty_tree(store, obj.root_tree):
                    needed.add(obj.root_tree)  # ctx init's empty tree: nothing to prune
                continue
            if obj is None:
                continue
            stack.extend((ref, False) for ref, _ in iter_references(obj))

    walk()
    for version, blob in deferred:
        if version.hex() in evidence or blob.hex() in evidence:
            stack += [(version, False), (blob, False)]
    for hexid in evidence:
        oid = ObjectId(bytes.fromhex(hexid))
        if store.objects.exists(oid):
            stack.append((oid, False))
    walk()
    return needed


def _empty_tree(store: Store, oid: bytes) -> bool:
    try:
        tree = _load(store, oid)
    except CtxError:
        return False
    return isinstance(tree, Tree) and not tree.entries


def v1_batches(store: Store) -> set[bytes]:
    """The change batches the commits v1 of the state's history carry (``ctx add file`` dedup)."""
    from ctxstore.replay import state_heads

    found: set[bytes] = set()
    for _, obj in store.iter_history([ObjectId(h) for h in state_heads(store)]):
        if isinstance(obj, Commit) and not isinstance(obj, CommitV2):
            found.update(obj.change_batches)
    return found


def pruned_missing(store: Store, roots: list[tuple[bytes, Any, str]],
                   missing: Iterable[bytes]) -> set[bytes]:
    """Of the ``missing`` ids, those a list names and knowledge does not need."""
    missing = set(missing)
    if not missing:
        return set()
    listed = missing & read_pruned(store.root).ids
    if not listed:
        return set()
    return listed - needed_objects(store, roots)
