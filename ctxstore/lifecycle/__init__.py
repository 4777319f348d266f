"""Memory lifecycle (spec 003): decay scoring, status transitions and consolidation.

``scoring`` is pure and light (the hook path imports it); ``policy`` and ``consolidate``
read the index and write ordinary change records, so every transition merges through
Git like any edit. Nothing here runs on the prompt path.
"""
