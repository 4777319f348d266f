"""One open store for a front end: Store + synced index + Config + clock (STYLE §2.1).

A ``Session`` is what a command, a hook or a long-lived server (MCP) works against. It is
opened once (``Session.open(ctx_dir)``, or ``Session(store)`` around a store opened
elsewhere) and closed once; it owns the index connection it opens and closes it. The
index is opened lazily, on the first ``index()`` call, so a path that only writes never
pays for SQLite, and every later call catches it up with HEAD and STAGE (cheap when they
have not moved), so a long-lived process never reads a stale index after a write.
``Session.open`` checks the store and reads its config at once but builds the ``Store``
handle (and imports the object model) only when first needed: a read whose index is
already in sync with the pointers (``index.open_current``) never needs it.

Every operation of the operations layer takes the session: writes read the index under the
store lock through ``index()`` (never a connection of their own), reads share it. A session
is used by one thread at a time. This module must not print or read the environment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ctxstore.discovery import check_store
from ctxstore.errors import IndexCorrupt
from ctxstore.limits import load_store_config

if TYPE_CHECKING:
    from ctxstore.config import Config
    from ctxstore.index import IndexConnection, IndexRepair
    from ctxstore.repo import Store

__all__ = ["Session"]


class Session:
    """A store with its derived index, config and clock, opened and closed once.

    Attributes:
        clock: Wall-clock seconds (``time.time``; tests pass another).
    """

    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        """Wrap an open store; the index is opened on first use.

        Args:
            store: The store (``repo.open_store``).
            clock: The wall clock in seconds.
        """
        self._store: Store | None = store
        self._root = store.root
        self._config = store.config
        self._lock_timeout: float | None = None
        self._build = True
        self.clock = clock
        self._conn: IndexConnection | None = None
        self._repairs: list[IndexRepair] = []
        self._closed = False

    @classmethod
    def open(cls, ctx_dir: Path, *, lock_timeout: float | None = None,
             clock: Callable[[], float] = time.time, config: Config | None = None,
             build: bool = True) -> Session:
        """Open the store at ``ctx_dir`` (the ``.ctx`` directory itself).

        Args:
            ctx_dir: The store's directory.
            lock_timeout: How long a write waits for the store lock (seconds); the
                configured ``[lock] timeout_seconds`` when None.
            clock: The wall clock in seconds.
            config: ``config.toml`` as the caller already loaded it (None: loaded here).
            build: Whether ``index()`` may build the whole index (a new, outdated or partial
                one, ``index.open_index(rebuild=...)``). A hook passes False: ``index()`` then
                raises ``IndexNotReady`` and the hook answers without the index.

        Returns:
            The session (its index not opened yet).

        Raises:
            StoreNotFound, UnsafePath, ConfigInvalid, UnsupportedStoreVersion: as
                ``repo.open_store`` raises them (the same checks, done here).
        """
        ctx_dir = Path(ctx_dir)
        check_store(ctx_dir)
        session = cls.__new__(cls)
        session._store = None
        session._root = ctx_dir.resolve()
        session._config = config if config is not None else load_store_config(ctx_dir)
        session._lock_timeout = lock_timeout
        session._build = build
        session.clock = clock
        session._conn = None
        session._repairs = []
        session._closed = False
        return session

    @property
    def store(self) -> Store:
        """The open store (the handle is built on first use)."""
        if self._store is None:
            from ctxstore.repo import Store

            # What ``repo.open_store`` returns: ``open`` already made its checks.
            self._store = Store(self._root, self._config)
            if self._lock_timeout is not None:
                self._store.lock_timeout = self._lock_timeout
        return self._store

    @property
    def config(self) -> Config:
        """The store's configuration (``config.toml``)."""
        return self._config

    @property
    def root(self) -> Path:
        """The store's ``.ctx`` directory."""
        return self._root

    @property
    def index_open(self) -> bool:
        """True once ``index()`` has opened the connection (and until ``close()``)."""
        return self._conn is not None

    def index(self, progress: Callable[[int, int], None] | None = None) -> IndexConnection:
        """The index connection, opened on first use and brought up to date each call.

        Args:
            progress: Called with (records applied, records to apply) while the index catches
                up with what it has not seen (a large import, a pull).

        Returns:
            The connection this session owns (do not close it; ``close()`` does). Using
            a closed session is a bug and raises ``RuntimeError``.

        Raises:
            UnsafePath: (E020) if an index file is a symlink or a special file.
            IndexCorrupt: (E007) if the index is damaged beyond an automatic rebuild.
            IndexNotReady: (E024) if the index needs a full build and the session was opened
                with ``build=False``, or another process builds it for longer than the lock
                timeout.
            CtxError: (E001-E005) if the store is damaged on the way.
        """
        # Imported here: a hook that never reads the index never loads SQLite's layer.
        from ctxstore.index import is_current, open_current, open_index, sync_index

        if self._closed:
            raise RuntimeError("the session is closed")
        if self._conn is None:
            # An index in sync with the pointers needs no store handle (nor the model).
            conn = open_current(self._root) if self._store is None else None
            self._conn = conn if conn is not None else open_index(
                self.store, progress=progress, rebuild=self._build)
            self._repairs.extend(self._conn.repairs)  # for the front end to say, once
        elif self._store is not None or not is_current(self._root, self._conn):
            sync_index(self.store, self._conn, progress=progress, rebuild=self._build)
        return self._conn

    def take_repairs(self) -> list[IndexRepair]:
        """The damaged indexes this session found and rebuilt since the last call, then forget them.

        Each distinct notice once. The CLI prints them on stderr; a hook adds them to
        ``systemMessage``.

        Returns:
            The repairs (``IndexRepair.message()`` is the notice).
        """
        seen: set[str] = set()
        out = []
        for repair in self._repairs:
            if repair.message() not in seen:
                seen.add(repair.message())
                out.append(repair)
        self._repairs.clear()
        return out

    def close_index(self) -> None:
        """Close the index connection, if open; the next ``index()`` opens a new one.

        For a caller about to recreate the index files (``ctx rebuild``).
        """
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close the index connection this session opened (idempotent)."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if isinstance(exc, IndexCorrupt):
            self.index_damaged(exc)
        self.close()

    def index_damaged(self, exc: IndexCorrupt) -> None:
        """Mark the open index damaged, so the next command rebuilds it from the store.

        For damage a reader found in a cell that SQLite does not check (SQLite's own
        damage is marked where it is met): without the mark every command would meet it.
        """
        if self._conn is not None and not exc.in_code_index:  # that one was marked where met
            from ctxstore.index import mark_damaged

            mark_damaged(self._conn, str(exc))
