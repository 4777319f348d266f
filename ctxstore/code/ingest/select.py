"""Stages 2 and 3 of a code-index run (``code.ingest.run``): select the files to read, read them.

**select**: only the listed files whose size or modification time changed since they were
indexed (the stat cache on the code index's own rows); sensitive files, links out of the
tree, special files and files over ``max_file_bytes`` are left out with a note. **read**: each
selected file read, sniffed (binary, not UTF-8), passed through the secret scanner and
hashed; a file whose content is the one indexed is not read into the index again (dedup).
"""

from __future__ import annotations

import os
import stat
from dataclasses import field
from pathlib import Path

from ctxstore import fsio
from ctxstore.code.ingest.report import FileNote, IngestReport, utf8_path
from ctxstore.code.ingest.resolve import NO_SEMANTICS, Budget
from ctxstore.errors import UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.index.code import StatRow
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.security.guard import guard, policy
from ctxstore.security.secrets import sensitive_file

__all__ = ["Reads", "Selection", "read_selected", "select", "sniff", "stat_file"]

_SNIFF_BYTES = 8192
_RACY_NS = 2_000_000_000  # an mtime this close to the run may still change within its tick


# -- stage 2: select ---------------------------------------------------------------------------------

def stat_file(root: Path, path: str, max_file_bytes: int
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


@dataclass
class Selection:
    """What the select stage found: the files to read, and the listed files to drop."""

    to_read: list[tuple[str, os.stat_result]]
    dropped: set[str]  # listed, no longer indexable: an indexed version of one is removed
    deferred: list[str] = field(default_factory=list)  # over a budget: not read this run


def select(store: Store, candidates: list[str], rows: dict[str, StatRow],
            skipped: dict[str, tuple[int, int]], semantics: bool, budget: Budget,
            report: IngestReport, settled: frozenset[str] = frozenset()) -> Selection:
    """Stage 2: which ``candidates`` to read, which to drop, which a budget defers.

    ``settled`` are files Git says are as they were when indexed; every skip, drop and
    deferral is counted or noted in ``report``.
    """
    root = store.worktree
    pol = policy(store)
    sel = Selection([], set())
    over = {"files": 0, "bytes": 0}
    for path in candidates:
        if path in settled:  # Git says it is as it was when indexed (_quick_listing)
            report.unchanged += 1
            continue
        # Secrets (docs/security.md): sensitive files are never read, whatever .gitignore
        # says (one that was indexed before is removed).
        if not pol.index_sensitive_files and sensitive_file(path) is not None:
            report.sensitive.append(path)
            sel.dropped.add(path)
            continue
        st, note = stat_file(root, path, budget.max_file_bytes)
        if st is None:
            if note:
                report.notes.append(FileNote(path, note))
            sel.dropped.add(path)
            continue
        row = rows.get(path)
        if (row is not None and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns
                and not (semantics and row.note == NO_SEMANTICS)):
            report.unchanged += 1
            continue
        if skipped.get(path) == (st.st_size, st.st_mtime_ns):
            report.unchanged += 1  # skipped before (binary, not UTF-8) and unchanged since
            continue
        if budget.max_files is not None and len(sel.to_read) >= budget.max_files:
            over["files"] += 1
            sel.deferred.append(path)
            continue
        if budget.max_bytes is not None and budget.bytes_used + st.st_size > budget.max_bytes:
            over["bytes"] += 1
            sel.deferred.append(path)
            continue
        budget.bytes_used += st.st_size
        sel.to_read.append((path, st))
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
    return sel


# -- stage 3: read ---------------------------------------------------------------------------------

def sniff(data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for UTF-8 text, (None, note) otherwise."""
    if b"\0" in data[:_SNIFF_BYTES]:
        return None, "binary (a NUL byte in the first 8 KiB): skipped"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start}): skipped"


@dataclass
class Reads:
    """What the read stage found."""

    texts: list[tuple[str, bytes, str]]  # changed files: (path, bytes, text)
    blobs: dict[str, ObjectId]
    stats: dict[str, tuple[int, int] | None]  # for the stat cache (None: racy, read again)
    same: list[str]  # read again, content as indexed
    skipped: list[str]  # read, not indexable (binary, not UTF-8)


def read_selected(store: Store, selection: Selection, rows: dict[str, StatRow], semantics: bool,
          budget: Budget, report: IngestReport, started: int) -> Reads:
    """Stage 3: read, sniff, scan and hash each selected file (``started``: the run's clock)."""
    root = store.worktree
    pol = policy(store)
    out = Reads([], {}, {}, [], [])
    for path, st in selection.to_read:
        try:
            data = fsio.read_regular(root / path, budget.max_file_bytes)
        except (OSError, UnsafePath) as exc:
            report.notes.append(FileNote(path, f"cannot be read ({exc.__class__.__name__}): skipped"))
            continue
        report.read += 1
        racy = started - st.st_mtime_ns < _RACY_NS
        out.stats[path] = None if racy else (st.st_size, st.st_mtime_ns)
        text, note = sniff(data)
        if text is None:
            report.notes.append(FileNote(path, note or "skipped"))
            selection.dropped.add(path)
            out.skipped.append(path)
            continue
        clean = guard(store, "files", text, what=path, path=path, policy_=pol)
        if clean is not text:  # what is stored is the redacted text: blob, symbols, chunks
            text, data = clean, clean.encode("utf-8")
            report.redacted.append(path)
        blob = object_id_of(KIND_BLOB, data)
        row = rows.get(path)
        if row is not None and row.blob == blob and not (semantics and row.note == NO_SEMANTICS):
            report.deduplicated += 1
            out.same.append(path)
            continue
        out.blobs[path] = blob
        out.texts.append((path, data, text))
    return out
