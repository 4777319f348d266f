"""What Git says of the work tree for ``ctx index``: ``git status``, ``git diff``, ``git ls-files``.

``git_status`` runs Git on ctx's own copy of Git's index (``PRIVATE_INDEX``, in the code
index's folder), where Git keeps its refreshed stat data and its untracked cache from run to
run; ctx never writes the user's ``.git/index`` nor takes its lock (docs/code.md, "ctx's copy
of Git's index"). Re-exported by ``code.walk``. It reads and runs Git; no store, no index.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import CtxError, UnsafePath
from ctxstore.records import dataclass

__all__ = ["GitStatus", "PRIVATE_INDEX", "git_status", "git_changed", "git_tracked"]


@dataclass(frozen=True)
class GitStatus:
    """What ``git status`` says of the work tree.

    Attributes:
        head: HEAD's commit id ("" on a branch with no commit yet).
        named: Every path it names: untracked and not ignored, or tracked and changed in
            the index or the work tree (deleted included).
        listed: Those of ``named`` that ``git ls-files -co --exclude-standard`` lists:
            untracked ones, and tracked ones still in the index.
    """

    head: str
    named: frozenset[str]
    listed: frozenset[str]


def _git_run(root: Path, args: list[str], env: dict[str, str] | None = None, *,
             optional_locks: bool = False) -> bytes | None:
    """Git's standard output, or None when Git is missing or fails (not a work tree, ...)."""
    locks = [] if optional_locks else ["--no-optional-locks"]
    try:
        res = subprocess.run(["git", *locks, "-c", "core.quotepath=off", *args],
                             cwd=root, capture_output=True, check=False, env=env)
    except (FileNotFoundError, OSError):
        return None
    return res.stdout if res.returncode == 0 else None


_TRACKED_BATCH = 500  # paths a Git command is given at once
PRIVATE_INDEX = "git-index"
"""ctx's own copy of Git's index, in the code index's folder (``git_status``)."""
_PRIVATE_STAMP = "git-index.stamp"
_PRIVATE_INDEX_MAX = 256 << 20  # a larger index of Git's is not copied: Git's own is asked
# Set by a caller (a Git hook, a script), these send Git elsewhere: the index they name is used.
_GIT_LOCATION = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")
# --branch for HEAD's id only: counting the commits ahead of and behind the upstream (a walk
# of history on a branch far from it) is left out.
_STATUS = ["status", "--porcelain=v2", "--branch", "--no-ahead-behind", "-z", "--no-renames",
           "--ignore-submodules=none"]


def _stamp(st: os.stat_result) -> str:
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


class _PrivateIndex:
    """A copy of Git's index that ``git status`` may refresh and give an untracked cache.

    ``git status`` run as ctx runs it never writes the user's ``.git/index`` (nor takes its
    lock): Git's refreshed stat data and its untracked cache, kept only in a written index,
    were lost each time, so every run stat-ed and read every folder, and after a copy of the
    repository (``cp -a``: other inodes) hashed every file again. Run on ctx's own copy in
    ``folder`` (``GIT_INDEX_FILE``), Git keeps both there. The copy is taken again whenever
    Git's index changed (``git add``, a commit, a checkout: Git writes a new file, so its
    inode, size or times differ), and whenever the copy is not the one ctx left (a stamp
    beside it holds both).
    """

    def __init__(self, folder: fsio.Dir, source: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.source = source
        self.path = folder.path / PRIVATE_INDEX
        self.env = {**env, "GIT_INDEX_FILE": str(self.path)}
        self.stamp = ""
        self.recorded = b""

    def prepare(self) -> bool:
        """Copy Git's index when the copy is not current; False when none can be used."""
        try:
            source = os.stat(self.source)
        except OSError:
            return False  # no index yet (no file ever added): Git's own answer is as cheap
        if not stat.S_ISREG(source.st_mode) or source.st_size > _PRIVATE_INDEX_MAX:
            return False
        try:
            self.recorded = self.folder.read(_PRIVATE_STAMP, 256)
        except (OSError, UnsafePath):
            self.recorded = b""
        try:
            mine = os.lstat(PRIVATE_INDEX, dir_fd=self.folder.fileno())
            current = stat.S_ISREG(mine.st_mode) and self.recorded == \
                f"{_stamp(source)}\n{_stamp(mine)}\n".encode()
        except OSError:
            current = False
        self.stamp = _stamp(source)  # taken before the read: a later change is copied next run
        try:
            # A killed Git's lock would keep Git from writing the copy ever after; no other
            # Git runs on it (the caller holds the code index's lock).
            self.folder.unlink(f"{PRIVATE_INDEX}.lock")
            if not current:
                data = fsio.read_regular(self.source, _PRIVATE_INDEX_MAX)
                self.folder.replace_atomic(PRIVATE_INDEX, data)
        except (OSError, CtxError):
            return False
        return True

    def record(self) -> None:
        """Remember which copy Git left (it rewrites the file when it refreshed something)."""
        try:
            mine = os.lstat(PRIVATE_INDEX, dir_fd=self.folder.fileno())
            text = f"{self.stamp}\n{_stamp(mine)}\n".encode()
            if text != self.recorded:
                self.folder.replace_atomic(_PRIVATE_STAMP, text)
        except (OSError, CtxError):
            pass  # not remembered: the next run copies Git's index again


def git_status(root: Path, *, scratch: fsio.Dir | None = None,
               environ: dict[str, str] | None = None) -> GitStatus | None:
    """``git status`` of the whole work tree (untracked files one by one), or None.

    Never writes Git's index (``.git/index``) nor takes its lock. With ``scratch`` (a folder
    of ctx's, the code index's) and ``environ`` (the caller's environment, for Git), Git runs
    on ctx's own copy of its index (``_PrivateIndex``) and keeps its refreshed stat data and
    its untracked cache there; untracked folders it names whole are listed file by file
    (``git ls-files -o``). Otherwise it runs without optional locks on Git's own index and
    lists untracked files one by one (``-uall``; no untracked cache serves that).
    """
    private = None
    cache: list[str] = []
    if scratch is not None and environ is not None \
            and not any(name in environ for name in _GIT_LOCATION):
        from ctxstore.git import index_file

        found = index_file(root)
        if found is not None and not found.split:
            private = _PrivateIndex(scratch, found.path, environ)
            # Git's untracked cache trusts folder times; a repository that says otherwise
            # (core.untrackedCache in its configuration) is left to its setting.
            if found.untracked_cache is None:
                cache = ["-c", "core.untrackedCache=true"]
            if not private.prepare():
                private = None
    if private is None:
        out = _git_run(root, [*_STATUS, "--untracked-files=all"])
        return _parse_status(out) if out is not None else None
    out = _git_run(root, [*cache, *_STATUS, "--untracked-files=normal"], private.env,
                   optional_locks=True)
    private.record()
    if out is None:
        return None
    folders: list[str] = []
    status = _parse_status(out, folders)
    if status is None or not folders:
        return status
    named, listed = set(status.named), set(status.listed)
    for start in range(0, len(folders), _TRACKED_BATCH):
        more = _git_run(root, ["--literal-pathspecs", "ls-files", "-o", "--exclude-standard",
                               "-z", "--", *folders[start:start + _TRACKED_BATCH]], private.env)
        if more is None:
            return None
        found_paths = [p for p in more.decode("utf-8", "surrogateescape").split("\0") if p]
        named.update(found_paths)
        listed.update(found_paths)
    return GitStatus(status.head, frozenset(named), frozenset(listed))


def _parse_status(out: bytes, folders: list[str] | None = None) -> GitStatus | None:
    """A ``git status --porcelain=v2 --branch -z`` answer; untracked ``dir/`` into ``folders``."""
    head = ""
    named: set[str] = set()
    listed: set[str] = set()
    entries = out.decode("utf-8", "surrogateescape").split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        kind = entry[:2]
        if entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid "):]
            head = "" if oid == "(initial)" else oid
        elif kind == "1 ":
            fields = entry.split(" ", 8)
            named.add(fields[8])
            if fields[1][0] != "D":  # a staged deletion: no longer in the index
                listed.add(fields[8])
        elif kind == "2 ":  # a rename (despite --no-renames): the original path follows
            fields = entry.split(" ", 9)
            named.update((fields[9], entries[i]))
            listed.add(fields[9])
            i += 1
        elif kind == "u ":
            path = entry.split(" ", 10)[10]
            named.add(path)
            listed.add(path)
        elif kind == "? ":
            if folders is not None and entry.endswith("/"):
                folders.append(entry[2:])  # a folder of untracked files, named whole
                continue
            named.add(entry[2:])
            listed.add(entry[2:])
    if not any(e.startswith("# branch.oid ") for e in entries):
        return None  # a status in a form not known here
    return GitStatus(head, frozenset(named), frozenset(listed))


def git_changed(root: Path, old: str, new: str) -> set[str] | None:
    """The paths that differ between two commits (both sides of a rename), or None."""
    out = _git_run(root, ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff",
                          old, new, "--"])
    if out is None:
        return None
    return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}




def git_tracked(root: Path, paths: Sequence[str]) -> set[str] | None:
    """Which of ``paths`` are in Git's index, or None."""
    found: set[str] = set()
    for start in range(0, len(paths), _TRACKED_BATCH):
        part = paths[start:start + _TRACKED_BATCH]
        out = _git_run(root, ["--literal-pathspecs", "ls-files", "-c", "-z", "--", *part])
        if out is None:
            return None
        found.update(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)
    return found & set(paths)
