"""Every stored run of a command, as rows search reads (``runs``, ``runs_fts``).

A ``command_run`` record names one run's ``diagnostics`` snapshot; a newer run of the same
name wins the key (``index.build`` keeps the winner's rows for ``ctx diagnostics``), but
every version stays in ``versions``. Each version applied also gets one ``runs`` row here:
the run's name, tool, exit code, time, command line and first diagnostics, and a
``runs_fts`` document of its searchable text, stemmed as prose (``search.tokenize.PROSE``:
"failed", "failing" and "fail" are one term). A purge that takes a version out of the
history takes its row out too (``forget_run``). Derived only: ``ctx rebuild`` makes the same
rows from the objects. The SELECTs of these tables live here as well (ranked search over
them is ``search.ranked.ranked_runs``). It must not print.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ctxstore.index.read import json_cell
from ctxstore.records import dataclass
from ctxstore.search.fts5 import Fts5Engine
from ctxstore.search.tokenize import PROSE

if TYPE_CHECKING:  # the object model is loaded by the apply path only: `ctx search` reads rows
    from ctxstore.model.build import CommandRunRecord, DiagnosticsSnapshot
    from ctxstore.repo import Store

__all__ = ["RUN_FTS_FIELDS", "STATUS_WORDS", "MAX_RUN_DIAGNOSTICS", "RunRow",
           "RunDiagnostic", "run_status", "summarize_diagnostics", "apply_run", "forget_run",
           "has_runs", "runs_at", "newest_failing_runs", "status_after"]

RUN_FTS_FIELDS = ("name", "status", "text")
# The words a run's status is searched by: the status and the noun of it, so "failed",
# "fails", "failing" (stem ``fail``) and "failure", "failures" (stem ``failur``) all find it.
STATUS_WORDS = {"failed": "failed failure", "passed": "passed pass success",
                "unknown": "unknown timeout"}
# Diagnostics a row keeps for display (each message's first line, cut); the searchable text
# holds up to ``_TEXT_CHARS`` of them all.
MAX_RUN_DIAGNOSTICS = 20
_MESSAGE_CHARS = 300
_TEXT_CHARS = 64 * 1024


def run_status(exit_code: int | None) -> str:
    """``passed`` (exit 0), ``failed`` (any other exit), ``unknown`` (no exit status: a timeout)."""
    return "unknown" if exit_code is None else "passed" if exit_code == 0 else "failed"


def summarize_diagnostics(diags: Iterable[tuple[str, str | None]], *, files: int = 3) -> str:
    """``3 errors in calc.py``, ``1 error, 2 warnings in a.py, b.py``, or ``no diagnostics``.

    Args:
        diags: Each diagnostic's severity and the path of its first span (None: none).
        files: Name at most this many files (then ``and N more``).

    Returns:
        One short phrase.
    """
    counts: dict[str, int] = {}
    paths: list[str] = []
    for severity, path in diags:
        counts[severity] = counts.get(severity, 0) + 1
        if path is not None and path not in paths:
            paths.append(path)
    if not counts:
        return "no diagnostics"
    text = ", ".join(f"{n} {sev}{'' if n == 1 else 's'}" for sev, n in counts.items())
    if paths:
        text += " in " + ", ".join(paths[:files]) + \
            (f" and {len(paths) - files} more" if len(paths) > files else "")
    return text


@dataclass(frozen=True, slots=True)
class RunDiagnostic:
    """One diagnostic of a run as a ``runs`` row keeps it (its first span's place)."""

    severity: str
    code: str | None
    path: str | None
    line: int | None
    message: str


@dataclass(frozen=True, slots=True)
class RunRow:
    """One stored run of a command (a ``runs`` row).

    Attributes:
        rowid: The row (``runs_fts`` documents share it).
        name: The command's name.
        tool: The parser its output went through.
        exit_code: Its exit status, None when unknown.
        run_at: When it was stored (ms since the epoch).
        snapshot: Its ``diagnostics`` snapshot's object id.
        argv: The command line, when ctx ran it.
        diagnostics: Its first ``MAX_RUN_DIAGNOSTICS`` diagnostics.
        diagnostic_count: How many it had.
        summary: Its diagnostics in a phrase (``summarize_diagnostics``: ``2 errors in a.py``).
        head_terms: The terms ``runs_fts`` holds of its name, tool, command line and status.
        body_terms: The terms it holds of its diagnostics.
    """

    rowid: int
    name: str
    tool: str
    exit_code: int | None
    run_at: int
    snapshot: bytes
    argv: tuple[str, ...]
    diagnostics: tuple[RunDiagnostic, ...]
    diagnostic_count: int
    summary: str
    head_terms: str
    body_terms: str

    @property
    def status(self) -> str:
        """``passed``, ``failed`` or ``unknown`` (``run_status``)."""
        return run_status(self.exit_code)


def _fields(rec: CommandRunRecord, snap: DiagnosticsSnapshot) -> tuple[dict[str, str], list[list[object]]]:
    """The searchable fields of a run and the diagnostics its row keeps."""
    lines: list[str] = []
    kept: list[list[object]] = []
    size = 0
    for diag in snap.diagnostics:
        first = diag.spans[0] if diag.spans else None
        where = "" if first is None else \
            f"{first.path}:{first.start_line}" if first.start_line > 0 else first.path
        line = " ".join(f"{diag.severity} {diag.code or ''} {where} {diag.message}".split())
        if size < _TEXT_CHARS:
            lines.append(line[:_TEXT_CHARS - size])
            size += len(line) + 1
        if len(kept) < MAX_RUN_DIAGNOSTICS:
            message = (diag.message.splitlines() or [""])[0][:_MESSAGE_CHARS]
            kept.append([diag.severity, diag.code, first.path if first else None,
                         first.start_line if first and first.start_line > 0 else None, message])
    name = " ".join([rec.name, snap.tool, *snap.argv])[:_TEXT_CHARS]
    return {"name": name, "status": STATUS_WORDS[run_status(snap.exit_code)],
            "text": "\n".join(lines)}, kept


def apply_run(store: Store, conn: sqlite3.Connection, rec: CommandRunRecord, version: bytes) -> None:
    """Add the row and the search document of one run (a ``command_run`` version new here).

    Args:
        store: The store (the run's snapshot is read).
        conn: The index connection (the caller's transaction).
        rec: The record.
        version: Its version id (the row's key).

    Raises:
        ObjectNotFound, HashMismatch, DeserializationFailed: if the snapshot cannot be read.
    """
    from ctxstore.model.build import DiagnosticsSnapshot
    from ctxstore.objects import ObjectId

    snap = store.read_typed(ObjectId(rec.snapshot), DiagnosticsSnapshot)
    fields, kept = _fields(rec, snap)
    cur = conn.execute(
        "INSERT OR IGNORE INTO runs(version, name, tool, exit_code, run_at, snapshot, argv,"
        " diagnostics, diagnostic_count, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (version, rec.name, snap.tool, snap.exit_code, snap.timestamp, bytes(rec.snapshot),
         json.dumps(list(snap.argv)), json.dumps(kept), len(snap.diagnostics),
         summarize_diagnostics((d.severity, d.spans[0].path if d.spans else None)
                               for d in snap.diagnostics)))
    if cur.rowcount == 1:
        assert cur.lastrowid is not None  # set after every INSERT that wrote a row
        # Stemmed as prose: the engine indexes the terms it is given, joined by spaces.
        Fts5Engine(conn, "runs_fts", RUN_FTS_FIELDS).index_document(
            cur.lastrowid, {k: PROSE.index_text(v) for k, v in fields.items()})


def forget_run(conn: sqlite3.Connection, version: bytes) -> None:
    """Remove the row and document of a run whose version left the history (a purge).

    Args:
        conn: The index connection (the caller's transaction).
        version: The version id.
    """
    row = conn.execute("SELECT rowid FROM runs WHERE version = ?", (version,)).fetchone()
    if row is not None:
        conn.execute("DELETE FROM runs_fts WHERE rowid = ?", (row[0],))
        conn.execute("DELETE FROM runs WHERE rowid = ?", (row[0],))


def has_runs(conn: sqlite3.Connection) -> bool:
    """Whether any run of a command is stored.

    Args:
        conn: The index connection.

    Returns:
        True when ``runs`` holds a row.
    """
    return conn.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is not None


def runs_at(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, RunRow]:
    """The ``runs`` rows of ``rowids`` (those that exist), with the terms they are searched by.

    Args:
        conn: The index connection.
        rowids: Row ids (``runs_fts`` hits).

    Returns:
        Row id to row.
    """
    out: dict[int, RunRow] = {}
    wanted = list(dict.fromkeys(rowids))
    for start in range(0, len(wanted), 500):
        part = wanted[start:start + 500]
        rows = conn.execute(
            "SELECT r.rowid, r.name, r.tool, r.exit_code, r.run_at, r.snapshot, r.argv,"
            " r.diagnostics, r.diagnostic_count, r.summary, f.name, f.status, f.text"
            " FROM runs r JOIN runs_fts f ON f.rowid = r.rowid"
            f" WHERE r.rowid IN ({', '.join('?' * len(part))})", part).fetchall()
        for r in rows:
            diags = tuple(RunDiagnostic(*d) for d in json_cell(r[7], "run diagnostics"))
            out[int(r[0])] = RunRow(int(r[0]), r[1], r[2], r[3], int(r[4]), bytes(r[5]),
                                    tuple(json_cell(r[6], "run argv")), diags, int(r[8]), r[9],
                                    f"{r[10]} {r[11]}", str(r[12]))
    return out


_STATUS_SQL = "CASE WHEN exit_code IS NULL THEN 'unknown' WHEN exit_code = 0 THEN 'passed'" \
              " ELSE 'failed' END"


def newest_failing_runs(conn: sqlite3.Connection, *, limit: int) -> list[RunRow]:
    """The newest runs that did not pass (``failed`` or ``unknown``), newest first.

    Args:
        conn: The index connection.
        limit: At most this many.

    Returns:
        The rows.
    """
    rowids = [int(r[0]) for r in conn.execute(
        f"SELECT rowid FROM runs WHERE {_STATUS_SQL} != 'passed' ORDER BY run_at DESC, rowid DESC"
        " LIMIT ?", (limit,))]
    rows = runs_at(conn, rowids)
    return [rows[i] for i in rowids if i in rows]


def status_after(conn: sqlite3.Connection, name: str, run_at: int, status: str
                 ) -> tuple[str, int] | None:
    """The first later run of ``name`` whose status is not ``status``: what the run turned into.

    Args:
        conn: The index connection.
        name: The command's name.
        run_at: The run's time (ms).
        status: The run's status.

    Returns:
        ``(status, run_at)`` of that later run (``failed`` then ``passed``), or None when
        every later run had the same status, or there is none.
    """
    row = conn.execute(f"SELECT {_STATUS_SQL}, run_at FROM runs WHERE name = ? AND run_at > ?"
                       f" AND {_STATUS_SQL} != ? ORDER BY run_at, rowid LIMIT 1",
                       (name, run_at, status)).fetchone()
    return (str(row[0]), int(row[1])) if row is not None else None
