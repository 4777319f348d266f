"""The writer lock file: an exclusive ``flock`` held for a block, a probe, the holder's pid."""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxstore.errors import LockConflict, UnsafePath
from ctxstore.fsio import core as _fsio

__all__ = ["hold_lock", "lock_is_held", "read_lock_pid"]


def read_lock_pid(path: Path) -> int | None:
    """Return the pid recorded in a lock file, or None if unreadable."""
    try:
        text = _fsio.read_regular(path, 64)[:64].decode("ascii", "replace").strip()
    except (OSError, UnsafePath):
        return None
    return int(text) if text.isdigit() else None


def lock_is_held(path: Path) -> bool:
    """Whether another open file description holds ``hold_lock``'s flock on ``path`` now.

    A probe that never waits and never creates the file: a missing file is a free lock. It
    takes a shared flock for an instant (``hold_lock`` retries past it), so a reader can tell
    "someone is at it" without a write of its own.

    Raises:
        UnsafePath: (E020) if the lock file is a symlink or not a regular file.
    """
    try:
        fd, _ = _fsio._open_regular(path, os.O_RDONLY, what="a lock file")
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    finally:
        os.close(fd)  # releases the probe's shared lock
    return False


@contextmanager
def hold_lock(path: Path, *, timeout: float, poll: float = 0.01) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the duration of the block.

    ``flock`` (not ``lockf``) is used on purpose: a POSIX record lock is dropped when
    *any* descriptor of the file is closed in the holding process, for example by a
    status read of the holder's pid; a flock belongs to this open file description
    only. The lock dies with the process, so a ``kill -9`` leaves no stale lock.

    The file is opened without ``O_TRUNC`` and with ``O_NOFOLLOW``, and must be a regular
    file: a committed ``LOCK`` symlink would otherwise make every writer truncate and
    overwrite its target (PS-09).

    Raises:
        LockConflict: if the lock is still held by another process after ``timeout``.
        UnsafePath: (E020) if the lock file is a symlink or not a regular file.
    """
    fd, _ = _fsio._open_regular(path, os.O_RDWR | os.O_CREAT, what="a lock file")
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
