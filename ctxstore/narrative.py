"""Narrative Markdown under ``.ctx/narrative/``: templates and commit snapshots.

Changed narrative files are snapshotted as blobs into a commit's ``narrative_refs``
(spec 002 §8.5). A file counts as changed when its blob id differs from the newest
snapshot of the same path in HEAD's history. Symlinks are never followed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxstore.model import Commit, NarrativeRef
from ctxstore.objects import KIND_BLOB, ObjectId, object_id_of
from ctxstore.repo import Store, Transaction

__all__ = ["TEMPLATE_DIR", "read_template", "iter_narrative_files", "role_of", "stream_of",
           "latest_snapshots", "snapshot_changes"]

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "narrative_templates"
MAX_NARRATIVE_BYTES = 8 << 20


def read_template(name: str) -> str:
    """Return the text of a narrative template shipped with the package."""
    for base in (TEMPLATE_DIR, Path(__file__).resolve().parent / "narrative_templates"):
        path = base / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"narrative template {name} is not installed")


def role_of(rel: str) -> str:
    """The document role of a narrative path (spec 002 §8.3)."""
    if rel == "README.md":
        return "overview"
    if rel == "decisions.md":
        return "decision"
    if rel.startswith("log/"):
        return "log"
    if rel.startswith("tasks/"):
        return "task"
    if rel.startswith("work/"):
        return "work"
    return "doc"


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


def snapshot_changes(store: Store, tx: Transaction, head: ObjectId,
                     staged: list[NarrativeRef]) -> list[NarrativeRef]:
    """Store blobs for narrative files that changed since their last snapshot."""
    files = iter_narrative_files(store)
    if not files:
        return []
    known = latest_snapshots(store, head)
    known.update({r.path: r for r in staged})
    out: list[NarrativeRef] = []
    for rel, path in files:
        data = path.read_bytes()[:MAX_NARRATIVE_BYTES]
        ref = known.get(rel)
        if ref is not None and ref.blob_id == object_id_of(KIND_BLOB, data):
            continue
        out.append(NarrativeRef(path=rel, stream=stream_of(rel), role=role_of(rel),
                                blob_id=tx.put_blob(data)))
    return out
