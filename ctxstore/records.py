"""``dataclass`` at a fraction of the definition cost, same classes.

The standard library's ``dataclasses.dataclass`` compiles each generated method with
its own ``exec``: a frozen, slotted class costs ~0.55 ms to define (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), and a
``ctx index`` or ``ctx pack`` process defines 60-70 of them, ~30 ms of start-up on
every run (docs/performance.md). This decorator lets the standard library do the field
processing (``fields()``, ``replace()``, ``asdict()``, ``__match_args__`` and slots all
work as before), compiles only ``__init__`` (the one method whose speed matters: it runs
per instance), and installs shared, generic ``__repr__``, ``__eq__``, ``__hash__`` and
frozen ``__setattr__``/``__delattr__`` that behave exactly as the generated ones:
equality between instances of the same class only, field-tuple hashing for frozen
classes, ``FrozenInstanceError`` on assignment, pickling of frozen slotted instances.

Only the options this code base uses are accepted (``frozen``, ``slots``); a class with
``InitVar`` or keyword-only fields is refused with ``TypeError`` at definition, so a
class never silently gets different semantics. ``tests/test_records.py`` compares the
behaviour with the standard library's, class by class.
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["dataclass"]

T = TypeVar("T")

_MISSING = dataclasses.MISSING


class _FactorySentinel:
    """The default of a parameter whose field has a ``default_factory``."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _FactorySentinel()


def _fields_key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names)


def _init_source(fields: list[dataclasses.Field[Any]], frozen: bool,
                 post_init: bool) -> tuple[str, dict[str, Any]]:
    """The source of ``__init__`` and the names it reads (defaults, factories).

    Its own names are dunder-wrapped (as the standard library's are), so that no field
    name (``self``, ``_set``) can shadow them.
    """
    me = "__rec_self__"
    params, body = [me], []
    scope: dict[str, Any] = {"__rec_set__": object.__setattr__, "__rec_has_factory__": _HAS_FACTORY}
    seen_default = False
    for f in fields:
        name = f.name
        default, factory = f"__rec_dflt_{name}__", f"__rec_factory_{name}__"
        if f.init:
            if f.default is not _MISSING:
                scope[default] = f.default
                params.append(f"{name}={default}")
                seen_default = True
            elif f.default_factory is not _MISSING:
                params.append(f"{name}=__rec_has_factory__")
                seen_default = True
            elif seen_default:
                raise TypeError(f"non-default argument {name!r} follows default argument")
            else:
                params.append(name)
            value = name
            if f.default_factory is not _MISSING:
                scope[factory] = f.default_factory
                value = f"{factory}() if {name} is __rec_has_factory__ else {name}"
        elif f.default is not _MISSING:
            scope[default] = f.default
            value = default
        elif f.default_factory is not _MISSING:
            scope[factory] = f.default_factory
            value = f"{factory}()"
        else:
            continue
        body.append(f"  __rec_set__({me}, {name!r}, {value})" if frozen
                    else f"  {me}.{name} = {value}")
    if post_init:
        body.append(f"  {me}.__post_init__()")
    if not body:
        body.append("  pass")
    return f"def __init__({', '.join(params)}):\n" + "\n".join(body) + "\n", scope


def _process(cls: type[T], frozen: bool, slots: bool) -> type[T]:
    documented = bool(getattr(cls, "__doc__", None))
    if not documented:
        # The standard library would describe the class by ``inspect.signature`` of the
        # ``__init__`` it has before ours (object's: its text signature costs a tokenizer
        # pass, ~5 ms on the first class). The docstring is written below instead.
        cls.__doc__ = cls.__name__
    made = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)
    kind: Any = made  # methods are assigned below, which the type of ``made`` forbids
    every = kind.__dataclass_fields__
    fields = list(dataclasses.fields(kind))
    names = {f.name for f in fields}
    for name, f in every.items():
        if name not in names and getattr(f, "_field_type", None) is \
                getattr(dataclasses, "_FIELD_INITVAR", object()):
            raise TypeError(f"{kind.__qualname__}.{name}: InitVar needs dataclasses.dataclass")
    if any(f.kw_only is True for f in fields):
        raise TypeError(f"{kind.__qualname__}: keyword-only fields need dataclasses.dataclass")
    own = dict(kind.__dict__)  # as the class body defined it

    if "__init__" not in own:
        source, scope = _init_source(fields, frozen, post_init=hasattr(kind, "__post_init__"))
        local: dict[str, Any] = {}
        exec(source, scope, local)  # noqa: S102 (generated from field names, as dataclasses does)
        init = local["__init__"]
        init.__qualname__ = f"{kind.__qualname__}.__init__"
        init.__module__ = kind.__module__
        init.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
        kind.__init__ = init
    if not documented:  # the standard library's generated docstring: "Name(a: int, b: str)"
        kind.__doc__ = kind.__name__ + str(inspect.signature(kind)).replace(" -> None", "")

    shown = tuple(f.name for f in fields if f.repr)
    if "__repr__" not in own:
        kind.__repr__ = _make_repr(shown)

    compared = tuple(f.name for f in fields if f.compare)
    key = _fields_key(compared)
    if "__eq__" not in own:
        def __eq__(self: Any, other: Any) -> Any:  # noqa: N807
            if other.__class__ is self.__class__:
                return key(self) == key(other)
            return NotImplemented
        kind.__eq__ = __eq__

    class_hash = own.get("__hash__", _MISSING)
    explicit_hash = not (class_hash is _MISSING or (class_hash is None and "__eq__" in own))
    if not explicit_hash:
        if frozen:
            hashed = _fields_key(tuple(f.name for f in fields
                                       if (f.compare if f.hash is None else f.hash)))

            def __hash__(self: Any) -> int:  # noqa: N807
                return hash(hashed(self))
            kind.__hash__ = __hash__
        else:
            kind.__hash__ = None

    if frozen:
        _freeze(kind, frozenset(names))
        if slots:
            ordered = tuple(f.name for f in fields)

            def __getstate__(self: Any) -> list[Any]:  # noqa: N807
                return [getattr(self, name) for name in ordered]

            def __setstate__(self: Any, state: list[Any]) -> None:  # noqa: N807
                for name, value in zip(ordered, state, strict=False):
                    object.__setattr__(self, name, value)
            if "__getstate__" not in own:
                kind.__getstate__ = __getstate__
            if "__setstate__" not in own:
                kind.__setstate__ = __setstate__
    return made


def _make_repr(shown: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:  # noqa: N807
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _freeze(cls: Any, names: frozenset[str]) -> None:
    for attr in ("__setattr__", "__delattr__"):
        if attr in cls.__dict__:
            raise TypeError(f"Cannot overwrite attribute {attr} in class {cls.__name__}")

    def __setattr__(self: Any, name: str, value: Any) -> None:  # noqa: N807
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:  # noqa: N807
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)
    cls.__setattr__ = __setattr__
    cls.__delattr__ = __delattr__


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, frozen: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: type[T] | None = None, /, *, frozen: bool = False,
              slots: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """``dataclasses.dataclass`` with ``frozen`` and ``slots``, defined ~5x cheaper.

    Args:
        cls: The class, when used bare (``@dataclass``).
        frozen: Instances refuse assignment (``FrozenInstanceError``) and hash by field.
        slots: The class gets ``__slots__`` (a new class, as with the standard library).

    Returns:
        The dataclass (or, called with options, the decorator).
    """
    if cls is None:
        return lambda inner: _process(inner, frozen, slots)
    return _process(cls, frozen, slots)
