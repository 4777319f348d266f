"""model.registry: one ``@typed("type", v)`` declaration per object type; the decoders come from
it, unknown pairs are refused by name, and declared wire fields agree with the annotations."""

from __future__ import annotations

import dataclasses
import hashlib
import types
import typing
from typing import Any, ClassVar, Literal, Union

import pytest

from ctxstore.errors import DeserializationFailed
from ctxstore.ids import ObjectId
from ctxstore.model import (
    DECODERS,
    ChangeBatch,
    Commit,
    CommitV2,
    NarrativeRef,
    Tree,
    TreeEntry,
    TypedObject,
    WorkCommit,
    decode_typed,
    encode_typed,
    registry,
)
from ctxstore.model._schema import REF, ListOf, MapOf, OneOf, Opt, Record
from ctxstore.model.build import (
    CargoDependency,
    CargoMetadataSnapshot,
    CargoPackage,
    CargoTarget,
    Diagnostic,
    DiagnosticSpan,
    DiagnosticsSnapshot,
)
from ctxstore.model.code import CodeRelation, CodeSymbol, FileVersion
from ctxstore.model.codec import encode
from ctxstore.model.derived import SccView
from ctxstore.model.knowledge import (
    RECORD_KINDS,
    EdgeRecord,
    EdgeRemoved,
    NodeRecord,
    NodeRemoved,
    ViewRecord,
    ViewRemoved,
    version_id,
)
from ctxstore.model.registry import typed


def _o(i: int) -> ObjectId:
    return ObjectId(bytes([i]) * 32)


_REF = NarrativeRef(path="log/a.md", stream="log", role="log", blob_id=_o(9))
# One full sample per registered type, with the SHA-256 of its payload as this format has always
# written it (recorded before the registry existed): the on-disk bytes must never change.
SAMPLES: dict[tuple[str, int], list[tuple[Any, str]]] = {
    ("commit", 1): [
        (Commit(parents=(_o(1),), timestamp_unix=5, message="m", root_tree=_o(2),
                change_batches=(_o(3),), narrative_refs=(_REF,), session_id="s",
                aborted_work=_o(4)),
         "7633e4bd3de519dad01e098ee548e792b52f53e4f977ec5bfd7c2ecf9e14848c"),
        (Commit(parents=(), timestamp_unix=0, message=""),
         "633b677e8bf5ec5db42642d2c488a6cde5d4d68188c2af54379de0df41f8fd61"),
    ],
    ("commit", 2): [  # names its code by Git ids (issue 30)
        (CommitV2(parents=(_o(1),), timestamp_unix=5, message="m", change_batches=(_o(3),),
                  narrative_refs=(_REF,), session_id="s", git_commit="a" * 40,
                  git_tree="b" * 64, cargo_snapshots=(_o(5),),
                  diagnostics_snapshots=(_o(6), _o(7))),
         "d7deef50b3e98fd45e0314a9073de4ff0dab87350471323039d4414a33d17d27"),
        (CommitV2(parents=(), timestamp_unix=0, message=""),
         "e1d4d4e8bb5664fe3a944c4076b4d7812f20413d220f3d96a0d04591fd01c75c"),
    ],
    ("work_commit", 1): [
        (WorkCommit(parents=(_o(1),), base=_o(2), session_id="x", created_at=7, step_kind="note",
                    message="hi", change_batches=(_o(5),), payload=(_o(6),),
                    narrative_refs=(_REF,)),
         "c014b84e26282bbcbab1a58c5ebd9635765acc71958f2defa91e98b9990946aa"),
    ],
    ("tree", 1): [
        (Tree(entries=(TreeEntry(name="a", kind="blob", id=_o(1)),
                       TreeEntry(name="b", kind="tree", id=_o(2)))),
         "e37c0691295aee82c72fefff660ceed5e4b5b23c69a107db814472a09e1075c7"),
    ],
    ("change_batch", 1): [
        (ChangeBatch(created_at=3, author="me", records=(
            NodeRecord(id="01ARZ3NDEKTSV4RRFFQ69G5FAV", type="fact", content="c",
                       content_blob=None, summary=None, tags=("a:b",),
                       metadata={"k": [1, 2.5, None]}, status="active", superseded_by=None,
                       created_at=1, updated_at=2, author=None, prev=_o(7)),
            NodeRemoved(id="01ARZ3NDEKTSV4RRFFQ69G5FAW", at=3, prev=None),
            EdgeRecord(from_ref=("node", "A"), to_ref=("file", "x.py"), label="Mentions",
                       weight=0.5, metadata={}, evidence={"tool": "human"}, created_at=1,
                       updated_at=1, prev=None),
            EdgeRemoved(from_ref=("node", "A"), to_ref=("node", "B"), label="RELATES_TO", at=4,
                        prev=_o(8)),
            ViewRecord(name="v", query="type:fact", budget=100, description=None, created_at=1,
                       updated_at=1, prev=None),
            ViewRemoved(name="w", at=2, prev=None))),
         "c81b6ec8c3d416c169ad683e9a80e3eae5d667874f490071e728e1a0edf4bdb9"),
    ],
}
SAMPLES[("cargo_snapshot", 1)] = [
    (CargoMetadataSnapshot(
        workspace_root=".", manifest_path="Cargo.toml", created_at=5,
        packages=(CargoPackage(package_id="p1", name="core", version="0.1.0",
                               manifest_path="core/Cargo.toml", edition="2021", member=True,
                               targets=(CargoTarget(target_id=_o(1), name="core", kind="lib",
                                                    src_path="core/src/lib.rs",
                                                    crate_types=("lib",)),)),),
        resolve=(CargoDependency(from_package_id="p2", to_package_id="p1", dep_kind="dev",
                                 optional=True, features_enabled=("f",), rename="c"),)),
     "c05f2b44f8087bbe362ed33236b476361f31e7bd951590af84b25c066deeb5a7"),
]
SAMPLES[("diagnostics", 1)] = [
    (DiagnosticsSnapshot(
        tool="cargo", timestamp=7, name="cargo test", argv=("cargo", "test"), exit_code=101,
        output_blob=_o(2), output_bytes=9,
        diagnostics=(Diagnostic(severity="error", code="E0308", message="m", spans=(
            DiagnosticSpan(path="src/a.rs", start_line=3, start_col=5, end_line=3, end_col=9,
                           start_byte=10, end_byte=14, label="l", primary=True,
                           item="a::f"),),
            related=("note: n",)),),
        notes=("cut",)),
     "ab74837f8bd1986011d669f45be036681f1e66be096e1ea5882ef403ea866c4c"),
]
SAMPLES[("scc_view", 1)] = [
    (SccView(heads=(_o(1),), nodes=("file:a.py", "module:a", "module:b"), scc_of=(0, 1, 1),
             dag_from=(0,), dag_to=(1,)),
     "7a3504f447c31504ff946ef3ad522e2c5f439ab5ee183ae229cc7ceeae9d194c"),
]
SAMPLES[("file_version", 1)] = [
    (FileVersion.make(
        path="src/a.py", blob_id=_o(3), language="python", byte_count=10, line_count=2,
        complete=True, note=None,
        symbols=(CodeSymbol("a", "a", "module", None, "public", None, 0, 10, 1, 2, ()),
                 CodeSymbol("a.f", "f", "function", "a", "public", "def f()", 0, 9, 1, 2,
                            (("k", "v"),))),
        relations=(CodeRelation("Calls", "item", "a.f", "item", "b.g", "b.g", "parser", "medium",
                                4, 7, 2, 2, ()),)),
     "59105853fc2dd859d1dde3e4f0856ce2ce5420126af2ec7c1b3d9d695227c3ab"),
]
# Version ids (BLAKE3 of each record's canonical encoding) of the change batch above.
RECORD_VERSION_IDS = [
    "5150e24231215ee74991779c817462956d947eee9c2d76894cb22a9ced18beee",
    "cb0f477fabe90c65995e7bbb0740fa708ed7b621f4481cb7f98ab4f90f321839",
    "0a08e7aa18fae6825148ce3037ddbef43cf607f42c2542f69d2f427328f5ae09",
    "5ed65a9f98a4aaf7196c20130fc57fa06b4a174f3dfd173d4c10ac2dd3083483",
    "d3f45b9b2201b078519b353d55c86e8e1df1a8b7fbd70117f6ccfdfce0ba4bea",
    "0e32e2a6a7fc141a4ffc9ec8b2f057fcc74fbecc65bb40dbffc6334f3df55308",
]


def test_decoders_are_the_registry() -> None:
    assert dict(DECODERS) == dict(registry.registered_types())
    assert {("commit", 1), ("work_commit", 1), ("tree", 1), ("change_batch", 1),
            ("cargo_snapshot", 1), ("diagnostics", 1)} <= set(DECODERS)
    for (name, v), cls in DECODERS.items():
        assert (cls.TYPE, cls.V) == (name, v)


def test_each_type_is_decoded_by_loading_its_own_module_only() -> None:
    """``decode_typed`` imports the module of the type it meets (``TYPE_MODULES``), no other."""
    import subprocess
    import sys

    from ctxstore.model import TYPE_MODULES

    assert TYPE_MODULES == {name: cls.__module__ for (name, _), cls in DECODERS.items()}
    commit = encode_typed(Commit(parents=(), timestamp_unix=1, message="m"))
    code = ("import sys; from ctxstore.model import decode_typed; "
            f"print(type(decode_typed(bytes.fromhex({commit.hex()!r}))).__name__); "
            "print(sorted(m for m in sys.modules if m.startswith('ctxstore.model.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    kind, modules = out.stdout.splitlines()
    assert kind == "Commit"
    assert "ctxstore.model.commit" in modules
    for other in ("ctxstore.model.build", "ctxstore.model.knowledge", "ctxstore.model.derived"):
        assert other not in modules


def test_every_registered_type_has_a_sample() -> None:
    # A new type is one @typed declaration; this test asks for its sample and golden bytes.
    assert set(SAMPLES) == set(DECODERS)


@pytest.mark.parametrize("pair", sorted(SAMPLES))
def test_registered_types_round_trip_with_unchanged_bytes(pair: tuple[str, int]) -> None:
    for obj, digest in SAMPLES[pair]:
        payload = encode_typed(obj)
        assert hashlib.sha256(payload).hexdigest() == digest
        back = decode_typed(payload)
        assert back == obj and type(back) is DECODERS[pair]
        assert encode_typed(back) == payload


def test_knowledge_record_version_ids_are_unchanged() -> None:
    (batch, _), = SAMPLES[("change_batch", 1)]
    assert [version_id(r).hex() for r in batch.records] == RECORD_VERSION_IDS


def test_typed_object_union_lists_every_registered_type() -> None:
    assert set(typing.get_args(TypedObject)) == set(DECODERS.values())


@pytest.mark.parametrize("payload,message,unsupported", [
    ({"type": "widget", "v": 1}, "unknown object type 'widget' v1", True),
    ({"type": "widget", "v": 2}, r"written by a newer ctx \(widget v2\)", True),
    ({"type": "commit", "v": 999}, r"written by a newer ctx \(commit v999\)", True),
    ({"type": "tree", "v": 0}, r"written by a newer ctx \(tree v0\)", True),
    ({"type": "change_batch", "v": 2}, r"written by a newer ctx \(change_batch v2\)", True),
    ({"type": True, "v": 1}, "typed payload has no type/v", False),
    ({"type": "tree", "v": True}, "typed payload has no type/v", False),
    ([1, 2], "typed payload is not a map", False),
])
def test_unknown_pairs_are_refused_by_name(payload: Any, message: str, unsupported: bool) -> None:
    oid = _o(1)
    with pytest.raises(DeserializationFailed, match=message) as err:
        decode_typed(encode(payload), oid=oid)
    assert err.value.unsupported is unsupported
    assert oid.hex() in str(err.value) and err.value.code == "E004"


def test_a_new_type_needs_one_declaration() -> None:
    @typed("probe", 1)
    @dataclasses.dataclass(frozen=True, slots=True)
    class Probe(Record):
        name: str
        ids: tuple[ObjectId, ...]

        FIELDS: ClassVar = {"name": "str", "ids": ListOf("oid")}

    try:
        assert DECODERS[("probe", 1)] is Probe
        payload = encode_typed(Probe(name="p", ids=(_o(3),)))  # type: ignore[arg-type]
        assert decode_typed(payload) == Probe(name="p", ids=(_o(3),))
        with pytest.raises(DeserializationFailed, match=r"newer ctx \(probe v2\)"):
            decode_typed(encode({"type": "probe", "v": 2}))
        assert_fields_agree(Probe)
    finally:
        registry._TYPES.pop(("probe", 1))
    with pytest.raises(DeserializationFailed, match="unknown object type 'probe' v1"):
        decode_typed(payload)


def test_registering_a_pair_twice_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"commit v1 is already registered \(Commit\)"):
        @typed("commit", 1)
        @dataclasses.dataclass(frozen=True, slots=True)
        class Other(Record):
            FIELDS: ClassVar = {}
    assert DECODERS[("commit", 1)] is Commit


def test_typed_must_decorate_a_dataclass_record_with_matching_fields() -> None:
    with pytest.raises(TypeError, match="above @dataclass"):
        @typed("probe", 1)
        class NotADataclass(Record):
            FIELDS: ClassVar = {}
    with pytest.raises(TypeError, match=r"FIELDS \['a'\] do not match the fields \['a', 'b'\]"):
        @typed("probe", 1)
        @dataclasses.dataclass(frozen=True, slots=True)
        class Drifted(Record):
            a: int
            b: int
            FIELDS: ClassVar = {"a": "int"}
    assert ("probe", 1) not in DECODERS


# -- declared wire fields agree with the annotations ------------------------------------------

_SCALARS: dict[Any, Any] = {ObjectId: "oid", str: "str", int: "int", bool: "bool",
                            float: "num", Any: "json"}


def _spec_of(hint: Any) -> Any:
    """The wire spec a field annotation stands for (the rule FIELDS must follow)."""
    if hint in _SCALARS:
        return _SCALARS[hint]
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return Opt(_spec_of(rest[0]))
        if set(args) == set(RECORD_KINDS.values()):
            return "record"  # a change batch's kinded knowledge record
    if origin is Literal:
        return OneOf(frozenset(args))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return ListOf(_spec_of(args[0]))
        if args == (str, str):
            return REF
    if origin is dict and args[0] is str:
        return MapOf(_spec_of(args[1]))
    raise AssertionError(f"no wire spec for annotation {hint!r}")


def _nested(spec: Any) -> list[type]:
    if isinstance(spec, type) and issubclass(spec, Record):
        return [spec]
    if isinstance(spec, (Opt, ListOf, MapOf)):
        return _nested(spec.inner)
    return []


def assert_fields_agree(cls: type) -> None:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert list(cls.FIELDS) == names, f"{cls.__name__}: FIELDS and dataclass fields differ"
    for name in names:
        assert cls.FIELDS[name] == _spec_of(hints[name]), \
            f"{cls.__name__}.{name}: FIELDS says {cls.FIELDS[name]!r}, annotation {hints[name]!r}"


def _all_records() -> list[type]:
    seen: list[type] = []
    todo: list[type] = [*DECODERS.values(), *RECORD_KINDS.values()]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.append(cls)
            for spec in cls.FIELDS.values():
                todo += _nested(spec)
    return seen


def test_every_record_reached_from_the_registry_is_checked() -> None:
    assert {c.__name__ for c in _all_records()} == {
        "Commit", "CommitV2", "WorkCommit", "Tree", "TreeEntry", "NarrativeRef", "ChangeBatch",
        "NodeRecord", "NodeRemoved", "EdgeRecord", "EdgeRemoved", "ViewRecord", "ViewRemoved",
        "PurgeRecord",  # ctx purge (model.knowledge)
        "SccView",  # model.derived
        "FileVersion", "FileRecord", "FileRemoved",  # model.code
        # model.build
        "CargoMetadataSnapshot", "CargoPackage", "CargoTarget", "CargoDependency",
        "DiagnosticsSnapshot", "Diagnostic", "DiagnosticSpan", "CargoRecord", "CommandRunRecord"}


@pytest.mark.parametrize("cls", _all_records(), ids=lambda c: c.__name__)
def test_declared_wire_fields_agree_with_annotations(cls: type) -> None:
    assert_fields_agree(cls)


def test_the_agreement_check_catches_a_drifted_field() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Drifted(Record):
        parents: tuple[ObjectId, ...]
        when: int | None

        FIELDS: ClassVar = {"parents": ListOf("oid"), "when": "int"}

    with pytest.raises(AssertionError, match=r"Drifted\.when"):
        assert_fields_agree(Drifted)


@pytest.mark.parametrize("field,value,message", [
    ("git_commit", "abc", "git_commit: not a Git object id"),
    ("git_tree", "B" * 40, "git_tree: not a Git object id"),
    ("root_tree", _o(2), "root_tree: is a commit v1 field"),
    ("diagnostics_snapshot", _o(2), "diagnostics_snapshot: is a commit v1 field"),
    ("cargo_snapshots", (_o(3), _o(2)), "cargo_snapshots: ids must be sorted and unique"),
])
def test_commit_v2_refuses_what_is_not_its_own(field: str, value: Any, message: str) -> None:
    """A commit v2 names Git ids as Git writes them, and none of v1's copies of the code."""
    wire = {"type": "commit", "v": 2, **CommitV2(parents=(), timestamp_unix=0, message="").to_wire()}
    wire[field] = list(value) if isinstance(value, tuple) else value
    with pytest.raises(DeserializationFailed, match=message):
        decode_typed(encode(wire))


def test_commit_v2_is_read_where_a_commit_is() -> None:
    """Every reader of a ``Commit`` (walkers, replay, the index) takes v2 as it is."""
    v2 = CommitV2(parents=(_o(1),), timestamp_unix=1, message="m", git_commit="c" * 40)
    back = decode_typed(encode_typed(v2))
    assert isinstance(back, Commit) and type(back) is CommitV2 and back.root_tree is None
