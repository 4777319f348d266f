"""The log of hook problems: ``.ctx/local/hooks.log`` (spec 003's log file, docs/hooks.md).

Claude Code shows a hook's ``systemMessage`` once and keeps stderr only in its debug
log, so a problem a hook met is also written here, one line each:
``<UTC time>\\t<event>\\t<message>`` (tabs and newlines in the message become spaces).
The file is per clone (``local/`` is gitignored). Past ``MAX_LOG_BYTES`` it is
rotated once: renamed to ``hooks.log.1`` (replacing the older one), and a new file is
started, so the two together never hold much more than twice the cap.

Written only through ``fsio``: appended with ``O_APPEND`` (a line of one write is never
interleaved with another hook's), never through a symbolic link or into a special
file, and only inside a real ``local/`` directory, opened by descriptor (PS-10).
Logging is best effort: any failure to log is swallowed, so it can never break a hook.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxstore import fsio

__all__ = ["LOG_FILE", "MAX_LOG_BYTES", "MAX_LINE_CHARS", "log_path", "log_problem"]

LOG_FILE = "hooks.log"
MAX_LOG_BYTES = 256 << 10
MAX_LINE_CHARS = 2_000


def log_path(store_root: Path) -> Path:
    """Where the hook problems of the store at ``store_root`` are logged.

    Args:
        store_root: The ``.ctx`` directory.

    Returns:
        ``<store_root>/local/hooks.log``.
    """
    return store_root / "local" / LOG_FILE


def _line(event: str, message: str, now: float) -> bytes:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    clean = " ".join(message.replace("\t", " ").split())
    if len(clean) > MAX_LINE_CHARS:
        clean = clean[:MAX_LINE_CHARS - 20] + " [... cut]"
    name = " ".join(event.split())[:40] or "-"
    return f"{stamp}\t{name}\t{clean}\n".encode("utf-8", "replace")


def _append(folder: fsio.Dir, local: Path, line: bytes) -> None:
    """Append ``line`` to the log in the open ``local/`` directory, rotating it when full.

    Raises:
        UnsafePath: (E020) if the log is a link or not a regular file.
        OSError: if it cannot be written.
    """
    from ctxstore import fsio
    from ctxstore.errors import UnsafePath

    try:
        st = os.stat(LOG_FILE, dir_fd=folder.fileno(), follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(os.fspath(local / LOG_FILE), detail=f"is {fsio.file_kind(st.st_mode)}")
        if st.st_size >= MAX_LOG_BYTES:
            fsio.replace(LOG_FILE, LOG_FILE + ".1", dir_fd=folder.fileno())  # the entry itself
    fd = folder.open_append(LOG_FILE)
    try:
        fsio.write_all(fd, line)
    finally:
        os.close(fd)


def log_problem(store_root: Path | None, event: str, message: str, *,
                now: float | None = None) -> bool:
    """Append one problem line to the store's hook log; never raises.

    Args:
        store_root: The ``.ctx`` directory, or None (no store: nothing is logged).
        event: The hook event (``stop``, ``session-start``, ...).
        message: What went wrong (one line is written).
        now: The time to record (seconds since the epoch); the current time when None.

    Returns:
        True if the line was written.
    """
    if store_root is None or not message.strip():
        return False
    try:
        from ctxstore import fsio

        local = store_root / "local"
        # Through descriptors (PS-10): ``local/`` is opened O_NOFOLLOW from the store's own
        # descriptor and the log is renamed and opened relative to it, so a ``local/``
        # swapped for a link at any moment is refused (E020), never written through.
        with fsio.open_dir(store_root, local, create=True, durable=False) as folder:
            _append(folder, local, _line(event, message, time.time() if now is None else now))
    except Exception:  # noqa: BLE001 - logging must never break a hook
        return False
    return True
