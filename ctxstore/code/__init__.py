"""Code intelligence: per-language extraction of symbols and relations.

``languages`` owns the ``Extractor`` protocol, its records and the registry;
``python`` and ``markdown`` are the built-in extractors. Later work adds files,
Rust, tree-sitter, Cargo, diagnostics and the ingest that stores extractions
(STYLE §2.1). This package sits with ``knowledge`` and ``narrative`` (STYLE §2.2):
it may use the storage and index layers, never a front end.
"""

from __future__ import annotations

__all__: list[str] = []
