"""``ctxstore.records.dataclass`` behaves as ``dataclasses.dataclass`` for every shape ctx uses.

Each shape is defined twice, once with each decorator, and the two classes are driven
through the same operations; the results (values, exceptions, reprs, hashes, pickles)
must be the same. The definition cost it exists for is measured in bench/startup.py.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from dataclasses import FrozenInstanceError, InitVar, field
from typing import Any, ClassVar

import pytest

from ctxstore import records

Decorator = Callable[..., Any]
BOTH = pytest.mark.parametrize("deco", [dataclasses.dataclass, records.dataclass],
                               ids=["stdlib", "records"])
OPTIONS = [{}, {"frozen": True}, {"slots": True}, {"frozen": True, "slots": True}]


def shapes(deco: Decorator, **options: Any) -> dict[str, type]:
    """The class shapes of ctx's code base, made with ``deco``."""

    @deco(**options)
    class Plain:
        """A plain record."""

        a: int
        b: str

    @deco(**options)
    class Defaults:
        """Defaults, a factory, a field left out of init, repr and comparison."""

        a: int
        b: str = "x"
        c: list[int] = field(default_factory=list)
        d: int = field(default=7, init=False)
        e: int = field(default=0, compare=False)
        f: str = field(default="hidden", repr=False)
        g: tuple[int, ...] = field(default=(), hash=False)
        kind: ClassVar[str] = "defaults"

    @deco(**options)
    class Empty:
        pass

    @deco(**options)
    class Base:
        """A base class."""

        a: int
        b: int = 2

    @deco(**options)
    class Child(Base):
        """Adds a field after the base's."""

        c: int = 3

    shapes_: dict[str, type] = {"Plain": Plain, "Defaults": Defaults, "Empty": Empty,
                                "Base": Base, "Child": Child}
    if not options.get("frozen"):
        @deco(**options)
        class Post:
            """``__post_init__`` fills a field."""

            a: int
            total: int = field(default=0, init=False)

            def __post_init__(self) -> None:
                self.total = self.a * 2

        shapes_["Post"] = Post
    return shapes_


ARGS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Plain": ((1, "b"), {}),
    "Defaults": ((1,), {"c": [1, 2], "e": 5, "g": (1,)}),
    "Empty": ((), {}),
    "Base": ((1,), {}),
    "Child": ((1,), {"c": 9}),
    "Post": ((4,), {}),
}


def _outcome(thunk: Callable[[], Any]) -> Any:
    try:
        return ("ok", thunk())
    except Exception as exc:  # the exception type and text are the behaviour compared
        return ("raised", type(exc).__name__, str(exc))


def observe(cls: type, name: str) -> dict[str, Any]:
    """Everything a caller can see of the class and two instances of it."""
    args, kwargs = ARGS[name]
    one, two = cls(*args, **kwargs), cls(*args, **kwargs)
    other = cls(*args, **{**kwargs, "e": 99}) if name == "Defaults" else None
    seen: dict[str, Any] = {
        "fields": [(f.name, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(cls)],
        "asdict": dataclasses.asdict(one),
        "astuple": dataclasses.astuple(one),
        "repr": repr(one).split(".")[-1],
        "eq": one == two,
        "ne": one != two,
        "eq_other_type": one == (1, "b"),
        "hashable": _outcome(lambda: hash(one) == hash(two)),
        "hash_value": _outcome(lambda: hash(one) == hash(dataclasses.astuple(one))),
        "match_args": getattr(cls, "__match_args__", None),
        "slots": getattr(cls, "__slots__", None),
        "has_dict": hasattr(one, "__dict__"),
        "set_field": _outcome(lambda: setattr(one, dataclasses.fields(cls)[0].name, 5)
                              if dataclasses.fields(cls) else None),
        "set_other": _outcome(lambda: setattr(two, "zzz", 1)),
        "del_field": _outcome(lambda: delattr(two, dataclasses.fields(cls)[0].name)
                              if dataclasses.fields(cls) else None),
        "replace": _outcome(lambda: dataclasses.asdict(dataclasses.replace(two))),
        "pickle": _outcome(lambda: pickle.loads(pickle.dumps(two)) == two),
        "copy": _outcome(lambda: copy.copy(two) == two and copy.deepcopy(two) == two),
        "too_many": _outcome(lambda: cls(*args, *range(10))),
        "missing": _outcome(lambda: cls() if args else None),
    }
    if other is not None:
        seen["eq_ignores_compare_false"] = one == other
        seen["hash_ignores_hash_false"] = _outcome(
            lambda: hash(cls(1, g=(1,))) == hash(cls(1, g=(2,))))
        seen["factory_fresh"] = cls(1).c is not cls(1).c
        seen["init_false_default"] = cls(1).d
    if name == "Post":
        seen["post_init"] = one.total
    return seen


def _normalise(key: str, value: Any) -> Any:
    if isinstance(value, tuple) and value and value[0] == "raised":
        if key == "set_other":
            # A slotted instance refuses a new attribute either way; Python 3.11's frozen
            # ``__setattr__`` names the class it had before slots were added and so fails
            # with a TypeError, where this one raises FrozenInstanceError as unslotted does.
            return value[0]
        return value[:2]  # the texts name the class: only the defining function differs
    return value


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_every_shape_behaves_as_the_standard_library(options: dict[str, Any]) -> None:
    ours, theirs = shapes(records.dataclass, **options), shapes(dataclasses.dataclass, **options)
    assert ours.keys() == theirs.keys()
    for name in ours:
        mine, stdlib = observe(ours[name], name), observe(theirs[name], name)
        for key in stdlib:
            assert _normalise(key, mine[key]) == _normalise(key, stdlib[key]), \
                (name, key, mine[key], stdlib[key])


def plain_shapes(deco: Decorator, fld: Callable[..., Any], **options: Any) -> dict[str, type]:
    """The shapes ``records`` makes without ``dataclasses``: documented, no base, no ClassVar."""

    @deco(**options)
    class Plain:
        """A plain record."""

        a: int
        b: str

    @deco(**options)
    class Defaults:
        """Defaults, a factory, a field left out of init, repr and comparison."""

        a: int
        b: str = "x"
        c: list[int] = fld(default_factory=list)
        d: int = fld(default=7, init=False)
        e: int = fld(default=0, compare=False)
        f: str = fld(default="hidden", repr=False)
        g: tuple[int, ...] = fld(default=(), hash=False)

    @deco(**options)
    class Empty:
        """No fields."""

    @deco(**options)
    class Base:
        """A base class."""

        a: int
        b: int = 2

    made: dict[str, type] = {"Plain": Plain, "Defaults": Defaults, "Empty": Empty, "Base": Base}
    if not options.get("frozen"):
        @deco(**options)
        class Post:
            """``__post_init__`` fills a field that has no default."""

            a: int
            total: int = fld(init=False)

            def __post_init__(self) -> None:
                self.total = self.a * 2

        made["Post"] = Post
    return made


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_plain_shapes_made_without_dataclasses_behave_as_the_standard_library(
        options: dict[str, Any]) -> None:
    ours = plain_shapes(records.dataclass, records.field, **options)
    theirs = plain_shapes(dataclasses.dataclass, field, **options)
    for name, cls in ours.items():
        # made here, not by dataclasses: the metadata waits for its first use
        assert isinstance(vars(cls)["__dataclass_fields__"], records._LazyMetadata), name
    for name in ours:
        mine, stdlib = observe(ours[name], name), observe(theirs[name], name)
        for key in stdlib:
            assert _normalise(key, mine[key]) == _normalise(key, stdlib[key]), \
                (name, key, mine[key], stdlib[key])
    for name, cls in ours.items():  # the standard library's own metadata, in its place
        assert [repr(f) for f in vars(cls)["__dataclass_fields__"].values()] == \
            [repr(f) for f in vars(theirs[name])["__dataclass_fields__"].values()], name
        assert repr(vars(cls)["__dataclass_params__"]) == \
            repr(dataclasses.dataclass(type("X", (), {}), init=False, repr=False,
                                       eq=False).__dataclass_params__)
        assert vars(cls).get("__match_args__") == vars(theirs[name]).get("__match_args__")
        assert {k for k in vars(cls) if not k.startswith("__")} == \
            {k for k in vars(theirs[name]) if not k.startswith("__")}, name  # class defaults
        assert cls.__init__.__annotations__ == theirs[name].__init__.__annotations__


def test_a_plain_record_subclassed_by_dataclasses_gives_its_fields() -> None:
    @records.dataclass(frozen=True)
    class Base:
        """Made without dataclasses."""

        a: int
        b: int = 2

    @records.dataclass(frozen=True)
    class Child(Base):
        """Made through dataclasses, which reads the base's fields."""

        c: int = 3

    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b", "c"]
    assert Child(1) == Child(1, 2, 3) and repr(Child(1)).endswith("Child(a=1, b=2, c=3)")


def test_records_field_refuses_a_default_and_a_factory_together() -> None:
    with pytest.raises(ValueError, match="cannot specify both default and default_factory"):
        records.field(default=1, default_factory=list)


def test_plain_records_import_neither_dataclasses_nor_inspect() -> None:
    """The point of the plain path (docs/performance.md): no ``inspect`` at start-up."""
    import subprocess
    import sys

    code = """from __future__ import annotations
if True:
        import sys
        from ctxstore.records import dataclass, field

        @dataclass(frozen=True, slots=True)
        class Row:
            \"\"\"A row.\"\"\"

            a: int
            tags: list[str] = field(default_factory=list)

        row = Row(1)
        assert (row.a, row.tags, row == Row(1), row.tags is not Row(1).tags) == (1, [], True, True)
        assert not {"dataclasses", "inspect"} & set(sys.modules), sorted(sys.modules)
        import dataclasses

        assert [f.name for f in dataclasses.fields(Row)] == ["a", "tags"]
        assert dataclasses.replace(row, a=2) == Row(2) and dataclasses.asdict(row) == {"a": 1, "tags": []}
        try:
            row.a = 3
        except dataclasses.FrozenInstanceError:
            pass
        else:
            raise AssertionError("a frozen record took an assignment")
    """
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_field_names_cannot_shadow_the_generated_init(options: dict[str, Any]) -> None:
    made = []
    for deco in (records.dataclass, dataclasses.dataclass):
        @deco(**options)
        class Odd:
            self: int
            _set: int = 2
            object: str = "o"

        made.append(Odd)
    ours, theirs = made
    assert dataclasses.asdict(ours(1)) == dataclasses.asdict(theirs(1)) == \
        {"self": 1, "_set": 2, "object": "o"}
    assert dataclasses.asdict(ours(self=5, _set=6)) == {"self": 5, "_set": 6, "object": "o"}


def test_frozen_assignment_names_the_field() -> None:
    @records.dataclass(frozen=True, slots=True)
    class Point:
        x: int

    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        Point(1).x = 2  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError, match="cannot delete field 'x'"):
        del Point(1).x  # type: ignore[misc]


def test_instances_of_different_classes_are_never_equal() -> None:
    @records.dataclass(frozen=True)
    class A:
        x: int

    @records.dataclass(frozen=True)
    class B:
        x: int

    assert A(1) != B(1)
    assert A(1) == A(1)
    assert len({A(1), A(1), A(2)}) == 2


def test_a_method_the_class_defines_is_kept() -> None:
    @records.dataclass(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and other.name.lower() == self.name.lower()

        def __hash__(self) -> int:
            return hash(self.name.lower())

    assert repr(Named("A")) == "<A>"
    assert Named("A") == Named("a")
    assert hash(Named("A")) == hash(Named("a"))


def test_mutable_records_are_unhashable_like_the_standard_library() -> None:
    @records.dataclass
    class Box:
        x: int

    with pytest.raises(TypeError, match="unhashable"):
        hash(Box(1))
    box = Box(1)
    box.x = 2
    assert box == Box(2)


def test_shapes_it_does_not_support_are_refused_at_definition() -> None:
    with pytest.raises(TypeError, match="InitVar"):
        @records.dataclass
        class WithInitVar:
            a: int
            b: InitVar[int]

    with pytest.raises(TypeError, match="keyword-only"):
        @records.dataclass
        class KwOnly:
            a: int = field(kw_only=True)

    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @records.dataclass
        class Order:
            a: int = 1
            b: int  # type: ignore[misc]


def test_an_undocumented_class_gets_the_signature_as_docstring() -> None:
    @records.dataclass(frozen=True)
    class Pair:
        a: int
        b: str = "x"

    @dataclasses.dataclass(frozen=True)
    class Same:
        a: int
        b: str = "x"

    assert Pair.__doc__ == (Same.__doc__ or "").replace("Same", "Pair")


def test_every_ctx_record_class_is_made_by_the_cheap_decorator() -> None:
    """A new module that imports ``dataclass`` from ``dataclasses`` pays start-up again."""
    from pathlib import Path

    import ctxstore

    root = Path(ctxstore.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("from dataclasses import ") and "dataclass" in \
                    [name.strip() for name in line.split(" import ", 1)[1].split(",")]:
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
