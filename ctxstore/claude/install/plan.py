"""Install plans: the file changes one install or uninstall makes, checked, then applied.

Every operation is planned first as a list of file changes (old bytes -> new bytes) and
only then applied, so ``--dry-run`` shows exactly what a real run writes, a run that
changes nothing writes nothing, and a bad file is refused before any file is touched.

Every path a plan reads, writes or deletes is checked while the plan is made and again
before the first write, so a refusal leaves every file as it was. The writes themselves go
through one directory handle (``fsio.Dir``) opened on the plan's root: each directory below
it is opened from its parent's descriptor, so a link swapped in after the checks is refused,
never written through. A project's ``.claude/`` and a plugin folder may come from a cloned
repository: there no symlink is followed, no special file read, nothing written or deleted
through a link. The user's own configuration (``~/.claude``, ``~/.codex``, ...) may be
linked into a dotfiles repository: there links are followed and a linked file is written
through (its target is replaced atomically, so the link stays), but a linked file is never
deleted.

This module knows nothing of what the files hold; ``settings``, ``skills``, ``plugin`` and
``mcp`` (and ``ctxstore.agents``) plan their content through it.
"""

from __future__ import annotations

import difflib
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import field
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.records import dataclass

__all__ = [
    "BACKUP_SUFFIX",
    "FILE_LIMIT",
    "FileChange",
    "Plan",
    "apply_plan",
    "backup_path",
    "describe",
    "dump_json",
    "load_json",
    "parse_json",
    "resolve_path",
]

BACKUP_SUFFIX = ".bak"
FILE_LIMIT = 4 * 1024 * 1024  # settings.json and SKILL.md are a few KiB; read no more than this

_STRICT_HINT = ("a cloned repository can commit such a link; ctx install never writes, reads "
                "or deletes through one in a project or plugin folder: remove it, or use "
                "--user for your own ~/.claude")
_OWN_HINT = "point the link at a regular file, or replace it with one"


def _unsafe(path: Path, detail: str, hint: str) -> UnsafePath:
    return UnsafePath(os.fspath(path), detail=detail, hint=hint)


def _hint(follow_links: bool) -> str:
    return _OWN_HINT if follow_links else _STRICT_HINT


def backup_path(path: Path) -> Path:
    """Where ``ctx install`` keeps the previous bytes of ``path`` (``<name>.bak``)."""
    return path.with_name(path.name + BACKUP_SUFFIX)


# -- JSON as every settings file is read and written ----------------------------------------------


def dump_json(data: Any) -> bytes:
    """``data`` as ctx writes a JSON settings file: two-space indent, UTF-8, a final newline."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(raw: bytes) -> Any:
    """Strict JSON: no NaN/Infinity, no lone surrogates (they could not be written back).

    Raises:
        ValueError: (``json.JSONDecodeError`` with a position where JSON has one) if the
            bytes are not such JSON, nested too deeply included.
    """
    try:
        data = json.loads(raw.decode("utf-8-sig"), parse_constant=_no_constant)
        dump_json(data)  # a lone surrogate ("\ud800") decodes but cannot be encoded again
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeEncodeError:
        raise ValueError("holds a lone surrogate") from None
    return data


def parse_json(raw: bytes | None) -> Any:
    """JSON of a backup or a file ctx may have written, or None when absent or not JSON."""
    if raw is None:
        return None
    try:
        return load_json(raw)
    except ValueError:
        return None


# -- checking paths ---------------------------------------------------------------------------------


def _parts(root: Path, path: Path, hint: str) -> list[Path]:
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise _unsafe(path, f"is outside {root}", hint) from None
    if ".." in rel.parts or not rel.parts:
        raise _unsafe(path, f"is not a path below {root}", hint)
    return [root.joinpath(*rel.parts[:i]) for i in range(1, len(rel.parts) + 1)]


def resolve_path(root: Path, path: Path, *, follow_links: bool = False) -> Path:
    """Check ``path`` below ``root`` and return the file to read and replace.

    ``root`` (the folder holding ``.claude``, a plugin's parent, the home folder) and its
    parents are the user's choice and are not checked. Below it, without ``follow_links``
    (a project, a plugin: content a clone may bring), every folder must be a real directory
    and the file a regular file or absent. With ``follow_links`` (the user's own
    configuration), links are followed, but what they reach must be a directory or a
    regular file.

    Returns:
        ``path`` itself, or the target of a link in the user's own configuration.

    Raises:
        UnsafePath: (E020) naming the first component that is a link (project or plugin)
            or that is not a directory / regular file (a FIFO, a device, a dangling link).
    """
    hint = _hint(follow_links)
    parts = _parts(root, path, hint)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        try:
            st = os.lstat(part)
        except FileNotFoundError:
            return path  # the rest is created when the plan is applied
        if stat.S_ISLNK(st.st_mode):
            if not follow_links:
                raise _unsafe(part, "is a symbolic link", hint)
            try:
                st = os.stat(part)
            except OSError:
                raise _unsafe(part, f"is a symbolic link to a missing file "
                                    f"({os.readlink(part)})", hint) from None
        if not last and not stat.S_ISDIR(st.st_mode):
            raise _unsafe(part, f"is {fsio.file_kind(st.st_mode)}, not a directory", hint)
        if last and not stat.S_ISREG(st.st_mode):
            raise _unsafe(part, f"is {fsio.file_kind(st.st_mode)}, not a regular file", hint)
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


# -- plans -------------------------------------------------------------------------------------------


@dataclass
class FileChange:
    """One file's planned change: ``new is None`` deletes it, ``old is None`` creates it.

    ``target`` is the file actually replaced: ``path``, or the target of a link in the
    user's own configuration.
    """

    path: Path
    old: bytes | None
    new: bytes | None
    backup: bool = False  # keep the old bytes in ``<path>.bak`` before replacing them
    target: Path | None = None
    mode: int | None = None  # permission bits of a new file (default: 0o644)

    @property
    def action(self) -> str:
        """``create``, ``update`` or ``delete``."""
        if self.new is None:
            return "delete"
        return "create" if self.old is None else "update"

    def diff(self) -> str:
        """A unified diff of the change (text files)."""
        old = (self.old or b"").decode("utf-8", "replace").splitlines(keepends=True)
        new = (self.new or b"").decode("utf-8", "replace").splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, new, f"{self.path} (now)", f"{self.path} (after)"))


@dataclass
class Plan:
    """The changes one install/uninstall would make below ``root``; empty when all is in place.

    ``follow_links`` is True for the user's own configuration (see ``resolve_path``).
    ``checked`` lists every path the plan read or may write, each already checked;
    ``apply_plan`` checks them all again before it writes anything.
    """

    root: Path
    follow_links: bool = False
    changes: list[FileChange] = field(default_factory=list)
    prune_dirs: list[tuple[Path, Path]] = field(default_factory=list)  # (dir, stop) pairs
    checked: dict[Path, Path] = field(default_factory=dict)  # path -> resolved file
    limits: dict[Path, int] = field(default_factory=dict)  # path -> its size limit, if not FILE_LIMIT

    def check(self, *paths: Path) -> None:
        """Check paths the plan reads or may write (see ``resolve_path``).

        Raises:
            UnsafePath: (E020) for the first path that fails.
        """
        for path in paths:
            self.checked[path] = resolve_path(self.root, path, follow_links=self.follow_links)

    def is_link(self, path: Path) -> bool:
        """Whether ``path`` itself is a symbolic link (only ever true in the user's own files)."""
        return os.path.islink(path)

    def read(self, path: Path) -> bytes | None:
        """The current bytes of ``path`` (None when absent), read through the directory handle.

        Raises:
            UnsafePath: (E020) if the path fails the checks.
            InvalidInput: if the file is larger than its limit (``FILE_LIMIT`` unless set in
                ``limits``).
        """
        self.check(path)
        limit = self.limits.get(path, FILE_LIMIT)
        try:
            with fsio.open_dir(self.root, follow_links=self.follow_links) as root:
                data = root.read(path, limit)
        except FileNotFoundError:
            return None
        except UnsafePath as exc:  # swapped in since the check: named with this plan's hint
            raise _unsafe(Path(exc.path), exc.detail, _hint(self.follow_links)) from None
        if len(data) > limit:
            raise InvalidInput(f"{path} is larger than {limit // (1024 * 1024)} MiB; "
                               "nothing was changed")
        return data

    def add(self, path: Path, new: bytes | None, *, backup: bool = False,
            mode: int | None = None) -> None:
        """Plan writing ``new`` to ``path`` (or deleting it), unless it already holds that.

        ``mode`` gives a new file its permission bits (an existing file keeps its own).

        Raises:
            UnsafePath: (E020) if ``path`` (or its backup) fails the checks, or a planned
                delete names a link (a link is never deleted, nor its target).
            InvalidInput: if the file is too large.
        """
        old = self.read(path)
        if old == new:
            return
        if new is None and self.is_link(path):
            raise _unsafe(path, "is a symbolic link; ctx does not delete through a link",
                          "remove it yourself if ctx's copy is no longer wanted")
        backup = backup and old is not None
        if backup:
            self.check(backup_path(path))
        self.changes.append(FileChange(path, old, new, backup=backup, target=self.checked[path],
                                       mode=mode))


# -- applying ----------------------------------------------------------------------------------------


def _write(root: fsio.Dir, target: Path, data: bytes, mode: int) -> None:
    """Replace ``target`` atomically through the handle (creating missing folders).

    A target outside the root is the target of a link of the user's own (a dotfiles
    repository elsewhere): its folder is theirs as the link is, and is opened as named.
    """
    if target.is_relative_to(root.path):
        root.replace_atomic(target, data, mode=mode)
        return
    with fsio.open_dir(target.parent) as folder:
        folder.replace_atomic(target.name, data, mode=mode)


def _prune(root: fsio.Dir, folder: Path, stop: Path) -> None:
    """Remove ``folder`` and its parents up to and including ``stop`` while they are empty.

    Through the handle: a removal never goes through a linked parent in a project or
    plugin folder, and ``rmdir`` never removes a link's target.
    """
    while folder == stop or stop in folder.parents:
        try:
            root.rmdir(folder)
        except (OSError, UnsafePath):
            return  # not empty, gone, or a link on the way: leave it and everything above it
        folder = folder.parent


def apply_plan(plan: Plan) -> None:
    """Write the planned changes: backups first, each file atomically, then empty dirs go.

    Every path the plan checked is checked again before the first write, so a link
    that appeared since the plan was made is refused with nothing written; the writes go
    through the directory handle, so one swapped in while they run is refused too.

    Raises:
        UnsafePath: (E020) if a checked path now fails the checks or leads elsewhere.
        OSError: if a write fails (files already replaced stay replaced, each whole).
    """
    for path, target in plan.checked.items():
        if resolve_path(plan.root, path, follow_links=plan.follow_links) != target:
            raise _unsafe(path, "changed while ctx was planning; nothing was written",
                          "run the command again")
    if not plan.changes and not plan.prune_dirs:
        return
    try:
        with fsio.open_dir(plan.root, follow_links=plan.follow_links) as root:
            for change in plan.changes:
                target = change.target or change.path
                # The backup and the rewritten file keep the original's mode (secrets stay
                # private).
                mode = fsio.mode_of(target, change.mode if change.mode is not None else 0o644)
                if change.backup and change.old is not None:
                    backup = backup_path(change.path)
                    _write(root, plan.checked.get(backup, backup), change.old, mode)
                if change.new is None:
                    root.unlink(target)  # never a link: Plan.add refuses to delete one
                    continue
                # A link of the user's own stays a link: its target is replaced (temp file
                # next to the target, then rename), not the link.
                _write(root, target, change.new, mode)
            for folder, stop in plan.prune_dirs:
                _prune(root, folder, stop)
    except UnsafePath as exc:
        raise _unsafe(Path(exc.path), exc.detail, _hint(plan.follow_links)) from None


def describe(changes: Iterable[FileChange]) -> list[str]:
    """One line per change: ``create PATH`` / ``update PATH`` / ``delete PATH``."""
    return [f"{c.action} {c.path}" for c in changes]
