"""Stage "extract": symbols and relations of the changed files, in forked workers when it pays.

``prepare_versions`` turns each file read into its ``file_version`` (``resolve``), in this
process for a small run and in ``jobs`` forked workers for a large one (docs/code.md
"Processes"): each worker gets a share of the files balanced by size, inherits them from
the parent (nothing is sent to a worker) and streams one record per file back through a
pipe, the version already encoded. A worker also writes its files' blobs and versions into
the staging area, so the file creations run beside the other workers' parsing; the parent
takes them into its one transaction (``Transaction.adopt``).

It must not print or run SQL.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ctxstore.code.ingest.resolve import Budget, Extracted, build_version
from ctxstore.code.languages import Confidence, Extraction, extractor_for
from ctxstore.errors import CtxError, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.model.code import FileVersion
from ctxstore.objects import KIND_BLOB, KIND_TYPED, ObjectStore
from ctxstore.records import dataclass
from ctxstore.repo import Store

__all__ = ["Prepared", "Progress", "default_jobs", "extract", "prepare_versions", "shares",
           "POOL_MIN_BYTES"]

POOL_MIN_BYTES = 256 << 10  # less source than this is extracted in-process (forking costs)
_MAX_DEFAULT_JOBS = 8

Progress = Callable[[int, int], None]


@dataclass
class Prepared:
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


def extract(path: str, text: str, semantics: bool,
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
               Budget, ObjectStore | None] | None = None


def _build(path: str, data: bytes, blob: ObjectId, text: str, semantics: bool,
           module_map: dict[str, list[str]], budget: Budget,
           counts: dict[str, int]) -> tuple[FileVersion, int, int]:
    """One changed file extracted and made a version, with its symbol and relation counts."""
    language, ext = extract(path, text, semantics, budget.min_confidence)
    return build_version(Extracted(path, data, blob, text, language, ext), module_map, budget, counts)


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


def prepare_versions(store: Store, reads: list[tuple[str, bytes, str]],
                      blobs: dict[str, ObjectId], module_map: dict[str, list[str]],
                      semantics: bool, budget: Budget, counts: dict[str, int], jobs: int,
                      progress: Progress | None) -> list[Prepared]:
    """Extract and build every changed file's version, in forked workers when it pays.

    Workers are used for a run with semantics, more than ``POOL_MIN_BYTES`` of source and
    no per-step edge budget (which is spent file by file, in order). Each returns the
    encoded version (bytes), not the objects: sending millions of small records back
    between processes would cost more than building them. Results keep the files' order.

    Raises:
        CtxError: if a worker process died (killed, out of memory).
    """
    total = sum(len(d) for _, d, _ in reads)
    if (jobs > 1 and semantics and budget.max_edges is None and total >= POOL_MIN_BYTES
            and len(reads) >= 2 * jobs and _can_fork()):
        return _prepare_in_pool(store, reads, blobs, module_map, budget, counts, jobs, progress)
    out: list[Prepared] = []
    for done, (path, data, text) in enumerate(reads, 1):
        fv, n_symbols, n_relations = _build(path, data, blobs[path], text, semantics, module_map,
                                            budget, counts)
        out.append(Prepared(path, data, blobs[path], fv, fv.note, n_symbols, n_relations))
        if progress is not None:
            progress(done, len(reads))
    return out


def _prepare_in_pool(store: Store, reads: list[tuple[str, bytes, str]],
                     blobs: dict[str, ObjectId], module_map: dict[str, list[str]],
                     budget: Budget, counts: dict[str, int], jobs: int,
                     progress: Progress | None) -> list[Prepared]:
    """``prepare_versions`` in ``jobs`` forked workers (see there).

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
        extract(path, "", True)
    results: list[Any] = [None] * len(reads)
    children: dict[int, int] = {}  # read end -> pid
    _SHARED = (reads, blobs, module_map, budget, objects)  # no per-step edge budget here
    try:
        for share in shares([len(data) for _, data, _ in reads], jobs):
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
    out: list[Prepared] = []
    for (path, data, _), (payload, written, note, n_symbols, n_relations, low) in \
            zip(reads, results, strict=True):
        counts["low"] += low
        out.append(Prepared(path, data, blobs[path], payload, note, n_symbols, n_relations,
                            written))
    return out


def shares(sizes: Sequence[int], jobs: int) -> list[list[int]]:
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
