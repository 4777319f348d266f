"""Retrieval: rank files and chunks for free text, and compile prompt packs.

``text`` tokenizes and cleans queries; ``rank`` scores documents (fielded BM25,
definitions, test prior, import graph) on abstract inputs, so the same method runs
in-process over a tree and over the index. It sits with ``packs`` in the composition
layer and imports neither networkx nor NumPy, so hooks may use it.
"""

from __future__ import annotations

__all__: list[str] = []
