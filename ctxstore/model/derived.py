"""Derived objects: views computed from the store, never part of its history (spec 002 §9.5).

``scc_view`` (``SccView``): the strongly connected components of the relationship graph
at a set of HEAD commits and the condensation DAG between them. It is written by
``ctxstore.graph.scc`` and named by ``.ctx/DERIVED/scc_latest``; deleting it loses
nothing (``ctx rebuild --scc`` makes the same object again).

It must not do I/O or import above ``model``.
"""

from __future__ import annotations

from typing import ClassVar

from ctxstore.ids import ObjectId
from ctxstore.model._schema import ListOf, Record, SchemaError
from ctxstore.model.registry import typed
from ctxstore.records import dataclass

__all__ = ["SccView"]


@typed("scc_view", 1)
@dataclass(frozen=True, slots=True)
class SccView(Record):
    """The SCC compression of the graph (spec 002 §9.5 ``SccView``).

    ``nodes`` are the graph's endpoints as ``kind:key`` (``file:src/a.py``,
    ``module:pkg.a``, ``node:<ULID>``), sorted; ``scc_of[i]`` is the SCC id of
    ``nodes[i]``. SCC ids are a topological order of the condensation (ties broken by
    the smallest member), so every DAG edge ``dag_from[j] -> dag_to[j]`` goes from a
    smaller id to a larger one; the pairs are sorted. ``heads`` are the HEAD commits
    the graph was read at.
    """

    heads: tuple[ObjectId, ...]
    nodes: tuple[str, ...]
    scc_of: tuple[int, ...]
    dag_from: tuple[int, ...]
    dag_to: tuple[int, ...]

    FIELDS: ClassVar = {"heads": ListOf("oid"), "nodes": ListOf("str"), "scc_of": ListOf("int"),
                        "dag_from": ListOf("int"), "dag_to": ListOf("int")}

    @property
    def scc_count(self) -> int:
        """How many SCCs there are."""
        return max(self.scc_of) + 1 if self.scc_of else 0

    def check(self, where: str) -> None:
        """Refuse a view that is not a well-formed condensation.

        Nodes sorted and unique, one SCC id per node, ids ``0..n-1`` all used, DAG
        edges sorted, unique and pointing forward (so the DAG is acyclic).

        Raises:
            SchemaError: naming the first rule broken; ``where`` names the object.
        """
        if len(self.nodes) != len(self.scc_of):
            raise SchemaError(f"{where}: nodes and scc_of differ in length")
        if any(a >= b for a, b in zip(self.nodes, self.nodes[1:], strict=False)):
            raise SchemaError(f"{where}.nodes: not sorted and unique")
        count = self.scc_count
        if set(self.scc_of) != set(range(count)):
            raise SchemaError(f"{where}.scc_of: SCC ids are not 0..{count - 1}")
        if len(self.dag_from) != len(self.dag_to):
            raise SchemaError(f"{where}: dag_from and dag_to differ in length")
        pairs = list(zip(self.dag_from, self.dag_to, strict=True))
        if any(not 0 <= a < b < count for a, b in pairs):
            raise SchemaError(f"{where}: a DAG edge does not go forward between known SCCs")
        if any(p >= q for p, q in zip(pairs, pairs[1:], strict=False)):
            raise SchemaError(f"{where}: DAG edges not sorted and unique")
