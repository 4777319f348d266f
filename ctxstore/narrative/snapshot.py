"""Narrative files in commits: the files under ``.ctx/narrative/`` and their snapshots.

Changed narrative files are snapshotted as blobs into a commit's ``narrative_refs``
(spec 002 §8.5). A file counts as changed when its blob id differs from the newest
snapshot of the same path in HEAD's history. Symlinks are never followed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import UnsafePath
from ctxstore.model import Commit, NarrativeRef
from ctxstore.narrative.markdown import role_of
from ctxstore.objects import KIND_BLOB, ObjectId, object_id_of
from ctxstore.repo import Store, Transaction

__all__ = ["MAX_NARRATIVE_BYTES", "stream_of", "iter_narrative_files", "latest_snapshots",
           "read_narrative_bytes", "snapshot_changes"]

MAX_NARRATIVE_BYTES = 8 << 20


def stream_of(rel: str) -> str:
    """The narrative stream of a path (spec 002 §8.4)."""
    parts = rel.split("/")
    if parts[0] == "work":
        return "work"
    if parts[0] == "feature" and len(parts) > 2:
        return f"feature-{parts[1]}"
    return "main"


def iter_narrative_files(store: Store) -> list[tuple[str, Path]]:
    """Every regular Markdown file under narrative/ (no symlinks), sorted by path."""
    root = store.root / "narrative"
    found: list[tuple[str, Path]] = []
    if not root.is_dir() or root.is_symlink():
        return found
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
        for name in filenames:
            path = Path(dirpath) / name
            if name.endswith(".md") and not path.is_symlink() and path.is_file():
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def latest_snapshots(store: Store, head: ObjectId) -> dict[str, NarrativeRef]:
    """The newest snapshot of each narrative path in ``head``'s history."""
    latest: dict[str, NarrativeRef] = {}
    for _, obj in store.iter_history([head]):
        if isinstance(obj, Commit):
            for ref in obj.narrative_refs:
                latest.setdefault(ref.path, ref)
    return latest


def read_narrative_bytes(path: Path) -> bytes | None:
    """A narrative file's bytes, or None if it cannot be read or exceeds ``MAX_NARRATIVE_BYTES``.

    Such a file is neither snapshotted nor read as knowledge, rather than kept cut short (a
    truncated snapshot would look like a real edit).
    """
    try:
        data = fsio.read_regular(path, MAX_NARRATIVE_BYTES)  # no link, FIFO or device
    except (OSError, UnsafePath):
        return None
    return data if len(data) <= MAX_NARRATIVE_BYTES else None


def snapshot_changes(store: Store, tx: Transaction, head: ObjectId,
                     staged: list[NarrativeRef]) -> list[NarrativeRef]:
    """Store blobs for narrative files that changed since their last snapshot.

    Files ``read_narrative_bytes`` refuses (unreadable, too large) are skipped: their
    last snapshot, if any, stays the newest one.
    """
    files = iter_narrative_files(store)
    if not files:
        return []
    known = latest_snapshots(store, head)
    known.update({r.path: r for r in staged})
    out: list[NarrativeRef] = []
    for rel, path in files:
        data = read_narrative_bytes(path)
        if data is None:
            continue
        ref = known.get(rel)
        if ref is not None and ref.blob_id == object_id_of(KIND_BLOB, data):
            continue
        out.append(NarrativeRef(path=rel, stream=stream_of(rel), role=role_of(rel),
                                blob_id=tx.put_blob(data)))
    return out
