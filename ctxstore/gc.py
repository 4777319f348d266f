"""Garbage collection of unreachable objects (spec 002 §15.3).

Reachable = everything reachable from HEAD, refs/* and STAGE, including aborted sessions
recorded by their abort commit. Objects live in two areas (``objects/``, committed, and this
clone's ``local/work/objects``): an unreachable object loses every copy, and the staging copy
of an object a fold promoted goes once past the grace period. An unreachable object is deleted
only if it is older than the grace period (``keep_days``); narrative blobs named by
unreachable work commits are always kept. Leftover temp files from interrupted writes are
removed after a short grace. gc holds the writer lock, so it never races a transaction whose
objects are written but whose pointer has not moved yet.

Reachable objects that no knowledge needs are *pruned* (``ctxstore.pruned``): the code index
an older ctx committed (file versions, their blobs, the trees of ``root_tree``). Their ids go
to a new list under ``.ctx/pruned/``, written durably before the first of them is deleted,
so that verify and every walker tell them from corruption after any crash. No grace period
applies: nothing reads them.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import CtxError, GcRefused
from ctxstore.model import ChangeBatch, Commit, TypedObject, WorkCommit
from ctxstore.model.knowledge import PurgeRecord
from ctxstore.objects import ObjectId
from ctxstore.pruned import needed_objects
from ctxstore.prunedlist import write_pruned
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.verify import Problem, _pointer_roots, walk_reachable, without_pruned, without_purged

__all__ = ["GcReport", "TMP_GRACE_SECONDS", "collect_garbage"]

TMP_GRACE_SECONDS = 3600


@dataclass
class GcReport:
    """Statistics of one gc run (spec 002 §15.3)."""

    scanned: int = 0
    reachable: int = 0
    deleted: int = 0
    bytes_reclaimed: int = 0
    kept_recent: int = 0
    kept_narrative: int = 0
    tmp_removed: int = 0
    dry_run: bool = False
    deleted_ids: list[str] = field(default_factory=list)
    pruned: int = 0  # reachable objects no knowledge needs (an older ctx's code index)
    pruned_bytes: int = 0
    pruned_list: str | None = None  # the list written (relative to .ctx), when one was


def _tmp_files(root: Path) -> list[Path]:
    """Leftover temp files anywhere in the store, never descending into a symlink."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        found += [Path(dirpath) / name for name in filenames + dirnames
                  if name.endswith(fsio.TMP_SUFFIX)]
    return sorted(found)


def collect_garbage(store: Store, *, keep_days: float | None = None, aggressive: bool = False,
                    dry_run: bool = False, now: float | None = None,
                    progress: Callable[[int, int], None] | None = None) -> GcReport:
    """Delete unreachable objects older than the grace period.

    Phases, all under the writer lock: list the objects, find the roots and walk what is
    reachable from them, choose the candidates (unreachable, not a kept narrative blob),
    delete those past the grace period, then remove leftover temp files.

    Args:
        store: The store.
        keep_days: Grace period for unreachable objects (default: config ``[gc] keep_days``).
        aggressive: No grace period: unreachable staging leftovers go at once.
        dry_run: Report what would be deleted; delete nothing.
        now: The current time (tests).
        progress: Called with (done, total) while scanning.

    Raises:
        GcRefused: (E021) if a pointer is unreadable or names a missing object (gc then
            refuses to run, since it cannot know what is reachable).
        LockConflict: if another writer holds the lock.
        UnsafePath: (E020) if a shard directory is a symlink or not a directory: gc never
            deletes through a link.
    """
    report = GcReport(dry_run=dry_run)
    days = store.config.get("gc", "keep_days") if keep_days is None else keep_days
    grace = 0.0 if aggressive else days * 86400.0
    tmp_grace = min(TMP_GRACE_SECONDS, grace)
    now = time.time() if now is None else now
    with store.lock():
        # Listed first: a shard that is a link out of the store is refused (E020) before
        # anything else, and nothing in it is ever a candidate for deletion.
        ids = list(store.objects.iter_ids())
        reachable, needed = _reachable(store)
        report.reachable = len(reachable)
        _prune(store, [oid for oid in ids if oid in reachable and oid not in needed], report,
               dry_run=dry_run)
        candidates, keep = _candidates(store, ids, reachable, report, progress)
        _delete_objects(store, candidates, keep, report, now=now, grace=grace, dry_run=dry_run)
        _delete_promoted_copies(store, reachable, report, now=now, grace=grace, dry_run=dry_run)
        _remove_tmp_files(store, report, now=now, tmp_grace=tmp_grace, dry_run=dry_run)
        if not dry_run and (report.deleted or report.tmp_removed or report.pruned):
            _remove_empty_shards(store)
            fsio.sync_barrier(store.root)
        if progress:
            progress(len(ids), len(ids))
    return report


def _reachable(store: Store) -> tuple[set[bytes], set[bytes]]:
    """Every object reachable from the pointers (the roots), and those knowledge needs.

    Raises:
        GcRefused: if a root or an object reachable from one is unreadable or missing
            (and not pruned by an earlier gc).
    """
    problems: list[Problem] = []
    roots = _pointer_roots(store, problems)
    reachable = walk_reachable(store, roots, problems)
    problems = without_purged(store, roots, problems)
    problems, _ = without_pruned(store, roots, problems)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise GcRefused(f"gc refused: {errors[0].line()}",
                           hint="run `ctx debug verify` and repair the store first")
    return reachable, needed_objects(store, roots)


def _prune(store: Store, prunable: list[ObjectId], report: GcReport, *, dry_run: bool) -> None:
    """List, then delete (unless ``dry_run``), the reachable objects no knowledge needs.

    The list is durable before the first deletion: a crash between the two, or in the middle
    of the deletions, leaves objects that are listed and present (harmless) or listed and
    gone (pruned), never an unlisted missing one.
    """
    sizes: list[tuple[ObjectId, list[Path], int]] = []
    for oid in prunable:
        paths = store.objects.paths_for(oid)
        total = 0
        for path in paths:
            try:
                total += os.lstat(path).st_size
            except FileNotFoundError:
                continue
        sizes.append((oid, paths, total))
    report.pruned = len(sizes)
    report.pruned_bytes = sum(size for _, _, size in sizes)
    if dry_run or not sizes:
        return
    report.pruned_list = write_pruned(store.root, (oid for oid, _, _ in sizes))
    with fsio.open_dir(store.root) as store_dir:
        for _, paths, _ in sizes:
            for path in paths:
                store_dir.unlink(path)


def _candidates(store: Store, ids: list[ObjectId], reachable: set[bytes], report: GcReport,
                progress: Callable[[int, int], None] | None) -> tuple[list[ObjectId], set[bytes]]:
    """The unreachable objects, and the narrative blobs to keep.

    Unreachable work commits and replaced canonical commits name narrative snapshots, and
    those blobs are never deleted (nor such a commit itself).
    """
    keep: set[bytes] = set()
    candidates = []
    purged: set[bytes] | None = None  # read only when a snapshot would be kept
    for i, oid in enumerate(ids):
        if progress and i % 1000 == 0:
            progress(i, len(ids))
        report.scanned += 1
        if oid in reachable:
            continue
        candidates.append(oid)
        try:
            obj: TypedObject = store.read_typed(oid)
        except CtxError:
            continue
        if purged is None and (isinstance(obj, Commit) or
                               (isinstance(obj, WorkCommit) and obj.narrative_refs)):
            purged = _purged_objects(store, reachable)
        if purged and oid in purged:
            # Rewritten by `ctx purge`: its content objects go. An old canonical commit
            # stays (it holds ids and a message, no content): a clone that still has the
            # old history names it as a parent, and a merge with that clone keeps a
            # complete history (its content reads as purged: replay.purged_objects).
            if isinstance(obj, Commit):
                keep.add(oid)
            continue
        if isinstance(obj, WorkCommit):
            keep.update(r.blob_id for r in obj.narrative_refs if not (purged and r.blob_id in purged))
        elif isinstance(obj, Commit) and obj.narrative_refs:
            # A replaced commit (`ctx commit --amend`, a rewritten history): its narrative
            # snapshots are kept (spec 002 §15.3), and the small commit with them, so the
            # next gc still knows them for narrative.
            keep.update(r.blob_id for r in obj.narrative_refs if not (purged and r.blob_id in purged))
            keep.add(oid)
    return candidates, keep


def _purged_objects(store: Store, reachable: set[bytes]) -> set[bytes]:
    """The objects reachable ``purge`` records name (``ctx purge``): never kept by gc.

    Read from the change batches of the history the pointers reach (``reachable`` is the
    closure of the same roots).
    """
    found: set[bytes] = set()
    heads = [ObjectId(oid) for oid, _, _ in _pointer_roots(store, [])]
    for _, obj in store.iter_history(heads, follow_base=True):
        for bid in getattr(obj, "change_batches", ()):
            if bid not in reachable:
                continue
            try:
                batch = store.read_typed(ObjectId(bid), ChangeBatch)
            except CtxError:
                continue
            for rec in batch.records:
                if isinstance(rec, PurgeRecord):
                    found.update(rec.objects)
    return found


def _delete_objects(store: Store, candidates: list[ObjectId], keep: set[bytes], report: GcReport,
                    *, now: float, grace: float, dry_run: bool) -> None:
    """Delete (unless ``dry_run``) each candidate not kept and older than ``grace`` seconds."""
    for oid in candidates:
        if oid in keep:
            report.kept_narrative += 1
            continue
        paths = store.objects.paths_for(oid)
        if _delete_files(store, paths, report, now=now, grace=grace, dry_run=dry_run):
            report.deleted += 1
            report.deleted_ids.append(oid.hex())


def _delete_promoted_copies(store: Store, reachable: set[bytes], report: GcReport, *,
                            now: float, grace: float, dry_run: bool) -> None:
    """Delete the staging copies of objects a fold promoted (reads find the committed copy).

    Except the commit STAGE names (this clone's last fold): its committed copy is a file Git
    tracks, which a `git revert`, `reset` or `checkout` of an older commit removes, and
    STAGE, which Git never touches, must still name an object then.
    """
    try:
        pointer = store.read_stage()
    except CtxError:
        pointer = None  # _reachable already refused a damaged STAGE
    stage = set(pointer.heads) if pointer is not None else set()
    for oid in store.objects.staging.iter_ids():
        if oid in reachable and oid not in stage and store.objects.is_canonical(oid):
            _delete_files(store, [store.objects.staging.path_for(oid)], report, now=now,
                          grace=grace, dry_run=dry_run)


def _delete_files(store: Store, paths: list[Path], report: GcReport, *, now: float, grace: float,
                  dry_run: bool) -> bool:
    """Delete (unless ``dry_run``) the copies of one object if all are past ``grace``; True if so."""
    sizes = []
    for path in paths:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if now - st.st_mtime < grace:
            report.kept_recent += 1
            return False
        sizes.append(st.st_size)
    if not sizes:
        return False
    report.bytes_reclaimed += sum(sizes)
    if not dry_run:
        for path in paths:
            # Every directory on the way is real (iter_ids refused linked shards; the
            # unlink goes through directory descriptors opened without following a link,
            # so a shard swapped for one meanwhile is refused): never delete outside the store.
            with fsio.open_dir(store.root) as store_dir:
                store_dir.unlink(path)
    return True


def _remove_tmp_files(store: Store, report: GcReport, *, now: float, tmp_grace: float,
                      dry_run: bool) -> None:
    """Remove (unless ``dry_run``) leftover temp files older than ``tmp_grace`` seconds."""
    for tmp in _tmp_files(store.root):
        try:
            st = os.lstat(tmp)
        except FileNotFoundError:
            continue
        if now - st.st_mtime >= tmp_grace and not stat.S_ISDIR(st.st_mode):
            report.tmp_removed += 1
            if not dry_run:
                # A planted link is removed, its target never touched; a directory on the
                # way swapped for a link since the walk is refused (E020).
                with fsio.open_dir(store.root) as store_dir:
                    store_dir.unlink(tmp)


def _remove_empty_shards(store: Store) -> None:
    """Remove the shard directories that deleting left empty."""
    for root in store.objects.roots:
        try:
            shards = list(os.scandir(root))
        except FileNotFoundError:
            continue
        for shard in shards:
            if shard.is_dir(follow_symlinks=False) and not any(os.scandir(shard.path)):
                fsio.rmdir(Path(shard.path))
