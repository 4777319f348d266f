"""Search: the one tokeniser, the full-text engines behind one protocol, ranking, one entry point.

- ``tokenize``: the terms of any text (identifier-aware, folded as FTS5's ``unicode61``
  folds), used by every index and every query: the same text gives the same terms.
- ``engine``: the ``FullTextEngine`` protocol; ``fts5`` (SQLite, inside the index) and
  ``tantivy`` (imported only where used) implement it; ``ranked`` holds the ranked FTS5
  SELECTs; ``tantivy_index`` keeps ``.ctx/index/tantivy/``.
- ``task`` and ``rank``: a free-text task cleaned into weighted terms, and file ranking
  (fielded BM25, definitions, test prior, import graph) on abstract inputs.
- ``search``: ranked search of any text over nodes, narrative, file chunks and symbols.

This package module imports nothing, so a hook pays only for the module it uses.
"""
