"""model.vocab: one vocabulary for the knowledge graph (spec 000) and the code graph (spec 002
§9.2), tiers and their order, edge endpoint kinds; the old names re-export it."""

from __future__ import annotations

import pytest
from conftest import invoke

from ctxstore.model import vocab
from ctxstore.model.vocab import (
    CODE_EDGE_LABELS,
    CODE_NODE_KINDS,
    EDGE_TYPES,
    ENDPOINT_KIND_OF,
    ENDPOINT_KINDS,
    NODE_TYPES,
    TIER_ORDER,
    TIERS,
)


def test_knowledge_vocabulary_is_spec_000() -> None:
    assert NODE_TYPES == ("fact", "decision", "pattern", "observation", "hypothesis", "task",
                          "summary", "source", "open-question")
    assert EDGE_TYPES == ("DERIVED_FROM", "DEPENDS_ON", "SUPERSEDES", "RELATES_TO", "CHILD_OF",
                          "CONTRADICTS", "REFINES", "EXEMPLIFIES", "SOURCE_OF")


def test_code_graph_vocabulary_is_spec_002_section_9_2() -> None:
    assert vocab.STRUCTURAL_LABELS == ("Contains", "Defines", "HasVersion")
    assert vocab.BUILD_LABELS == ("DependsOn", "TargetOf", "CrateFromTarget")
    assert vocab.SEMANTIC_LABELS == ("Imports", "References", "Calls", "Implements", "UsesType")
    assert vocab.NARRATIVE_LABELS == ("Mentions", "UpdatedIn", "DerivedFrom")
    assert CODE_EDGE_LABELS == (vocab.STRUCTURAL_LABELS + vocab.BUILD_LABELS
                                + vocab.SEMANTIC_LABELS + vocab.NARRATIVE_LABELS)
    assert CODE_NODE_KINDS == ("File", "Module", "Item", "Package", "Target", "Crate", "Task",
                               "Note", "Decision", "Diagnostic")


def test_knowledge_and_code_labels_never_collide() -> None:
    # One graph, two vocabularies: DERIVED_FROM (spec 000) is not DerivedFrom (spec 002).
    assert not set(EDGE_TYPES) & set(CODE_EDGE_LABELS)
    assert len(set(CODE_EDGE_LABELS)) == len(CODE_EDGE_LABELS)
    assert vocab.ALL_EDGE_LABELS == EDGE_TYPES + CODE_EDGE_LABELS


def test_every_code_node_kind_has_an_endpoint_kind() -> None:
    assert set(ENDPOINT_KIND_OF) == set(CODE_NODE_KINDS)
    assert set(ENDPOINT_KIND_OF.values()) <= set(ENDPOINT_KINDS)
    # Tasks, notes and decisions are knowledge nodes: ("node", ULID), as DESIGN §4 says.
    assert {ENDPOINT_KIND_OF[k] for k in ("Task", "Note", "Decision")} == {"node"}
    assert ENDPOINT_KINDS[:3] == ("node", "file", "item")


def test_tiers_and_their_order() -> None:
    assert TIERS == ("pinned", "reference", "working", "off-context")
    ranked = sorted(TIER_ORDER, key=lambda t: TIER_ORDER[t])
    assert ranked == ["pinned", "reference", "working", None, "off-context"]
    assert set(TIER_ORDER) == {*TIERS, None}


@pytest.mark.parametrize("node_type", NODE_TYPES)
def test_cli_add_accepts_every_node_type(store, runner, node_type: str) -> None:
    r = invoke(runner, store, "add", "--type", node_type, f"a {node_type}")
    assert (r.exit_code, r.stderr) == (0, ""), r.output


def test_cli_add_refuses_a_type_outside_the_vocabulary_naming_it(store, runner) -> None:
    r = invoke(runner, store, "add", "--type", "Contains", "code labels are not node types")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.startswith("ctx: error[E011]: unknown node type 'Contains'")
    assert ", ".join(NODE_TYPES) in r.stderr


@pytest.mark.parametrize("label", EDGE_TYPES)
def test_cli_link_accepts_every_knowledge_edge_label(store, runner, label: str) -> None:
    a = invoke(runner, store, "add", "--type", "fact", "one").stdout.strip()
    b = invoke(runner, store, "add", "--type", "fact", "two").stdout.strip()
    r = invoke(runner, store, "link", a, b, "--type", label.lower())
    assert (r.exit_code, r.stderr) == (0, ""), r.output
