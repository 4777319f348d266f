"""Code ingestion: ``ctx add file`` and ``ctx index`` (spec 002 §7.2.1, §13.2.2, §16.4).

A run lists the candidate files (``code.walk``, or the paths given), reads only those
whose size or modification time changed since the last run (the stat cache in
``.ctx/local/code-stat.json``: path -> size, mtime, blob id, per clone), extracts
symbols and relations from each changed text file, resolves ``Imports`` targets to
indexed files through the extractors' ``module_name``, and writes a ``file_version``
object per changed file. All objects of a run are written and made durable, then one
change batch of ``file`` / ``file_removed`` records and ONE work commit (step
``file_read``) move STAGE: a run is one pointer move, whatever its size.

Gates (``[ingestion]``, docs/code.md "Gates"): a file whose blob is the one indexed is
not stored again (dedup); ``ctx add file`` honours the per-step budgets of files, bytes
and edges; ``ctx index``, a bulk command, is exempt from those and bounded instead by
``max_index_bytes`` a run; every run honours ``max_file_bytes`` a file and drops edges
below ``min_confidence``. Each drop is one line of ``IngestReport.dropped``.

Resolution is done at ingest time against every indexed file plus the files of the
run; an import left unresolved is not revisited when a later run adds the file it names
(that file's own run resolves only its own imports): re-index the importer to resolve it.

It must not print or run SQL (``index.code`` reads the index).
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import field
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn, cast

from ctxstore import fsio
from ctxstore.clock import next_stamp
from ctxstore.code.languages import CONFIDENCE_RANK, Confidence, Extraction, Relation, extractor_for
from ctxstore.code.walk import walk_tree
from ctxstore.errors import CtxError, InvalidInput, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.model.code import CodeRelation, CodeSymbol, FileRecord, FileRemoved, FileVersion
from ctxstore.model.knowledge import KnowledgeRecord
from ctxstore.objects import KIND_BLOB, KIND_TYPED, ObjectStore, object_id_of
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.security.guard import guard, policy
from ctxstore.security.secrets import sensitive_file

__all__ = ["IngestReport", "FileNote", "index_tree", "add_files", "default_jobs", "repo_path",
           "STAT_CACHE",
           "NO_SEMANTICS",
           "CONFIDENCE_RANK", "endpoint_of_symbol", "resolve_target"]

STAT_CACHE = "code-stat.json"
# The note of a version stored without its symbols (`ctx add file` without --extract-semantics):
# a later run that extracts semantics reads the file again even though its bytes are the same.
NO_SEMANTICS = "symbols not extracted (ctx add file without --extract-semantics)"
_SNIFF_BYTES = 8192
_RACY_NS = 2_000_000_000  # an mtime this close to the run may still change within its tick
_SEPARATOR = re.compile(r"\.|::")
_POOL_MIN_BYTES = 256 << 10  # less source than this is extracted in-process (forking costs)
_MAX_DEFAULT_JOBS = 8

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class FileNote:
    """Why a file was skipped or stored incomplete."""

    path: str
    note: str


@dataclass
class IngestReport:
    """What a run did (``--format json`` prints ``to_json()``).

    Attributes:
        scanned: Candidate files.
        unchanged: Files the stat cache and the index showed unchanged (not read).
        read: Files read.
        deduplicated: Files read whose content was the one indexed (gate 1: nothing stored).
        written: Paths given a new ``file_version``.
        removed: Paths gone from the work tree (``file_removed`` records).
        notes: Per-file notes (binary, not UTF-8, too large, symlink out of the tree,
            incomplete extraction).
        dropped: One line per gate that dropped something.
        symbols: Symbols in the versions written.
        relations: Relations in the versions written.
        work_commit: The work commit of the run (hex), None when nothing changed.
        sensitive: Sensitive files not read (``.env``, keys, keystores, credential files:
            ``[security] index_sensitive_files``).
        redacted: Files whose secrets were redacted before they were stored.
    """

    scanned: int = 0
    unchanged: int = 0
    read: int = 0
    deduplicated: int = 0
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[FileNote] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    symbols: int = 0
    relations: int = 0
    work_commit: str | None = None
    sensitive: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready map."""
        return {"scanned": self.scanned, "unchanged": self.unchanged, "read": self.read,
                "deduplicated": self.deduplicated, "written": self.written,
                "removed": self.removed,
                "notes": [{"path": _shown(n.path), "note": n.note} for n in self.notes],
                "dropped": self.dropped, "symbols": self.symbols, "relations": self.relations,
                "work_commit": self.work_commit, "sensitive": self.sensitive,
                "redacted": self.redacted}


@dataclass
class _Budget:
    """The gates of one run (``[ingestion]``)."""

    max_files: int | None
    max_bytes: int | None
    max_edges: int | None
    max_file_bytes: int
    min_rank: int
    min_confidence: Confidence
    bytes_used: int = 0
    edges_used: int = 0


@dataclass
class _Read:
    """A changed file, read and extracted."""

    path: str
    data: bytes
    blob: ObjectId
    text: str
    language: str | None
    extraction: Extraction | None


@dataclass
class _Version:
    """A changed file's new version: the record, or its encoded payload.

    ``written`` is the version's id when a pool worker already wrote it and the blob.
    """

    path: str
    data: bytes
    blob: ObjectId
    version: FileVersion | bytes
    note: str | None
    symbols: int
    relations: int
    written: ObjectId | None = None


# -- paths ----------------------------------------------------------------------------------------

def repo_path(store: Store, given: str, cwd: Path) -> str:
    """The repository-relative POSIX path of a path given on the command line.

    Args:
        store: The store (its work tree is the repository).
        given: The path as typed (relative to ``cwd`` or absolute).
        cwd: The current directory.

    Returns:
        The path relative to the work tree ("" for the tree itself).

    Raises:
        InvalidInput: if it lies outside the work tree or inside ``.ctx/``.
    """
    root = store.worktree.resolve()
    raw = Path(given) if os.path.isabs(given) else cwd / given
    absolute = Path(os.path.normpath(raw.parent.resolve() / raw.name)) if raw.name else raw.resolve()
    try:
        rel = absolute.relative_to(root).as_posix()
    except ValueError:
        raise InvalidInput(f"{given}: is outside the work tree {root}") from None
    rel = "" if rel == "." else rel
    if rel.split("/", 1)[0] == ".ctx":
        raise InvalidInput(f"{given}: is inside the store (.ctx/)")
    return rel


# -- stat cache (per clone, .ctx/local/) ------------------------------------------------------------

def _load_cache(store: Store) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """(path -> [size, mtime_ns, blob hex or None], path -> module name or "")."""
    try:
        raw = fsio.read_regular(store.root / "local" / STAT_CACHE, 64 << 20)
        doc = json.loads(raw)
    except (OSError, UnsafePath, ValueError, RecursionError):
        return {}, {}
    if not isinstance(doc, dict) or doc.get("version") != 1:
        return {}, {}
    entries, modules = doc.get("entries"), doc.get("modules")
    return (entries if isinstance(entries, dict) else {},
            modules if isinstance(modules, dict) else {})


def _save_cache(store: Store, entries: dict[str, list[Any]], modules: dict[str, str]) -> None:
    data = json.dumps({"version": 1, "entries": entries, "modules": modules},
                      separators=(",", ":")).encode()
    try:
        # By descriptor (PS-10): a ``local/`` that is (or is swapped for) a link is refused,
        # never written through. Atomic, not durable (no fsync): after a crash an old or
        # unreadable cache only means files are read again, and every entry is checked
        # against the index.
        with fsio.open_dir(store.root, "local", create=True, durable=False) as local:
            local.write_new_file(STAT_CACHE, data, mode=0o644)
    except (OSError, UnsafePath):
        pass  # a cache: the next run reads the files again


# -- reading ---------------------------------------------------------------------------------------

def _sniff(path: str, data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for UTF-8 text, (None, note) otherwise."""
    if b"\0" in data[:_SNIFF_BYTES]:
        return None, "binary (a NUL byte in the first 8 KiB): skipped"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start}): skipped"


def _extract(path: str, text: str, semantics: bool,
             min_confidence: Confidence = "low") -> tuple[str | None, Extraction | None]:
    """(language, extraction); relations below ``min_confidence`` may come only counted."""
    extractor = extractor_for(path)
    if extractor is None:
        return None, None
    if not semantics:
        return extractor.name, None
    if getattr(extractor, "filters_confidence", False):
        return extractor.name, extractor.extract(  # type: ignore[call-arg]
            path, text, min_confidence=min_confidence)
    return extractor.name, extractor.extract(path, text)


def default_jobs() -> int:
    """The processes ``ctx index`` extracts with by default: one per CPU this process may use."""
    try:
        return max(1, min(len(os.sched_getaffinity(0)), _MAX_DEFAULT_JOBS))
    except (AttributeError, OSError):
        return max(1, min(os.cpu_count() or 1, _MAX_DEFAULT_JOBS))


# What the pool's workers read, set in the parent just before they fork (so nothing but an
# index goes to a worker): (files, blob ids, module map, the run's gates, the object store to
# write to or None).
_SHARED: tuple[list[tuple[str, bytes, str]], dict[str, ObjectId], dict[str, list[str]],
               _Budget, ObjectStore | None] | None = None


def _build(path: str, data: bytes, blob: ObjectId, text: str, semantics: bool,
           module_map: dict[str, list[str]], budget: _Budget,
           counts: dict[str, int]) -> tuple[FileVersion, int, int]:
    """One changed file extracted and made a version, with its symbol and relation counts."""
    language, ext = _extract(path, text, semantics, budget.min_confidence)
    return _version(_Read(path, data, blob, text, language, ext), module_map, budget, counts)


def _prepare_in_worker(index: int) -> tuple[bytes, ObjectId | None, str | None, int, int, int]:
    """One file's version, built in a pool worker.

    The worker also writes the file's blob and version into the staging area, so that the
    file creations run beside the other workers' parsing instead of after it; the parent
    takes them into its transaction (``Transaction.adopt``), which makes them durable.

    Returns:
        (the encoded version, its id if written here, note, symbols, relations,
        low-confidence edges dropped).
    """
    from ctxstore.model import encode_typed

    assert _SHARED is not None
    reads, blobs, module_map, budget, objects = _SHARED
    path, data, text = reads[index]
    counts = {"low": 0, "budget": 0}
    fv, n_symbols, n_relations = _build(path, data, blobs[path], text, True, module_map,
                                        budget, counts)
    payload = encode_typed(fv)
    written = None
    if objects is not None:
        try:
            objects.write(KIND_BLOB, data)
            written, _ = objects.write(KIND_TYPED, payload)
        except OSError:
            written = None  # the parent writes it again under its lock and reports the error
    return payload, written, fv.note, n_symbols, n_relations, counts["low"]


def _can_fork() -> bool:
    """Whether forking workers is safe here: on Linux, with no other thread running.

    A lock another thread holds at the fork would stay held in the child forever.
    """
    import threading

    return sys.platform.startswith("linux") and threading.active_count() == 1


def _prepare_versions(store: Store, reads: list[tuple[str, bytes, str]],
                      blobs: dict[str, ObjectId], module_map: dict[str, list[str]],
                      semantics: bool, budget: _Budget, counts: dict[str, int], jobs: int,
                      progress: Progress | None) -> list[_Version]:
    """Extract and build every changed file's version, in forked workers when it pays.

    Workers are used for a run with semantics, more than ``_POOL_MIN_BYTES`` of source and
    no per-step edge budget (which is spent file by file, in order). Each returns the
    encoded version (bytes), not the objects: sending millions of small records back
    between processes would cost more than building them. Results keep the files' order.

    Raises:
        CtxError: if a worker process died (killed, out of memory).
    """
    total = sum(len(d) for _, d, _ in reads)
    if (jobs > 1 and semantics and budget.max_edges is None and total >= _POOL_MIN_BYTES
            and len(reads) >= 2 * jobs and _can_fork()):
        return _prepare_in_pool(store, reads, blobs, module_map, budget, counts, jobs, progress)
    out: list[_Version] = []
    for done, (path, data, text) in enumerate(reads, 1):
        fv, n_symbols, n_relations = _build(path, data, blobs[path], text, semantics, module_map,
                                            budget, counts)
        out.append(_Version(path, data, blobs[path], fv, fv.note, n_symbols, n_relations))
        if progress is not None:
            progress(done, len(reads))
    return out


def _prepare_in_pool(store: Store, reads: list[tuple[str, bytes, str]],
                     blobs: dict[str, ObjectId], module_map: dict[str, list[str]],
                     budget: _Budget, counts: dict[str, int], jobs: int,
                     progress: Progress | None) -> list[_Version]:
    """``_prepare_versions`` in ``jobs`` forked workers (see there).

    Each worker gets a share of the files, balanced by size (largest first, each to the
    least loaded), and streams one record per file back through a pipe as it goes:
    a little-endian length, then the pickled ``(index, result)``. Nothing else passes
    between the processes, and no pool machinery (threads, queues) is imported.

    Raises:
        CtxError: if a worker died (killed, out of memory) or could not finish.
    """
    global _SHARED
    import pickle  # noqa: F401 - imported once here, before the workers fork, not in each
    import selectors  # noqa: F401

    objects: ObjectStore | None = store.objects
    try:
        store.ensure_staging_area()
    except (OSError, UnsafePath):
        objects = None  # the transaction reports it
    first: dict[str, str] = {}  # a file of each language, to build its parser here, once
    for path, _, _ in reads:
        extractor = extractor_for(path)
        if extractor is not None:
            first.setdefault(extractor.name, path)
    for path in first.values():  # the workers inherit the parsers and queries
        _extract(path, "", True)
    results: list[Any] = [None] * len(reads)
    children: dict[int, int] = {}  # read end -> pid
    _SHARED = (reads, blobs, module_map, budget, objects)  # no per-step edge budget here
    try:
        for share in _shares([len(data) for _, data, _ in reads], jobs):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                os.close(read_end)
                _worker(share, write_end)
            os.close(write_end)
            children[read_end] = pid
        _collect(children, results, progress)
    except BaseException:
        for pid in children.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        raise
    finally:
        _SHARED = None
        died = False
        for fd, pid in children.items():
            os.close(fd)
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                continue
            died = died or status != 0
    if died or any(r is None for r in results):
        raise CtxError("an extraction process died (killed, or out of memory); nothing was "
                       "stored", hint="ctx index --jobs 1")
    out: list[_Version] = []
    for (path, data, _), (payload, written, note, n_symbols, n_relations, low) in \
            zip(reads, results, strict=True):
        counts["low"] += low
        out.append(_Version(path, data, blobs[path], payload, note, n_symbols, n_relations,
                            written))
    return out


def _shares(sizes: Sequence[int], jobs: int) -> list[list[int]]:
    """Indices of ``sizes`` in ``jobs`` shares of about equal total, each largest first."""
    shares: list[list[int]] = [[] for _ in range(jobs)]
    loads = [0] * jobs
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        least = loads.index(min(loads))
        shares[least].append(index)
        loads[least] += sizes[index] + 1
    return [share for share in shares if share]


def _worker(share: list[int], out: int) -> NoReturn:
    """A forked worker's whole life: prepare each file of ``share``, send it, exit.

    It leaves with ``os._exit``: the parent's exit handlers and buffered output are not
    its own. Any error (a ``KeyboardInterrupt`` included) ends it with status 1.
    """
    import pickle

    status = 1
    try:
        for index in share:
            record = pickle.dumps((index, _prepare_in_worker(index)), pickle.HIGHEST_PROTOCOL)
            view = memoryview(len(record).to_bytes(4, "little") + record)
            while view:  # a pipe, not a durable write: not ``fsio.write_all``
                view = view[os.write(out, view):]
        status = 0
    finally:  # an exception (KeyboardInterrupt too) ends here, with status 1
        os._exit(status)


def _collect(children: dict[int, int], results: list[Any], progress: Progress | None) -> None:
    """Read every worker's records into ``results`` as they come, until each pipe ends."""
    import pickle
    import selectors

    done = 0
    pending: dict[int, bytearray] = {fd: bytearray() for fd in children}
    with selectors.DefaultSelector() as selector:
        for fd in children:
            selector.register(fd, selectors.EVENT_READ)
        while pending:
            for key, _ in selector.select():
                fd = int(key.fd)
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    selector.unregister(fd)
                    del pending[fd]
                    continue
                buf = pending[fd]
                buf += chunk
                while len(buf) >= 4:
                    size = int.from_bytes(buf[:4], "little")
                    if len(buf) < 4 + size:
                        break
                    # Our own forked worker's bytes, not input from outside.
                    index, result = pickle.loads(buf[4:4 + size])  # noqa: S301
                    del buf[:4 + size]
                    results[index] = result
                    done += 1
                    if progress is not None:
                        progress(done, len(results))


# -- resolution ------------------------------------------------------------------------------------

def endpoint_of_symbol(qualname: str, modules: set[str]) -> tuple[str, str]:
    """The endpoint of a symbol of a file: ``("module", q)`` for a module, else ``("item", q)``."""
    return ("module", qualname) if qualname in modules else ("item", qualname)


def _prefixes(target: str) -> Iterable[str]:
    """``a.b.c`` -> ``a.b.c``, ``a.b``, ``a`` (``::`` separators alike), longest first."""
    yield target
    cuts = [m.start() for m in _SEPARATOR.finditer(target)]
    for cut in reversed(cuts):
        if cut:
            yield target[:cut]


def _nearest(paths: list[str], importer: str) -> str:
    """The path sharing the longest directory prefix with the importer (crate-scoped names)."""
    def shared(p: str) -> int:
        return len(os.path.commonprefix([PurePosixPath(p).parts, PurePosixPath(importer).parts]))
    return sorted(paths, key=lambda p: (-shared(p), p))[0]


def resolve_target(rel: Relation, importer: str, module_map: dict[str, list[str]],
                   own: set[str]) -> tuple[str, str]:
    """The endpoint a relation's target names (docs/code.md "Endpoints").

    An ``Imports`` of a module of an indexed file is ``("file", path)``; of a name inside
    one, ``("item", name)``; anything else imported is ``("module", name)``. Other labels
    name an item, or a module when the name is one.

    Args:
        rel: The relation as extracted.
        importer: The path of the file it comes from.
        module_map: Module name -> paths of the files defining it.
        own: The file's own symbols' qualified names.

    Returns:
        ``(kind, key)``.
    """
    target = rel.target
    if target in own:
        return "item", target
    for prefix in _prefixes(target):
        paths = module_map.get(prefix)
        if paths:
            if prefix == target:
                return ("file", _nearest(paths, importer)) if rel.label == "Imports" \
                    else ("module", target)
            return "item", target
    return ("module", target) if rel.label == "Imports" else ("item", target)


def _module_map(paths: Iterable[str], memo: dict[str, str]) -> dict[str, list[str]]:
    """Module name -> the files defining it; ``memo`` (path -> name or "") is filled in."""
    from ctxstore.code.languages import module_name

    out: dict[str, list[str]] = {}
    for path in paths:
        name = memo.get(path)
        if name is None:
            name = memo[path] = module_name(path) or ""
        if name:
            out.setdefault(name, []).append(path)
    return out


# -- building versions -----------------------------------------------------------------------------

def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _relations(path: str, ext: Extraction, module_map: dict[str, list[str]], budget: _Budget,
               counts: dict[str, int]) -> tuple[CodeRelation, ...]:
    modules = {s.qualname for s in ext.symbols if s.kind == "module"}
    own = {s.qualname for s in ext.symbols}
    out: list[CodeRelation] = []
    counts["low"] += ext.dropped  # counted by the extractor, never built
    for sym in ext.symbols:  # the file node holds its outermost symbols
        if sym.parent is None:
            kind, key = endpoint_of_symbol(sym.qualname, modules)
            out.append(CodeRelation("Contains", "file", path, kind, key, sym.qualname, "ingest",
                                    "high", sym.span.start_byte, sym.span.end_byte,
                                    sym.span.start_line, sym.span.end_line, ()))
    for rel in ext.relations:
        if CONFIDENCE_RANK.get(rel.evidence.confidence, 0) < budget.min_rank:
            counts["low"] += 1
            continue
        from_kind, from_key = endpoint_of_symbol(rel.source, modules)
        to_kind, to_key = resolve_target(rel, path, module_map, own)
        span = rel.evidence.span
        out.append(CodeRelation(rel.label, from_kind, from_key, to_kind, to_key, rel.target,
                                rel.evidence.tool, rel.evidence.confidence, span.start_byte,
                                span.end_byte, span.start_line, span.end_line, tuple(rel.detail)))
    if budget.max_edges is not None:
        room = max(budget.max_edges - budget.edges_used, 0)
        if len(out) > room:
            counts["budget"] += len(out) - room
            out = sorted(out, key=lambda r: -CONFIDENCE_RANK.get(r.confidence, 0))[:room]
        budget.edges_used += len(out)
    return tuple(out)


def _version(item: _Read, module_map: dict[str, list[str]], budget: _Budget,
             counts: dict[str, int]) -> tuple[FileVersion, int, int]:
    """The version of a changed file, with its symbol and relation counts."""
    ext = item.extraction
    symbols: tuple[CodeSymbol, ...] = ()
    relations: tuple[CodeRelation, ...] = ()
    note = None
    if ext is not None:
        symbols = tuple(CodeSymbol(s.qualname, s.name, s.kind, s.parent, s.visibility, s.signature,
                                   s.span.start_byte, s.span.end_byte, s.span.start_line,
                                   s.span.end_line, tuple(s.detail)) for s in ext.symbols)
        relations = _relations(item.path, ext, module_map, budget, counts)
        if not ext.complete:
            note = ext.note or "extraction incomplete (a syntax error or a construct the parser skips)"
    elif item.language is not None:
        note = NO_SEMANTICS
    fv = FileVersion.make(path=item.path, blob_id=item.blob, language=item.language,
                          byte_count=len(item.data), line_count=_line_count(item.text),
                          complete=ext is None or ext.complete, note=note, symbols=symbols,
                          relations=relations)
    return fv, len(symbols), len(relations)


# -- the run ---------------------------------------------------------------------------------------

def _budget(store: Store, bulk: bool) -> _Budget:
    cfg = store.config
    min_conf = cast("Confidence", str(cfg.get("ingestion", "min_confidence")))  # validated
    return _Budget(
        max_files=None if bulk else int(cfg.get("ingestion", "max_files_per_step")),
        max_bytes=int(cfg.get("ingestion", "max_index_bytes" if bulk else "max_bytes_per_step")),
        max_edges=None if bulk else int(cfg.get("ingestion", "max_edges_per_step")),
        max_file_bytes=int(cfg.get("ingestion", "max_file_bytes")),
        min_rank=CONFIDENCE_RANK.get(min_conf, 1), min_confidence=min_conf)


def index_tree(store: Store, paths: Sequence[str] = (), *, jobs: int | None = None,
               progress: Progress | None = None) -> IngestReport:
    """``ctx index``: ingest the work tree (or the files below ``paths``), with semantics.

    Files indexed earlier that vanished from the work tree below the scope get
    ``file_removed`` (a file now ignored, but still there, keeps its last version).

    Args:
        store: The store.
        paths: Repository-relative paths to limit the run to (all the tree when empty).
        jobs: Processes extracting symbols (None: ``default_jobs()``); forked workers are
            used only for runs over ``_POOL_MIN_BYTES`` of changed source.
        progress: Called with (files done, files to extract) while extracting.

    Returns:
        The report.

    Raises:
        InvalidInput: if a path names nothing on disk and nothing indexed.
        LockConflict, StagingConflict, StorageIOError: if the write cannot happen (the
            store is then as it was).
    """
    root = store.worktree
    with _no_collections():  # the walk too: a large tree's paths are as acyclic as the rest
        walk = walk_tree(root, ignore_globs=store.config.get("ingestion", "ignore_globs"),
                         under=paths)
        scope = [p.strip("/") for p in paths if p.strip("/")]
        return _ingest(store, walk.files, scope=scope, removals=True, semantics=True,
                       budget=_budget(store, bulk=True),
                       jobs=default_jobs() if jobs is None else jobs, progress=progress)


def add_files(store: Store, paths: Sequence[str], *, semantics: bool = False) -> IngestReport:
    """``ctx add file``: ingest the given files, honouring the per-step budgets.

    A run that stores something appends one line to today's narrative log.

    Args:
        store: The store.
        paths: Repository-relative paths of regular files (ignore rules do not apply:
            they were named).
        semantics: Also extract symbols and relations (``--extract-semantics``).

    Returns:
        The report.

    Raises:
        InvalidInput: if a path names a directory or nothing.
        LockConflict, StagingConflict, StorageIOError: if the write cannot happen.
    """
    root = store.worktree
    for path in paths:
        full = root / path
        if not path or full.is_dir():
            raise InvalidInput(f"{path or '.'}: is a directory", hint="ctx index DIR")
        if not full.is_symlink() and not full.exists():
            raise InvalidInput(f"{path}: no such file")
    return _ingest(store, list(dict.fromkeys(paths)), scope=None, removals=False,
                   semantics=semantics, budget=_budget(store, bulk=False), jobs=1,
                   progress=None, log_line=True)


def _utf8(path: str) -> bool:
    """Whether a path (from Git or the walk, undecodable bytes kept as surrogates) is UTF-8."""
    try:
        path.encode()
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: str) -> str:
    """A path as UTF-8 text: the bytes of a name that is not UTF-8 written as ``\\xNN``."""
    return path if _utf8(path) else os.fsencode(path).decode("utf-8", "backslashreplace")


def _stat_file(root: Path, path: str, max_file_bytes: int
               ) -> tuple[os.stat_result | None, str | None]:
    """(stat, None) for a regular file to consider, (None, note or None) to skip it."""
    try:
        st = os.lstat(f"{root}/{path}")  # a string, not a Path: one call per file of the tree
    except OSError:
        return None, None  # vanished since the listing
    if not _utf8(path):  # objects hold UTF-8 names: Git keeps it, ctx cannot name it
        return None, "file name is not valid UTF-8: skipped"
    if stat.S_ISLNK(st.st_mode):
        try:
            target = (root / path).resolve()
            target.relative_to(root.resolve())
        except RuntimeError:  # Path.resolve on a cycle of links (a -> b -> a)
            return None, "symbolic link in a loop: not followed"
        except (OSError, ValueError):
            return None, "symbolic link out of the work tree: not followed"
        return None, None  # a link inside the tree: its target is indexed under its own path
    if not stat.S_ISREG(st.st_mode):
        return None, f"{fsio.file_kind(st.st_mode)}: skipped"
    if st.st_size > max_file_bytes:
        return None, (f"{st.st_size} bytes, over [ingestion] max_file_bytes = {max_file_bytes}: "
                      "skipped")
    return st, None


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


def _ingest(store: Store, candidates: list[str], *, scope: list[str] | None, removals: bool,
            semantics: bool, budget: _Budget, jobs: int, progress: Progress | None,
            log_line: bool = False) -> IngestReport:
    with _no_collections():
        return _ingest_run(store, candidates, scope=scope, removals=removals,
                           semantics=semantics, budget=budget, jobs=jobs, progress=progress,
                           log_line=log_line)


def _ingest_run(store: Store, candidates: list[str], *, scope: list[str] | None, removals: bool,
                semantics: bool, budget: _Budget, jobs: int, progress: Progress | None,
                log_line: bool) -> IngestReport:
    from ctxstore.index import open_index
    from ctxstore.index.code import file_rows

    report = IngestReport(scanned=len(candidates))
    root = store.worktree
    with closing(open_index(store)) as conn:
        indexed = file_rows(conn)
    for part in scope or ():  # a typo must not look like a run that found nothing to do
        if not os.path.lexists(root / part) and not any(_in_scope(p, [part]) for p in indexed):
            raise InvalidInput(f"{part}: no such file or directory, and nothing indexed there")
    cache, modules = _load_cache(store)
    known_modules = dict(modules)
    new_cache: dict[str, list[Any]] = {}
    started = time.time_ns()
    to_read: list[tuple[str, os.stat_result]] = []
    over: dict[str, int] = {"files": 0, "bytes": 0}
    # Listed files that can no longer be indexed (gone, now a link, a special file, too
    # large, binary, not UTF-8): an indexed version of one is stale, so it is removed.
    dropped: set[str] = set()
    # Secrets (docs/security.md): sensitive files are never read, whatever .gitignore says
    # (one that was indexed before is removed); other files are redacted before storing.
    pol = policy(store)
    for path in candidates:
        if not pol.index_sensitive_files and sensitive_file(path) is not None:
            report.sensitive.append(path)
            dropped.add(path)
            continue
        st, note = _stat_file(root, path, budget.max_file_bytes)
        if st is None:
            if note:
                report.notes.append(FileNote(path, note))
            dropped.add(path)
            continue
        hit = cache.get(path)
        row = indexed.get(path)
        if (hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns and row is not None
                and hit[2] == row.blob.hex() and not (semantics and row.note == NO_SEMANTICS)):
            report.unchanged += 1
            new_cache[path] = hit
            continue
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns and hit[2] is None:
            report.unchanged += 1  # skipped before (binary, not UTF-8) and unchanged since
            new_cache[path] = hit
            continue
        if budget.max_files is not None and len(to_read) >= budget.max_files:
            over["files"] += 1
            continue
        if budget.max_bytes is not None and budget.bytes_used + st.st_size > budget.max_bytes:
            over["bytes"] += 1
            continue
        budget.bytes_used += st.st_size
        to_read.append((path, st))
    if report.sensitive:
        shown = ", ".join(report.sensitive[:5]) + (f" and {len(report.sensitive) - 5} more"
                                                  if len(report.sensitive) > 5 else "")
        report.dropped.append(f"{len(report.sensitive)} sensitive files not read (they hold "
                              f"credentials; [security] index_sensitive_files): {shown}")
    if over["files"]:
        report.dropped.append(f"{over['files']} files not read: over [ingestion] "
                              f"max_files_per_step = {budget.max_files}")
    if over["bytes"]:
        key = "max_bytes_per_step" if budget.max_files is not None else "max_index_bytes"
        report.dropped.append(f"{over['bytes']} files not read: over [ingestion] {key} = "
                              f"{budget.max_bytes}")
    texts: list[tuple[str, bytes, str]] = []
    blobs: dict[str, ObjectId] = {}
    for path, st in to_read:
        try:
            data = fsio.read_regular(root / path, budget.max_file_bytes)
        except (OSError, UnsafePath) as exc:
            report.notes.append(FileNote(path, f"cannot be read ({exc.__class__.__name__}): skipped"))
            continue
        report.read += 1
        text, note = _sniff(path, data)
        racy = started - st.st_mtime_ns < _RACY_NS
        if text is None:
            report.notes.append(FileNote(path, note or "skipped"))
            dropped.add(path)
            if not racy:
                new_cache[path] = [st.st_size, st.st_mtime_ns, None]
            continue
        clean = guard(store, "files", text, what=path, path=path, policy_=pol)
        if clean is not text:  # what is stored is the redacted text: blob, symbols, chunks
            text, data = clean, clean.encode("utf-8")
            report.redacted.append(path)
        blob = object_id_of(KIND_BLOB, data)
        if not racy:
            new_cache[path] = [st.st_size, st.st_mtime_ns, blob.hex()]
        row = indexed.get(path)
        if row is not None and row.blob == blob and not (semantics and row.note == NO_SEMANTICS):
            report.deduplicated += 1
            continue
        blobs[path] = blob
        texts.append((path, data, text))
    module_map = _module_map(set(indexed) | {p for p, _, _ in texts}, modules) \
        if texts and semantics else {}
    counts = {"low": 0, "budget": 0}
    records: list[KnowledgeRecord] = []
    versions = _prepare_versions(store, texts, blobs, module_map, semantics, budget, counts, jobs,
                                 progress)
    for version in versions:
        if version.note and version.note != NO_SEMANTICS:
            report.notes.append(FileNote(version.path, version.note))
    if counts["low"]:
        report.dropped.append(f"{counts['low']} low-confidence edges not stored: below "
                              f"[ingestion] min_confidence = {budget.min_confidence}")
    if counts["budget"]:
        report.dropped.append(f"{counts['budget']} edges not stored: over [ingestion] "
                              f"max_edges_per_step = {budget.max_edges}")
    listed = set(candidates)
    # Vanished (a tracked file deleted without `git rm` is still listed), or no longer
    # indexable; a file that became ignored stays as it was indexed.
    gone = sorted(p for p in indexed if removals and _in_scope(p, scope)
                  and (p in dropped or (p not in listed and not os.path.lexists(root / p))))
    report.work_commit = _write(store, versions, gone, indexed, records, report,
                                log_line=log_line)
    for path in gone:
        new_cache.pop(path, None)
    if scope is None or scope:  # a partial run keeps the other entries
        new_cache = {**{p: e for p, e in cache.items() if p not in listed}, **new_cache}
    if new_cache != cache or modules != known_modules:
        _save_cache(store, new_cache, {p: m for p, m in modules.items() if p in new_cache})
    return report


def _in_scope(path: str, scope: list[str] | None) -> bool:
    if scope is None:
        return False
    return not scope or any(path == s or path.startswith(s + "/") for s in scope)


def _read_line(report: IngestReport) -> str:
    """The log line of a ``ctx add file`` run that stored something."""
    shown = ", ".join(report.written[:3]) + (f" and {len(report.written) - 3} more"
                                             if len(report.written) > 3 else "")
    return f"Read {shown} ({report.symbols} symbols, {report.relations} relations)"


def _write(store: Store, versions: list[_Version], gone: list[str],
           indexed: dict[str, Any], records: list[KnowledgeRecord],
           report: IngestReport, *, log_line: bool = False) -> str | None:
    """Write every object, then one batch and one work commit (one STAGE move).

    With ``log_line`` (``ctx add file``), today's narrative log gets one line naming the
    files, written under the transaction's lock after the work commit, before STAGE moves.
    """
    from ctxstore.staging import stage_records

    if not versions and not gone:
        return None
    with store.transaction() as tx:
        for v in versions:
            if isinstance(v.version, FileVersion):
                tx.put_blob(v.data)
                vid = tx.put(v.version)
            elif v.written is not None:  # a worker wrote both
                tx.adopt(v.blob, KIND_BLOB, v.data)
                vid = tx.adopt(v.written, KIND_TYPED, v.version)
            else:
                tx.put_blob(v.data)
                vid = tx.put_payload(v.version)
            row = indexed.get(v.path)
            records.append(FileRecord(path=v.path, version=vid, blob=v.blob,
                                      updated_at=next_stamp(row.stamp if row else None),
                                      prev=ObjectId(row.version) if row else None))
            report.written.append(v.path)
            report.symbols += v.symbols
            report.relations += v.relations
        for path in gone:
            row = indexed[path]
            records.append(FileRemoved(path=path, at=next_stamp(row.stamp),
                                       prev=ObjectId(row.version)))
        report.removed = list(gone)
        what = f"index {len(versions)} files" + (f", {len(gone)} removed" if gone else "")
        res = stage_records(store, records, message=what, step_kind="file_read", tx=tx)
        if log_line:  # before the transaction moves STAGE; the key names the session
            from ctxstore.narrative.entries import log_event

            log_event(store, "file-read", _read_line(report), res.session_id)
    return res.work_commit.hex()
