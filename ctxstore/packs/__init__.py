"""Context for the model: composing views and the session start (``compose``), and prompt packs.

Prompt packs (spec 002 §12): ``text`` cleans and tokenises the task, ``rank`` scores files
(fielded BM25, definitions, test prior, import graph) on abstract inputs, so the same method
runs in-process over a tree and over the index; ``pack`` builds a pack over the index and
``render`` prints it. This package module imports nothing, so a hook pays only for the
module it uses.
"""
