"""Moved to ``ctxstore.knowledge.exchange`` and ``knowledge.sources`` (issue 12): re-exports.

Export and import are ``ctxstore.knowledge.exchange``, file ingest is
``ctxstore.knowledge.sources``, and the bounded file reading this module held is
``ctxstore.knowledge._files``, unchanged. This shim keeps the callers not yet rewired
working; the lead deletes it once they are.
"""

from __future__ import annotations

from ctxstore.knowledge.exchange import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MAX_DOCUMENT_BYTES,
    MAX_METADATA_DEPTH,
    ImportPlan,
    ImportReport,
    build_import_plan,
    export_document,
    import_document,
    parse_document,
    read_document_file,
    stage_import_plan,
)
from ctxstore.knowledge.sources import MAX_INGEST_BYTES, ingest_file

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "MAX_DOCUMENT_BYTES", "MAX_INGEST_BYTES",
           "MAX_METADATA_DEPTH", "ImportReport", "ImportPlan", "export_document",
           "parse_document", "read_document_file", "build_import_plan", "stage_import_plan",
           "import_document", "ingest_file"]
