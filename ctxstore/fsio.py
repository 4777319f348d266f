"""Durable file I/O: the only place that writes, renames, fsyncs or unlinks under ``.ctx/``.

Everything that must survive a crash goes through these primitives, so a test shim can
count them, kill the process between any two of them, or make any one of them fail
(see tests/_shim). The rules they implement:

* a new file is written to a temp file in the same directory, opened exclusively,
  and renamed into place, so readers never see a partial file;
* a pointer is fsynced before its rename and its directory after it;
* a batch of objects is made durable with one filesystem barrier (``sync_barrier``)
  instead of one fsync per file; pointers move only after that barrier.

This module must not import anything from ctxstore except ``errors``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxstore.errors import LockConflict

__all__ = [
    "TMP_SUFFIX",
    "open_excl",
    "write_all",
    "fsync_file",
    "fsync_dir",
    "fsync_path",
    "replace",
    "link",
    "unlink",
    "mkdir",
    "rmdir",
    "sync_barrier",
    "tmp_path_for",
    "write_new_file",
    "replace_atomic",
    "mode_of",
    "ensure_dir",
    "hold_lock",
    "read_lock_pid",
]

TMP_SUFFIX = ".tmp"
StrPath = str | os.PathLike[str]


def open_excl(path: StrPath, mode: int = 0o644) -> int:
    """Create ``path`` exclusively for writing and return its descriptor.

    Raises:
        OSError: ``FileExistsError`` if the path exists, or any OS error.
    """
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``, looping over short writes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_file(fd: int) -> None:
    """Flush a file's data and metadata to stable storage."""
    os.fsync(fd)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (creates, renames) to stable storage."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: Path) -> None:
    """Flush an existing file's data and metadata (opened read-only) to stable storage."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fsync_file(fd)
    finally:
        os.close(fd)


def replace(src: StrPath, dst: StrPath) -> None:
    """Atomically rename ``src`` over ``dst``."""
    os.replace(src, dst)


def link(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst``; fails if ``dst`` exists."""
    os.link(src, dst)


def unlink(path: StrPath) -> None:
    """Remove a file."""
    os.unlink(path)


def mkdir(path: Path) -> None:
    """Create one directory (its parent must exist)."""
    os.mkdir(path)


_syncfs = None


def rmdir(path: Path) -> None:
    """Remove an empty directory."""
    os.rmdir(path)


def sync_barrier(anchor: Path) -> None:
    """Make every write so far on ``anchor``'s filesystem durable, in one call.

    Uses ``syncfs(2)`` where the C library has it (Linux), else ``sync(2)``. One
    barrier covers any number of files and directory entries, which is what lets
    a transaction of N objects avoid N fsyncs.

    Raises:
        OSError: if the kernel reports a write-back error.
    """
    global _syncfs
    if _syncfs is None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _syncfs = getattr(libc, "syncfs", False)
    if not _syncfs:
        os.sync()
        return
    fd = os.open(anchor, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _syncfs(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(anchor))
    finally:
        os.close(fd)


def tmp_path_for(path: StrPath) -> str:
    """Return a fresh temp-file path in the same directory as ``path``.

    The name is 6 random bytes as hex, exactly what ``secrets.token_hex(6)`` gives;
    ``os.urandom`` spares every process the ``secrets`` import (hmac, OpenSSL: ~3 ms)."""
    return f"{os.fspath(path)}.{os.urandom(6).hex()}{TMP_SUFFIX}"


def _write_tmp(path: StrPath, data: bytes, *, durable: bool, mode: int) -> str:
    tmp = tmp_path_for(path)
    fd = open_excl(tmp, mode)
    try:
        write_all(fd, data)
        if durable:
            fsync_file(fd)
    except BaseException:
        os.close(fd)
        _discard(tmp)
        raise
    os.close(fd)
    return tmp


def _discard(tmp: StrPath) -> None:
    # Best effort: a leftover temp file is harmless (gc removes it) and the
    # original error is the one worth reporting.
    try:
        unlink(tmp)
    except OSError:
        pass


def write_new_file(path: StrPath, data: bytes, *, mode: int = 0o444) -> None:
    """Write an immutable file by temp + rename, *without* fsync.

    The caller makes it durable later with ``sync_barrier`` (objects of one
    transaction share one barrier). An existing file at ``path`` is replaced,
    which is how a corrupt object is repaired.
    """
    tmp = _write_tmp(path, data, durable=False, mode=mode)
    try:
        replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


def replace_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Durably replace ``path`` with ``data``: temp, fsync, rename, fsync directory.

    After return, a crash leaves either the old or the new content, never a mix.
    """
    tmp = _write_tmp(path, data, durable=True, mode=mode)
    try:
        replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise
    fsync_dir(path.parent)


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
    """Create ``path`` (and missing parents) if needed; return True if any was created."""
    if path.is_dir():
        return False
    if not path.parent.is_dir():
        ensure_dir(path.parent)
    try:
        mkdir(path)
    except FileExistsError:
        if not path.is_dir():
            raise
        return False
    return True


def read_lock_pid(path: Path) -> int | None:
    """Return the pid recorded in a lock file, or None if unreadable."""
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


@contextmanager
def hold_lock(path: Path, *, timeout: float, poll: float = 0.01) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the duration of the block.

    ``flock`` (not ``lockf``) is used on purpose: a POSIX record lock is dropped when
    *any* descriptor of the file is closed in the holding process, for example by a
    status read of the holder's pid; a flock belongs to this open file description
    only. The lock dies with the process, so a ``kill -9`` leaves no stale lock.

    Raises:
        LockConflict: if the lock is still held by another process after ``timeout``.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        start = time.monotonic()
        delay = poll
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            waited = time.monotonic() - start
            if waited >= timeout:
                raise LockConflict(str(path), pid=read_lock_pid(path), waited=waited)
            time.sleep(min(delay, max(timeout - waited, 0.001)))
            delay = min(delay * 1.5, 0.05)
        # The pid is advisory (for the error message), so it is not fsynced.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
