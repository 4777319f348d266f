"""Stage "extract": symbols and relations of the changed files, in forked workers when it pays.

``prepare_versions`` turns each file read into its ``file_version`` (``resolve``) and the
code rows of that version (``index.code.prepare_rows``: chunks, retrieval tokens, edges),
in this process for a small run and in ``jobs`` forked workers for a large one (docs/code.md
"Processes"). Each worker gets a share of the files balanced by size, inherits them from the
parent (nothing is sent to a worker) and streams one record per file back through a pipe as
it goes; the parent hands each to ``sink`` as it arrives, so the store stage writes the index
while the workers still parse. Nothing here writes.

It must not print or run SQL.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from ctxstore.code.ingest.resolve import Budget, Extracted, ModuleLookup, build_version, names_needed
from ctxstore.code.languages import Confidence, Extraction, extractor_for
from ctxstore.errors import CtxError
from ctxstore.ids import ObjectId
from ctxstore.index.code import FileRows, prepare_rows
from ctxstore.objects import KIND_TYPED, object_id_of
from ctxstore.records import dataclass

__all__ = ["Prepared", "Progress", "Sink", "default_jobs", "extract", "prepare_versions",
           "shares", "POOL_MIN_BYTES"]

POOL_MIN_BYTES = 256 << 10  # less source than this is extracted in-process (forking costs)
_MAX_DEFAULT_JOBS = 8

Progress = Callable[[int, int], None]


@dataclass
class Prepared:
    """A changed file's new version and its code rows.

    ``payload`` is the version's encoding (its id is ``rows.version``), kept only when the
    version is to be stored as an object (``ctx add file``).
    """

    path: str
    data: bytes
    blob: ObjectId
    rows: FileRows
    payload: bytes | None
    note: str | None
    symbols: int
    relations: int


Sink = Callable[[Prepared], None]


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
# index goes to a worker): (files, blob ids, module map, the run's gates).
_SHARED: tuple[list[tuple[str, bytes, str]], dict[str, ObjectId], dict[str, list[str]],
               Budget] | None = None


def _prepare(path: str, data: bytes, blob: ObjectId, text: str, semantics: bool,
             module_map: Mapping[str, list[str]], budget: Budget, counts: dict[str, int],
             keep_payload: bool) -> Prepared:
    """One changed file extracted, made a version, and its rows prepared."""
    from ctxstore.model import encode_typed

    language, ext = extract(path, text, semantics, budget.min_confidence)
    if ext is not None and isinstance(module_map, ModuleLookup):
        module_map.need(names_needed(ext))
    fv, n_symbols, n_relations = build_version(
        Extracted(path, data, blob, text, language, ext), module_map, budget, counts)
    payload = encode_typed(fv)
    rows = prepare_rows(fv, text, object_id_of(KIND_TYPED, payload))
    return Prepared(path, data, blob, rows, payload if keep_payload else None, fv.note,
                    n_symbols, n_relations)


def _prepare_in_worker(index: int) -> tuple[Prepared, int]:
    """One file prepared in a pool worker, with the low-confidence edges it dropped."""
    assert _SHARED is not None
    reads, blobs, module_map, budget = _SHARED
    path, data, text = reads[index]
    counts = {"low": 0, "budget": 0}
    prepared = _prepare(path, data, blobs[path], text, True, module_map, budget, counts, False)
    prepared.data = b""  # the parent has the bytes: not sent back
    return prepared, counts["low"]


def _can_fork() -> bool:
    """Whether forking workers is safe here: on Linux, with no other thread running.

    A lock another thread holds at the fork would stay held in the child forever.
    """
    import threading

    return sys.platform.startswith("linux") and threading.active_count() == 1


def prepare_versions(reads: list[tuple[str, bytes, str]], blobs: dict[str, ObjectId],
                     module_map: Mapping[str, list[str]], semantics: bool, budget: Budget,
                     counts: dict[str, int], jobs: int, progress: Progress | None,
                     sink: Sink, *, keep_payload: bool = False) -> None:
    """Extract every changed file, make its version and rows, and hand each to ``sink``.

    Workers are used for a run with semantics, more than ``POOL_MIN_BYTES`` of source and
    no per-step edge budget (which is spent file by file, in order); their results reach
    ``sink`` as they come. In-process, the files go in order.

    Args:
        reads: (path, bytes, text) of each changed file.
        blobs: Each path's blob id.
        module_map: Module name -> the files defining it (``resolve.module_map``; a
            ``resolve.ModuleLookup`` is asked file by file, in this process).
        semantics: Extract symbols and relations (else only the file's text is indexed).
        budget: The run's gates.
        counts: Where the dropped relations are counted (``low``, ``budget``).
        jobs: The processes to extract with.
        progress: Called with (files done, files to extract).
        sink: Called with each file prepared.
        keep_payload: Keep each version's encoding (to store it as an object).

    Raises:
        CtxError: if a worker process died (killed, out of memory).
    """
    total = sum(len(d) for _, d, _ in reads)
    if (jobs > 1 and semantics and budget.max_edges is None and total >= POOL_MIN_BYTES
            and len(reads) >= 2 * jobs and not keep_payload
            and not isinstance(module_map, ModuleLookup) and _can_fork()):
        assert isinstance(module_map, dict)
        _prepare_in_pool(reads, blobs, module_map, budget, counts, jobs, progress, sink)
        return
    for done, (path, data, text) in enumerate(reads, 1):
        sink(_prepare(path, data, blobs[path], text, semantics, module_map, budget, counts,
                      keep_payload))
        if progress is not None:
            progress(done, len(reads))


def _prepare_in_pool(reads: list[tuple[str, bytes, str]], blobs: dict[str, ObjectId],
                     module_map: dict[str, list[str]], budget: Budget, counts: dict[str, int],
                     jobs: int, progress: Progress | None, sink: Sink) -> None:
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
    import signal

    first: dict[str, str] = {}  # a file of each language, to build its parser here, once
    for path, _, _ in reads:
        extractor = extractor_for(path)
        if extractor is not None:
            first.setdefault(extractor.name, path)
    for path in first.values():  # the workers inherit the parsers and queries
        extract(path, "", True)
    children: dict[int, int] = {}  # read end -> pid
    received = [False] * len(reads)
    _SHARED = (reads, blobs, module_map, budget)  # no per-step edge budget here

    def take(index: int, result: tuple[Prepared, int]) -> None:
        prepared, low = result
        prepared.data = reads[index][1]
        counts["low"] += low
        received[index] = True
        sink(prepared)

    try:
        for share in shares([len(data) for _, data, _ in reads], jobs):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                os.close(read_end)
                _worker(share, write_end)
            os.close(write_end)
            children[read_end] = pid
        _collect(children, len(reads), take, progress)
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
    if died or not all(received):
        raise CtxError("an extraction process died (killed, or out of memory); the files it "
                       "had not sent were not indexed", hint="ctx index --jobs 1")


def shares(sizes: Sequence[int], jobs: int) -> list[list[int]]:
    """Indices of ``sizes`` in ``jobs`` shares of about equal total, each largest first."""
    out: list[list[int]] = [[] for _ in range(jobs)]
    loads = [0] * jobs
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        least = loads.index(min(loads))
        out[least].append(index)
        loads[least] += sizes[index] + 1
    return [share for share in out if share]


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


def _collect(children: dict[int, int], total: int, take: Callable[[int, Any], None],
             progress: Progress | None) -> None:
    """Hand every worker's records to ``take`` as they come, until each pipe ends."""
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
                    take(index, result)
                    done += 1
                    if progress is not None:
                        progress(done, total)
