"""What the memory browser (``ctx ui``) shows: one read-only use case per page.

Each module owns one page's reading: ``timeline`` (decisions, tasks, notes, commits and
transcript sessions, newest first), ``node`` (a node, or a code endpoint, with its history,
edges, evidence and stale mentions), ``graph`` (the knowledge and code graph with its cycles),
``pack`` (a prompt pack and the notes on it) and ``transcripts`` (transcript-memory topics and
search). Every function takes the ``Session`` and returns frozen records; none writes: no
object, pointer, narrative file, hook state or transcript memory (opened read-only), and the
SCC view is computed in memory when the stored one is out of date instead of being stored.
Like every reader, the derived index is brought up to date with HEAD and STAGE first.
Nothing here renders, prints or reads the environment.
"""

from __future__ import annotations

__all__: list[str] = []
