"""Opening ``local/state.sqlite``: checked, migrated, repaired, or peeked at read-only.

The file and its side files must be regular files in a real ``local/`` directory (a link is
moved aside, never followed); a damaged file is moved aside to
``state.sqlite.damaged-<time>-<pid>`` and created again, with a one-time notice.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxstore.claude.state.handle import HookState, StateDamaged, _is_damage
from ctxstore.claude.state.schema import (
    _LOCK_FILE,
    _MIGRATIONS,
    _SIDE_FILES,
    _TABLES,
    NOTICE_KEY,
    STATE_FILE,
    TASK_KEY,
    state_path,
)
from ctxstore.errors import UnsafePath
from ctxstore.sqlite import connect, irregular_files, migrate

__all__ = ["open_state", "peek_state", "repair_state", "read_access_counts"]

def _ident(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _check_files(path: Path) -> tuple[int, int] | None:
    """The state file and its WAL and shared-memory files must be regular files (or absent).

    SQLite would follow a link out of the store, and block or fail on the rest.

    Returns:
        ``(st_dev, st_ino)`` of the state file, or None when it does not exist.

    Raises:
        StateDamaged: naming the first that is not.
    """
    ident = _ident(path)
    for entry, st in irregular_files(path):
        from ctxstore.fsio import file_kind

        raise StateDamaged(f"{entry.name} is {file_kind(st.st_mode)}", ident)
    return ident


def _open_checked(path: Path) -> HookState:
    """Open, migrate and check the tables of the state at ``path``.

    Raises:
        StateDamaged: if it is damaged.
        sqlite3.OperationalError: if it cannot be opened or stays locked (not damage).
    """
    ident = _check_files(path)
    try:
        conn = connect(path, busy_seconds=5.0)
    except sqlite3.Error as exc:
        if _is_damage(exc):
            raise StateDamaged(str(exc), ident) from exc
        raise
    try:
        migrate(conn, _MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if missing := sorted(_TABLES - tables):
            raise StateDamaged(f"table {missing[0]} is missing", ident)
    except sqlite3.Error as exc:
        conn.close()
        if _is_damage(exc):
            raise StateDamaged(str(exc), ident) from exc
        raise
    except BaseException:
        conn.close()
        raise
    return HookState(conn, ident or _ident(path))


def _check_local(store_root: Path, *, create: bool) -> tuple[bool, str | None]:
    """Make sure ``local/`` is a real directory (creating it if ``create``).

    Returns:
        Whether it exists now (False when it did not and must not be created), and a
        notice when something other than a directory stood in its place and was moved
        aside.

    Raises:
        UnsafePath: (E020) if ``local/`` is a symbolic link.
        OSError: if it cannot be created.
    """
    local = store_root / "local"
    try:
        st = os.lstat(local)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):  # the common case: no fsio import (~ms)
        return True, None
    from ctxstore import fsio

    if st is None:
        if not create:
            return False, None
        with fsio.open_dir(store_root) as store_dir:
            store_dir.ensure_dir(local)
        return True, None
    if stat.S_ISLNK(st.st_mode):  # refused, never followed: it may lead out of the store
        fsio.check_under(store_root, local)
    # Anything else in place of the folder (a file, a FIFO) is damage, moved aside.
    moved = _move_aside(local)
    with fsio.open_dir(store_root) as store_dir:
        store_dir.ensure_dir(local)
    return True, (f"the hook state folder .ctx/local was {fsio.file_kind(st.st_mode)}; moved "
                  f"aside to .ctx/{moved} and started fresh")


def _move_aside(path: Path) -> str:
    """Rename ``path`` to a unique ``<name>.damaged-<time>-<pid>`` beside it; return the new name.

    The entry itself is renamed: a link is never followed.
    """
    from ctxstore import fsio

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for n in range(100):
        target = path.with_name(f"{path.name}.damaged-{stamp}-{os.getpid()}" + (f"-{n}" if n else ""))
        if _ident(target) is None:
            fsio.replace(path, target)
            return target.name
    raise FileExistsError(str(path))  # pragma: no cover - 100 names taken in one second


def repair_state(store_root: Path, damage: StateDamaged) -> str | None:
    """Move a damaged state aside and record a one-time notice in the fresh state.

    The WAL and shared-memory files move with it. Returns the notice, or None if another hook
    already replaced the file.

    Runs under ``local/state.lock`` so that two hooks finding the same damage move it
    once, and never move aside the fresh file the other one created.

    Raises:
        UnsafePath: (E020) if ``local/`` or the lock file is a symbolic link.
        LockConflict: if another hook holds the repair lock for seconds.
        OSError: if the files cannot be renamed.
    """
    from ctxstore import fsio

    path = state_path(store_root)
    _check_local(store_root, create=True)  # the hooks opened it: it exists unless removed since
    with fsio.hold_lock(path.parent / _LOCK_FILE, timeout=5.0):
        if damage.ident is not None and _ident(path) not in (damage.ident, None):
            try:  # replaced since: only repair it if the new one is damaged too
                _open_checked(path).close()
                return None
            except StateDamaged as again:
                damage = again
        moved = None
        for suffix in _SIDE_FILES:
            side = Path(str(path) + suffix)
            if _ident(side) is not None:
                name = _move_aside(side)
                moved = moved or name
        where = f"; moved aside to local/{moved}" if moved else ""
        notice = (f"the hook state .ctx/local/{STATE_FILE} was damaged ({damage.reason}){where} "
                  "and started fresh (pending results and deferred commands in it are lost)")
        state = _open_checked(path)
    with state:
        old = state.get(NOTICE_KEY)
        state.put(NOTICE_KEY, f"{old}; {notice}" if old else notice)
    return notice


def open_state(store_root: Path, *, create: bool) -> HookState | None:
    """Open the state of the store at ``store_root``.

    None if it does not exist and ``create`` is false (so a read-only hook creates nothing). A
    damaged state is moved aside and replaced by a new, empty one that holds a one-time notice
    (``NOTICE_KEY``).

    Raises:
        UnsafePath: (E020) if ``local/`` is a symbolic link.
        OSError: if ``local/`` cannot be created.
        sqlite3.OperationalError: if the file cannot be opened or stays locked.
        StateDamaged: if the file is damaged again right after it was replaced.
    """
    exists, notice = _check_local(store_root, create=create)
    if not exists:
        return None
    path = state_path(store_root)
    if not create and notice is None and _ident(path) is None:
        return None
    try:
        state = _open_checked(path)
    except StateDamaged as damage:
        repair_state(store_root, damage)
        state = _open_checked(path)
    if notice is not None:
        with _closing_on_error(state):
            state.put(NOTICE_KEY, notice)
    with _closing_on_error(state):
        _adopt_legacy_task(store_root, state)
    return state


def _adopt_legacy_task(store_root: Path, state: HookState) -> None:
    """Move the current task an older ctx kept here (kv ``TASK_KEY``) to its one owner.

    The current task is ``knowledge.tasks``'s (``local/current-task``), read alike by the
    hooks, the MCP server and ``ctx pack``; a task an older hook started is moved there once
    (unless a task is current there already), then dropped from the state.
    """
    legacy = state.get(TASK_KEY)
    if legacy is None:
        return
    from ctxstore.errors import InvalidInput
    from ctxstore.knowledge.tasks import read_current_task, set_current_task

    if read_current_task(store_root) is None:
        try:
            set_current_task(store_root, legacy)
        except InvalidInput:
            pass  # not a task name: nothing to carry over
    state.put(TASK_KEY, None)


# What a read-only reader of the state needs (an older schema still has them).
_PEEK_TABLES = frozenset({"pending", "queue", "kv"})


def peek_state(store_root: Path) -> HookState | None:
    """The state opened read-only, for a preview that must change nothing.

    Nothing is created, migrated or repaired: None when there is no state, when it is not a
    regular file, lacks a table a reader needs or cannot be opened (then the next hook replaces
    or creates it, and starts with an empty state).
    """
    path = state_path(store_root)
    try:
        if not stat.S_ISDIR(os.lstat(path.parent).st_mode):
            return None
        ident = _check_files(path)
    except (OSError, StateDamaged):
        return None
    if ident is None:
        return None
    try:
        conn = connect(path, busy_seconds=5.0, read_only=True)
    except (sqlite3.Error, UnsafePath):
        return None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        tables = set()
    if not _PEEK_TABLES <= tables:
        conn.close()
        return None
    return HookState(conn, ident)


def read_access_counts(store_root: Path) -> dict[str, int]:
    """The hooks' retrieval counts per node id in this clone (none without a state file).

    Raises:
        As ``open_state`` (never creates the state).
    """
    state = open_state(store_root, create=False)
    if state is None:
        return {}
    with state:
        return state.access_counts()


@contextmanager
def _closing_on_error(state: HookState) -> Iterator[None]:
    try:
        yield
    except BaseException:
        state.close()
        raise
