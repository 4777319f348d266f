"""Comparing the on-disk index with a replay of the store (``ctx debug verify --index``).

The open-time checks of ``ctxstore.index`` catch a file SQLite cannot read and a schema
or ``meta`` row ctx did not write; they cannot tell a hand-edited row from a real one.
This replays the objects into a fresh in-memory index, synced to the same pointers the
file says it reflects, and compares the two table by table. It only reads: the file is
opened read-only and nothing is repaired (``ctx rebuild`` does that).
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ctxstore import fsio
from ctxstore.errors import CtxError, UnsafePath
from ctxstore.index import (  # the package's private helpers: one package, one schema
    INDEX_FILE,
    _connect,
    _create,
    _irregular_files,
    index_dir,
    inspect_index,
    parse_snapshot,
    pointer_snapshot,
    sync_index,
)
from ctxstore.repo import Store
from ctxstore.verify import Problem

__all__ = ["REACHED_TABLES", "STRICT_TABLES", "IndexComparison", "compare_index"]

# The answers: exactly what a replay gives (nodes without their rowid, FTS by node id).
STRICT_TABLES: dict[str, str] = {
    "nodes": "SELECT id, type, content, content_blob, summary, status, superseded_by, created_at,"
             " updated_at, author, metadata, tokens, version, hook_key FROM nodes",
    "nodes_fts": "SELECT n.id, f.content, f.summary FROM nodes_fts f LEFT JOIN nodes n"
                 " ON n.rowid = f.rowid",
    "tags": "SELECT node_id, tag FROM tags",
    "edges": "SELECT * FROM edges",
    "views": "SELECT * FROM views",
    "winners": "SELECT * FROM winners",
}
# Bookkeeping: everything the replay reaches must be there. More is normal, so it is not
# reported: a session folded by `ctx commit` stays applied though the new heads no
# longer reach it (and rows nothing reaches change no answer).
REACHED_TABLES: dict[str, str] = {
    "applied": "SELECT * FROM applied",
    "applied_batches": "SELECT * FROM applied_batches",
    # Which batch a version is filed under is the first that carried it (a session's
    # work commit, or the fold that replaced it): the version itself must match.
    "versions": "SELECT key, version, stamp, kind, record FROM versions",
    "commit_graph": "SELECT * FROM commit_graph",
    "commit_parents": "SELECT * FROM commit_parents",
    "node_heads": "SELECT * FROM node_heads",
}


@dataclass
class IndexComparison:
    """What ``compare_index`` found."""

    tables: int = 0
    rows: int = 0
    differences: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not any(d.severity == "error" for d in self.differences)


def _short(value: Any) -> str:
    if isinstance(value, bytes):
        return value.hex()[:16]
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_files(store: Store) -> list[Problem]:
    folder = index_dir(store)
    try:
        fsio.check_under(store.root, folder)
    except UnsafePath as exc:
        return [Problem("E020", "index", exc.message)]
    return [Problem("E020", "index", f"{path} is {fsio.file_kind(st.st_mode)}, not a regular file")
            for path, st in _irregular_files(folder)]


def compare_index(store: Store) -> IndexComparison:
    """Replay the store into a fresh in-memory index and compare the file with it.

    Returns:
        The tables and rows compared, and each difference found (E007: the file differs
        from the replay or cannot be read; E020: an index file is a link or special).

    Raises:
        CtxError: (E001-E005) if the store itself cannot be replayed.
    """
    report = IndexComparison()
    report.differences = _check_files(store)
    path = index_dir(store) / INDEX_FILE
    if report.differences:
        return report
    if not path.exists():
        report.differences.append(Problem(
            "E007", "index", "no index file (the next command builds it)", "warning"))
        return report
    try:
        disk = sqlite3.connect(f"file:{quote(os.fspath(path))}?mode=ro", uri=True,
                               isolation_level=None)
    except sqlite3.Error as exc:
        report.differences.append(Problem("E007", "index", f"cannot open: {exc}"))
        return report
    try:
        _compare(store, disk, report)
    finally:
        disk.close()
    return report


def _compare(store: Store, disk: sqlite3.Connection, report: IndexComparison) -> None:
    try:
        problem = inspect_index(disk, create=False, quick_check_max=0)
        if problem is None:
            found = [str(r[0]) for r in disk.execute("PRAGMA integrity_check(20)")]
            if found != ["ok"]:
                problem = "integrity_check: " + "; ".join(found)[:300]
        rows = dict(disk.execute("SELECT key, value FROM meta").fetchall()) if problem is None else {}
    except (sqlite3.Error, CtxError) as exc:
        problem = str(exc)
    if problem is not None:
        report.differences.append(Problem("E007", "index", f"damaged: {problem}"))
        return
    synced = parse_snapshot(rows["synced"]) if "synced" in rows else None
    ref = _connect(":memory:")
    try:
        _create(ref)
        if synced is not None:
            try:
                sync_index(store, ref, target=synced)
            except CtxError as exc:
                report.differences.append(Problem(
                    "E007", "index", f"synced to pointers the store cannot replay: {exc.message}"))
                return
            if synced != pointer_snapshot(store):
                report.differences.append(Problem(
                    "E007", "index", "behind the pointers (the next command catches up)", "warning"))
        for tables, exact in ((STRICT_TABLES, True), (REACHED_TABLES, False)):
            for table, sql in tables.items():
                _compare_table(table, sql, disk, ref, exact, report)
    finally:
        ref.close()


def _compare_table(table: str, sql: str, disk: sqlite3.Connection, ref: sqlite3.Connection,
                   exact: bool, report: IndexComparison) -> None:
    try:
        have = Counter(disk.execute(sql).fetchall())
    except sqlite3.Error as exc:
        report.differences.append(Problem("E007", f"index:{table}", f"unreadable: {exc}"))
        return
    want = Counter(ref.execute(sql).fetchall())
    report.tables += 1
    report.rows += sum(have.values())
    missing = want - have
    extra = have - want
    if missing:
        first = min(missing, key=repr)
        report.differences.append(Problem(
            "E007", "index", f"table {table}: {sum(missing.values())} row(s) of the replay missing "
                             f"or different (first: {_short(first[0])})"))
    if extra and exact:
        first = min(extra, key=repr)
        report.differences.append(Problem(
            "E007", "index", f"table {table}: {sum(extra.values())} row(s) not in the replay "
                             f"(first: {_short(first[0])})"))
