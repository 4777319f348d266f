"""Code ingestion: ``ctx add file`` and ``ctx index`` (spec 002 §7.2.1, §13.2.2, §16.4).

A run goes through named stages:

1. **list**: the candidate files (``code.walk``, or the paths given);
2. **select**: only those whose size or modification time changed since the last run are
   read (the stat cache in ``.ctx/local/code-stat.json``: path -> size, mtime, blob id, per
   clone); sensitive files, links out of the tree, special files and files over
   ``max_file_bytes`` are left out with a note;
3. **read**: each selected file read, sniffed (binary, not UTF-8), passed through the secret
   scanner and hashed; a file whose content is the one indexed is not stored again (dedup);
4. **extract** (``extract``): symbols and relations, in forked workers for a large run;
5. **resolve** (``resolve``): endpoints resolved against every indexed file plus the files of
   the run, each file made a ``file_version``;
6. **store** (``store``): every object of the run, then ONE work commit (step ``file_read``).

Gates (``[ingestion]``, docs/code.md "Gates"): ``ctx add file`` honours the per-step budgets
of files, bytes and edges; ``ctx index``, a bulk command, is exempt from those and bounded
instead by ``max_index_bytes`` a run; every run honours ``max_file_bytes`` a file and drops
edges below ``min_confidence``. Each drop is one line of ``IngestReport.dropped``.

It must not print or run SQL (``index.code`` reads the index).
"""

from __future__ import annotations

import gc
import json
import os
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore.code.ingest.extract import Progress, default_jobs, prepare_versions
from ctxstore.code.ingest.report import FileNote, IngestReport, utf8_path
from ctxstore.code.ingest.resolve import NO_SEMANTICS, Budget, budget_of, module_map
from ctxstore.code.ingest.store import write_run
from ctxstore.code.walk import walk_tree
from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.model.knowledge import KnowledgeRecord
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.repo import Store
from ctxstore.security.guard import guard, policy
from ctxstore.security.secrets import sensitive_file

__all__ = ["index_tree", "add_files", "repo_path", "STAT_CACHE"]

STAT_CACHE = "code-stat.json"
_SNIFF_BYTES = 8192
_RACY_NS = 2_000_000_000  # an mtime this close to the run may still change within its tick


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



# -- the stat cache (per clone, .ctx/local/) -----------------------------------------------------

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
        folder = fsio.open_dir_under(store.root, store.root / "local", create=True,
                                     durable=False)
        try:
            fsio.write_new_file_in(folder, STAT_CACHE, data, mode=0o644)
        finally:
            os.close(folder)
    except (OSError, UnsafePath):
        pass  # a cache: the next run reads the files again



# -- the run -------------------------------------------------------------------------------------

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
                         under=paths,
                         build_outputs=bool(store.config.get("ingestion", "index_build_outputs")))
        scope = [p.strip("/") for p in paths if p.strip("/")]
        return _ingest(store, walk.files, scope=scope, removals=True, semantics=True,
                       budget=budget_of(store.config, bulk=True),
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
                   semantics=semantics, budget=budget_of(store.config, bulk=False), jobs=1,
                   progress=None, log_line=True)


def _stat_file(root: Path, path: str, max_file_bytes: int
               ) -> tuple[os.stat_result | None, str | None]:
    """(stat, None) for a regular file to consider, (None, note or None) to skip it."""
    try:
        st = os.lstat(f"{root}/{path}")  # a string, not a Path: one call per file of the tree
    except OSError:
        return None, None  # vanished since the listing
    if not utf8_path(path):  # objects hold UTF-8 names: Git keeps it, ctx cannot name it
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
            semantics: bool, budget: Budget, jobs: int, progress: Progress | None,
            log_line: bool = False) -> IngestReport:
    with _no_collections():
        return _ingest_run(store, candidates, scope=scope, removals=removals,
                           semantics=semantics, budget=budget, jobs=jobs, progress=progress,
                           log_line=log_line)


def _ingest_run(store: Store, candidates: list[str], *, scope: list[str] | None, removals: bool,
                semantics: bool, budget: Budget, jobs: int, progress: Progress | None,
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
    modules_of_run = module_map(set(indexed) | {p for p, _, _ in texts}, modules) \
        if texts and semantics else {}
    counts = {"low": 0, "budget": 0}
    records: list[KnowledgeRecord] = []
    versions = prepare_versions(store, texts, blobs, modules_of_run, semantics, budget, counts, jobs,
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
    report.work_commit = write_run(store, versions, gone, indexed, records, report,
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



def _sniff(path: str, data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for UTF-8 text, (None, note) otherwise."""
    if b"\0" in data[:_SNIFF_BYTES]:
        return None, "binary (a NUL byte in the first 8 KiB): skipped"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start}): skipped"
