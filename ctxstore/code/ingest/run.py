"""Code ingestion: ``ctx index`` and ``ctx add file`` (spec 002 §7.2.1, §13.2.2, §16.4).

The code index is derived from this clone's work tree (``index.codedb``): ``ctx index``
writes it directly and nothing of it becomes an object, so Git never sees it. A run goes
through named stages:

1. **list**: the candidate files (``code.walk``, or the paths given);
2. **select** (``select``): only those whose size or modification time changed since they were indexed
   are read (the stat cache on the code index's own rows); sensitive files, links out of the
   tree, special files and files over ``max_file_bytes`` are left out with a note;
3. **read** (``select``): each selected file read, sniffed (binary, not UTF-8), passed through the secret
   scanner and hashed; a file whose content is the one indexed is not indexed again (dedup);
4. **extract** (``extract``): symbols and relations, in forked workers for a large run;
5. **resolve** (``resolve``): endpoints resolved against every indexed file plus the files of
   the run, each file made a ``file_version`` and its rows;
6. **store** (``store``): the rows written into the code index as they come, in slices; a
   file indexed earlier that is gone, ignored now or no longer indexable leaves it; then the
   import cycles (``graph.cycles``) when the imports between files changed.

``ctx add file`` runs the same stages over the files named and also records a snapshot of
them (objects and one work commit: a person or an agent chose to keep them).

Gates (``[ingestion]``, docs/code.md "Gates"): ``ctx add file`` honours the per-step budgets
of files, bytes and edges; ``ctx index``, a bulk command, is exempt from those and bounded
instead by ``max_index_bytes`` a run; every run honours ``max_file_bytes`` a file and drops
edges below ``min_confidence``. Each drop is one line of ``IngestReport.dropped``.

It must not print or run SQL (``index.code`` and ``index.codedb`` do).
"""

from __future__ import annotations

import gc
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ctxstore import fsio
from ctxstore.code.ingest.extract import Prepared, Progress, default_jobs, prepare_versions
from ctxstore.code.ingest.report import FileNote, IngestReport, utf8_path
from ctxstore.code.ingest.resolve import NO_SEMANTICS, Budget, ModuleLookup, budget_of, module_map
from ctxstore.code.ingest.select import read_selected, select, sniff
from ctxstore.code.ingest.store import CodeWriter, write_snapshot
from ctxstore.code.walk import GitStatus, filter_paths, git_changed, git_status, git_tracked, walk_tree
from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.index.code import IndexedPaths, ListingState, StatRow
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.security.guard import guard, policy

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["index_tree", "add_files", "rederive_rows"]

_SHAPE_CHECK_MAX = 200  # files of a run compared before and after for their imports and names


def index_tree(db: Session, paths: Sequence[str] = (), *, jobs: int | None = None,
               progress: Progress | None = None, full: bool = False,
               environ: Mapping[str, str] | None = None) -> IngestReport:
    """``ctx index``: index the work tree (or the files below ``paths``), with semantics.

    A file indexed earlier below the scope that is gone from the work tree, no longer
    listed (ignored now, a build output) or no longer indexable leaves the index; one added
    by name (``ctx add file``) stays while it exists.

    Args:
        db: The open session.
        paths: Repository-relative paths to limit the run to (all the tree when empty).
        jobs: Processes extracting symbols (None: ``default_jobs()``); forked workers are
            used only for runs over ``extract.POOL_MIN_BYTES`` of changed source.
        progress: Called with (files done, files to extract) while extracting.
        full: Read and derive every file again, whatever the stat cache and the indexed
            content say (``ctx index --full``: a code index edited or damaged by hand).
        environ: The caller's environment, which Git is run with: given, ``git status`` runs
            on the code index's own copy of Git's index (``code.gitlist.git_status``) unless it
            names another index or Git directory (``GIT_INDEX_FILE``, ``GIT_DIR``, ...).

    Returns:
        The report.

    Raises:
        InvalidInput: if a path names nothing on disk and nothing indexed.
        LockConflict: if another run holds the code index longer than the lock timeout.
    """
    store = db.store
    root = store.worktree
    globs = list(store.config.get("ingestion", "ignore_globs") or ())
    outputs = bool(store.config.get("ingestion", "index_build_outputs"))
    budget = budget_of(store.config, bulk=True)
    with _no_collections():  # the walk too: a large tree's paths are as acyclic as the rest
        scope = [p.strip("/") for p in paths if p.strip("/")]
        tree = _Tree(globs, outputs, _listing_config(store, globs, outputs, budget),
                     None if environ is None else dict(environ))
        candidates = None
        if scope:  # below some paths: listed as given, the Git state of the tree is kept
            candidates = walk_tree(root, ignore_globs=globs, under=paths,
                                   build_outputs=outputs).files
        return _ingest(db, candidates, scope=scope, removals=True, semantics=True,
                       budget=budget, jobs=default_jobs() if jobs is None else jobs,
                       progress=progress, full=full, tree=None if scope else tree)


def add_files(db: Session, paths: Sequence[str], *, semantics: bool = False) -> IngestReport:
    """``ctx add file``: snapshot the given files and index them, honouring the per-step budgets.

    A run that stores something appends one line to today's narrative log.

    Args:
        db: The open session.
        paths: Repository-relative paths of regular files (ignore rules do not apply:
            they were named).
        semantics: Also extract symbols and relations (``--extract-semantics``).

    Returns:
        The report.

    Raises:
        InvalidInput: if a path names a directory or nothing.
        LockConflict, StagingConflict, StorageIOError: if the write cannot happen.
    """
    store = db.store
    root = store.worktree
    for path in paths:
        full = root / path
        if not path or full.is_dir():
            raise InvalidInput(f"{path or '.'}: is a directory", hint="ctx index DIR")
        if not full.is_symlink() and not full.exists():
            raise InvalidInput(f"{path}: no such file")
    with _no_collections():
        return _ingest(db, list(dict.fromkeys(paths)), scope=None, removals=False,
                       semantics=semantics, budget=budget_of(store.config, bulk=False), jobs=1,
                       progress=None, snapshot=True)


# -- stage 1: list -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Tree:
    """A run over the whole work tree: its listing settings and what they say (``config``)."""

    globs: list[str]
    outputs: bool
    config: str
    environ: dict[str, str] | None = None


_QUICK_MAX_CHANGED = 1000  # more paths to look at than this: the walk costs little beside them
_VENV_MARKER = "pyvenv.cfg"  # makes its folder a build output (code.walk): every path changes


def _listing_config(store: Store, globs: list[str], outputs: bool, budget: Budget) -> str:
    """What a listing depends on besides Git: a change of it lists the whole tree again."""
    import json

    from ctxstore.index.codedb import CODE_SCHEMA_VERSION

    return json.dumps([CODE_SCHEMA_VERSION, globs, outputs, budget.max_file_bytes,
                       bool(policy(store).index_sensitive_files)])


@dataclass
class _Quick:
    """A listing of the whole tree from what Git says changed (``_quick_listing``)."""

    looked: list[str]  # the paths to look at that are listed, sorted
    settled: int  # the files indexed (or skipped) then that are as they were: not listed here
    indexed: IndexedPaths  # of the paths looked at (named or not listed now) only
    rows: dict[str, StatRow]  # the stat rows of the indexed paths looked at
    quiet: frozenset[str] = frozenset()  # those looked at in Git's index, not named by Git


def _quick_listing(store: Store, conn: sqlite3.Connection, skipped: dict[str, tuple[int, int]],
                   status: GitStatus, tree: _Tree) -> _Quick | None:
    """The listing of the whole tree from what Git says changed since the last such run.

    A file indexed (or skipped) then that Git names neither now (``git status``) nor
    between the two HEADs (``git diff``), and that no run since read, is as it was: it is
    listed without a look (``settled``, only counted). The others are listed as
    ``walk_tree`` lists them. Only their rows are read from the code index: nothing is done
    per indexed file in Python. None when that cannot be told: no state recorded, other
    settings, a HEAD Git no longer has, too many changes, or a ``pyvenv.cfg`` among them.

    Whether a path Git does not name is in its index (listed) or not (ignored now, gone) is
    asked of ``git ls-files -c``, unless the state says it was in Git's index and unnamed
    then (``ListingState.quiet``: a file skipped every run, over ``max_file_bytes``) and Git
    names no change of it between the two HEADs: it is in Git's index still.
    """
    from ctxstore.index.code import listing_state, stat_rows
    from ctxstore.index.listing import count_indexed, look_paths

    root = store.worktree
    state = listing_state(conn)
    if state is None or state.config != tree.config:
        return None
    changed = set(status.named) | set(state.dirty)
    moved: set[str] = set()
    if status.head != state.head:
        between = git_changed(root, state.head, status.head) \
            if state.head and status.head else None
        if between is None:
            return None
        moved = between
        changed |= moved
    # Read again whatever the stat cache does not vouch for (a racy time), and files added
    # by name, which ctx index keeps while they exist whatever Git says of them.
    look = look_paths(conn, NO_SEMANTICS)
    changed |= look
    if len(changed) > _QUICK_MAX_CHANGED or any(
            p.rpartition("/")[2] == _VENV_MARKER for p in changed):
        return None
    # Not named by Git: tracked, ignored or gone. Those in Git's index and unnamed last run,
    # of which Git names no change since, are in it still (see ListingState.quiet).
    kept = {p for p in state.quiet if p not in moved and p not in status.named}
    clean = sorted(p for p in changed if p not in status.named and p not in kept)
    tracked = git_tracked(root, clean) if clean else set()
    if tracked is None:
        return None
    tracked |= kept & changed
    looked = filter_paths(root, [p for p in changed if p in status.listed or p in tracked],
                          ignore_globs=tree.globs, build_outputs=tree.outputs)
    rows = stat_rows(conn, [p for p in changed if utf8_path(p)])  # others are never indexed
    held = count_indexed(conn, skipped)  # indexed or skipped then
    settled = held - len(changed & (rows.keys() | skipped.keys()))
    indexed = IndexedPaths({p: r.module for p, r in rows.items()},
                           frozenset(p for p, r in rows.items() if r.named), look)
    return _Quick(looked, settled, indexed, rows, frozenset(tracked))


_LOOKUP_MAX = 20  # files of a run at most whose module names are looked up, not all mapped


def _module_lookup(conn: sqlite3.Connection, paths: list[str], memo: dict[str, str]
                   ) -> ModuleLookup:
    """``module_map`` of every indexed file and ``paths``, looked up by name (a few files).

    ``memo`` (path -> module name) gets the module name of each of ``paths``.
    """
    from ctxstore.code.languages import module_name
    from ctxstore.index.listing import module_paths

    for path in paths:
        if memo.get(path) is None:
            memo[path] = module_name(path) or ""
    own = {path: memo[path] for path in paths}

    def fetch(names: set[str]) -> dict[str, list[str]]:
        found, unnamed = module_paths(conn, names)
        for path in unnamed:  # indexed before module names were recorded
            name = memo.get(path)
            if name is None:
                name = memo[path] = module_name(path) or ""
            if name in names:
                found.setdefault(name, []).append(path)
        for path, name in own.items():
            if name in names and path not in found.get(name, ()):
                found.setdefault(name, []).append(path)
        return found

    return ModuleLookup(fetch)


def _git_status(store: Store, tree: _Tree) -> GitStatus | None:
    """``git status`` of the work tree, on the code index's copy of Git's index when it can."""
    from ctxstore.index import index_dir

    if tree.environ is None:
        return git_status(store.worktree)
    try:
        scratch = fsio.open_dir(store.root, index_dir(store))
    except (OSError, UnsafePath):
        return git_status(store.worktree)
    with scratch:
        return git_status(store.worktree, scratch=scratch, environ=tree.environ)


# -- the run ---------------------------------------------------------------------------------------

@contextmanager
def _no_collections() -> Iterator[None]:
    """Run with the cyclic GC off, then restore it.

    A run keeps every extraction alive until the write and makes millions of small acyclic
    objects (syntax trees, symbols, relations). With the default threshold the collector
    rescanned them over and over (a third of the CPU of a full index of the standard
    library); with the first threshold raised to 100,000 it still made 42 collections
    (~0.5 s) in that index. Reference counting frees everything that is not a cycle, and a
    run makes none worth the name: the peak memory of that index is the same either way.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _in_scope(path: str, scope: list[str] | None) -> bool:
    if scope is None:
        return False
    return not scope or any(path == s or path.startswith(s + "/") for s in scope)


def _ingest(db: Session, candidates: list[str] | None, *, scope: list[str] | None,
            removals: bool, semantics: bool, budget: Budget, jobs: int,
            progress: Progress | None, snapshot: bool = False, full: bool = False,
            tree: _Tree | None = None) -> IngestReport:
    """One run, every stage, under the code index's lock (one run writes it at a time)."""
    from ctxstore.index import index_dir
    from ctxstore.index.codedb import CODE_LOCK

    store = db.store
    folder = index_dir(store)
    with fsio.open_dir(store.root) as root:
        root.ensure_dir(folder)
    # Opened first: a code index of an older schema (or a damaged one) is dropped under the
    # same lock, which this process could not take again while holding it.
    db.index()
    with fsio.hold_lock(folder / CODE_LOCK, timeout=store.lock_timeout):
        return _run(db, candidates, scope=scope, removals=removals, semantics=semantics,
                    budget=budget, jobs=jobs, progress=progress, snapshot=snapshot, full=full,
                    tree=tree)


def _run(db: Session, listed: list[str] | None, *, scope: list[str] | None, removals: bool,
         semantics: bool, budget: Budget, jobs: int, progress: Progress | None,
         snapshot: bool, full: bool = False, tree: _Tree | None = None) -> IngestReport:
    from ctxstore.index.code import (
        import_shape,
        indexed_paths,
        listing_state,
        mark_file_sccs_current,
        names_imported,
        set_listing_state,
        skipped_rows,
        snapshot_heads,
        stat_rows,
    )
    from ctxstore.index.retrieval import code_generation, file_sccs_current

    store = db.store
    root = store.worktree
    started = time.time_ns()
    conn = db.index()
    generation_before = code_generation(conn)  # the packs' corpus is patched from it
    skipped = {} if full else skipped_rows(conn)
    quick: _Quick | None = None
    status: GitStatus | None = None
    how = "paths"
    if tree is not None:  # the whole tree: what Git says changed, or every listed file
        # Before any file is read: a later change is seen next run.
        status = _git_status(store, tree)
        quick = None if full or status is None else _quick_listing(
            store, conn, skipped, status, tree)
        if quick is None:
            walk = walk_tree(root, ignore_globs=tree.globs, build_outputs=tree.outputs)
            listed, how = walk.files, walk.source
            status = status if walk.source == "git" else None
        else:
            listed, how = quick.looked, "git status"
    # Every indexed path, unless Git said which changed: then those only (quick.indexed).
    indexed = indexed_paths(conn, NO_SEMANTICS) if quick is None else quick.indexed
    candidates = listed or []
    if full and removals:  # --full empties the code tables first: what it keeps, it reads again
        listing = set(candidates)
        candidates = [*candidates, *sorted(
            p for p in indexed.named if p not in listing and _in_scope(p, scope)
            and os.path.lexists(root / p))]
    report = IngestReport(scanned=len(candidates) + (quick.settled if quick else 0),
                          listing=how, unchanged=quick.settled if quick else 0)
    for part in scope or ():  # a typo must not look like a run that found nothing to do
        if not os.path.lexists(root / part) and not any(_in_scope(p, [part])
                                                        for p in indexed.modules):
            raise InvalidInput(f"{part}: no such file or directory, and nothing indexed there")
    # --full: neither the stat cache nor dedup apply. A snapshot (ctx add file) is read
    # whatever the code index holds: what it dedups against is the file's last snapshot.
    # After a quick listing, the stat rows of the files it looks at only.
    known_rows: dict[str, StatRow] = {} if full or snapshot else \
        quick.rows if quick is not None else stat_rows(conn)
    selection = select(store, candidates, known_rows, skipped, semantics, budget, report)
    reads = read_selected(store, selection, known_rows, semantics, budget, report, started)
    modules = {p: m for p, m in indexed.modules.items() if m is not None}
    known: Mapping[str, list[str]] = {}
    if reads.texts and semantics and quick is not None and len(reads.texts) <= _LOOKUP_MAX:
        known = _module_lookup(conn, [p for p, _, _ in reads.texts], modules)
    elif reads.texts and semantics:
        if quick is not None:  # many files changed: every indexed file's module is needed
            indexed = indexed_paths(conn, NO_SEMANTICS)
            modules = {p: m for p, m in indexed.modules.items() if m is not None} | modules
        known = module_map(set(indexed.modules) | {p for p, _, _ in reads.texts}, modules)
    in_listing = set(candidates)
    # Gone, ignored now (or a build output), or no longer indexable; a file added by name
    # stays while it exists.
    gone = sorted(p for p in (quick.indexed if quick else indexed).modules if removals
                  and (p in selection.dropped or (p not in in_listing and not (
                      p in indexed.named and os.path.lexists(root / p))))
                  and _in_scope(p, scope))  # last: most paths are listed, few dropped
    named = set(candidates) if snapshot else set((quick.indexed if quick else indexed).named)
    counts = {"low": 0, "budget": 0}
    stored: list[Prepared] = []
    touched = [p for p, _, _ in reads.texts] + gone
    # A few files whose imports stay as they were, and whose names gained or lost none that
    # a file imports, leave the import graph between files as it was: its components need
    # no recomputing (one-file re-index).
    shapes = {p: import_shape(conn, p) for p in touched} \
        if len(touched) <= _SHAPE_CHECK_MAX and not full and file_sccs_current(conn) else None
    with CodeWriter(conn, report, stats=reads.stats, modules=modules, named=named,
                    recount=full) as writer:
        for path in reads.same:
            writer.unchanged(path, reads.stats.get(path))
        for path in reads.skipped:
            writer.skipped(path, reads.stats.get(path))

        def sink(prepared: Prepared) -> None:
            writer.put(prepared)
            if prepared.note and prepared.note != NO_SEMANTICS:
                report.notes.append(FileNote(prepared.path, prepared.note))
            if snapshot:
                stored.append(prepared)

        prepare_versions(reads.texts, reads.blobs, known, semantics, budget, counts, jobs,
                         progress, sink, keep_payload=snapshot)
        writer.remove(gone)
        # What the next whole-tree run may take from Git: the files read now may differ from
        # HEAD's (a change between the status and the read, undone since), so they are dirty;
        # so are the files listed and not indexed (a note, a budget): looked at every run.
        attempted = [*(p for p, _ in selection.to_read), *selection.dropped, *selection.deferred]
        if tree is not None:
            quiet = () if quick is None else tuple(p for p in attempted if p in quick.quiet)
            set_listing_state(conn, None if status is None else ListingState(
                status.head, (*status.named, *attempted), tree.config, quiet))
        elif attempted and (state := listing_state(conn)) is not None:
            set_listing_state(conn, ListingState(state.head, (*state.dirty, *attempted),
                                                 state.config, state.quiet))
    if report.written or report.removed or full:
        from ctxstore.graph.cycles import refresh_file_cycles
        from ctxstore.graph.scc import drop_view

        # The import graph between files is as it was when each file imports what it did
        # and no file imports by name one of the names it gained or lost (an import of a name
        # leads to the file defining it).
        if shapes is not None and all(
                now[0] == shape[0] and not names_imported(conn, now[1] ^ shape[1])
                for p, shape in shapes.items() for now in [import_shape(conn, p)]):
            mark_file_sccs_current(conn)
        else:
            refresh_file_cycles(conn)
        drop_view(store)  # of the old code edges: rebuilt by the next reader needing it
    if semantics and not snapshot:  # the first pack after `ctx index` reads, never writes
        from ctxstore.index.retrieval import warm_corpus

        warm_corpus(conn, since=None if full else generation_before,
                    changed=[*report.written, *report.removed])
    if snapshot and stored:
        heads = snapshot_heads(conn, [p.path for p in stored])
        # As snapshotted last: the same version, or without semantics asked, the same bytes
        # (a snapshot with symbols is not replaced by one without).
        # Only a snapshot `ctx gc` keeps counts: not one an older ctx's `ctx index` wrote
        # (in a commit v1, ctxstore.pruned), nor one whose objects it pruned.
        changed = {p.path for p in stored
                   if heads.get(p.path, (b"", 0, None, None, b""))[2 if semantics else 3]
                   != (p.rows.version if semantics else p.rows.blob)}
        if len(changed) < len(stored):
            from ctxstore.pruned import v1_batches

            old = v1_batches(store)
            changed |= {p.path for p in stored if p.path not in changed and (
                heads[p.path][4] in old or not _snapshot_present(store, heads[p.path]))}
        fresh = [p for p in stored if p.path in changed]
        same = {p.path for p in stored} - {p.path for p in fresh}
        report.deduplicated += len(same)  # as snapshotted last: nothing new to record
        report.written = [p for p in report.written if p not in same]
        if fresh:
            report.work_commit = write_snapshot(store, fresh, heads, report)
    if counts["low"]:
        report.dropped.append(f"{counts['low']} low-confidence edges not stored: below "
                              f"[ingestion] min_confidence = {budget.min_confidence}")
    if counts["budget"]:
        report.dropped.append(f"{counts['budget']} edges not stored: over [ingestion] "
                              f"max_edges_per_step = {budget.max_edges}")
    return report


def _snapshot_present(store: Store, head: tuple[bytes, int, bytes | None, bytes | None, bytes]
                      ) -> bool:
    """Whether the objects a ``file`` record names (its version, its blob) are in the store."""
    return all(store.objects.exists(ObjectId(oid)) for oid in head[2:4] if oid is not None)


def rederive_rows(store: Store, conn: sqlite3.Connection,
                  indexed: dict[str, tuple[bytes, str | None, str | None]]) -> set[str]:
    """Derive again the code rows of indexed files, into ``conn``'s code tables (verify).

    Only the files whose content in the work tree is still the one indexed (same blob id,
    after the same secret redaction) are derived, the way ``ctx index`` derived them: the same
    gates, the same module map, semantics unless the file was indexed without them.

    Args:
        store: The store (its work tree is read; nothing is written to it).
        conn: A connection whose attached ``code`` tables receive the rows (a scratch index).
        indexed: Path -> (blob id, module name or None, note) of each indexed file.

    Returns:
        The paths derived.
    """
    from ctxstore.code.ingest.extract import _prepare
    from ctxstore.index import codedb
    from ctxstore.index.code import DocumentFrequencies, apply_rows

    root = store.worktree
    pol = policy(store)
    budget = budget_of(store.config, bulk=True)
    reads: list[tuple[str, bytes, str]] = []
    blobs: dict[str, ObjectId] = {}
    for path, (blob, _, _) in sorted(indexed.items()):
        try:
            data = fsio.read_regular(root / path, budget.max_file_bytes)
        except (OSError, UnsafePath):
            continue
        text, _ = sniff(data)
        if text is None:
            continue
        clean = guard(store, "files", text, what=path, path=path, policy_=pol)
        if clean is not text:
            text, data = clean, clean.encode("utf-8")
        oid = object_id_of(KIND_BLOB, data)
        if bytes(oid) != blob:
            continue
        reads.append((path, data, text))
        blobs[path] = oid
    modules = {p: m for p, (_, m, _) in indexed.items() if m is not None}
    known = module_map(set(indexed), modules)
    counts = {"low": 0, "budget": 0}
    frequencies = DocumentFrequencies()
    with _no_collections(), codedb.write(conn, "code"):
        for path, data, text in reads:
            semantics = indexed[path][2] != NO_SEMANTICS
            prepared = _prepare(path, data, blobs[path], text, semantics,
                                known if semantics else {}, budget, counts, False)
            apply_rows(conn, prepared.rows, stamp=0, frequencies=frequencies,
                       module=modules.get(path, ""))
        frequencies.flush(conn)
    return set(blobs)
