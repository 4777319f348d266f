"""The SCC view (spec 002 §9.5): strongly connected components and their condensation DAG.

``build_scc`` reads the relationship graph from the index (knowledge ``edges`` and
``code_edges`` at HEAD and STAGE), runs Tarjan's algorithm and the condensation through
networkx (imported inside ``compute_scc`` only), stores the result as an ``scc_view``
object in ``.ctx/DERIVED/objects/`` (the object format of ``objects/``, but ignored by
Git like the rest of ``DERIVED/``: a derived view is not history) and points
``.ctx/DERIVED/scc_latest`` at it (one atomic write through fsio); older views there are
deleted.
The same graph always gives the same object, so deleting ``DERIVED/`` and ``index/``
and running ``ctx rebuild`` gives back the same object id.

``load_scc`` reads the view back without networkx (packs, hooks). The pointer is never
trusted: a missing object, garbage, an object of another type or a symbolic link is a
*stale* pointer, named in a notice, and ``current_scc`` rebuilds it. A ``DERIVED``
directory that is a link or not a directory, or a pointer that is a FIFO or a device, is
refused with E020 like every other store file.

``refresh_after_commit`` is what ``ctx commit`` calls: the view is derived, so a failure
to build it never fails the commit; it returns a notice and the next rebuild retries.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore import fsio
from ctxstore.errors import CtxError, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.records import dataclass, field

if TYPE_CHECKING:  # the object store and the graph's SELECT load only where used (a pack
    # reading no view needs neither)
    from ctxstore.index.derived import GraphEdge
    from ctxstore.model.derived import SccView
    from ctxstore.objects import LooseObjectStore
    from ctxstore.repo import Store

__all__ = ["DERIVED_DIR", "POINTER_NAME", "SccResult", "LoadedScc", "node_name", "split_node",
           "compute_scc", "build_scc", "load_scc", "current_scc", "refresh_after_commit",
           "cycles", "members", "drop_view", "too_large",
           "AUTO_MAX_EDGES"]

DERIVED_DIR = "DERIVED"
POINTER_NAME = "scc_latest"
_OBJECTS = "objects"
_POINTER_LIMIT = 256  # a pointer is 64 hex digits and a newline
# Above this many edges, ``ctx commit`` and ``ctx rebuild`` leave the view to ``ctx rebuild
# --scc`` (networkx takes seconds for a 10,000-file code index; measured in docs/performance.md).
AUTO_MAX_EDGES = 50_000


def node_name(kind: str, key: str) -> str:
    """The name of an endpoint in the view: ``kind:key`` (the kind never holds a colon)."""
    return f"{kind}:{key}"


def split_node(name: str) -> tuple[str, str]:
    """``kind:key`` back to ``(kind, key)``."""
    kind, _, key = name.partition(":")
    return kind, key


def compute_scc(edges: Sequence[GraphEdge], heads: Sequence[ObjectId]) -> SccView:
    """Compress a directed graph into its SCCs and the DAG between them.

    Args:
        edges: ``(from_kind, from_key, to_kind, to_key, label)`` rows; labels are ignored
            (any edge joins its endpoints).
        heads: The commits the edges were read at (recorded sorted, once each).

    Returns:
        The view, identical for the same edges and heads whatever their order.
    """
    import networkx as nx

    from ctxstore.model.derived import SccView

    graph: nx.DiGraph[str] = nx.DiGraph()
    for fk, fkey, tk, tkey, _ in edges:
        graph.add_edge(node_name(fk, fkey), node_name(tk, tkey))
    # Tarjan's components, condensed; members known per condensation node.
    comps = list(nx.strongly_connected_components(graph))
    dag = nx.condensation(graph, scc=comps)
    smallest = {c: min(dag.nodes[c]["members"]) for c in dag.nodes}
    order = list(nx.lexicographical_topological_sort(dag, key=smallest.__getitem__))
    new_id = {c: i for i, c in enumerate(order)}
    nodes = sorted(graph.nodes)
    mapping = dag.graph["mapping"]
    pairs = sorted({(new_id[a], new_id[b]) for a, b in dag.edges})
    return SccView(heads=tuple(sorted(set(heads))), nodes=tuple(nodes),
                   scc_of=tuple(new_id[mapping[n]] for n in nodes),
                   dag_from=tuple(a for a, _ in pairs), dag_to=tuple(b for _, b in pairs))


def members(view: SccView) -> list[list[str]]:
    """The members of each SCC, by SCC id (each list sorted)."""
    out: list[list[str]] = [[] for _ in range(view.scc_count)]
    for name, scc in zip(view.nodes, view.scc_of, strict=True):
        out[scc].append(name)
    return out


def cycles(view: SccView) -> list[list[str]]:
    """The non-trivial SCCs (more than one member: import cycles, mutual recursion)."""
    return [m for m in members(view) if len(m) > 1]


@dataclass(frozen=True, slots=True)
class SccResult:
    """A view built and stored by ``build_scc``."""

    oid: ObjectId
    view: SccView


@dataclass(frozen=True, slots=True)
class LoadedScc:
    """What ``load_scc`` found: the view (or None) and, for a stale pointer, why."""

    oid: ObjectId | None
    view: SccView | None
    notices: list[str] = field(default_factory=list)


def _pointer_path(root: Path) -> tuple[Path, Path]:
    folder = root / DERIVED_DIR
    return folder, folder / POINTER_NAME


def _derived_objects(root: Path) -> LooseObjectStore:
    """The derived objects' store, ``DERIVED/objects/`` (ignored by Git, like ``index/``)."""
    from ctxstore.objects import LooseObjectStore

    return LooseObjectStore(root / DERIVED_DIR / _OBJECTS, anchor=root)


def _write_pointer(store: Store, oid: ObjectId) -> None:
    """Point ``DERIVED/scc_latest`` at ``oid``, atomically.

    A symbolic link there is replaced, never followed: the pointer is derived and never
    trusted (``load_scc`` treats a link as a stale pointer), so a planted link is removed
    and the pointer written anew. ``DERIVED`` is opened by descriptor (PS-10): a link
    there, even one swapped in while this runs, is refused and nothing is written.

    Raises:
        UnsafePath: (E020) if ``DERIVED`` is a link or not a directory, or the pointer is a
            directory, a FIFO or a device.
    """
    folder, path = _pointer_path(store.root)
    with fsio.open_dir(store.root, folder, create=True) as derived:
        try:
            mode = os.stat(POINTER_NAME, dir_fd=derived.fileno(), follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISLNK(mode):
            # Removed relative to the descriptor: the link itself, never its target. A link
            # planted again before the write below is refused by it (E020), not followed.
            derived.unlink(POINTER_NAME)
        elif mode is not None and stat.S_ISDIR(mode):
            raise UnsafePath(os.fspath(path), detail="is a directory")
        derived.replace_atomic(POINTER_NAME, (oid.hex() + "\n").encode())


def build_scc(store: Store, conn: sqlite3.Connection | None = None) -> SccResult:
    """Compute the SCC view of the graph the index holds, store it and point at it.

    Args:
        store: The store.
        conn: A synced index connection (None: one is opened and closed here).

    Returns:
        The stored view and its object id.

    Raises:
        UnsafePath: (E020) for a hostile ``DERIVED`` (see ``_write_pointer``).
        CtxError: from the index or the object store.
    """
    from ctxstore.index import open_index
    from ctxstore.index.derived import graph_edges
    from ctxstore.objects import KIND_TYPED
    from ctxstore.replay import state_heads

    own = conn is None
    if conn is None:
        conn = open_index(store)
    try:
        edges = graph_edges(conn)
    finally:
        if own:
            conn.close()
    view = compute_scc(edges, state_heads(store))
    # The area (DERIVED/objects) is opened and created by descriptor on the first write.
    objects = _derived_objects(store.root)
    from ctxstore.model import encode_typed

    oid, _ = objects.write(KIND_TYPED, encode_typed(view))
    fsio.sync_barrier(store.root)  # the view and its shard durable before the pointer names it
    _write_pointer(store, oid)
    for old in list(objects.iter_ids()):  # only the newest view is kept
        if old != oid:
            with fsio.open_dir(store.root) as store_dir:
                store_dir.unlink(objects.path_for(old))
    return SccResult(oid, view)


def load_scc(root: Path) -> LoadedScc:
    """Read the view ``DERIVED/scc_latest`` names, without networkx.

    Args:
        root: The store's ``.ctx`` directory (no store handle needed: a pack reads the view
            without loading the object store).

    Returns:
        The view; or None with no notice when there is none yet, or None with a notice
        naming what is wrong with a stale pointer.

    Raises:
        UnsafePath: (E020) if ``DERIVED`` or the pointer is a FIFO, device or a link out
            of the store directory.
    """
    folder, path = _pointer_path(root)
    fsio.check_under(root, folder / _OBJECTS)
    try:
        raw = fsio.read_regular(path, _POINTER_LIMIT)
    except FileNotFoundError:
        return LoadedScc(None, None)
    except UnsafePath:
        if os.path.islink(path):
            return LoadedScc(None, None, [f"{path} is a symbolic link; not followed"])
        raise
    text = raw.decode("ascii", "replace").strip()
    try:
        oid = ObjectId(bytes.fromhex(text))
        if len(oid) != 32:
            raise ValueError
    except ValueError:
        return LoadedScc(None, None, [f"{path} does not hold an object id"])
    from ctxstore.model import decode_typed  # only once a view is named: a pack without one
    from ctxstore.model.derived import SccView  # loads no part of the object model
    from ctxstore.objects import KIND_TYPED

    try:
        stored = _derived_objects(root).read(oid)
        view = decode_typed(stored.payload, oid=oid) if stored.kind == KIND_TYPED else None
    except CtxError as exc:
        return LoadedScc(oid, None, [f"{path} names {text[:16]}, which is unusable ({exc})"])
    if not isinstance(view, SccView):
        return LoadedScc(oid, None, [f"{path} names {text[:16]}, which is not an SCC view"])
    return LoadedScc(oid, view)


def current_scc(store: Store, conn: sqlite3.Connection | None = None) -> LoadedScc:
    """The view of the graph as it is now: the stored one if current, else rebuilt.

    A view read at other heads than the store's is out of date and rebuilt silently; a
    stale pointer is rebuilt with a notice naming it.

    Args:
        store: The store.
        conn: A synced index connection, or None.

    Returns:
        The current view, its id and the notices.

    Raises:
        UnsafePath: (E020) for a hostile ``DERIVED``.
        CtxError: from the index or the object store.
    """
    from ctxstore.replay import state_heads

    found = load_scc(store.root)
    if found.view is not None and found.view.heads == tuple(sorted(set(state_heads(store)))):
        return found
    built = build_scc(store, conn)
    notices = [f"{n}; the SCC view was rebuilt" for n in found.notices]
    return LoadedScc(built.oid, built.view, notices)


def drop_view(store: Store) -> None:
    """Remove ``DERIVED/scc_latest`` (the graph changed under it: ``ctx index``); never raise.

    The view is keyed by the store's heads, which a new code index does not move: without
    its pointer the next reader that needs it (``current_scc``), ``ctx rebuild`` or
    ``ctx commit`` builds it again. The pointer is removed relative to ``DERIVED``'s
    descriptor (a link there is refused, never followed).
    """
    folder, _ = _pointer_path(store.root)
    try:
        with fsio.open_dir(store.root, folder) as derived:
            derived.unlink(POINTER_NAME)
    except (OSError, UnsafePath):
        return  # none, or hostile: nothing to remove through it


def too_large(store: Store, conn: sqlite3.Connection | None = None) -> int | None:
    """The graph's edge count when it is over ``AUTO_MAX_EDGES`` (None: small enough).

    Args:
        store: The store.
        conn: The caller's index connection (``Session.index``); None: one is opened here.

    Raises:
        CtxError, sqlite3.Error: from the index.
    """
    from ctxstore.index.derived import graph_size

    if conn is not None:
        size = graph_size(conn)
    else:
        from ctxstore.index import open_index

        conn = open_index(store)
        try:
            size = graph_size(conn)
        finally:
            conn.close()
    return size if size > AUTO_MAX_EDGES else None


def refresh_after_commit(store: Store, index: Callable[[], sqlite3.Connection] | None = None
                         ) -> str | None:
    """Rebuild the SCC view after a fold; never raise (the view is derived).

    A graph over ``AUTO_MAX_EDGES`` edges (a large code index) is not condensed at every
    commit: the view of the old heads is removed and built when asked for (``ctx rebuild
    --scc``, ``ctx debug graph``); packs read the import cycles ``ctx index`` keeps instead.

    Args:
        store: The store (the caller may hold its lock).
        index: Gives the caller's index connection, brought up to date (``Session.index``);
            None: one is opened here.

    Returns:
        None when the view was rebuilt or left for later, else a one-line notice saying why
        it could not be (the next ``ctx rebuild`` retries).
    """
    try:
        conn = index() if index is not None else None
        if too_large(store, conn) is not None:
            drop_view(store)
            return None
        build_scc(store, conn)
    except (CtxError, OSError, sqlite3.Error, ImportError) as exc:
        return f"SCC view not rebuilt ({exc}); `ctx rebuild --scc` retries"
    return None
