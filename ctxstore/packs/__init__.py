"""Context for the model: composing views and the session start (``compose``).

Prompt packs (seed, expand, budget, render, build) land here too. This package module
imports nothing, so a hook pays only for the module it uses.
"""
