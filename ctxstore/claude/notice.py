"""The hooks' memory of a notice said once when there is no store to keep it in.

A hook that finds no store says so once per session (``claude.hooks``); this module keeps the
markers that remember it, and loads nothing else.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ctxstore import fsio

__all__ = ["first_notice"]


def first_notice(key: str, folder: Path | None = None) -> bool:
    """Whether a notice keyed ``key`` is new (True once per key), for hooks without a store.

    A hook that finds no store has no ``.ctx/local/state.sqlite`` to remember what it said,
    and must not create a store (or a ``~/.ctx`` folder that is not one). It keeps an
    empty marker file per key instead, in the user's cache (``~/.cache/ctx/notices``;
    ``folder`` overrides it), created with ``O_EXCL`` so that two hooks running at once
    say it once. Anything unexpected (a folder on the way is a link, another user's, not
    writable) says it again rather than never.

    Args:
        key: what the notice is about (a session id and a topic).
        folder: where the markers live (tests).

    Returns:
        True when the caller should say it now.
    """
    if not key:
        return True
    base = folder if folder is not None else \
        Path(os.path.expanduser("~")) / ".cache" / "ctx" / "notices"
    try:
        for i, part in enumerate((base.parent.parent, base.parent, base)):
            look = os.stat if i == 0 else os.lstat  # ~/.cache may be the user's own link
            try:
                st = look(part)
            except FileNotFoundError:
                fsio.mkdir(part)
                os.chmod(part, 0o700)
                st = look(part)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                return True
        fd = fsio.open_excl(base / hashlib.sha256(key.encode()).hexdigest()[:32], 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True
    os.close(fd)
    return True
