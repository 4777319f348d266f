"""Backfill: index existing transcripts into memory (spec 004 §6.4).

Given files or directories, every ``*.jsonl`` below is indexed with the same cursors the hooks
use, so a backfill is idempotent (a second run reads nothing new) and resumable (an interrupted
run continues where its last batch committed). Small files are indexed in runs of about
``BATCH_BYTES`` per transaction (a commit costs more than a small transcript); a crash loses at
most the run in progress. Subagent transcripts (``<session>/subagents/agent-*.jsonl``) are
included; their turns are marked as sidechains. Links are not followed into directories; a path
that is not a regular file or a directory is noted and skipped.

``--all`` reads ``~/.claude/projects`` (resolved by the CLI), which holds every project's
sessions: ``project_transcripts`` keeps those of this project only — a transcript whose
working directory (its lines' ``cwd``) is the project's work tree or below it, or, for one
that names none, whose folder is the work tree's name as Claude Code writes it (every
character but letters and digits as ``-``) — and counts the others it passed over.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

from ctxstore.memory.db import MemoryDB
from ctxstore.memory.index import BATCH_BYTES, TURN_TOOL_BUDGET, FileReport, Where, cursor_key, index_file

__all__ = ["BackfillReport", "ProjectSelection", "find_transcripts", "project_transcripts",
           "project_dir_name", "transcript_cwd", "backfill"]

_MAX_FILES = 200_000
# A transcript's working directory is read from its first lines: at most this many bytes.
_CWD_BYTES = 256 * 1024
# Claude Code cuts a project folder's name to this many characters (and appends a hash).
_DIR_NAME_CHARS = 200


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


class ProjectSelection(NamedTuple):
    """The transcripts of the wanted projects, and what was passed over.

    Attributes:
        paths: The transcripts to index.
        skipped_files: Transcripts of other projects left out.
        skipped_projects: The folders (under ``projects/``) they were in, sorted.
        notes: Paths that could not be read.
    """

    paths: list[Path]
    skipped_files: int
    skipped_projects: list[str]
    notes: list[str]


def project_dir_name(path: str | os.PathLike[str]) -> str:
    """The folder name Claude Code gives a working directory's sessions under ``projects/``.

    Every character but an ASCII letter or digit becomes ``-`` (``/home/me/repo`` ->
    ``-home-me-repo``). The encoding is lossy; ``project_transcripts`` trusts a transcript's
    own ``cwd`` first.
    """
    return re.sub(r"[^A-Za-z0-9]", "-", os.fspath(path))


def transcript_cwd(path: Path) -> str | None:
    """The working directory a transcript's first lines record (``cwd``), or None.

    Reads at most ``_CWD_BYTES``; a line cut there, or one that is not a JSON object, is
    passed over.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(_CWD_BYTES)
    except OSError:
        return None
    lines = head.split(b"\n")
    if len(head) == _CWD_BYTES:
        lines = lines[:-1]  # the last one is cut
    for raw in lines:
        if b'"cwd"' not in raw:
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        cwd = entry.get("cwd") if isinstance(entry, dict) else None
        if isinstance(cwd, str) and cwd.strip() and "\x00" not in cwd:
            return cwd
    return None


def _within(cwd: str, roots: list[str]) -> bool:
    here = os.path.normpath(cwd)
    return any(here == root or here.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _folder_matches(name: str, roots: list[str]) -> bool:
    for root in roots:
        mine = project_dir_name(root)
        if name == mine or (len(mine) > _DIR_NAME_CHARS and name.startswith(mine[:_DIR_NAME_CHARS])):
            return True
    return False


def project_transcripts(projects_dir: Path, work_trees: Iterable[Path]) -> ProjectSelection:
    """The transcripts under ``projects_dir`` that belong to the given work trees.

    A transcript belongs when the ``cwd`` it records is one of ``work_trees`` or below one
    (Claude Code's ``cwd`` follows ``cd``); one that records none belongs when its project
    folder (the first level under ``projects_dir``) is a work tree's name as Claude Code
    writes it.

    Args:
        projects_dir: Claude Code's ``projects/`` folder.
        work_trees: The projects' work trees (absolute paths; their real paths count too).

    Returns:
        The selection, with the transcripts and project folders passed over.
    """
    roots: list[str] = []
    for tree in work_trees:
        for form in (os.path.abspath(tree), os.path.realpath(tree)):
            if os.path.normpath(form) not in roots:
                roots.append(os.path.normpath(form))
    files, notes = find_transcripts([projects_dir])
    kept: list[Path] = []
    skipped = 0
    folders: set[str] = set()
    for path, _ in files:
        try:
            folder = path.relative_to(projects_dir).parts[0]
        except (ValueError, IndexError):
            folder = ""
        cwd = transcript_cwd(path)
        if _within(cwd, roots) if cwd is not None else _folder_matches(folder, roots):
            kept.append(path)
        else:
            skipped += 1
            folders.add(folder)
    return ProjectSelection(kept, skipped, sorted(folders), notes)


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
             redact: Callable[[str], str] | None = None,
             where: Where | None = None, worktree: Path | None = None) -> BackfillReport:
    """Index every transcript at or below ``paths``.

    Args:
        db: The open memory.
        paths: Transcript files or directories holding them.
        progress: Called with (bytes done, bytes in all) as batches commit.
        tool_budget: Characters of tool calls and results kept per turn (0: none).
        redact: What memory stores of a text (``index.transcript_redactor``); the built-in
            rules' redaction when None.
        where: The branch and commit each idea records (``index.history_position``).
        worktree: The project's work tree (the files a turn's tool calls read or wrote in it
            go on its ideas; ``index.index_file``).

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
                report = _index_one(db, path, step, tool_budget, redact, where, worktree)
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
               tool_budget: int, redact: Callable[[str], str] | None,
               where: Where | None = None, worktree: Path | None = None) -> FileReport:
    """``index_file``, or a report with a note when the file cannot be indexed.

    Every line is type-checked when it is read, and a line that still cannot be taken is
    skipped; this is the net under that, so one file never stops the rest of a backfill
    (``--all``). What it had committed stays; its failed batch was rolled back.
    """
    try:
        return index_file(db, path, progress=progress, tool_budget=tool_budget, redact=redact,
                          where=where, worktree=worktree)
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
