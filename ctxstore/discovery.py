"""Store discovery: which ``.ctx/`` a command or hook works on (DESIGN §2).

The one walk every front end uses, with a policy argument for where it stops. It
imports only ``errors`` and ``fsio``, because every hook calls it before it knows
whether there is any work (``ctxstore.repo`` costs a hook ~20 ms of imports).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import RefNotFound, StoreNotFound, UnsafePath

__all__ = ["CTX_DIRNAME", "STORE_DIRS", "STORE_FILES", "check_layout", "check_store", "discover_store"]

CTX_DIRNAME = ".ctx"
# The fixed entries of a store (DESIGN §2). A cloned repository is untrusted input: any of
# them may have been committed as a symlink or a special file, so each is lstat-checked
# when the store is opened (``check_layout``), before anything reads or writes through it.
STORE_DIRS = ("objects", "refs", "index", "local", "local/work", "local/work/objects", "narrative",
              "narrative/log", "narrative/tasks", "DERIVED")
STORE_FILES = ("HEAD", "STAGE", "local/STAGE", "config.toml", "LOCK")


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


def check_layout(ctx_dir: Path) -> None:
    """Check the fixed entries of a store.

    None is a symbolic link, and each is absent or of its kind (``STORE_DIRS`` real directories,
    ``STORE_FILES`` regular files).

    Two kinds of damage are left to the code that owns them: a directory in place of
    ``HEAD`` or ``STAGE`` is a damaged pointer (E005 when read), and another kind of entry
    in place of the derived or per-clone ``index/``, ``DERIVED/`` or ``local/`` is repaired
    or reported by the index and the hook state. About twelve ``lstat`` calls: cheap
    enough for every command and hook. Deeper paths (shard directories, pointer files
    under refs/, narrative files, SQLite files) are checked where they are opened.

    Raises:
        UnsafePath: (E020) naming the first entry that is a link or of the wrong kind.
    """
    for names, want, what in ((STORE_DIRS, stat.S_ISDIR, "a directory"),
                              (STORE_FILES, stat.S_ISREG, "a regular file")):
        for name in names:
            path = ctx_dir / name
            try:
                mode = os.lstat(path).st_mode
            except (FileNotFoundError, NotADirectoryError):
                continue  # absent (or under a parent already refused above)
            if stat.S_ISLNK(mode):
                raise UnsafePath(str(path), detail="is a symbolic link")
            if name in ("local", "index", "DERIVED"):
                continue  # derived or per-clone: their owners repair another kind of entry
            if name in ("HEAD", "STAGE", "local/STAGE") and stat.S_ISDIR(mode):
                continue  # a damaged pointer: reading it reports E005 (RELIABILITY.md CO-05)
            if not want(mode):
                raise UnsafePath(str(path), detail=f"is {fsio.file_kind(mode)}, not {what}")


def check_store(ctx_dir: Path) -> None:
    """Refuse a directory that is not a store, or whose fixed entries are unsafe.

    What ``repo.open_store`` checks before it reads anything, importable without the
    object model (a read on an index that is current needs no more).

    Args:
        ctx_dir: The store's ``.ctx`` directory.

    Raises:
        StoreNotFound: if ``ctx_dir`` holds no HEAD file.
        UnsafePath: (E020) if a fixed entry of the store is a symlink or of the wrong
            kind (``check_layout``).
    """
    if ctx_dir.is_dir():
        check_layout(ctx_dir)
    if not (ctx_dir / "HEAD").is_file():
        raise StoreNotFound(f"{ctx_dir} is not a ctx store (no HEAD)",
                            hint="run `ctx init`, or check --ctx-dir")
