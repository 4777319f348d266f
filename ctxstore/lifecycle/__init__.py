"""Memory lifecycle (spec 003): status transitions and consolidation.

The decay scoring they use is ``model.scoring`` (pure and light, so recall, compose and
the hook path share it). ``policy`` and ``consolidate`` read the index and write ordinary
change records, so every transition merges through Git like any edit. Nothing here runs
on the prompt path.
"""
