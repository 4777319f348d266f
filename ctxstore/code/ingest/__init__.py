"""Code ingestion: ``ctx index`` and ``ctx add file``, as named stages.

``run`` (listing; the run itself), ``select`` (which files to read, and reading them),
``extract`` (symbols and relations, in forked workers when it pays), ``resolve`` (endpoints;
a file's ``file_version``), ``store`` (the run written into this clone's code index; a ``ctx
add file`` snapshot as one staged step), ``report`` (what a run says). This package's public
names are re-exported here.
"""

from __future__ import annotations

from ctxstore.code.ingest.extract import default_jobs
from ctxstore.code.ingest.report import FileNote, IngestReport
from ctxstore.code.ingest.resolve import NO_SEMANTICS, endpoint_of_symbol, resolve_target
from ctxstore.code.ingest.run import add_files, index_tree
from ctxstore.code.walk import repo_path

__all__ = ["IngestReport", "FileNote", "index_tree", "add_files", "default_jobs", "repo_path",
           "NO_SEMANTICS", "endpoint_of_symbol",
           "resolve_target"]
