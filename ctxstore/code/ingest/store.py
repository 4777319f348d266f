"""Stage "store": a run written into this clone's code index (and a ``ctx add file`` snapshot).

The code index (``index.codedb``) is derived from the work tree, per clone: ``ctx index``
writes each changed file's rows there as it comes out of extraction, and nothing of it
becomes an object. ``CodeWriter`` commits in slices (every ``SLICE_SECONDS``), so a large
run keeps what it did when it is stopped: every file is either as it was or as the run
indexed it, and the stat cache (on the same rows) makes the next run read only the rest.
Removals and the document frequencies go with the last slice.

``ctx add file`` also records what a person or an agent chose to keep: a snapshot
(``write_snapshot``): every blob and version written and made durable, then one change batch
of ``file`` records and ONE work commit (step ``file_read``) move STAGE; a kill at any point
leaves the store as it was or with the whole snapshot.

It must not print. SQL goes through ``index.code`` and ``index.codedb``.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any

from ctxstore.clock import next_stamp, now_ms
from ctxstore.code.ingest.extract import Prepared
from ctxstore.code.ingest.report import IngestReport
from ctxstore.ids import ObjectId
from ctxstore.index import codedb
from ctxstore.index.code import (
    DocumentFrequencies,
    apply_rows,
    clear_code_rows,
    recount_term_df,
    remove_path,
    set_skipped,
    set_stat,
)

if TYPE_CHECKING:
    from ctxstore.model.knowledge import KnowledgeRecord
    from ctxstore.repo import Store

__all__ = ["CodeWriter", "SLICE_SECONDS", "write_snapshot", "read_line"]

SLICE_SECONDS = 2.0  # a large run commits the code index at least this often


class CodeWriter:
    """Writes one run into the code index, in slices (see the module docstring).

    Use as a context manager: leaving it normally commits the last slice; an exception
    rolls back the slice in progress (the slices before it stay).
    """

    def __init__(self, conn: sqlite3.Connection, report: IngestReport, *,
                 stats: dict[str, tuple[int, int] | None], modules: dict[str, str],
                 named: set[str], recount: bool = False) -> None:
        """Start a writer (the transaction opens on entering).

        Args:
            conn: An index connection (the code database attached).
            report: The run's report (``written``, ``symbols``, ``relations``).
            stats: Path -> (size, mtime_ns) for the stat cache, None for a file to read
                again next run (its modification time was too recent to trust).
            modules: Path -> module name ("" none).
            named: Paths added by name (kept while they exist; ``ctx add file``).
            recount: Count ``term_df`` again from the postings at the end (``ctx index --full``).
        """
        self.recount = recount
        self.conn, self.report = conn, report
        self.stats, self.modules, self.named = stats, modules, named
        self.frequencies = DocumentFrequencies()
        self.opened = 0.0
        self.stamp = now_ms()

    def __enter__(self) -> CodeWriter:
        codedb.begin(self.conn, "code")
        if self.recount:  # ctx index --full: every row is made again, orphans included
            clear_code_rows(self.conn)
        self.opened = time.monotonic()
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if exc is not None:
            if self.conn.in_transaction:
                codedb.rollback(self.conn)
            return
        self.frequencies.flush(self.conn)
        if self.recount:
            recount_term_df(self.conn)
            self.frequencies.terms.clear()  # ids of the terms it dropped
        codedb.commit(self.conn)

    def _maybe_commit(self) -> None:
        if time.monotonic() - self.opened < SLICE_SECONDS:
            return
        self.frequencies.flush(self.conn)
        if self.recount:
            recount_term_df(self.conn)
            self.frequencies.terms.clear()  # ids of the terms it dropped
        codedb.commit(self.conn)
        codedb.begin(self.conn, "code")
        self.opened = time.monotonic()

    def put(self, prepared: Prepared) -> None:
        """Write one changed file's rows."""
        path = prepared.path
        size_mtime = self.stats.get(path)
        self.stamp = next_stamp(self.stamp)
        apply_rows(self.conn, prepared.rows, stamp=self.stamp, frequencies=self.frequencies,
                   size=size_mtime[0] if size_mtime else None,
                   mtime_ns=size_mtime[1] if size_mtime else None,
                   module=self.modules.get(path, ""), named=path in self.named)
        self.report.written.append(path)
        self.report.symbols += prepared.symbols
        self.report.relations += prepared.relations
        self._maybe_commit()

    def unchanged(self, path: str, size_mtime: tuple[int, int] | None) -> None:
        """Record the stat of a file read again whose content is the indexed one."""
        set_stat(self.conn, path, *(size_mtime or (None, None)))

    def skipped(self, path: str, size_mtime: tuple[int, int] | None) -> None:
        """Remember a file read and not indexed (binary, not UTF-8) while it stays so."""
        set_skipped(self.conn, path, *(size_mtime or (None, None)))

    def remove(self, paths: list[str]) -> None:
        """Remove files from the code index."""
        for path in paths:
            remove_path(self.conn, path, self.frequencies)
            set_skipped(self.conn, path, None, None)
        self.report.removed = list(paths)


def read_line(report: IngestReport) -> str:
    """The log line of a ``ctx add file`` run that stored something."""
    shown = ", ".join(report.written[:3]) + (f" and {len(report.written) - 3} more"
                                             if len(report.written) > 3 else "")
    return f"Read {shown} ({report.symbols} symbols, {report.relations} relations)"


def write_snapshot(store: Store, versions: list[Prepared], previous: dict[str, Any],
                   report: IngestReport) -> str:
    """Record ``ctx add file``'s snapshot: every object, then one batch and one work commit.

    Today's narrative log gets one line naming the files, written under the transaction's
    lock after the work commit, before STAGE moves.

    Args:
        store: The store.
        versions: The files stored (each with its version's encoding).
        previous: Path -> the record the path's snapshot replaces (its ``version`` and
            ``stamp``), when there is one.
        report: The run's report (``written``, ``symbols``, ``relations`` already filled in).

    Returns:
        The work commit (hex).
    """
    from ctxstore.model.code import FileRecord  # only a snapshot (ctx add file) records
    from ctxstore.narrative.entries import log_event
    from ctxstore.staging import stage_records

    records: list[KnowledgeRecord] = []
    with store.transaction() as tx:
        for v in versions:
            assert v.payload is not None
            tx.put_blob(v.data)
            vid = tx.put_payload(v.payload)
            assert bytes(vid) == v.rows.version
            before = previous.get(v.path)
            records.append(FileRecord(path=v.path, version=vid, blob=v.blob,
                                      updated_at=next_stamp(before[1] if before else None),
                                      prev=ObjectId(before[0]) if before else None))
        res = stage_records(store, records, message=f"read {len(versions)} files",
                            step_kind="file_read", tx=tx)
        log_event(store, "file-read", read_line(report), res.session_id)
    return res.work_commit.hex()

