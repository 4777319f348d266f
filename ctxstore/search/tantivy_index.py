"""Tantivy serving search on a large index: ``.ctx/index/tantivy/`` (docs/index.md).

One ``search.tantivy.TantivyEngine`` per corpus, each made from the SQLite index's own rows
and holding the one tokeniser's terms:

- ``nodes/``: every live node's content and summary (what ``nodes_fts`` holds), key
  ``nodes.rowid``;
- ``chunks/``: every file chunk's path, qualified name and text (``chunks_fts``), key
  ``chunks.rowid``, deleted by its file's path;
- ``source/`` and ``other/``: the file ranking's postings (``file_terms``): a source file's
  significant body terms with their counts and its path's terms, key ``files.rowid``;
  the others (prose, no known language) apart, as ``packs.seed.rank_files`` ranks them. A
  path is padded to ``PATH_SLOTS`` terms, so every path has the same length and Tantivy's
  BM25 (k1 1.2, b 0.75) scores the path field as the ranking's does (b 0).

It serves (``open_served``) when ``[index] fulltext`` is ``"tantivy"``, or ``"auto"`` (the
default) and the index holds at least ``TANTIVY_MIN_CHUNKS`` chunks (bench/pack.py measured
where Tantivy overtakes FTS5): ``ctx search``, ``ctx pack`` and their MCP tools then rank
chunks, files and nodes with it (``serves_packs``). Hooks never ask:
they search with FTS5 and import no tantivy.

It is kept current: ``sync_tantivy`` applies what changed since it last synced (nodes by
rowid and version, files by path, rowid and version), run by ``ctx index``, ``ctx commit``
and by a command it serves that finds it behind (up to ``READ_SYNC_MAX`` documents; more are
left to the next ``ctx index``, ``ctx commit`` or ``ctx rebuild``, and FTS5 serves meanwhile).
``rebuild_tantivy`` makes it whole (``ctx rebuild``, or a sync that finds none). What it
synced to is ``index/tantivy.synced``: the index file's identity, its pointers
(``meta.synced``) and the code index's generation (``code_meta``); what it holds, ``index/tantivy.state``. A
command uses it only when both say it is the index in use: a hit whose row is not what the
engine recorded (a rowid reused by a rebuild) makes the search fall back to FTS5 and the
next write rebuild it. Builds go to ``tantivy.new/``, swapped in whole; one process writes at
a time (``index/tantivy.lock``). ``tantivy`` is imported inside the engines only.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore import fsio
from ctxstore.errors import CtxError, UnsafePath
from ctxstore.records import dataclass
from ctxstore.search.rows import (
    chunks_of_paths,
    corpus_size,
    file_terms_of,
    file_versions,
    meta_value,
    node_texts,
    node_versions,
)

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.config import Config
    from ctxstore.search.engine import SearchSession as _Session
    from ctxstore.search.tantivy import TantivyEngine

__all__ = ["TANTIVY_DIR", "TANTIVY_MIN_CHUNKS", "READ_SYNC_MAX", "PATH_SLOTS", "PROSE_LANGUAGES",
           "CORPORA", "TantivyReport", "TantivyUnusable", "Served", "wanted", "serves_packs",
           "open_served",
           "sync_tantivy",
           "refresh_tantivy", "rebuild_tantivy", "forget_tantivy", "path_field", "check_of"]

TANTIVY_DIR = "tantivy"
TANTIVY_MIN_CHUNKS = 100_000
"""From this many chunks on, ``[index] fulltext = "auto"`` lets Tantivy serve (docs/index.md)."""
READ_SYNC_MAX = 2_000
"""A command it serves brings Tantivy up to date when at most this many documents changed."""
PATH_SLOTS = 32
PROSE_LANGUAGES = frozenset({"markdown"})  # indexed languages ranked apart from source
CORPORA = ("nodes", "chunks", "source", "other")
FIELDS: dict[str, tuple[str, ...]] = {"nodes": ("content", "summary"),
                                      "chunks": ("path", "name", "text"),
                                      "source": ("body", "path"), "other": ("body", "path")}
_FORMAT = 1  # what the engines hold; another format is rebuilt
_MARKER = "tantivy.synced"
_STATE = "tantivy.state"
_BUILD_LOCK = "tantivy.lock"
_PAD = "\x01"  # a term no text gives (a control character separates words)
_BATCH = 500


@dataclass(frozen=True, slots=True)
class TantivyReport:
    """What a build or a sync of the Tantivy index did."""

    chunks: int
    nodes: int
    files: int
    seconds: float
    full: bool


def path_field(terms: Sequence[str]) -> list[str]:
    """A path's terms padded (or cut) to ``PATH_SLOTS``: every path field is as long."""
    return [*terms[:PATH_SLOTS], *[_PAD] * (PATH_SLOTS - len(terms))]


def _corpus_of(language: str | None) -> str:
    return "other" if language is None or language in PROSE_LANGUAGES else "source"


def check_of(text: str) -> int:
    """The check value a document keeps of its row's identity (a path, a node id)."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def wanted(conn: sqlite3.Connection, config: Config) -> bool:
    """Whether Tantivy should serve this index (``[index] fulltext`` and its size).

    Args:
        conn: A current index connection.
        config: The store's configuration.

    Returns:
        True for ``"tantivy"``, or ``"auto"`` with at least ``TANTIVY_MIN_CHUNKS`` chunks.
    """
    setting = config.get("index", "fulltext")
    if setting == "fts5":
        return False
    return setting == "tantivy" or corpus_size(conn) >= TANTIVY_MIN_CHUNKS


def serves_packs(config: Config) -> bool:
    """Whether Tantivy may serve prompt packs: under ``"auto"`` and ``"tantivy"``.

    Where it serves at all (``open_served``: ``"tantivy"``, or ``"auto"`` from
    ``TANTIVY_MIN_CHUNKS`` chunks), a pack ranks files and memory with it, as ``ctx search``
    does. Measured at 206,000 chunks (docs/index.md): Tantivy's own work in a pack costs ~7.5 ms
    less CPU than the postings' and FTS5's and loading it ~6 ms, so a ``ctx pack`` process
    costs 1.3-2.0 ms of ~140 less (105 of 176 paired runs cheaper), and a pack in a process
    that keeps Tantivy loaded (the MCP server) 14-15% less.

    Args:
        config: The store's configuration.

    Returns:
        False only under ``"fts5"``.
    """
    return bool(config.get("index", "fulltext") != "fts5")


class TantivyUnusable(Exception):
    """The Tantivy index cannot answer (damaged or unreadable files): FTS5 answers instead."""


class Served:
    """The Tantivy index of one store, open for searching (its engines open on first use).

    A failure of Tantivy itself (files it cannot read) is ``TantivyUnusable``.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._engines: dict[str, TantivyEngine] = {}

    def engine(self, corpus: str) -> TantivyEngine:
        """The engine of one corpus (``CORPORA``)."""
        if corpus not in self._engines:
            self._engines[corpus] = _engine(self.folder / corpus, corpus)
        return self._engines[corpus]

    def hits(self, corpus: str, phrases: Sequence[str], limit: int
             ) -> list[tuple[int, float, int]]:
        """Any-phrase BM25 hits of ``nodes`` or ``chunks``: ``(rowid, score, check)``, best first."""
        try:
            return self.engine(corpus).hits(phrases, mode="any", limit=limit)
        except (ValueError, OSError, RuntimeError) as exc:
            raise TantivyUnusable(str(exc)) from exc

    def ranked_files(self, corpus: str, weights: Mapping[str, float], path_weight: float,
                     limit: int, *, body: Collection[str] | None = None,
                     path: Collection[str] | None = None) -> list[tuple[int, float, int]]:
        """The best files of ``source`` or ``other``: body BM25 plus ``path_weight`` x path BM25.

        ``body`` and ``path``: the terms scored in each field (None: every term).
        """
        only = {f: terms for f, terms in (("body", body), ("path", path)) if terms is not None}
        try:
            return self.engine(corpus).weighted(weights, {"body": 1.0, "path": path_weight},
                                                limit, only=only)
        except (ValueError, OSError, RuntimeError) as exc:
            raise TantivyUnusable(str(exc)) from exc


def _engine(path: Path, corpus: str, *, build: bool = False) -> TantivyEngine:
    from ctxstore.search.tantivy import BUILD_HEAP_BYTES, HEAP_BYTES, TantivyEngine

    return TantivyEngine(path, FIELDS[corpus], positions=corpus in ("nodes", "chunks"),
                         checked=True, heap_bytes=BUILD_HEAP_BYTES if build else HEAP_BYTES)


def _index_file(root: Path) -> Path:
    from ctxstore.index import INDEX_FILE

    return root / "index" / INDEX_FILE


def _token(root: Path, conn: sqlite3.Connection) -> str | None:
    """What the Tantivy index must have synced to, to serve ``conn``: None when it cannot."""
    try:
        st = os.stat(_index_file(root))
    except OSError:
        return None  # an index in memory (a read-only checkout): nothing to serve
    synced = meta_value(conn, "synced")
    if synced is None:
        return None
    return json.dumps({"format": _FORMAT, "db": [st.st_dev, st.st_ino], "synced": synced,
                       "code": _code_generation(conn)}, sort_keys=True)


def _code_generation(conn: sqlite3.Connection) -> str:
    """The generation of this clone's code index (``ctx index`` changes it, no pointer moves)."""
    import sqlite3

    from ctxstore.index.retrieval import code_generation

    try:
        return code_generation(conn)
    except sqlite3.OperationalError:  # no code index attached: nothing indexed yet
        return "0"


def _read_marker(folder: Path) -> str | None:
    try:
        return fsio.read_regular(folder / _MARKER, 1 << 16).decode("utf-8", "replace")
    except (OSError, UnsafePath):
        return None


def open_served(root: Path, conn: sqlite3.Connection, config: Config, *,
                lock_timeout: float = 0.0) -> Served | None:
    """The Tantivy index to serve a search of ``conn``, brought up to date, or None for FTS5.

    None when Tantivy is not wanted (``wanted``), not installed, not built yet, behind by more
    than ``READ_SYNC_MAX`` documents, being written by another process, or unreadable: a
    search never fails for want of it.

    Args:
        root: The store's ``.ctx`` directory.
        conn: A current index connection.
        config: The store's configuration.
        lock_timeout: How long to wait for another process's sync.

    Returns:
        The index, or None.
    """
    import importlib.util

    if not wanted(conn, config) or importlib.util.find_spec("tantivy") is None:
        return None
    folder = root / "index"
    token = _token(root, conn)
    if token is None:
        return None
    if _read_marker(folder) != token:
        try:
            if sync_tantivy(root, conn, lock_timeout=lock_timeout, limit=READ_SYNC_MAX,
                            build=False) is None:
                return None
        except (CtxError, OSError, ValueError):
            return None  # busy, unwritable or damaged: FTS5 answers, a writer repairs it
    if not (folder / TANTIVY_DIR).is_dir() or (folder / TANTIVY_DIR).is_symlink():
        return None
    return Served(folder / TANTIVY_DIR)


def refresh_tantivy(session: _Session) -> str | None:
    """Bring the Tantivy index up to date after a write (``ctx index``, ``ctx commit``).

    Only where it serves (``wanted``): built whole the first time, then kept by changes. It
    is derived, so a failure (the index itself included) is a notice, never an error.

    Args:
        session: The command's session (its index is brought up to date first).

    Returns:
        None when it is current (or not wanted), else a one-line notice saying why not.
    """
    import importlib.util

    config = session.config
    try:
        if config.get("index", "fulltext") == "fts5":
            return None
        conn = session.index()
        if not wanted(conn, config) or importlib.util.find_spec("tantivy") is None:
            return None
        sync_tantivy(session.root, conn, lock_timeout=float(config.get("lock", "timeout_seconds")))
    except (CtxError, OSError, ValueError) as exc:
        return f"Tantivy index not updated ({exc}); `ctx rebuild --tantivy` retries"
    return None


def forget_tantivy(root: Path) -> None:
    """Mark the Tantivy index as not synced (before the SQLite index is rebuilt in place).

    Its rows' rowids may change: the next sync rebuilds it whole.

    Args:
        root: The store's ``.ctx`` directory.
    """
    folder = root / "index"
    try:
        index = fsio.open_dir(root, folder)
    except (FileNotFoundError, UnsafePath):
        return
    with index:
        for name in (_MARKER, _STATE):
            index.unlink(name)
        fsio.fsync_dir(index.fileno())


def _read_state(folder: Path) -> dict[str, Any] | None:
    import msgpack

    try:
        data = fsio.read_regular(folder / _STATE, 1 << 30)
        state = msgpack.unpackb(data, strict_map_key=False)
    except (OSError, UnsafePath, ValueError, msgpack.UnpackException):
        return None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        return None
    return state


def _write_state(index: fsio.Dir, state: dict[str, Any], token: str) -> None:
    import msgpack

    index.replace_atomic(_STATE, msgpack.packb(state, use_bin_type=True))
    index.replace_atomic(_MARKER, token.encode())


def sync_tantivy(root: Path, conn: sqlite3.Connection, *, lock_timeout: float,
                 limit: int | None = None, build: bool = True) -> TantivyReport | None:
    """Bring ``index/tantivy/`` up to date with the SQLite index ``conn``.

    Applies what changed since the last sync; with no usable earlier sync it builds the
    index whole (``build``) or gives up.

    Args:
        root: The store's ``.ctx`` directory.
        conn: A current index connection.
        lock_timeout: How long to wait for another process writing it.
        limit: Give up (None) when more documents than this changed.
        build: Build it whole when there is nothing to sync from.

    Returns:
        What was done, or None when it gave up (nothing was written).

    Raises:
        LockConflict: (E006) if another process writes it for longer than ``lock_timeout``.
        UnsafePath: (E020) for a link or special file where its files go.
    """
    folder = root / "index"
    token = _token(root, conn)
    if token is None:
        return None
    with fsio.hold_lock(folder / _BUILD_LOCK, timeout=lock_timeout):
        if _read_marker(folder) == token:
            return TantivyReport(0, 0, 0, 0.0, False)  # another process did it meanwhile
        state = _read_state(folder)
        if state is None or not (folder / TANTIVY_DIR).is_dir():
            return _build(root, folder, conn, token) if build else None
        return _apply_changes(root, folder, conn, token, state, limit)


def rebuild_tantivy(root: Path, conn: sqlite3.Connection, *, lock_timeout: float) -> TantivyReport:
    """Recreate ``index/tantivy/`` from the SQLite index, whole.

    Args:
        root: The store's ``.ctx`` directory.
        conn: A current index connection.
        lock_timeout: How long to wait for another process writing it.

    Returns:
        The counts and the time taken.

    Raises:
        LockConflict: (E006) if another process writes it for longer than ``lock_timeout``.
        UnsafePath: (E020) if ``index/``, ``tantivy/`` or ``tantivy.new/`` is a link or a
            special file.
        IndexCorrupt: (E007) when the index is in memory (a read-only checkout).
    """
    from ctxstore.errors import IndexCorrupt

    folder = root / "index"
    token = _token(root, conn)
    if token is None:
        raise IndexCorrupt("the index is not a file here (a read-only checkout?): "
                           "there is no Tantivy index to build")
    with fsio.hold_lock(folder / _BUILD_LOCK, timeout=lock_timeout):
        return _build(root, folder, conn, token)


def _build(root: Path, folder: Path, conn: sqlite3.Connection, token: str) -> TantivyReport:
    """Fill ``tantivy.new/`` from the index, swap it in, record what it holds (lock held)."""
    start = time.perf_counter()
    # ``index/`` by descriptor (PS-10): the removals, the swap and the markers are made
    # relative to it, never through a link swapped in for it. Tantivy itself writes into
    # ``tantivy.new/<corpus>`` by name (it takes a path, as SQLite does), right after ctx
    # created those directories through the descriptor.
    with fsio.open_dir(root, folder, create=True) as index:
        for name in (_MARKER, _STATE):  # a crash from here on leaves no claim of a sync
            index.unlink(name)
        fresh = TANTIVY_DIR + ".new"
        _remove_tree(index, fresh)
        with index.dir(fresh, create=True) as new:
            for corpus in CORPORA:
                new.dir(corpus, create=True).close()
        engines = {c: _engine(folder / fresh / c, c, build=True) for c in CORPORA}
        state: dict[str, Any] = {"format": _FORMAT, "nodes": {}, "files": {}}
        nodes, chunks, files = _fill(conn, engines, state, list(node_versions(conn)),
                                     file_versions(conn), set())
        for engine in engines.values():
            engine.commit()
        engines.clear()
        _remove_tree(index, TANTIVY_DIR)
        fsio.replace(fresh, TANTIVY_DIR, dir_fd=index.fileno())
        fsio.fsync_dir(index.fileno())
        _write_state(index, state, token)
    return TantivyReport(chunks, nodes, files, time.perf_counter() - start, True)


def _apply_changes(root: Path, folder: Path, conn: sqlite3.Connection, token: str,
                   state: dict[str, Any], limit: int | None) -> TantivyReport | None:
    """Apply to the engines what changed since ``state``, then record the new state."""
    start = time.perf_counter()
    old_nodes: dict[int, bytes] = state["nodes"]
    now_nodes = node_versions(conn)
    node_gone = [r for r, v in old_nodes.items() if now_nodes.get(r) != v]
    node_new = [r for r, v in now_nodes.items() if old_nodes.get(r) != v]
    old_files: dict[str, list[Any]] = state["files"]
    now_files = file_versions(conn)
    changed = {p for p, (r, v, _lang) in now_files.items()
               if old_files.get(p, [None, None])[:2] != [r, v]}
    changed |= {p for p in old_files if p not in now_files}
    if limit is not None and len(node_gone) + len(node_new) + len(changed) > limit:
        return None
    engines = {c: _engine(folder / TANTIVY_DIR / c, c) for c in CORPORA}
    # Every document about to be added is deleted first, whatever the state says: a sync
    # that crashed after its commit, before its state, added some of them already.
    for rowid in {*node_gone, *node_new}:
        engines["nodes"].delete_document(rowid)
        state["nodes"].pop(rowid, None)
    for path in changed:
        old_files.pop(path, None)
        for corpus in ("chunks", "source", "other"):
            engines[corpus].delete_group(path)
    nodes, chunks, files = _fill(conn, engines, state, node_new,
                                 {p: now_files[p] for p in changed if p in now_files}, changed)
    for engine in engines.values():
        engine.commit()
    with fsio.open_dir(root, folder) as index:
        _write_state(index, state, token)
    return TantivyReport(chunks, nodes, files, time.perf_counter() - start, False)


def _fill(conn: sqlite3.Connection, engines: Mapping[str, TantivyEngine], state: dict[str, Any],
          node_rowids: list[int], files: Mapping[str, tuple[int, bytes, str | None]],
          changed: set[str]) -> tuple[int, int, int]:
    """Add the given nodes and files (their chunks and postings); record them in ``state``."""
    versions = node_versions(conn) if node_rowids else {}
    nodes = 0
    for rowid, node_id, content, summary in node_texts(conn, sorted(node_rowids)):
        engines["nodes"].index_document(rowid, {"content": content, "summary": summary},
                                        check=check_of(node_id))
        state["nodes"][rowid] = versions[rowid]
        nodes += 1
    paths = sorted(files)
    chunks = 0
    for rowid, path, qualname, text in _chunk_rows(conn, paths, bool(changed)):
        engines["chunks"].index_document(rowid, {"path": path, "name": qualname, "text": text},
                                         group=path, check=check_of(path))
        chunks += 1
    for start in range(0, len(paths), _BATCH):
        batch = paths[start:start + _BATCH]
        postings = file_terms_of(conn, [files[p][0] for p in batch])
        for path in batch:
            rowid, version, language = files[path]
            corpus = _corpus_of(language)
            body, where = postings[rowid]
            engines[corpus].index_terms(rowid, {"body": body, "path": path_field(where)},
                                        group=path, check=check_of(path))
            state["files"][path] = [rowid, version, corpus]
    return nodes, chunks, len(paths)


def _chunk_rows(conn: sqlite3.Connection, paths: list[str], some: bool
                ) -> Iterator[tuple[int, str, str, str]]:
    """The chunks of ``paths``: every chunk in rowid order for a whole build, else by path."""
    if some:
        yield from chunks_of_paths(conn, paths)
        return
    from ctxstore.index.derived import chunk_documents

    for rowid, path, qualname, text in chunk_documents(conn):
        yield rowid, path, qualname or "", text


def _remove_tree(index: fsio.Dir, name: str) -> None:
    """Delete ``name`` (Tantivy's files, in one level of corpus folders) in the open ``index/``.

    Opened ``O_NOFOLLOW`` from ``index/``'s descriptor and emptied relative to its own, so a
    link (or a special file) there, even one swapped in meanwhile, is refused (E020) and
    nothing it leads to is deleted.

    Raises:
        UnsafePath: (E020) if ``name`` or a folder in it is a link or not a directory, or a
            corpus folder holds a directory.
        OSError: if a file cannot be removed.
    """
    try:
        folder = index.dir(name)
    except FileNotFoundError:
        return
    with folder:
        with os.scandir(folder.fileno()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    _remove_flat(folder, entry.name)
                else:
                    folder.unlink(entry.name)
    index.rmdir(name)


def _remove_flat(parent: fsio.Dir, name: str) -> None:
    with parent.dir(name) as folder:
        with os.scandir(folder.fileno()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    raise UnsafePath(os.path.join(os.fspath(folder.path), entry.name),
                                     detail="is a directory (Tantivy writes none)")
                folder.unlink(entry.name)
    parent.rmdir(name)
