"""Which files of the work tree code ingestion looks at.

In a Git work tree the list is Git's own (``git ls-files -co --exclude-standard -z``:
tracked and untracked files, ``.gitignore``, ``.git/info/exclude`` and the global
excludes honoured); elsewhere a pure-Python walk honours ``.gitignore`` files (blank
lines and ``#`` comments, ``!`` negation, a trailing ``/`` for directories, a ``/``
anchoring the pattern to its directory, ``*``, ``?`` and ``**``). Either way
``[ingestion] ignore_globs`` is applied on top, and ``.ctx/`` and ``.git/`` are never
listed. Build outputs are left out at any depth unless asked for (``build_outputs``):
what lies below a folder named as ``BUILD_OUTPUT_GLOBS`` names (``target/``,
``node_modules/``, ``dist/``, ``build/``, ...) or below a virtualenv (a folder holding a
``pyvenv.cfg``, whatever its name). Paths are repository-relative POSIX paths. It only
reads: no store, no index.

What Git says changed since a run (``git status`` on ctx's copy of Git's index, ``git
diff``, ``git ls-files -c``) is ``code.gitlist``'s, re-exported here.

Globs are matched by RE2 (``google-re2``), in time linear in the path whatever the globs: a
committed ``.gitignore`` or ``ignore_globs`` is untrusted, and Python's backtracking ``re``
took minutes for one name against ``*a*a*a*a*a*a*a*a*a*a*a*a*b``.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore import fsio
from ctxstore.code.gitlist import PRIVATE_INDEX, GitStatus, git_changed, git_status, git_tracked
from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.repo import Store

__all__ = ["BUILD_OUTPUT_GLOBS", "WalkResult", "GlobSet", "GitStatus", "walk_tree", "glob_source",
           "glob_regex", "matches_any", "build_output", "filter_paths", "git_status",
           "git_changed", "git_tracked", "repo_path", "PRIVATE_INDEX"]

_ALWAYS_SKIPPED = (".ctx", ".git")
# Folders whose files are what a build, a package manager or a tool wrote, at any depth
# (``[ingestion] index_build_outputs = true`` indexes them). Virtualenvs are told by their
# ``pyvenv.cfg`` instead of a name (``venv/`` is also the standard library's own package).
BUILD_OUTPUT_GLOBS = ("**/target/**", "**/node_modules/**", "**/dist/**", "**/build/**",
                      "**/__pycache__/**", "**/.venv/**", "**/.tox/**", "**/.nox/**",
                      "**/.eggs/**", "**/*.egg-info/**")
_VENV_MARKER = "pyvenv.cfg"
# Every glob of BUILD_OUTPUT_GLOBS is ``**/NAME/**``: a folder is an output when one of its
# names is NAME, or ends with what follows a leading ``*`` (``*.egg-info``). Told by string
# comparison, without compiling the globs (a run over a few changed files names a few folders).
_OUTPUT_NAMES = frozenset(g[3:-3] for g in BUILD_OUTPUT_GLOBS if "*" not in g[3:-3])
_OUTPUT_SUFFIXES = tuple(g[4:-3] for g in BUILD_OUTPUT_GLOBS if g[3:-3].startswith("*"))
assert all(g.startswith("**/") and g.endswith("/**") and "*" not in g[4:-3]
           for g in BUILD_OUTPUT_GLOBS)


@dataclass
class WalkResult:
    """The files found and how they were found.

    Attributes:
        files: Repository-relative POSIX paths, sorted.
        source: ``"git"`` or ``"walk"``.
    """

    files: list[str] = field(default_factory=list)
    source: str = "walk"


_PATTERN_CHARS = 4096
"""A glob longer than this never matches (no path is longer; RE2 would refuse some anyway)."""
_SURROGATES = re.compile("[\ud800-\udfff]")


def _text(value: str) -> str:
    """``value`` as RE2 can take it (UTF-8).

    A lone surrogate (a byte of a name that is not UTF-8, decoded with ``surrogateescape``)
    becomes U+FFFD: one character still, as its byte was.
    """
    try:
        value.encode()
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", value)
    return value


def _literal(char: str) -> str:
    return char if char.isalnum() or char == "_" else f"\\x{{{ord(char):x}}}"


def glob_source(pattern: str, *, below: bool = True) -> str:
    """The RE2 expression of a path glob: ``*`` and ``?`` stop at ``/``, ``**`` crosses it.

    A pattern without ``/`` (other than a trailing one) matches a name at any depth.

    Args:
        pattern: The glob (``target/**``, ``*.min.js``, ``docs/*.md``).
        below: A path below a matching directory matches too.

    Returns:
        An expression (RE2 syntax, every literal character but letters, digits and ``_``
        written as ``\\x{..}``) to match whole repository-relative POSIX paths.
    """
    pat = _text(pattern.strip().rstrip("/"))
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
            out.append(_literal(pat[i]))
            i += 1
    prefix = "" if anchored else "(?:.*/)?"
    return f"{prefix}{''.join(out)}{'(?:/.*)?' if below else ''}"


def _compile(source: str) -> Any:
    """An RE2 regex (matching in time linear in the text), or None if RE2 refuses it."""
    import re2  # only ingestion matches globs (untyped: pyproject ignores its imports)

    options = re2.Options()
    options.dot_nl = True  # a name may hold a newline
    options.log_errors = False
    try:
        return re2.compile(source, options)
    except re2.error:
        return None


class GlobSet:
    """Path globs, matched in time linear in the path (RE2: no backtracking).

    Python's ``re`` backtracks: ``*a*a*a*a*a*a*a*a*a*a*a*a*b`` against a name of 40 ``a`` took
    minutes. RE2 runs an automaton instead, so every path costs time proportional to its length
    whatever the globs. A glob RE2 refuses (too large, over ``_PATTERN_CHARS``) matches nothing.

    Args:
        globs: The globs, in order (a later one wins in ``last``).
        below: A path below a matching directory matches too.
    """

    def __init__(self, globs: Sequence[str], *, below: bool = True) -> None:
        sources = [glob_source(g, below=below) if len(g) <= _PATTERN_CHARS else None
                   for g in globs]
        self._each = [_compile(s) if s is not None else None for s in sources]
        kept = [s for s, rx in zip(sources, self._each, strict=True) if rx is not None]
        # One pass over the path answers "does any match" (the common "no" included).
        self._any = _compile("|".join(f"(?:{s})" for s in kept)) if len(kept) > 1 else None

    def __len__(self) -> int:
        return len(self._each)

    def fullmatch(self, path: str) -> bool:
        """Whether one of the globs matches the whole of ``path`` (as ``any``)."""
        return self.any(path)

    def any(self, path: str) -> bool:
        """Whether one of the globs matches the whole of ``path``."""
        path = _text(path)
        if self._any is not None:
            return self._any.fullmatch(path) is not None
        return any(rx is not None and rx.fullmatch(path) is not None for rx in self._each)

    def last(self, path: str, skip: Sequence[bool] = ()) -> int | None:
        """The index of the last glob matching ``path``, or None; ``skip[i]`` passes glob i over."""
        path = _text(path)
        if self._any is not None and self._any.fullmatch(path) is None:
            return None
        for index in range(len(self._each) - 1, -1, -1):
            rx = self._each[index]
            if rx is not None and not (index < len(skip) and skip[index]) \
                    and rx.fullmatch(path) is not None:
                return index
        return None


def glob_regex(pattern: str, *, below: bool = True) -> GlobSet:
    """One glob compiled (see ``GlobSet``); ``.fullmatch(path)`` tells whether it matches."""
    return GlobSet([pattern], below=below)


def matches_any(path: str, patterns: GlobSet) -> bool:
    """Whether a repository-relative path matches one of the compiled globs."""
    return patterns.any(path)


def walk_tree(root: Path, *, ignore_globs: Iterable[str] = (),
              under: Sequence[str] = (), build_outputs: bool = False) -> WalkResult:
    """List the files to ingest below ``root`` (the directory holding ``.ctx/``).

    Args:
        root: The work tree's root.
        ignore_globs: ``[ingestion] ignore_globs``.
        under: Only files at or below these repository-relative paths (all when empty).
        build_outputs: Also list build outputs (``[ingestion] index_build_outputs``).

    Returns:
        The files, sorted; symlinks are listed (the caller decides about them).
    """
    listed = _git_files(root, under)
    result = WalkResult(source="git") if listed is not None else WalkResult()
    if listed is None:
        listed = _walk_files(root)
    result.files = filter_paths(root, listed, ignore_globs=ignore_globs, under=under,
                                build_outputs=build_outputs)
    return result


def filter_paths(root: Path, paths: Iterable[str], *, ignore_globs: Iterable[str] = (),
                 under: Sequence[str] = (), build_outputs: bool = False) -> list[str]:
    """Of the paths Git (or the walk) lists, those ``walk_tree`` keeps, sorted.

    Args:
        root: The work tree's root.
        paths: Repository-relative paths as listed.
        ignore_globs: ``[ingestion] ignore_globs``.
        under: Only paths at or below these (all when empty).
        build_outputs: Also keep build outputs.

    Returns:
        The paths outside ``.ctx/`` and ``.git/``, not matching an ignore glob, in scope and
        (unless asked for) not build outputs.
    """
    patterns = GlobSet([g for g in ignore_globs if g.strip()])
    scope = [u.strip("/") for u in under if u.strip("/") not in ("", ".")]
    outputs = None if build_outputs else _BuildOutputs(root)
    return sorted(
        p for p in set(paths)
        if p.split("/", 1)[0] not in _ALWAYS_SKIPPED and not matches_any(p, patterns)
        and (not scope or any(p == s or p.startswith(s + "/") for s in scope))
        and (outputs is None or not outputs.holds(p)))


class _BuildOutputs:
    """Which paths lie in a build output folder (``BUILD_OUTPUT_GLOBS``) or a virtualenv.

    A virtualenv is a folder holding ``pyvenv.cfg``: each folder on the paths' way is looked
    at once (one ``lstat``), so the folders of a tree cost one call each, not one per file.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv: dict[str, bool] = {}
        # Every glob is ``**/NAME/**``: the answer is the path's folder's, asked once a folder.
        self.folders: dict[str, bool] = {}

    def holds(self, path: str) -> bool:
        """Whether ``path`` (repository-relative) is a build output."""
        folder = path.rpartition("/")[0]
        if not folder:
            return False  # a file at the root lies in no folder
        known = self.folders.get(folder)
        if known is None:
            known = self.folders[folder] = self._folder_holds(folder)
        return known

    def _folder_holds(self, folder: str) -> bool:
        if any(name in _OUTPUT_NAMES or name.endswith(_OUTPUT_SUFFIXES)
               for name in folder.split("/")):
            return True
        while folder:
            known = self.venv.get(folder)
            if known is None:
                known = self.venv[folder] = os.path.isfile(
                    os.path.join(self.root, folder, _VENV_MARKER))
            if known:
                return True
            folder = folder.rpartition("/")[0]
        return False


def build_output(root: Path, path: str) -> bool:
    """Whether a repository-relative path is a build output (see ``walk_tree``)."""
    return _BuildOutputs(root).holds(path)


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
class _Rules:
    """The rules of one ``.gitignore``: its globs in order, and which negate or name folders."""

    globs: GlobSet
    negate: tuple[bool, ...]
    dir_only: tuple[bool, ...]


def _parse_gitignore(text: str) -> _Rules:
    pats: list[str] = []
    negate: list[bool] = []
    dir_only: list[bool] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        if line.startswith("\\"):
            line = line[1:]
        pat = line.rstrip("/")
        if not pat:
            continue
        pats.append(pat)
        negate.append(negated)
        dir_only.append(line.endswith("/"))
    return _Rules(GlobSet(pats, below=False), tuple(negate), tuple(dir_only))


def _ignored(rules: list[tuple[str, _Rules]], rel: str, is_dir: bool) -> bool:
    verdict = False
    for base, found in rules:  # the last matching rule decides, deeper files last
        if base and not rel.startswith(base + "/"):
            continue
        local = rel[len(base) + 1:] if base else rel
        last = found.globs.last(local, skip=() if is_dir else found.dir_only)
        if last is not None:
            verdict = not found.negate[last]
    return verdict


_GITIGNORE_LIMIT = 1 << 20  # bytes of a .gitignore read; the rest is not looked at


def _walk_files(root: Path) -> list[str]:
    """The pure-Python walk for a tree that is not a Git work tree (ignored folders are not entered)."""
    out: list[str] = []
    stack: list[tuple[Path, str, list[tuple[str, _Rules]]]] = [(root, "", [])]
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


# -- the commands ----------------------------------------------------------------------------------
