"""Saved views: a named query with a token budget (spec 000, spec 001 §4).

Owns the view operations: create, update, delete, get and list, and the built-in
``default`` view (``tag:tier:pinned OR tag:tier:reference OR tag:tier:working``, budget
50,000 or the caller's default), which exists from the first use without being written:
reading never writes the store. ``update_view(store, "default", ...)`` saves it like any
other view. It must not run SQL (reads go through ``ctxstore.index.read``) or print.
The write path (``knowledge.nodes``, staging) is imported only by the functions that
write: ``compose`` and the session-start hook read views on every run.
"""

from __future__ import annotations

import re
import time
from contextlib import closing
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.errors import InvalidInput, NodeNotFound
from ctxstore.index import open_index
from ctxstore.index.read import ViewRow, find_view, read_views
from ctxstore.model.knowledge import ViewRecord, ViewRemoved
from ctxstore.query.parser import parse_query
from ctxstore.repo import Store
from ctxstore.security.guard import guard_fields

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.knowledge.nodes import WriteResult

__all__ = ["DEFAULT_VIEW_NAME", "DEFAULT_VIEW_QUERY", "DEFAULT_BUDGET", "validate_view_name",
           "get_view", "list_views", "create_view", "update_view", "delete_view"]

DEFAULT_VIEW_NAME = "default"
DEFAULT_VIEW_QUERY = "tag:tier:pinned OR tag:tier:reference OR tag:tier:working"
DEFAULT_BUDGET = 50_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def validate_view_name(name: str) -> str:
    """Check a view name.

    Args:
        name: The name as given.

    Returns:
        ``name`` unchanged.

    Raises:
        InvalidInput: for names other than letters, digits, ``_ . -`` (max 64).
    """
    if not _NAME.fullmatch(name):
        raise InvalidInput(f"invalid view name {name!r} (letters, digits, _ . -; up to 64)")
    return name


def _builtin(budget: int) -> ViewRow:
    return ViewRow(DEFAULT_VIEW_NAME, DEFAULT_VIEW_QUERY, budget, "built-in default view", 0, 0,
                   builtin=True)


def _check_budget(budget: int) -> int:
    if budget < 1:
        raise InvalidInput(f"budget must be a positive number of tokens, got {budget}")
    return budget


def get_view(conn: sqlite3.Connection, name: str, *,
             default_budget: int = DEFAULT_BUDGET) -> ViewRow:
    """A saved view, or the built-in default.

    Args:
        conn: A synced index connection.
        name: The view's name.
        default_budget: The budget of the built-in default view when it is not saved.

    Returns:
        The view (``builtin`` set for the unsaved default).

    Raises:
        NodeNotFound: (E019) if there is no view of that name.
    """
    view = find_view(conn, name)
    if view is None and name == DEFAULT_VIEW_NAME:
        return _builtin(default_budget)
    if view is None:
        raise NodeNotFound(f"no view named {name!r}", hint="see `ctx view list`")
    return view


def list_views(conn: sqlite3.Connection, *, default_budget: int = DEFAULT_BUDGET) -> list[ViewRow]:
    """Every view, the built-in default included when it has not been saved.

    Args:
        conn: A synced index connection.
        default_budget: The budget shown for the unsaved default view.

    Returns:
        The views sorted by name.
    """
    views = read_views(conn)
    if not any(v.name == DEFAULT_VIEW_NAME for v in views):
        views.append(_builtin(default_budget))
    return sorted(views, key=lambda v: v.name)


def create_view(store: Store, name: str, query: str, budget: int,
                description: str | None = None) -> WriteResult:
    """Save a new view.

    Args:
        store: The store to write to.
        name: The view's name.
        query: Its query (checked with the query parser).
        budget: Its token budget (positive).
        description: An optional description.

    Returns:
        The view record staged.

    Raises:
        InvalidInput: bad name, budget or query syntax, or the view exists.
        QuerySyntaxError: (E011) if the query does not parse.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    from ctxstore.knowledge.nodes import stage_write

    validate_view_name(name)
    _check_budget(budget)
    parse_query(query, now=time.time())
    guard_fields(store, "explicit", [("the query", query), ("the description", description)])
    with store.lock():
        with closing(open_index(store)) as conn:
            exists = find_view(conn, name) is not None
        if exists:
            raise InvalidInput(f"view {name!r} exists", hint=f"use `ctx view update {name}`")
        stamp = next_stamp()
        rec = ViewRecord(name=name, query=query, budget=budget, description=description,
                         created_at=stamp, updated_at=stamp, prev=None)
        return stage_write(store, [rec], f"view create {name}")


def update_view(store: Store, name: str, *, query: str | None = None, budget: int | None = None,
                description: str | None = None,
                default_budget: int = DEFAULT_BUDGET) -> WriteResult:
    """Change a view's query, budget or description (saving the default view if needed).

    Args:
        store: The store to write to.
        name: The view's name.
        query: A new query, or None to keep it.
        budget: A new budget, or None to keep it.
        description: A new description, or None to keep it.
        default_budget: The budget of the built-in default view, when it is the one saved.

    Returns:
        The new view record staged.

    Raises:
        InvalidInput: if nothing is given or a value is invalid.
        QuerySyntaxError: (E011) if the query does not parse.
        NodeNotFound: if there is no such view.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    from ctxstore.knowledge.nodes import stage_write

    if query is None and budget is None and description is None:
        raise InvalidInput("nothing to update", hint="give --query, --budget or --description")
    guard_fields(store, "explicit", [("the query", query), ("the description", description)])
    if budget is not None:
        _check_budget(budget)
    if query is not None:
        parse_query(query, now=time.time())
    with store.lock():
        with closing(open_index(store)) as conn:
            cur = get_view(conn, name, default_budget=default_budget)
        stamp = next_stamp(cur.updated_at)
        rec = ViewRecord(name=name, query=cur.query if query is None else query,
                         budget=cur.budget if budget is None else budget,
                         description=cur.description if description is None else description,
                         created_at=cur.created_at or stamp, updated_at=stamp, prev=None)
        return stage_write(store, [rec], f"view update {name}")


def delete_view(store: Store, name: str) -> WriteResult:
    """Delete a saved view (deleting ``default`` restores the built-in one).

    Args:
        store: The store to write to.
        name: The view's name.

    Returns:
        The view tombstone staged.

    Raises:
        NodeNotFound: if there is no saved view of that name.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    from ctxstore.knowledge.nodes import stage_write

    with store.lock():
        with closing(open_index(store)) as conn:
            cur = find_view(conn, name)
        if cur is None:
            raise NodeNotFound(f"no saved view named {name!r}")
        removed = ViewRemoved(name=name, at=next_stamp(cur.updated_at), prev=None)
        return stage_write(store, [removed], f"view delete {name}")
