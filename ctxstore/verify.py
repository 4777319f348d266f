"""Integrity checks: every object, every pointer, and connectivity (``ctx debug verify``).

Like ``git fsck``: each object file must decompress as one zstd frame, hash to its
name, hold a CTXO1 envelope and, if typed, decode canonically; every pointer must
parse and name an object of the right type; everything reachable must exist. Each
problem is reported on its own, with its code; nothing is repaired here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from ctxstore import refs
from ctxstore.errors import CtxError, DeserializationFailed, ObjectNotFound
from ctxstore.model import Commit, WorkCommit, decode_typed
from ctxstore.model.references import ABORTED_WORK, iter_references
from ctxstore.objects import KIND_TYPED, ObjectId
from ctxstore.pruned import pruned_missing
from ctxstore.prunedlist import read_pruned
from ctxstore.records import dataclass
from ctxstore.replay import purged_objects
from ctxstore.repo import STAGE_TYPES, Store, type_name

__all__ = ["Problem", "VerifyReport", "iter_pointer_names", "iter_references", "walk_reachable",
           "verify_store", "without_pruned"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Problem:
    """One finding: a code, the object or file it concerns, and what is wrong."""

    code: str
    subject: str
    message: str
    severity: str = "error"  # "error", "unsupported" or "warning"

    def line(self) -> str:
        """The one-line form ``ctx debug verify`` prints."""
        return f"{self.severity} {self.code} {self.subject}: {self.message}"


@dataclass
class VerifyReport:
    """All findings of one verification run."""

    objects: int = 0
    reachable: int = 0
    problems: list[Problem] = field(default_factory=list)
    pruned: int = 0  # missing objects `ctx gc` pruned (ctxstore.pruned): not problems

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not any(p.severity != "warning" for p in self.problems)


def iter_pointer_names(store: Store) -> Iterator[str]:
    """HEAD's target, every file under refs/, and STAGE if present."""
    yield "HEAD"
    base = store.root / "refs"
    if base.is_dir():
        for path in sorted(base.rglob("*")):
            # Anything but a real directory is a pointer to check: a FIFO or a link
            # there is reported by the read (E005/E020), never skipped in silence.
            if (path.is_symlink() or not path.is_dir()) and not path.name.endswith(".tmp"):
                yield path.relative_to(store.root).as_posix()
    if refs.stage_file(store.root).exists():
        yield "STAGE"


def walk_reachable(store: Store, roots: Iterable[tuple[bytes, Any, str]],
                   problems: list[Problem] | None = None, *, aborted: bool = True) -> set[bytes]:
    """Mark every object reachable from ``roots`` (iteratively).

    Each root is ``(oid, required type, where it came from)``. Missing or damaged
    objects are appended to ``problems`` (when given) and not followed. Without
    ``aborted`` an abort commit's aborted steps are not followed (they never leave
    the clone that aborted them).
    """
    seen: set[bytes] = set()
    stack = [(oid, want, where) for oid, want, where in roots]
    while stack:
        oid, want, where = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        try:
            stored = store.objects.read(ObjectId(oid))
            obj = None
            if stored.kind == KIND_TYPED:
                obj = store._cache.get(oid) or decode_typed(stored.payload, oid=oid)
        except ObjectNotFound:
            if want is ABORTED_WORK:
                continue  # aborted in another clone: its steps never leave that clone
            if problems is not None:
                # A commit another commit names (a parent, a base): the history is broken,
                # E009 as the commands say (repo.iter_history); else a missing object, E001.
                orphan = want in (Commit, WorkCommit) and len(where) == 64
                problems.append(Problem("E009" if orphan else "E001", oid.hex(),
                                        f"missing (referenced by {where})"))
            continue
        except CtxError:
            continue  # damage of the object itself is reported by the object scan
        if want is not None and not isinstance(obj, want):
            if problems is not None:
                what = "a blob" if obj is None else f"a {type(obj).TYPE}"
                problems.append(Problem("E004", oid.hex(),
                                        f"is {what}, expected a {type_name(want)} (referenced by {where})"))
            continue
        if obj is None:
            continue
        for ref, ref_want in iter_references(obj):
            if ref not in seen and (aborted or ref_want is not ABORTED_WORK):
                stack.append((ref, ref_want, oid.hex()))
    return seen


def without_purged(store: Store, roots: list[tuple[bytes, Any, str]],
                   problems: list[Problem]) -> list[Problem]:
    """``problems`` less the missing objects a reachable ``purge`` record names.

    ``ctx purge`` rewrote them and ``ctx gc`` deleted them; a clone's old history merged
    back still names them, and that history is not broken there (``replay.purged_objects``).
    """
    if not any(p.code == "E001" for p in problems):
        return problems
    try:
        purged = {oid.hex() for oid in purged_objects(store, [ObjectId(r[0]) for r in roots])}
    except CtxError:
        return problems  # the history itself is broken: every problem stands
    return [p for p in problems if not (p.code == "E001" and p.subject in purged)]


def without_pruned(store: Store, roots: list[tuple[bytes, Any, str]],
                   problems: list[Problem]) -> tuple[list[Problem], int]:
    """``problems`` less the missing objects ``ctx gc`` pruned, and how many those are.

    Pruned: a list under ``.ctx/pruned/`` names the object and the knowledge the pointers
    reach does not need it (``pruned.pruned_missing``): the code index an older ctx
    committed, rebuilt by ``ctx index``. Any other missing object stays an error.
    """
    missing = {p.subject for p in problems if p.code == "E001" and len(p.subject) == 64}
    if not missing:
        return problems, 0
    gone = {oid.hex() for oid in pruned_missing(store, roots, (bytes.fromhex(m) for m in missing))}
    return [p for p in problems if not (p.code == "E001" and p.subject in gone)], len(gone)


def _pruned_list_problems(store: Store) -> list[Problem]:
    """W005 for each file under ``.ctx/pruned/`` that is not (wholly) a list of ids."""
    return [Problem("W005", where, f"{what}; a pruned list holds one object id per line",
                    "warning") for where, what in read_pruned(store.root).problems]


def _pointer_roots(store: Store, problems: list[Problem],
                   named: set[bytes] | None = None) -> list[tuple[bytes, Any, str]]:
    """Every head a pointer names, as walk roots.

    Problems of pointers are appended. ``named`` (when given) collects every id a pointer names,
    damaged or not.
    """
    roots: list[tuple[bytes, Any, str]] = []
    try:
        target = refs.read_head_target(store.root)
        if refs.read_pointer(store.root, target) is None:
            problems.append(Problem("E005", target, "HEAD points to a ref that does not exist"))
    except CtxError as exc:
        problems.append(Problem(exc.code, "HEAD", exc.message))
    for name in iter_pointer_names(store):
        if name == "HEAD":
            continue
        try:
            ptr = refs.read_pointer(store.root, name)
        except CtxError as exc:
            problems.append(Problem(exc.code, name, exc.message))
            continue
        if ptr is None:
            continue
        want: type | tuple[type, ...] = STAGE_TYPES if name == "STAGE" else Commit
        if ptr.conflicted:
            problems.append(Problem("W001", name, f"holds {len(ptr.heads)} heads from a Git merge; "
                                    "the next write or `ctx rebuild` merges them", "warning"))
        for head in ptr.heads:
            if named is not None:
                named.add(head)
            try:
                store.read_typed(head, want)
            except ObjectNotFound:
                problems.append(Problem("E001", name, f"names missing object {head.hex()}"))
                continue
            except CtxError as exc:
                problems.append(Problem(exc.code, name, f"names {head.hex()}: {exc.message}"))
                continue
            roots.append((head, want, name))
    return roots


def _unnamed_work_problems(store: Store, named: set[bytes]) -> list[Problem]:
    """Staged work no pointer names.

    ``recover.find_unnamed_work``; the object scan above has decoded every object, so this reads
    nothing again.

    With STAGE missing it is an error: acknowledged writes are hidden, and ``ctx stage
    recover`` puts them back. With STAGE present it is a warning: the chain may also be
    what a killed command wrote before it could move STAGE (never acknowledged).
    """
    from ctxstore.recover import find_unnamed_work

    found = find_unnamed_work(store, named)
    if not found:
        return []
    if not os.path.lexists(refs.stage_file(store.root)):
        total = sum(w.work_commits for w in found)
        sessions = len({w.session_id for w in found})
        return [Problem("E005", "STAGE",
                        f"is missing, but {total} work commits of {sessions} staging "
                        f"session{'s' if sessions > 1 else ''} (newest {found[0].tip.hex()}) "
                        "are named by no pointer, so their nodes are hidden; run "
                        "`ctx stage recover` to re-attach them")]
    return [Problem("W003", w.tip.hex(),
                    f"{w.work_commits} work commits of staging session {w.session_id} are "
                    "named by no pointer (left by an interrupted write, or STAGE was replaced "
                    "since); `ctx stage recover --adopt` re-attaches them", "warning")
            for w in found]


def _uncommitted_problems(store: Store, roots: list[tuple[bytes, Any, str]]) -> list[Problem]:
    """Objects a canonical ref reaches that exist only in this clone's staging area.

    A Git commit of ``.ctx`` would lack them, so another clone would find its history
    broken. Only an interrupted promotion by an older ctx, or a copied store, leaves
    this; ``ctx stage flush`` copies them.
    """
    canonical = [r for r in roots if r[2] != "STAGE"]
    return [Problem("W004", ObjectId(oid).hex(),
                    "is reachable from a canonical ref but only in this clone's staging area "
                    "(local/work/objects), so Git does not see it; run `ctx stage flush`",
                    "warning")
            for oid in sorted(walk_reachable(store, canonical, aborted=False))
            # walk_reachable also returns the ids it found missing (E001/E009, reported
            # by the walk): only an object present in the staging area is W004.
            if not store.objects.is_canonical(ObjectId(oid))
            and store.objects.exists(ObjectId(oid))]


def verify_store(store: Store, progress: Progress | None = None) -> VerifyReport:
    """Check every object, pointer and reference of the store.

    Returns:
        A report; ``report.ok`` is False if anything is missing, damaged or unreadable.
    """
    report = VerifyReport()
    ids = list(store.objects.iter_ids())
    damaged: dict[ObjectId, Problem] = {}
    for i, oid in enumerate(ids):
        report.objects += 1
        if progress and i % 500 == 0:
            progress(i, len(ids))
        try:
            stored = store.objects.read(oid)
            if stored.kind == KIND_TYPED:
                store._cache[oid] = decode_typed(stored.payload, oid=oid)
        except DeserializationFailed as exc:
            damaged[oid] = Problem(exc.code, oid.hex(), exc.detail,
                                   "unsupported" if exc.unsupported else "error")
        except CtxError as exc:
            damaged[oid] = Problem(exc.code, oid.hex(), exc.message)
        except OSError as exc:
            damaged[oid] = Problem("E017", oid.hex(), f"cannot be read ({exc.strerror})")
    if progress:
        progress(len(ids), len(ids))
    named: set[bytes] = set()
    roots = _pointer_roots(store, report.problems, named)
    reach = walk_reachable(store, roots, report.problems)
    report.problems = without_purged(store, roots, report.problems)
    report.problems, report.pruned = without_pruned(store, roots, report.problems)
    report.reachable = len(reach)
    for oid, problem in damaged.items():
        if oid not in reach and oid not in named and problem.severity == "error":
            # Nothing refers to it (a leftover of a crash or of a recovery): the state is
            # intact, and `ctx gc` deletes it once past the grace period.
            problem = Problem(problem.code, problem.subject,
                              f"{problem.message} [unreachable: `ctx gc` removes it]", "warning")
        report.problems.append(problem)
    report.problems.extend(_unnamed_work_problems(store, named))
    report.problems.extend(_uncommitted_problems(store, roots))
    report.problems.extend(_pruned_list_problems(store))
    for tmp in store.objects.iter_tmp_files():
        report.problems.append(Problem("W002", str(Path(tmp).relative_to(store.root)),
                                       "leftover temp file from an interrupted write "
                                       "(`ctx gc` removes it)", "warning"))
    for tmp in store.root.glob("*.tmp"):
        report.problems.append(Problem("W002", tmp.name, "leftover temp file", "warning"))
    report.problems.sort(key=lambda p: (p.severity == "warning", p.code, p.subject))
    return report
