"""Export and import: the JSON exchange format of spec 000 ("Import/Export").

Owns the export document (``export_document``) and the import, in its phases:
``parse_document`` (strict, bounded JSON), ``build_import_plan`` (every field checked and
turned into records, no store access), then ``stage_import_plan`` (what the store already
has, under the lock, and one change batch: one work commit, one durability barrier), so
an import is all-or-nothing (RELIABILITY IM-01..03). ``import_document`` runs the three.
File ingest as a ``source`` node is ``knowledge.sources``.

Its modules: ``document`` (the format, value checks, parsing), ``export``, ``plan`` (the
import plan) and ``apply`` (the plan against the store). The names below are re-exported.

An import is hostile input: this package bounds its size and nesting, refuses NaN,
duplicate keys and lone surrogates, clamps timestamps from the future (DESIGN §4) and
never overwrites what the store holds. It must not read stdin, print or run SQL (reads go
through ``ctxstore.index``): the CLI reads and renders.

Document format (``"version": 1``, ``"format": "ctx-export"``)::

    {"version": 1, "format": "ctx-export",
     "nodes": [{"id", "type", "content", "summary", "tags", "metadata", "status",
                "superseded_by", "created_at", "updated_at", "author"}],
     "edges": [{"from", "to", "type", "weight", "metadata", "created_at", "updated_at"}],
     "views": [{"name", "query", "budget", "description", "created_at", "updated_at"}]}

Times are ISO-8601 UTC with milliseconds (``2026-11-22T20:37:31.123Z``), the store's
own resolution, so export -> import -> export gives the same document byte for byte.
"""

from __future__ import annotations

from ctxstore.knowledge.exchange.apply import import_document, stage_import_plan
from ctxstore.knowledge.exchange.document import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MAX_DOCUMENT_BYTES,
    MAX_METADATA_DEPTH,
    parse_document,
    read_document_file,
)
from ctxstore.knowledge.exchange.export import export_document
from ctxstore.knowledge.exchange.plan import ImportPlan, ImportReport, build_import_plan

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "MAX_DOCUMENT_BYTES", "MAX_METADATA_DEPTH",
           "ImportReport", "ImportPlan", "export_document", "parse_document",
           "read_document_file", "build_import_plan", "stage_import_plan", "import_document"]
