"""Which objects a typed object refers to: the edges of the object graph.

One definition for every walker: ``verify`` and ``gc`` mark what the pointers reach, and
a transaction promotes what a canonical commit reaches from the staging area to the
committed one (``ctxstore.repo``).
"""

from __future__ import annotations

from collections.abc import Iterator

from ctxstore.model.build import (
    CargoMetadataSnapshot,
    CargoRecord,
    CommandRunRecord,
    DiagnosticsSnapshot,
)
from ctxstore.model.code import FileRecord, FileVersion
from ctxstore.model.commit import Commit, CommitV2, Tree, WorkCommit
from ctxstore.model.knowledge import ChangeBatch

__all__ = ["ABORTED_WORK", "Want", "iter_references", "record_references"]

# The type an abort commit's ``aborted_work`` must have. A distinct tuple (not the
# WorkCommit class itself) so walkers can tell this reference apart: aborted steps stay
# in the clone that aborted them, so another clone lacks them (not damage), and they are
# never promoted to the committed area.
ABORTED_WORK: tuple[type, ...] = (WorkCommit,)
# What a reference must be: a type, ``ABORTED_WORK``, or None (any object).
Want = type | tuple[type, ...] | None


def iter_references(obj: object) -> Iterator[tuple[bytes, Want]]:
    """Every object id a typed object refers to, with the type it must have (None: any)."""
    if isinstance(obj, Commit):
        yield from ((p, Commit) for p in obj.parents)
        if obj.root_tree:
            yield obj.root_tree, Tree
        yield from ((b, ChangeBatch) for b in obj.change_batches)
        yield from ((b, None) for b in obj.edge_batches)
        yield from ((r.blob_id, None) for r in obj.narrative_refs)
        for snap in (obj.cargo_snapshot, obj.code_snapshot, obj.diagnostics_snapshot):
            if snap:
                yield snap, None
        if isinstance(obj, CommitV2):  # the Git ids name no object of the store
            yield from ((s, CargoMetadataSnapshot) for s in obj.cargo_snapshots)
            yield from ((s, DiagnosticsSnapshot) for s in obj.diagnostics_snapshots)
        if obj.aborted_work:
            yield obj.aborted_work, ABORTED_WORK
    elif isinstance(obj, WorkCommit):
        yield from ((p, WorkCommit) for p in obj.parents)
        yield obj.base, Commit
        yield from ((b, ChangeBatch) for b in obj.change_batches)
        yield from ((p, None) for p in obj.payload)
        yield from ((r.blob_id, None) for r in obj.narrative_refs)
    elif isinstance(obj, Tree):
        for entry in obj.entries:
            yield entry.id, (Tree if entry.kind == "tree" else None)
    elif isinstance(obj, ChangeBatch):
        for rec in obj.records:
            yield from record_references(rec)
    elif isinstance(obj, DiagnosticsSnapshot):
        yield obj.output_blob, None
    elif isinstance(obj, FileVersion):
        yield obj.blob_id, None


def record_references(rec: object) -> Iterator[tuple[bytes, Want]]:
    """Every object id one change-batch record refers to, with the type it must have."""
    blob = getattr(rec, "content_blob", None)
    if blob:
        yield blob, None
    if isinstance(rec, CargoRecord):
        yield rec.snapshot, CargoMetadataSnapshot
    elif isinstance(rec, CommandRunRecord):
        yield rec.snapshot, DiagnosticsSnapshot
    elif isinstance(rec, FileRecord):  # model.code: the version and the file's bytes
        yield rec.version, FileVersion
        yield rec.blob, None
