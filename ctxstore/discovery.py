"""Store discovery: which ``.ctx/`` a command or hook works on (DESIGN §2).

The one walk every front end uses, with a policy argument for where it stops. It
imports only ``errors`` and ``fsio``, because every hook calls it before it knows
whether there is any work (``ctxstore.repo`` costs a hook ~20 ms of imports).
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import RefNotFound, StoreNotFound

__all__ = ["CTX_DIRNAME", "discover_store"]

CTX_DIRNAME = ".ctx"


def discover_store(start: Path, *, user_store: Path | None = None,
                   stop_at_git: bool = False) -> Path:
    """Find the nearest ``.ctx/`` directory, walking up from ``start`` (DESIGN §2).

    The one discovery walk of every front end; the policy arguments say where it stops.
    A ``.ctx/`` directory without HEAD is a damaged project store: the walk stops there
    with an error rather than going on to a store further up or to the user store, which
    would silently send every read and write (hooks included) somewhere else.

    Args:
        start: The directory to start from (the working directory, a hook's ``cwd``).
        user_store: The user store (``~/.ctx``). Reaching it ends the walk: it is returned
            if it holds a HEAD, and is otherwise not a project store (StoreNotFound; the
            caller applies its own user-store policy).
        stop_at_git: Stop after the Git top level (the first directory holding ``.git``),
            as hooks do (RELIABILITY.md HK-04).

    Returns:
        The ``.ctx`` directory (with a HEAD).

    Raises:
        RefNotFound: (E005) the nearest ``.ctx/`` directory has no HEAD.
        StoreNotFound: (E012) there is none up to the filesystem root (or the limits above).
    """
    here = start.resolve()
    user = user_store.absolute() if user_store is not None else None
    for folder in (here, *here.parents):
        candidate = folder / CTX_DIRNAME
        if user is not None and candidate.absolute() == user:
            if (candidate / "HEAD").is_file():
                return candidate
            break
        if candidate.is_dir():
            fsio.check_store_link(candidate)  # E020: a committed .ctx link out of the repo
            if os.path.lexists(candidate / "HEAD"):
                return candidate  # a HEAD that is not a pointer is reported when read
            # The remedy is in the message, not a hint: hooks show only the message.
            raise RefNotFound(
                str(candidate / "HEAD"),
                detail=f"does not exist, so {candidate} is a damaged ctx store (ctx does "
                       f"not fall back to another store); restore HEAD from Git (`git "
                       f"checkout -- {CTX_DIRNAME}/HEAD`) or run `ctx init --force` in {folder}")
        if stop_at_git and os.path.lexists(folder / ".git"):
            break
    raise StoreNotFound(f"no {CTX_DIRNAME}/ store in {here} or any parent",
                        hint="run `ctx init` at the repository root, or pass --ctx-dir")
