"""Which files of the work tree code ingestion looks at.

In a Git work tree the list is Git's own (``git ls-files -co --exclude-standard -z``:
tracked and untracked files, ``.gitignore``, ``.git/info/exclude`` and the global
excludes honoured); elsewhere a pure-Python walk honours ``.gitignore`` files (blank
lines and ``#`` comments, ``!`` negation, a trailing ``/`` for directories, a ``/``
anchoring the pattern to its directory, ``*``, ``?`` and ``**``). Either way
``[ingestion] ignore_globs`` is applied on top, and ``.ctx/`` and ``.git/`` are never
listed. Paths are repository-relative POSIX paths. It only reads: no store, no index.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import field
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import UnsafePath
from ctxstore.records import dataclass

__all__ = ["WalkResult", "walk_tree", "glob_regex", "matches_any"]

_ALWAYS_SKIPPED = (".ctx", ".git")


@dataclass
class WalkResult:
    """The files found and how they were found.

    Attributes:
        files: Repository-relative POSIX paths, sorted.
        source: ``"git"`` or ``"walk"``.
    """

    files: list[str] = field(default_factory=list)
    source: str = "walk"


def glob_regex(pattern: str, *, below: bool = True) -> re.Pattern[str]:
    """Compile a path glob: ``*`` and ``?`` stop at ``/``, ``**`` crosses it.

    A pattern without ``/`` (other than a trailing one) matches a name at any depth.

    Args:
        pattern: The glob (``target/**``, ``*.min.js``, ``docs/*.md``).
        below: A path below a matching directory matches too.

    Returns:
        A regular expression over repository-relative POSIX paths.
    """
    pat = pattern.strip().rstrip("/")
    anchored = "/" in pat
    pat = pat.lstrip("/")
    out = []
    i = 0
    while i < len(pat):
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif pat[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pat[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pat[i]))
            i += 1
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(f"{prefix}{''.join(out)}{'(?:/.*)?' if below else ''}", re.DOTALL)


def matches_any(path: str, patterns: Sequence[re.Pattern[str]]) -> bool:
    """Whether a repository-relative path matches one of the compiled globs."""
    return any(p.fullmatch(path) for p in patterns)


def walk_tree(root: Path, *, ignore_globs: Iterable[str] = (),
              under: Sequence[str] = ()) -> WalkResult:
    """List the files to ingest below ``root`` (the directory holding ``.ctx/``).

    Args:
        root: The work tree's root.
        ignore_globs: ``[ingestion] ignore_globs``.
        under: Only files at or below these repository-relative paths (all when empty).

    Returns:
        The files, sorted; symlinks are listed (the caller decides about them).
    """
    patterns = [glob_regex(g) for g in ignore_globs if g.strip()]
    listed = _git_files(root, under)
    result = WalkResult(source="git") if listed is not None else WalkResult()
    if listed is None:
        listed = _walk_files(root)
    scope = [u.strip("/") for u in under if u.strip("/") not in ("", ".")]
    result.files = sorted(
        p for p in set(listed)
        if p.split("/", 1)[0] not in _ALWAYS_SKIPPED and not matches_any(p, patterns)
        and (not scope or any(p == s or p.startswith(s + "/") for s in scope)))
    return result


def _git_files(root: Path, under: Sequence[str]) -> list[str] | None:
    """Git's list of tracked and not-ignored untracked files, or None outside a work tree."""
    try:  # outside a work tree (or inside .git/) ls-files fails: one process, not two
        res = subprocess.run(["git", "-c", "core.quotepath=off", "ls-files", "-co",
                              "--exclude-standard", "-z", "--", *(under or ["."])],
                             cwd=root, capture_output=True, check=False)
    except (FileNotFoundError, OSError):
        return None
    if res.returncode != 0:
        return None
    out = res.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [p for p in out if p and not p.endswith("/")]


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _parse_gitignore(text: str) -> list[_Rule]:
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        if line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        pat = line.rstrip("/")
        if not pat:
            continue
        rules.append(_Rule(glob_regex(pat, below=False), negate, dir_only))
    return rules


def _ignored(rules: list[tuple[str, list[_Rule]]], rel: str, is_dir: bool) -> bool:
    verdict = False
    for base, rule_list in rules:
        if base and not rel.startswith(base + "/"):
            continue
        local = rel[len(base) + 1:] if base else rel
        for rule in rule_list:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.fullmatch(local):
                verdict = not rule.negate
    return verdict


_GITIGNORE_LIMIT = 1 << 20  # bytes of a .gitignore read; the rest is not looked at


def _walk_files(root: Path) -> list[str]:
    """The pure-Python walk for a tree that is not a Git work tree (ignored folders are not entered)."""
    out: list[str] = []
    stack: list[tuple[Path, str, list[tuple[str, list[_Rule]]]]] = [(root, "", [])]
    while stack:
        folder, rel, rules = stack.pop()
        try:
            try:  # bounded, regular files only, never through a link
                text = fsio.read_regular(folder / ".gitignore", _GITIGNORE_LIMIT)[:_GITIGNORE_LIMIT]
                rules = [*rules, (rel, _parse_gitignore(text.decode("utf-8", "replace")))]
            except (FileNotFoundError, UnsafePath):
                pass
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            child = f"{rel}/{entry.name}" if rel else entry.name
            if not rel and entry.name in _ALWAYS_SKIPPED:
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if _ignored(rules, child, is_dir):
                continue
            if is_dir:
                stack.append((Path(entry.path), child, rules))
            else:
                out.append(child)
    return out
