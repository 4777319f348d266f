"""The log of hook problems: ``.ctx/local/hooks.log`` (spec 003's log file, docs/hooks.md).

Claude Code shows a hook's ``systemMessage`` once and keeps stderr only in its debug
log, so a problem a hook met is also written here, one line each:
``<UTC time>\\t<event>\\t<message>`` (tabs and newlines in the message become spaces).
The file is per clone (``local/`` is gitignored). Past ``MAX_LOG_BYTES`` it is
rotated once: renamed to ``hooks.log.1`` (replacing the older one), and a new file is
started, so the two together never hold much more than twice the cap.

Written only through ``fsio``: appended with ``O_APPEND`` (a line of one write is never
interleaved with another hook's), never through a symbolic link or into a special
file, and only inside a real ``local/`` directory. Logging is best effort: any failure
to log is swallowed, so it can never break a hook.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

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
        try:
            st = os.lstat(local)
        except FileNotFoundError:
            fsio.ensure_dir_under(store_root, local)  # refuses a link anywhere on the way
            st = os.lstat(local)
        if not stat.S_ISDIR(st.st_mode):  # a link or anything else: never followed
            return False
        path = local / LOG_FILE
        try:
            size = os.lstat(path)
        except FileNotFoundError:
            size = None
        if size is not None:
            if not stat.S_ISREG(size.st_mode):
                return False
            if size.st_size >= MAX_LOG_BYTES:
                fsio.replace(path, local / (LOG_FILE + ".1"))  # renames the entry itself
        fd = fsio.open_append(path)
        try:
            fsio.write_all(fd, _line(event, message, time.time() if now is None else now))
        finally:
            os.close(fd)
    except Exception:  # noqa: BLE001 - logging must never break a hook
        return False
    return True
