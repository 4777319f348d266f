"""The vocabulary of the one graph: node types, edge labels, tiers, endpoint kinds.

Owns the names the knowledge model of spec 000 and the code graph of spec 002 §9
share (DESIGN §4): knowledge node types and edge labels (upper snake case, spec 000),
code-graph labels and node kinds (CamelCase, spec 002 §9.1–§9.2), context tiers and
their order, and the kinds of the typed endpoints ``(kind, key)`` an edge joins.
It holds constants only: no I/O and no imports from ctxstore. The decoder does not
check labels or endpoint kinds against these lists (objects written by a newer ctx
must still decode); writers validate (``nodes.validate_type``,
``edges.normalize_edge_type``).
"""

from __future__ import annotations

__all__ = [
    "NODE_TYPES",
    "NODE_STATUSES",
    "EDGE_TYPES",
    "STRUCTURAL_LABELS",
    "BUILD_LABELS",
    "SEMANTIC_LABELS",
    "NARRATIVE_LABELS",
    "CODE_EDGE_LABELS",
    "ALL_EDGE_LABELS",
    "CODE_NODE_KINDS",
    "ENDPOINT_KINDS",
    "ENDPOINT_KIND_OF",
    "TIERS",
    "TIER_ORDER",
    "TIER_TAG_PREFIX",
]

# -- knowledge (spec 000) -------------------------------------------------------------------------

NODE_TYPES = ("fact", "decision", "pattern", "observation", "hypothesis", "task", "summary",
              "source", "open-question")
# The statuses ctx itself writes; imported documents may carry others.
NODE_STATUSES = ("active", "archived")
EDGE_TYPES = ("DERIVED_FROM", "DEPENDS_ON", "SUPERSEDES", "RELATES_TO", "CHILD_OF",
              # spec 003 edge vocabulary (auto-linking, consolidation, prose-code pairs)
              "CONTRADICTS", "REFINES", "EXEMPLIFIES", "SOURCE_OF")

# -- code graph (spec 002 §9.2), by tier of the edge creation policy -------------------------------

STRUCTURAL_LABELS = ("Contains", "Defines", "HasVersion")  # tier 1: always relate
BUILD_LABELS = ("DependsOn", "TargetOf", "CrateFromTarget")  # tier 2: always, for Rust
SEMANTIC_LABELS = ("Imports", "References", "Calls", "Implements", "UsesType")  # when feasible
NARRATIVE_LABELS = ("Mentions", "UpdatedIn", "DerivedFrom")  # tier 4: selectively
CODE_EDGE_LABELS = STRUCTURAL_LABELS + BUILD_LABELS + SEMANTIC_LABELS + NARRATIVE_LABELS
# The two vocabularies never collide (DERIVED_FROM is not DerivedFrom), so one label
# column serves the one graph.
ALL_EDGE_LABELS = EDGE_TYPES + CODE_EDGE_LABELS

# spec 002 §9.1 NodeKind.
CODE_NODE_KINDS = ("File", "Module", "Item", "Package", "Target", "Crate", "Task", "Note",
                   "Decision", "Diagnostic")

# -- edge endpoints (DESIGN §4) -------------------------------------------------------------------

# The kind of an endpoint ``(kind, key)`` and what its key is:
#   node          a knowledge node's ULID          file        a repository-relative path
#   item          a Python or Rust qualified name  module      a module path
#   package       a Cargo package id               target      a Cargo target id
#   crate         a crate id                       diagnostic  a diagnostic's object id (hex)
#   commit        a commit's object id (hex)       file_version  a file version's object id (hex)
ENDPOINT_KINDS = ("node", "file", "item", "module", "package", "target", "crate", "diagnostic",
                  "commit", "file_version")
# spec 002 node kinds as endpoints: tasks, notes and decisions are knowledge nodes.
ENDPOINT_KIND_OF = {
    "File": "file", "Module": "module", "Item": "item", "Package": "package",
    "Target": "target", "Crate": "crate", "Task": "node", "Note": "node", "Decision": "node",
    "Diagnostic": "diagnostic",
}

# -- tiers ----------------------------------------------------------------------------------------

TIERS = ("pinned", "reference", "working", "off-context")
TIER_TAG_PREFIX = "tier:"
# Composition order: pinned first, untiered (None) between working and off-context.
TIER_ORDER: dict[str | None, int] = {"pinned": 0, "reference": 1, "working": 2, None: 3,
                                     "off-context": 4}
