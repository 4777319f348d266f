"""Bounded reading of a file a person names: an import document or a file to ingest.

Owns ``read_regular_file``, moved unchanged from ``ctxstore/exchange.py`` (issue 12):
a regular file of at most ``cap`` bytes, never blocking on a FIFO or a device, every
failure an ``InvalidInput`` naming the path. Symlinks are followed on purpose: the path
is the one the user typed, not one found inside a cloned ``.ctx/`` (that is
``fsio.read_regular``'s job). It must not write or decode what it reads.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ctxstore.errors import InvalidInput

__all__ = ["read_regular_file"]


def read_regular_file(path: Path, cap: int, what: str) -> bytes:
    """Read a regular file of at most ``cap`` bytes (never blocks on a FIFO or device).

    Args:
        path: The file, as the user named it.
        cap: The most bytes accepted.
        what: What the file is, for messages (``file``).

    Returns:
        The file's bytes.

    Raises:
        InvalidInput: if the file is missing, a directory, not a regular file,
            unreadable or larger than ``cap``.
    """
    name = str(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except ValueError:
        raise InvalidInput(f"invalid {what} path {name!r}") from None
    except FileNotFoundError:
        raise InvalidInput(f"no such {what}: {name}") from None
    except IsADirectoryError:
        raise InvalidInput(f"{name} is a directory, not a file") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InvalidInput(f"{name} is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInput(f"{name} is not a regular file")
        if info.st_size > cap:
            raise InvalidInput(f"{what} {name} is larger than {cap >> 20} MiB")
        chunks: list[bytes] = []
        total = 0
        while total <= cap:  # the file may grow while we read it: stop at cap + 1
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise InvalidInput(f"{name} is a directory, not a file") from None
        raise InvalidInput(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > cap:
        raise InvalidInput(f"{what} {name} is larger than {cap >> 20} MiB")
    return b"".join(chunks)
