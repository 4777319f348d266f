"""History use cases: the canonical commits of a store (``commit``, ``compact``, ``abort``).

Every path that makes a canonical commit (``ctx commit``, ``ctx add --commit``,
``ctx stage compact``, ``ctx stage abort``, automatic compaction in the hooks and the MCP
server, ``ctx upgrade``, the merge ``ctx rebuild`` writes) goes through one function of this
package, which runs the same steps after the commit (``commit.after_commit``): the graph
view is rebuilt and the store is staged in Git where Git tracks it. Each function takes
the ``Session`` and returns a result record the front ends render; none prints.

The fold itself (``staging.commit_stage``) is storage: this package hands it what a commit
carries besides its records, the narrative snapshots and the file tree. This package module
imports nothing, so a hook pays only for the module it uses.
"""

from __future__ import annotations

__all__: list[str] = []
