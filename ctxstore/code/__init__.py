"""Code intelligence: per-language extraction of symbols and relations.

``languages`` owns the ``Extractor`` protocol, its records and the registry;
``python``, ``rust``, ``javascript`` (JS and TS), ``go`` and ``markdown`` are the
built-in extractors, the tree-sitter ones sharing ``_treesitter`` (docs/code.md
"Languages"). This package sits with ``knowledge`` and ``narrative`` (STYLE §2.2):
it may use the storage and index layers, never a front end.
"""

from __future__ import annotations

__all__: list[str] = []
