"""Text and JSON renderings of typed objects shared by log and debug."""

from __future__ import annotations

from typing import Any

from ctxstore.model import ChangeBatch, Commit, Tree, WorkCommit
from ctxstore.model._schema import to_wire
from ctxstore.model.codec import jsonable
from ctxstore.model.knowledge import record_to_wire

__all__ = ["jsonable", "object_json", "commit_summary"]


def object_json(obj: Any) -> dict[str, Any]:
    """A typed object as a JSON-ready map with its ``type`` and ``v``."""
    cls = type(obj)
    body = obj.to_wire() if isinstance(obj, ChangeBatch) else to_wire(obj, cls)
    if isinstance(obj, ChangeBatch):
        body["records"] = [record_to_wire(r) for r in obj.records]
    return {"type": cls.TYPE, "v": cls.V, **jsonable(body)}


def commit_summary(oid: bytes, obj: Commit | WorkCommit | Tree) -> dict[str, Any]:
    """One history entry for ``log`` / ``debug history``."""
    if isinstance(obj, Commit):
        return {"id": oid.hex(), "type": "commit", "time": obj.timestamp_unix,
                "message": obj.message, "parents": [p.hex() for p in obj.parents],
                "change_batches": len(obj.change_batches),
                "narrative_refs": len(obj.narrative_refs), "session_id": obj.session_id,
                "aborted": obj.aborted_work is not None}
    assert isinstance(obj, WorkCommit)
    return {"id": oid.hex(), "type": "work_commit", "time": obj.created_at / 1000,
            "message": obj.message, "parents": [p.hex() for p in obj.parents],
            "base": obj.base.hex(), "session_id": obj.session_id, "step_kind": obj.step_kind,
            "change_batches": len(obj.change_batches)}
