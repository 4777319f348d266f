"""``ctx rebuild`` and ``ctx debug verify``: the history to one head per pointer, the derived state.

In order: the layout upgrade of an older store (``upgrade``: announced in the result, never
silent), the merge of pointers a Git merge left with several heads (``staging.flush``: a
merge commit or a fast-forward), the SQLite index (``index.rebuild_index``, or only the
commits it lacks), the SCC graph view and the Tantivy index. A merge commit is a canonical
commit: the store is staged in Git afterwards, as after ``ctx commit``
(``commit.after_commit``; the graph view is rebuilt here anyway).

This is the only place that writes a merge commit on behalf of ``ctx rebuild``: the index
package reads several heads without writing (DESIGN §6: the next write or rebuild resolves
them, with no manual step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from ctxstore.history.commit import PostCommit, after_commit
from ctxstore.history.upgrade import UpgradeResult, fold_received
from ctxstore.records import dataclass
from ctxstore.staging import FoldResult, flush

if TYPE_CHECKING:
    from ctxstore.index.compare import IndexComparison
    from ctxstore.session import Session
    from ctxstore.verify import VerifyReport

__all__ = ["Mode", "VerifyResult", "verify", "IndexHealth", "check_index", "IndexRebuild",
           "SccRebuild", "SccDeferred", "TantivyRebuild", "RebuildResult", "merge_heads", "rebuild"]

Mode = Literal["all", "full", "incremental", "scc", "tantivy"]


@dataclass(frozen=True, slots=True)
class IndexRebuild:
    """The SQLite index after ``rebuild``.

    Attributes:
        nodes: Live nodes.
        edges: Live edges.
        commits: Commits applied.
        incremental: True when only the missing commits were applied.
        records_applied: Records this run applied (a full build only).
        records_resumed: Records an interrupted run had applied already (0 from nothing).
    """

    nodes: int
    edges: int
    commits: int
    incremental: bool = False
    records_applied: int = 0
    records_resumed: int = 0


@dataclass(frozen=True, slots=True)
class SccRebuild:
    """The graph view written by ``rebuild``: its object id and sizes, and stale pointers met."""

    oid: bytes
    nodes: int
    sccs: int
    cycles: int
    stale: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SccDeferred:
    """The graph view left to ``ctx rebuild --scc``: a large code index's edge count."""

    edges: int


@dataclass(frozen=True, slots=True)
class TantivyRebuild:
    """The Tantivy index written (or brought up to date) by ``rebuild``."""

    chunks: int
    nodes: int
    files: int
    seconds: float


@dataclass(frozen=True, slots=True)
class RebuildResult:
    """What ``rebuild`` did, step by step (None: the step did not run).

    Attributes:
        upgrade: The layout upgrade (``upgraded`` False when none was needed).
        merge: The merge of several heads of refs/main (``merge_commit`` None when there was
            nothing to merge).
        index: The SQLite index.
        scc: The graph view.
        scc_deferred: Set instead of ``scc`` when the graph has more than
            ``graph.scc.AUTO_MAX_EDGES`` edges (a large code index): the old view was removed
            and is built on request only (``mode="scc"``).
        tantivy: The Tantivy index.
        node_vectors: Nodes embedded again (``search.node_vectors``), when
            ``[retrieval] vectors = "on"``.
        after: The steps after the merge commit (``git add .ctx``).
        seconds: The time the whole rebuild took.
    """

    upgrade: UpgradeResult | None = None
    merge: FoldResult | None = None
    index: IndexRebuild | None = None
    scc: SccRebuild | None = None
    scc_deferred: SccDeferred | None = None
    tantivy: TantivyRebuild | None = None
    after: PostCommit = PostCommit()
    seconds: float = 0.0
    node_vectors: int | None = None

    @property
    def merged_heads(self) -> bool:
        """True when pointers with several heads were merged (a merge commit or fast-forward)."""
        return self.merge is not None and self.merge.merged_heads > 0


def merge_heads(db: Session) -> FoldResult:
    """Resolve HEAD's ref and STAGE when a Git merge left them with several heads.

    Args:
        db: The open session.

    Returns:
        A fold record with ``merge_commit`` (the merge commit, or the head a fast-forward
        kept) and ``merged_heads`` set when refs/main held several heads; else empty.

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the merge cannot be written.
        CtxError: (E001-E005) if a pointer or a commit it names is damaged.
    """
    store = db.store
    before = store.read_head()
    flush(store)  # a merge commit if HEAD or STAGE hold several heads
    after = store.read_head()
    if not before.conflicted or after.heads == before.heads:
        return FoldResult(None, 0, 0, 0, None)
    return FoldResult(None, 0, 0, 0, None, merge_commit=after.single,
                      merged_heads=len(before.heads))


def rebuild(db: Session, mode: Mode = "all",
            progress: Callable[[int, int], None] | None = None) -> RebuildResult:
    """``ctx rebuild``: upgrade, merge heads, then recreate the derived state.

    Args:
        db: The open session (its index connection is closed first: the files may be
            recreated).
        mode: ``all`` (the index cleared and refilled, or an interrupted build finished; the
            graph view; Tantivy when it serves this index or exists), ``full`` (the index
            files deleted first), ``incremental`` (only the commits the index lacks), ``scc`` (only the graph
            view) or ``tantivy`` (only the Tantivy index).
        progress: Called with (records applied, records to apply) while the index is filled.

    Returns:
        What each step did.

    Raises:
        UnsafePath: (E020) if an index file or ``DERIVED`` is a link or a special file.
        IndexNotReady: (E024) if another process rebuilds for longer than the lock timeout.
        LockConflict: (E006) if another writer holds the lock while heads are merged.
        EmbedUnavailable: (E027) ``[retrieval] vectors = "on"`` without the extra.
        CtxError: (E001-E005) if the store is damaged on the way.
    """
    from ctxstore.graph import scc as scc_mod
    from ctxstore.index import index_dir, rebuild_index
    from ctxstore.index.counts import table_counts
    from ctxstore.search import tantivy_index

    start = time.perf_counter()
    store = db.store
    up = merge = index = scc = deferred = tantivy = None
    if mode in ("all", "full", "incremental"):
        up = UpgradeResult(fold_received(db))
        merge = merge_heads(db)
        db.close_index()  # the index files may be recreated under it
        if mode != "incremental":  # rows come back with new rowids: Tantivy's are no longer theirs
            tantivy_index.forget_tantivy(store.root)
        if mode == "incremental":
            index = IndexRebuild(*table_counts(db.index(progress)), incremental=True)
        else:
            conn, counts = rebuild_index(store, full=mode == "full", progress=progress)
            try:
                nodes, edges, commits = table_counts(conn)
            finally:
                conn.close()
            index = IndexRebuild(nodes, edges, commits, records_applied=counts.applied,
                                 records_resumed=counts.resumed)
    large = (scc_mod.too_large(store, db.index(progress)) if mode not in ("tantivy", "scc")
             else None)
    if large is not None:  # a large code index: condensed on request only
        scc_mod.drop_view(store)
        deferred = SccDeferred(large)
    elif mode != "tantivy":
        stale = tuple(scc_mod.load_scc(store.root).notices)
        built = scc_mod.build_scc(store, db.index(progress))
        scc = SccRebuild(built.oid, len(built.view.nodes), built.view.scc_count,
                         len(scc_mod.cycles(built.view)), stale)
    if mode == "tantivy" or (mode != "scc" and (
            tantivy_index.wanted(db.index(progress), db.config)
            or (index_dir(store) / tantivy_index.TANTIVY_DIR).is_dir())):
        conn = db.index(progress)
        rep = (tantivy_index.sync_tantivy(store.root, conn, lock_timeout=store.lock_timeout)
               if mode == "incremental" else None) \
            or tantivy_index.rebuild_tantivy(store.root, conn, lock_timeout=store.lock_timeout)
        tantivy = TantivyRebuild(rep.chunks, rep.nodes, rep.files, rep.seconds)
    vectors = None
    if mode in ("all", "full"):  # derived from the nodes: made again (deleted when off)
        from ctxstore.search.node_vectors import rebuild_node_vectors

        vectors = rebuild_node_vectors(store.root, db.index(progress), db.config)
    folds = [f for f in (merge, up.fold if up else None) if f is not None]
    after = after_commit(db, folds, graph=False)  # the view was rebuilt above
    return RebuildResult(up, merge, index, scc, deferred, tantivy, after,
                         time.perf_counter() - start, vectors)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """What ``verify`` found.

    Attributes:
        store: Every object, pointer and reference checked (``verify.verify_store``); its
            ``problems`` include the index's differences when ``index`` was compared.
        index: The index compared with a fresh replay (None when not asked for).
    """

    store: VerifyReport
    index: IndexComparison | None = None


def verify(db: Session, *, index: bool = False,
           progress: Callable[[int, int], None] | None = None) -> VerifyResult:
    """``ctx debug verify``: check the store, and with ``index`` compare the index with a replay.

    Args:
        db: The open session.
        index: Also replay the store into a fresh index and compare the file with it, table
            by table (read only; ``ctx rebuild`` fixes a mismatch).
        progress: Called with (objects checked, objects) while the objects are read.

    Returns:
        The report (the index's differences joined to its problems) and the comparison.

    Raises:
        CtxError: (E001-E005) if the store cannot be replayed for the comparison.
    """
    from ctxstore.verify import verify_store

    report = verify_store(db.store, progress=progress)
    if not index:
        return VerifyResult(report)
    from ctxstore.code.ingest.run import rederive_rows
    from ctxstore.index.compare import compare_index

    store = db.store
    cmp = compare_index(store, lambda conn, indexed: rederive_rows(store, conn, indexed))
    report.problems.extend(cmp.differences)
    return VerifyResult(report, cmp)


@dataclass(frozen=True, slots=True)
class IndexHealth:
    """What ``check_index`` found: whether the index was behind the store, or damaged.

    Attributes:
        behind: True when it lacked commits and was brought up to date.
        repaired: Why a damaged index was rebuilt, or None.
    """

    behind: bool
    repaired: str | None


def check_index(db: Session) -> IndexHealth:
    """``ctx doctor``'s index check: open it as it is, then bring it up to date.

    Args:
        db: The open session (its own connection is left alone: this opens the file afresh
            to tell "behind" and "damaged" apart).

    Returns:
        Whether it was behind, and why it was rebuilt if it was damaged.

    Raises:
        StoreCorrupt, ObjectNotFound, RefNotFound: if the objects or pointers are damaged.
        CtxError: (E007, E020, E024) if the index cannot be opened or rebuilt.
    """
    from ctxstore.index import open_index, sync_index

    conn = open_index(db.store, sync=False)
    try:
        behind = sync_index(db.store, conn)
        repaired = conn.repaired
    finally:
        conn.close()
    return IndexHealth(behind, repaired.reason if repaired is not None else None)
