"""Tantivy full-text over file chunks and node text (``.ctx/index/tantivy/``).

Rebuilt from the SQLite index (``chunks``: file chunks at symbol granularity; ``nodes``:
every live node's content and summary, which includes the narrative entries that
``ctx commit`` turns into nodes), never written incrementally: ``ctx rebuild --tantivy``
(or a search that finds it missing or behind the index's pointers) recreates it in
``tantivy.new/`` and swaps it in, so a crash leaves the old index or none, never half of
one. ``tantivy`` is imported inside the functions that use it.

Words are identifier-aware: one registered analyzer (Tantivy's regex tokenizer, lower
case, ASCII folding) cuts ``parse_header``, ``parseHeader`` and ``ParseHeader`` alike into
``parse`` ``header`` (``HTTPServer`` into ``https`` ``erver``: the same cut on both sides,
so the identifier still finds itself). Queries are free text, never syntax: each word is
a term query on the chunk's qualified name (boosted), its path and its text, any word
may match, ranked by BM25. docs/index.md says which engine serves which text, with
the measurements of ``bench/fulltext.py``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore.errors import UnsafePath
from ctxstore.index.derived import chunk_documents, node_documents
from ctxstore.records import dataclass
from ctxstore.repo import Store

__all__ = ["TANTIVY_DIR", "WORD_PATTERN", "TextHit", "TantivyReport", "CodeTextIndex",
           "rebuild_tantivy", "search_text"]

TANTIVY_DIR = "tantivy"
_SYNCED = "tantivy.synced"  # beside the directory: Tantivy owns the files inside it
_BUILD_LOCK = "tantivy.lock"  # held while the index is built and swapped in
_ANALYZER = "ctx_ident"
# Words of identifiers: a capitalised or lower-case run, an upper-case run, digits, or a
# run of letters without case (CJK). Tantivy's regex has no look-ahead.
WORD_PATTERN = r"\p{Lu}?\p{Ll}+\p{N}*|\p{Lu}+\p{N}*|\p{N}+|\p{Lo}+"
_HEAP_BYTES = 50_000_000
_NAME_BOOST = 2.0
_PATH_BOOST = 1.5


@dataclass(frozen=True, slots=True)
class TextHit:
    """One search result: a chunk (``ref`` = path) or a node (``ref`` = node id)."""

    kind: str
    rowid: int
    ref: str
    name: str
    score: float


@dataclass(frozen=True, slots=True)
class TantivyReport:
    """What ``rebuild_tantivy`` indexed and how long it took."""

    chunks: int
    nodes: int
    seconds: float


class CodeTextIndex:
    """A Tantivy index of chunks and nodes, in a directory or in memory."""

    def __init__(self, path: Path | None = None) -> None:
        """Open (or create) the index in ``path``, or in memory when it is None.

        Args:
            path: An existing directory, or None.
        """
        import tantivy

        self._tv: Any = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("rowid", stored=True, indexed=False)
        builder.add_text_field("kind", stored=True, tokenizer_name="raw")
        builder.add_text_field("ref", stored=True, tokenizer_name="raw")
        builder.add_text_field("label", stored=True, tokenizer_name="raw", index_option="basic")
        for name in ("name", "path", "text"):
            builder.add_text_field(name, stored=False, tokenizer_name=_ANALYZER,
                                   index_option="freq")
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema, path=None if path is None else str(path))
        self._analyzer = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(WORD_PATTERN))
                          .filter(tantivy.Filter.lowercase())
                          .filter(tantivy.Filter.ascii_fold())
                          .build())
        self._index.register_tokenizer(_ANALYZER, self._analyzer)
        self._writer: Any = None

    def words(self, text: str) -> list[str]:
        """The words ``text`` is indexed (or searched) as."""
        return list(self._analyzer.analyze(text))

    def add(self, kind: str, rowid: int, ref: str, name: str, path: str, text: str) -> None:
        """Queue one document (``commit`` makes the queued documents searchable).

        Args:
            kind: ``chunk`` or ``node``.
            rowid: Its rowid in ``chunks`` or ``nodes``.
            ref: The chunk's path or the node's id.
            name: The chunk's qualified name, or the node's type.
            path: Text of the path field (a chunk's path; empty for a node).
            text: The body.
        """
        if self._writer is None:
            self._writer = self._index.writer(heap_size=_HEAP_BYTES, num_threads=1)
        doc = self._tv.Document()
        doc.add_integer("rowid", rowid)
        doc.add_text("kind", kind)
        doc.add_text("ref", ref)
        doc.add_text("label", name)
        doc.add_text("name", name)
        doc.add_text("path", path)
        doc.add_text("text", text)
        self._writer.add_document(doc)

    def commit(self) -> None:
        """Commit the queued documents and reload the searcher."""
        if self._writer is not None:
            self._writer.commit()
            self._writer.wait_merging_threads()
            self._writer = None
        self._index.reload()

    def search(self, query: str, *, limit: int = 10, kind: str | None = None) -> list[TextHit]:
        """Rank documents for free text (any word may match; BM25).

        Args:
            query: Any text; words are cut as they were indexed.
            limit: At most this many hits.
            kind: Only ``chunk`` or only ``node`` documents; None for both.

        Returns:
            The hits, best first (ties by kind and rowid).
        """
        tv = self._tv
        words = list(dict.fromkeys(self.words(query)))
        if not words:
            return []
        clauses = []
        for word in words:
            for field, boost in (("name", _NAME_BOOST), ("path", _PATH_BOOST), ("text", 1.0)):
                q = tv.Query.term_query(self._schema, field, word)
                clauses.append((tv.Occur.Should, q if boost == 1.0 else tv.Query.boost_query(q, boost)))
        q = tv.Query.boolean_query(clauses)
        if kind is not None:
            q = tv.Query.boolean_query([(tv.Occur.Must, q), (tv.Occur.Must, tv.Query.term_query(
                self._schema, "kind", kind))])
        searcher = self._index.searcher()
        if searcher.num_docs == 0:
            return []
        hits = []
        for score, addr in searcher.search(q, limit=limit).hits:
            doc = searcher.doc(addr)
            hits.append(TextHit(doc["kind"][0], int(doc["rowid"][0]), doc["ref"][0],
                                doc["label"][0], float(score)))
        hits.sort(key=lambda h: (-h.score, h.kind, h.rowid))
        return hits


def _remove_dir(index: fsio.Dir, index_folder: Path, name: str) -> None:
    """Delete ``name``, a flat directory Tantivy wrote (files only), in the open ``index/``.

    Opened ``O_NOFOLLOW`` from ``index/``'s descriptor and emptied relative to its own, so
    a link (or a special file) there, even one swapped in meanwhile, is refused (E020) and
    nothing it leads to is deleted.

    Raises:
        UnsafePath: (E020) if ``name`` is a link or not a directory, or holds a directory.
        OSError: if a file cannot be removed.
    """
    where = os.fspath(index_folder / name)
    try:
        folder = index.dir(name)
    except FileNotFoundError:
        return
    with folder:
        with os.scandir(folder.fileno()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    raise UnsafePath(os.path.join(where, entry.name),
                                     detail="is a directory (Tantivy writes none)")
                folder.unlink(entry.name)
    index.rmdir(name)


def _synced_text(store: Store) -> str:
    from ctxstore.index import pointer_snapshot

    return json.dumps(pointer_snapshot(store), sort_keys=True)


def fill(index: CodeTextIndex, conn: sqlite3.Connection) -> tuple[int, int]:
    """Add every chunk and node of the SQLite index, and commit.

    Args:
        index: An empty index.
        conn: A synced index connection.

    Returns:
        How many chunks and nodes were added.
    """
    chunks = nodes = 0
    for rowid, path, qualname, text in chunk_documents(conn):
        index.add("chunk", rowid, path, qualname or "", path, text)
        chunks += 1
    for rowid, node_id, node_type, text in node_documents(conn):
        index.add("node", rowid, node_id, node_type, "", text)
        nodes += 1
    index.commit()
    return chunks, nodes


def rebuild_tantivy(store: Store, conn: sqlite3.Connection | None = None) -> TantivyReport:
    """Recreate ``index/tantivy/`` from the SQLite index.

    Args:
        store: The store.
        conn: A synced index connection (None: one is opened and closed here).

    Returns:
        The counts and the time taken.

    Raises:
        UnsafePath: (E020) if ``index/``, ``tantivy/`` or ``tantivy.new/`` is a link or a
            special file.
        CtxError: from the index.
    """
    from ctxstore.index import index_dir, open_index

    start = time.perf_counter()
    own = conn is None
    if conn is None:
        conn = open_index(store)
    try:
        folder = index_dir(store)
        final, fresh = folder / TANTIVY_DIR, folder / (TANTIVY_DIR + ".new")
        # One builder at a time: two would fill and swap the same tantivy.new.
        with fsio.hold_lock(folder / _BUILD_LOCK, timeout=store.lock_timeout):
            # ``index/`` by descriptor (PS-10): the removals, the swap and the ``synced``
            # marker are made relative to it, never through a link swapped in for it.
            # Tantivy itself writes into ``tantivy.new`` by name (it takes a path, as SQLite
            # does), right after ctx created that directory through the descriptor.
            with fsio.open_dir(store.root, folder, create=True) as index:
                _remove_dir(index, folder, fresh.name)
                index.dir(fresh.name, create=True).close()
                chunks, nodes = fill(CodeTextIndex(fresh), conn)
                synced = _synced_text(store)
                _remove_dir(index, folder, final.name)
                fsio.replace(fresh.name, final.name, dir_fd=index.fileno())
                fsio.fsync_dir(index.fileno())
                index.replace_atomic(_SYNCED, synced.encode())
    finally:
        if own:
            conn.close()
    return TantivyReport(chunks, nodes, time.perf_counter() - start)


def _current(store: Store) -> bool:
    from ctxstore.index import index_dir

    folder = index_dir(store)
    try:
        marker = fsio.read_regular(folder / _SYNCED, 1 << 16).decode("utf-8", "replace")
    except (FileNotFoundError, UnsafePath):
        return False
    return (folder / TANTIVY_DIR).is_dir() and not (folder / TANTIVY_DIR).is_symlink() \
        and marker == _synced_text(store)


def search_text(store: Store, query: str, *, limit: int = 10, kind: str | None = None
                ) -> list[TextHit]:
    """Search chunks and nodes with Tantivy, rebuilding the index first when it is behind.

    Args:
        store: The store.
        query: Free text.
        limit: At most this many hits.
        kind: ``chunk``, ``node`` or None for both.

    Returns:
        The hits, best first.

    Raises:
        UnsafePath: (E020) for a hostile ``index/tantivy``.
    """
    from ctxstore.index import index_dir

    if not _current(store):
        rebuild_tantivy(store)
    return CodeTextIndex(index_dir(store) / TANTIVY_DIR).search(query, limit=limit, kind=kind)
