"""Derived structures rebuilt from the store: the SCC view and the Tantivy full-text index.

Nothing here is history: ``scc`` stores a derived object named by ``.ctx/DERIVED/scc_latest``;
``tantivy_index`` keeps ``.ctx/index/tantivy/``. Both are rebuilt by ``ctx rebuild`` and may
be deleted at any time. networkx and tantivy are imported inside the functions that use
them, so importing this package costs a hook nothing.
"""
