"""Stage "store": a run's versions and removals written as one staged step.

Every blob and version is written and made durable, then one change batch of ``file`` /
``file_removed`` records and ONE work commit (step ``file_read``) move STAGE: a run is one
pointer move, whatever its size, and a kill at any point leaves the store as it was or with
the whole run.

It must not print or run SQL.
"""

from __future__ import annotations

from typing import Any

from ctxstore.clock import next_stamp
from ctxstore.code.ingest.extract import Prepared
from ctxstore.code.ingest.report import IngestReport
from ctxstore.ids import ObjectId
from ctxstore.model.code import FileRecord, FileRemoved, FileVersion
from ctxstore.model.knowledge import KnowledgeRecord
from ctxstore.objects import KIND_BLOB, KIND_TYPED
from ctxstore.repo import Store

__all__ = ["write_run", "read_line"]


def read_line(report: IngestReport) -> str:
    """The log line of a ``ctx add file`` run that stored something."""
    shown = ", ".join(report.written[:3]) + (f" and {len(report.written) - 3} more"
                                             if len(report.written) > 3 else "")
    return f"Read {shown} ({report.symbols} symbols, {report.relations} relations)"


def write_run(store: Store, versions: list[Prepared], gone: list[str],
           indexed: dict[str, Any], records: list[KnowledgeRecord],
           report: IngestReport, *, log_line: bool = False) -> str | None:
    """Write every object, then one batch and one work commit (one STAGE move).

    With ``log_line`` (``ctx add file``), today's narrative log gets one line naming the
    files, written under the transaction's lock after the work commit, before STAGE moves.
    """
    from ctxstore.staging import stage_records

    if not versions and not gone:
        return None
    with store.transaction() as tx:
        for v in versions:
            if isinstance(v.version, FileVersion):
                tx.put_blob(v.data)
                vid = tx.put(v.version)
            elif v.written is not None:  # a worker wrote both
                tx.adopt(v.blob, KIND_BLOB, v.data)
                vid = tx.adopt(v.written, KIND_TYPED, v.version)
            else:
                tx.put_blob(v.data)
                vid = tx.put_payload(v.version)
            row = indexed.get(v.path)
            records.append(FileRecord(path=v.path, version=vid, blob=v.blob,
                                      updated_at=next_stamp(row.stamp if row else None),
                                      prev=ObjectId(row.version) if row else None))
            report.written.append(v.path)
            report.symbols += v.symbols
            report.relations += v.relations
        for path in gone:
            row = indexed[path]
            records.append(FileRemoved(path=path, at=next_stamp(row.stamp),
                                       prev=ObjectId(row.version)))
        report.removed = list(gone)
        what = f"index {len(versions)} files" + (f", {len(gone)} removed" if gone else "")
        res = stage_records(store, records, message=what, step_kind="file_read", tx=tx)
        if log_line:  # before the transaction moves STAGE; the key names the session
            from ctxstore.narrative.entries import log_event

            log_event(store, "file-read", read_line(report), res.session_id)
    return res.work_commit.hex()
