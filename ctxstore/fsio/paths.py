"""Writes by a path outside a directory handle: a file the user names, a folder, a file's mode.

``write_output`` writes ``--output FILE`` as a shell redirect would, never into a store;
``ensure_dir`` makes a folder and its parents, refusing a symlink in its place.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.fsio import core as _fsio
from ctxstore.fsio.core import StrPath

__all__ = ["write_output", "mode_of", "ensure_dir"]


def write_output(path: StrPath, data: bytes, *, store: Path, also: Sequence[Path] = ()) -> None:
    """Write a file the user named (``--output FILE``) as a shell redirect would, never into ``store``.

    A FIFO or a character device is opened and written directly (a rename would replace the
    device node or the pipe itself); a symlink is followed and its target written; a regular
    file (or a new one) is replaced atomically, keeping its permission bits. The final target,
    symlinks and ``..`` resolved, must not lie inside ``store``: ctx's own files are never
    overwritten by an export or a pack.

    Args:
        path: The file name as given (any bytes, as ``os.fsencode`` takes them).
        data: What to write.
        store: The store directory (``.ctx/``) the output must stay out of.
        also: Other stores it must stay out of (the user store ``~/.ctx``).

    Raises:
        InvalidInput: (E011) if ``path`` is empty, inside ``store``, a directory, or a
            special file other than a FIFO or a character device.
        OSError: any error of the operating system (the CLI reports E017).
    """
    name = os.fspath(path)
    if not name:
        raise InvalidInput("the output file name is empty",
                           hint="name a file, or - for standard output")
    real = os.path.realpath(name)
    for root in (store, *also):
        if _inside(Path(real), Path(root)):
            raise InvalidInput(f"refusing to write {name}: it is inside the store {root}",
                               hint="write the output outside the .ctx/ directory")
    try:
        st = os.stat(name)  # follows symlinks: the kind of the final target
    except FileNotFoundError:
        st = None  # a new file (or a dangling link: its target is created)
    if st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        # As `>` does: open and write (blocking until a FIFO has a reader); nothing renamed.
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a file since the stat
                raise InvalidInput(f"{name} changed while being opened", hint="try again")
            _fsio.write_all(fd, data)
        finally:
            os.close(fd)
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InvalidInput(f"refusing to write {name}: it is {_fsio.file_kind(st.st_mode)}",
                           hint="name a regular file, a FIFO or a character device")
    if st is None and not os.path.isdir(os.path.dirname(real) or "."):
        raise InvalidInput(f"cannot write {name}: the directory {os.path.dirname(real)} does "
                           "not exist", hint="create it first, or name a file in an existing one")
    _fsio.replace_atomic(Path(real), data, mode=mode_of(Path(real)))


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (already resolved) is ``root`` or lies below it.

    By name after resolving both, and by identity (device and inode) for each existing
    ancestor, so a case-insensitive file system or a second mount of the store is caught too.
    """
    root_real = Path(os.path.realpath(root))
    if path == root_real or root_real in path.parents:
        return True
    try:
        root_st = os.stat(root_real)
    except OSError:
        return False
    for folder in (path, *path.parents):
        try:
            if os.path.samestat(os.stat(folder), root_st):
                return True
        except OSError:
            continue
    return False


def mode_of(path: Path, default: int = 0o644) -> int:
    """The permission bits of ``path``, or ``default`` if there is no such file.

    Rewriting a file the user owns (settings.json, CLAUDE.md) or copying it to a backup
    must not widen its permissions: a 0o600 file may hold secrets. Pass the result as
    ``replace_atomic``'s ``mode``.
    """
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return default


def ensure_dir(path: Path) -> bool:
    """Create ``path`` (and missing parents) if needed; return True if any was created.

    ``path`` itself must be a real directory: a symlink there is refused, never followed
    (use ``Dir.ensure_dir`` to check every component below a root).

    Raises:
        UnsafePath: (E020) if ``path`` is a symlink or exists as something else.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode):
            return False
        raise UnsafePath(os.fspath(path), detail=f"is {_fsio.file_kind(st.st_mode)}, not a directory")
    if not path.parent.is_dir():
        ensure_dir(path.parent)
    try:
        _fsio.mkdir(path)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise
        return False
    return True
