"""Backfill: index existing transcripts into memory (spec 004 §6.4).

Given files or directories (``--all``: ``~/.claude/projects``, resolved by the CLI), every
``*.jsonl`` below is indexed with the same cursors the hooks use, so a backfill is idempotent
(a second run reads nothing new) and resumable (an interrupted run continues where its last batch
committed). Small files are indexed in runs of about ``BATCH_BYTES`` per transaction (a commit
costs more than a small transcript); a crash loses at most the run in progress. Subagent
transcripts (``<session>/subagents/agent-*.jsonl``) are included; their turns are marked as
sidechains. Links are not followed into directories; a path that is not a
regular file or a directory is noted and skipped.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

from ctxstore.memory.db import MemoryDB
from ctxstore.memory.index import BATCH_BYTES, TURN_TOOL_BUDGET, FileReport, cursor_key, index_file

__all__ = ["BackfillReport", "find_transcripts", "backfill"]

_MAX_FILES = 200_000


class BackfillReport(NamedTuple):
    """What a backfill did: per-file reports and notes for paths passed over."""

    files: list[FileReport]
    notes: list[str]

    @property
    def bytes(self) -> int:
        """Transcript bytes read."""
        return sum(f.bytes for f in self.files)

    @property
    def turns(self) -> int:
        """Turns created."""
        return sum(f.turns for f in self.files)

    @property
    def ideas(self) -> int:
        """Ideas extracted."""
        return sum(f.ideas for f in self.files)


def find_transcripts(paths: Iterable[Path]) -> tuple[list[tuple[Path, int]], list[str]]:
    """The ``*.jsonl`` files at or below ``paths`` with their sizes, and notes on the rest.

    A file named directly is taken whatever its name; directories are walked without following
    links.
    """
    found: dict[str, tuple[Path, int]] = {}
    notes: list[str] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as exc:
            notes.append(f"{path}: {exc.strerror or exc}")
            continue
        if stat.S_ISREG(st.st_mode):
            found.setdefault(os.path.abspath(path), (path, st.st_size))
        elif stat.S_ISDIR(st.st_mode):
            for root, dirs, files in os.walk(path, onerror=lambda e: notes.append(str(e))):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith(".jsonl") and len(found) < _MAX_FILES:
                        _add(found, Path(root) / name)
        else:
            notes.append(f"{path}: not a regular file or a directory")
    return sorted(found.values()), notes


def _add(found: dict[str, tuple[Path, int]], path: Path) -> None:
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        found.setdefault(os.path.abspath(path), (path, st.st_size))


def backfill(db: MemoryDB, paths: Iterable[Path], *,
             progress: Callable[[int, int], None] | None = None,
             tool_budget: int = TURN_TOOL_BUDGET,
             redact: Callable[[str], str] | None = None) -> BackfillReport:
    """Index every transcript at or below ``paths``.

    Args:
        db: The open memory.
        paths: Transcript files or directories holding them.
        progress: Called with (bytes done, bytes in all) as batches commit.
        tool_budget: Characters of tool calls and results kept per turn (0: none).
        redact: What memory stores of a text (``index.transcript_redactor``); the built-in
            rules' redaction when None.

    Returns:
        The report.
    """
    files, notes = find_transcripts(paths)
    total = sum(size for _, size in files)
    done = 0
    reports = []

    def step(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(min(done, total), total)

    for group in _groups(files):
        with db.batch() if len(group) > 1 else nullcontext():
            for path, size in group:
                before = done
                report = _index_one(db, path, step, tool_budget, redact)
                reports.append(report)
                if report.note:
                    notes.append(f"{report.path}: {report.note}")
                if report.skipped:
                    notes.append(f"{report.path}: {report.skipped} line(s) skipped (malformed, "
                                 "or over 8 MB)")
                done = before + size  # already-indexed bytes count as done
                if progress is not None:
                    progress(min(done, total), total)
    return BackfillReport(reports, notes)


def _index_one(db: MemoryDB, path: Path, progress: Callable[[int], None],
               tool_budget: int, redact: Callable[[str], str] | None) -> FileReport:
    """``index_file``, or a report with a note when the file cannot be indexed.

    Every line is type-checked when it is read, and a line that still cannot be taken is
    skipped; this is the net under that, so one file never stops the rest of a backfill
    (``--all``). What it had committed stays; its failed batch was rolled back.
    """
    try:
        return index_file(db, path, progress=progress, tool_budget=tool_budget, redact=redact)
    except (ValueError, TypeError, LookupError, RecursionError) as exc:
        return FileReport(cursor_key(path), 0, 0, 0, 0, False,
                          f"skipped: cannot be indexed ({type(exc).__name__}: {exc})"[:300])


def _groups(files: list[tuple[Path, int]]) -> Iterator[list[tuple[Path, int]]]:
    """Files in runs of about ``BATCH_BYTES``, each committed as one transaction.

    A commit costs more than indexing a small transcript; a crash loses at most the run in
    progress, which the next backfill reads again. A file of ``BATCH_BYTES`` or more is a run of
    its own (its batches commit one by one, so a long file resumes where it stopped).
    """
    group: list[tuple[Path, int]] = []
    pending = 0
    for path, size in files:
        if size >= BATCH_BYTES or pending + size > BATCH_BYTES:
            if group:
                yield group
            group, pending = [], 0
        group.append((path, size))
        pending += size
        if size >= BATCH_BYTES:
            yield group
            group, pending = [], 0
    if group:
        yield group
