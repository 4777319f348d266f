"""The global layer (DESIGN §2, spec 003): reading the project store and the user store together.

What a project learns stays in its ``.ctx/``; what holds everywhere (the user's preferences,
facts about their tools) lives in the user store ``~/.ctx``. Recall, search, query and
compose read both when asked (``--global``; recall by default, ``[retrieval] recall_global``),
and every result carries the store it came from (``project`` or ``user``). Writes with the
global scope (``ctx add --global``, ``<ctx:remember scope="global">``, the MCP ``remember``
tool with ``scope: "user"``) go to the user store, which is created on first write.

The two stores are never mixed: each is read through its own ``Session`` and index, and
results are merged here. This module runs no SQL and reads no environment: the caller
passes the user store's path (``user_store_path``); ``default_user_store`` is the one place
the library expands ``~``, for front ends that have no environment of their own (a hook's
command handler).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ctxstore.errors import InvalidInput
from ctxstore.index.read import NodeRow
from ctxstore.records import dataclass
from ctxstore.session import Session

if TYPE_CHECKING:
    from ctxstore.repo import Store
    from ctxstore.search.search import RunHit

__all__ = ["SCOPES", "Scope", "ScopedNode", "ScopedRun", "ScopedSearch", "Stores", "user_store_path",
           "default_user_store", "recall_global_default", "open_user_store", "search_scoped",
           "search_scoped_hits",
           "query_scoped", "recall_scoped", "parse_scope", "scoped_json", "session_for_scope"]

Scope = Literal["project", "user"]
SCOPES: tuple[Scope, ...] = ("project", "user")
# What a scope attribute may say: "global" is the user store, "project"/"local" the project's.
_SCOPE_NAMES: dict[str, Scope] = {"project": "project", "local": "project", "global": "user",
                                  "user": "user"}


def parse_scope(text: str | None) -> Scope:
    """The store a write goes to, from a ``scope`` attribute or argument.

    Args:
        text: ``project`` (or ``local``), ``global`` (or ``user``), or None for the project.

    Returns:
        ``project`` or ``user``.

    Raises:
        InvalidInput: (E011) for any other word.
    """
    if text is None or not text.strip():
        return "project"
    scope = _SCOPE_NAMES.get(text.strip().lower())
    if scope is None:
        raise InvalidInput(f"scope must be project or global, got {text!r}")
    return scope


def user_store_path(home: Path) -> Path:
    """The user store of a home directory (``<home>/.ctx``).

    Args:
        home: The user's home directory.

    Returns:
        The user store's ``.ctx`` directory (it may not exist yet).
    """
    return home / ".ctx"


def default_user_store() -> Path:
    """The user store of the running user (``~/.ctx``), for front ends given no home.

    Returns:
        ``~/.ctx`` expanded.
    """
    return Path("~").expanduser() / ".ctx"


def recall_global_default(store: Store) -> bool:
    """Whether recall reads the user store too when not told (``[retrieval] recall_global``).

    Args:
        store: The project store (its config decides).

    Returns:
        The setting, True when the config does not have it.
    """
    values = store.config.values.get("retrieval", {})
    value = values.get("recall_global", True)
    return value if isinstance(value, bool) else True


def open_user_store(path: Path, *, create: bool) -> Session | None:
    """A session on the user store, or None when there is none and ``create`` is False.

    Reads never create the user store (a search with ``--global`` on a machine without one
    just finds nothing there); a global write does.

    Args:
        path: The user store's ``.ctx`` directory (``user_store_path``).
        create: Create it (without Git) when it does not exist.

    Returns:
        The session (close it), or None.

    Raises:
        StoreNotFound, UnsafePath, ConfigInvalid, UnsupportedStoreVersion: if it cannot be opened.
        StoreExists, StorageIOError: if it cannot be created.
    """
    if not (path / "HEAD").is_file():
        if not create:
            return None
        from ctxstore.init import init_store

        init_store(path, git=False)
    return Session.open(path)


@contextmanager
def session_for_scope(project: Session, scope: str | None, *,
                      user_store: Path | None = None) -> Iterator[Session]:
    """The session a write with ``scope`` goes to: the project's, or the user store's (created).

    Args:
        project: The project's open session.
        scope: ``project``/``local`` (or None), or ``global``/``user``.
        user_store: The user store's directory; ``default_user_store()`` when None.

    Yields:
        The session to write to (a user store's opened here is closed on exit).

    Raises:
        InvalidInput: (E011) for an unknown scope.
        StoreExists, StorageIOError, UnsafePath, ConfigInvalid: if the user store cannot be
            created or opened.
    """
    if parse_scope(scope) == "project":
        yield project
        return
    path = user_store if user_store is not None else default_user_store()
    if _same(path, project.root):
        yield project
        return
    db = open_user_store(path, create=True)
    assert db is not None  # created above when missing
    try:
        yield db
    finally:
        db.close()


@dataclass
class Stores:
    """The stores one read covers: the project's, and the user store when global.

    Attributes:
        project: The project's session (the store the command found).
        user: The user store's session, or None (not global, no user store, or the project
            store is the user store itself).
    """

    project: Session
    user: Session | None = None

    @classmethod
    def open(cls, project: Session, user_path: Path | None) -> Stores:
        """The project store plus the user store at ``user_path`` when it exists.

        Args:
            project: The project's open session.
            user_path: The user store's directory, or None for the project alone.

        Returns:
            The stores; ``user`` is None when ``user_path`` is None, holds no store, or is
            the project store itself (read once, labelled ``project``).

        Raises:
            UnsafePath, ConfigInvalid, UnsupportedStoreVersion: if the user store cannot be opened.
        """
        if user_path is None or _same(user_path, project.root):
            return cls(project)
        return cls(project, open_user_store(user_path, create=False))

    def each(self) -> Iterator[tuple[Scope, Session]]:
        """The sessions with their labels, project first."""
        yield "project", self.project
        if self.user is not None:
            yield "user", self.user

    def close_user(self) -> None:
        """Close the user store's session (the project's belongs to the caller)."""
        if self.user is not None:
            self.user.close()


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class ScopedNode:
    """A node and the store it came from.

    Attributes:
        scope: ``project`` or ``user``.
        node: The node as that store's index holds it.
        score: Its relevance (higher is better) for a full-text search, else None.
        matched: The search's terms it holds (a full-text search only).
    """

    scope: Scope
    node: NodeRow
    score: float | None = None
    matched: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScopedRun:
    """A stored command run found by search, and the store it came from.

    Attributes:
        scope: ``project`` or ``user``.
        run: The run and what its command did next.
        score: Its relevance (higher is better).
        matched: The search's terms it holds.
    """

    scope: Scope
    run: RunHit
    score: float
    matched: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScopedSearch:
    """A search over every store: its nodes and its command runs, each best first."""

    nodes: list[ScopedNode]
    runs: list[ScopedRun]


def search_scoped_hits(stores: Stores, text: str, *, limit: int,
                       kinds: Sequence[str] = ("node", "narrative", "run"),
                       include_superseded: bool = False) -> ScopedSearch:
    """Ranked search for any text over every store: nodes and stored runs (``search.search``).

    The one search of ``ctx search``, run in each store: a command's runs are one hit (its
    best run for the text, with what the command did next), and among nodes at most
    ``search.MIXED_RUNS`` runs are kept, as ``ctx search`` keeps them.

    Args:
        stores: The stores to read.
        text: Any text (never refused; one without a word finds nothing).
        limit: The most results in all, nodes and runs together.
        kinds: ``node``, ``narrative``, ``run`` (chunks and symbols are the project's code,
            not searched across stores).
        include_superseded: Also superseded nodes.

    Returns:
        The nodes and the runs among the ``limit`` best results. Each store's scores are
        ranked over its own index, so they are close to comparable; on a tie the project's
        result comes first.

    Raises:
        IndexCorrupt: (E007) if an index cannot answer.
    """
    from ctxstore.search.search import MIXED_RUNS, search

    found: list[tuple[float, int, ScopedNode | ScopedRun]] = []
    for rank, (scope, db) in enumerate(stores.each()):
        for hit in search(db, text, kinds=kinds, limit=limit,
                          include_superseded=include_superseded):
            if hit.node is not None:
                found.append((-hit.score, rank, ScopedNode(scope, hit.node, hit.score,
                                                           hit.matched)))
            elif hit.run is not None:
                found.append((-hit.score, rank, ScopedRun(scope, hit.run, hit.score, hit.matched)))
    found.sort(key=lambda t: (t[0], t[1]))
    kept = [item for _, _, item in found[:limit]]
    runs = [r for r in kept if isinstance(r, ScopedRun)]
    if set(kinds) - {"run"}:
        runs = runs[:MIXED_RUNS]
    return ScopedSearch([n for n in kept if isinstance(n, ScopedNode)], runs)


def search_scoped(stores: Stores, text: str, *, limit: int,
                  kinds: Sequence[str] = ("node", "narrative"),
                  include_superseded: bool = False) -> list[ScopedNode]:
    """Ranked search for any text over every store, best first (``search.search.search``).

    Args:
        stores: The stores to read.
        text: Any text (never refused; one without a word finds nothing).
        limit: The most results in all.
        kinds: The node kinds to search: ``node`` and/or ``narrative``.
        include_superseded: Also superseded nodes.

    Returns:
        At most ``limit`` results. Each store's scores are ranked over its own index, so they
        are close to comparable; on a tie the project's result comes first.

    Raises:
        IndexCorrupt: (E007) if an index cannot answer.
    """
    return search_scoped_hits(stores, text, limit=limit, kinds=kinds,
                              include_superseded=include_superseded).nodes


def query_scoped(stores: Stores, text: str, *, now: float, limit: int | None = None,
                 include_superseded: bool = False) -> list[ScopedNode]:
    """The query language over every store: the project's matches, then the user store's.

    Args:
        stores: The stores to read.
        text: The query (docs/query.md).
        now: Seconds since the epoch (relative times).
        limit: The most results in all, or None.
        include_superseded: Also superseded nodes.

    Returns:
        The matches in each store's order, project first, cut to ``limit``.

    Raises:
        QuerySyntaxError, NodeNotFound, AmbiguousPrefix, QueryTooComplex, IndexCorrupt:
            as ``query.executor.run_query`` (a ``from:`` id the user store lacks is not an
            error there: that store is skipped).
    """
    from ctxstore.errors import AmbiguousPrefix, NodeNotFound
    from ctxstore.query.executor import run_query

    out: list[ScopedNode] = []
    for scope, db in stores.each():
        left = None if limit is None else limit - len(out)
        if left is not None and left <= 0:
            break
        try:
            nodes = run_query(db.index(), text, now=now, include_superseded=include_superseded,
                              limit=left)
        except (NodeNotFound, AmbiguousPrefix):
            if scope == "project":
                raise
            continue  # an id of the project's store names nothing in the user store
        out += [ScopedNode(scope, n) for n in nodes]
    return out


def recall_scoped(stores: Stores, query: str, *, limit: int, now: float) -> list[ScopedNode]:
    """What recall returns over every store (``knowledge.recall.recall_nodes`` per store).

    Free text is always accepted (DESIGN §8): a query the query language cannot parse is
    searched as full text instead.

    Args:
        stores: The stores to read.
        query: The query text; it must not be blank.
        limit: The most nodes in all.
        now: Seconds since the epoch.

    Returns:
        Live nodes, the project's first: not archived, or archived by the lifecycle only
        (recalling one restores it: ``lifecycle.policy.restore_recalled_scoped``).

    Raises:
        InvalidInput: (E011) for a blank query.
        IndexCorrupt: (E007) if an index cannot answer.
    """
    from ctxstore.knowledge.recall import recall_nodes

    if not query.strip():
        raise InvalidInput("recall needs a query")
    out: list[ScopedNode] = []
    for scope, db in stores.each():
        left = limit - len(out)
        if left <= 0:
            break
        # recall_nodes searches what the query language cannot parse as free text.
        out += [ScopedNode(scope, n) for n in recall_nodes(db.index(), query, limit=left, now=now)]
    return out


def scoped_json(hits: Sequence[ScopedNode]) -> list[dict[str, Any]]:
    """The results as JSON objects ``{"store", "id", "type", "content", "tags", "status", "provenance"}``.

    A search result adds ``score`` and ``matched`` (the terms it holds).

    Args:
        hits: Scoped results.

    Returns:
        One object per result, in order.
    """
    # Here, not at the top: the hooks import this module for scope handling, and provenance
    # (git, the secret guard) would cost the prompt hook's import budget for nothing.
    from ctxstore.knowledge.nodes.provenance import provenance_json

    out = []
    for h in hits:
        doc: dict[str, Any] = {"store": h.scope, "id": h.node.id, "type": h.node.type,
                               "content": h.node.content, "tags": list(h.node.tags),
                               "status": h.node.status,
                               "provenance": provenance_json(h.node.metadata)}
        if h.score is not None:
            doc["score"] = round(h.score, 4)
            doc["matched"] = list(h.matched)
        out.append(doc)
    return out
