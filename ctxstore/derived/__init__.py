"""The Tantivy full-text index (``tantivy_index``), rebuilt from the store.

Nothing here is history: ``tantivy_index`` keeps ``.ctx/index/tantivy/``, rebuilt by
``ctx rebuild`` and deleted at any time. tantivy is imported inside the functions that use
it, so importing this package costs a hook nothing. (The SCC view lives in ``graph.scc``.)
"""
