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
class never silently gets different semantics. ``tests/storage/test_records.py`` compares the
behaviour with the standard library's, class by class.

Importing ``dataclasses`` itself costs ~6 ms on a path that does not import click,
because it imports ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``): more than
the prompt hook can spare (docs/performance.md). So a record of the plain shape (a
docstring, no base class, annotations written as text, defaults that are plain values or
``records.field(...)``) is made without it: its fields are read from the annotations the
way the standard library reads them, and its ``__dataclass_fields__`` and
``__dataclass_params__`` are made by the standard library itself, from a copy of the
class's annotations and defaults, on first use (``dataclasses.fields``, ``replace``,
``asdict``). Any other shape goes through ``dataclasses.dataclass`` as before.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, dataclass_transform, overload

if TYPE_CHECKING:
    from dataclasses import Field as _DataclassField
    from dataclasses import field as _dataclass_field
else:
    # What type checkers need to know: only ``dataclass_transform`` reads these names, and
    # at run time it merely stores them.
    _DataclassField = _dataclass_field = None

__all__ = ["dataclass", "field"]

T = TypeVar("T")


class _Missing:
    """No default: what ``dataclasses.MISSING`` means here (read without importing it)."""

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class _FactorySentinel:
    """The default of a parameter whose field has a ``default_factory``."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _FactorySentinel()


class _Spec:
    """One field, as the methods made here read it (from a ``dataclasses.Field`` or a plain class)."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare")

    def __init__(self, name: str, type: Any, default: Any = _MISSING,  # noqa: A002
                 default_factory: Any = _MISSING, init: bool = True, repr: bool = True,  # noqa: A002
                 hash: bool | None = None, compare: bool = True) -> None:  # noqa: A002
        self.name, self.type, self.default, self.default_factory = name, type, default, default_factory
        self.init, self.repr, self.hash, self.compare = init, repr, hash, compare


class _FieldArgs:
    """What ``field(...)`` was given; a ``dataclasses.field`` is made of it when one is needed."""

    __slots__ = ("kwargs",)

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs

    def to_dataclass_field(self) -> Any:
        import dataclasses

        return dataclasses.field(**self.kwargs)


@overload
def field(*, default: T, init: bool = True, repr: bool = True,  # noqa: A002
          hash: bool | None = None, compare: bool = True) -> T: ...  # noqa: A002


@overload
def field(*, default_factory: Callable[[], T], init: bool = True, repr: bool = True,  # noqa: A002
          hash: bool | None = None, compare: bool = True) -> T: ...  # noqa: A002


@overload
def field(*, init: bool = True, repr: bool = True, hash: bool | None = None,  # noqa: A002
          compare: bool = True) -> Any: ...


def field(*, default: Any = _MISSING, default_factory: Any = _MISSING, init: bool = True,
          repr: bool = True, hash: bool | None = None, compare: bool = True) -> Any:  # noqa: A002
    """``dataclasses.field`` for ``records.dataclass``, usable without importing ``dataclasses``.

    Args:
        default: The field's default value.
        default_factory: Called for the default of each new instance.
        init: Whether ``__init__`` takes the field.
        repr: Whether ``repr`` shows the field.
        hash: Whether the hash includes it (None: as ``compare``).
        compare: Whether equality compares it.

    Returns:
        A marker the decorator reads (a class it does not make itself gets the
        ``dataclasses.field`` of the same arguments).

    Raises:
        ValueError: if both ``default`` and ``default_factory`` are given.
    """
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    kwargs: dict[str, Any] = {"init": init, "repr": repr, "hash": hash, "compare": compare}
    if default is not _MISSING:
        kwargs["default"] = default
    if default_factory is not _MISSING:
        kwargs["default_factory"] = default_factory
    return _FieldArgs(kwargs)


def _fields_key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names)


def _init_source(fields: list[_Spec], frozen: bool,
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


def _plain_fields(cls: type) -> list[_Spec] | None:
    """The fields of a record of the plain shape, read as ``dataclasses`` reads them; else None.

    Plain: a docstring, no base class but ``object``, no ``__slots__`` of its own, every
    annotation a text naming no ``ClassVar``, ``InitVar`` or ``KW_ONLY``, and every default
    a hashable value without ``__set_name__`` (or a ``field(...)`` of this module). Any
    other class is left to ``dataclasses.dataclass``, which also names what is wrong with it.
    """
    own = cls.__dict__
    if type(cls) is not type or cls.__bases__ != (object,) or "__slots__" in own \
            or not own.get("__doc__"):
        return None
    annotations = own.get("__annotations__", {})
    for text in annotations.values():
        if not isinstance(text, str) or "ClassVar" in text or "InitVar" in text or "KW_ONLY" in text:
            return None
    stdlib = sys.modules.get("dataclasses")  # a dataclasses.Field exists only once it is imported
    for name, value in own.items():
        if stdlib is not None and isinstance(value, stdlib.Field):
            return None
        if isinstance(value, _FieldArgs) and name not in annotations:
            return None
    fields = []
    for name in annotations:
        value = getattr(cls, name, _MISSING)  # what dataclasses takes as the default
        text = annotations[name]
        spec = _Spec(name, text, **value.kwargs) if isinstance(value, _FieldArgs) \
            else _Spec(name, text, value)
        default = spec.default
        if default is not _MISSING and (type(default).__hash__ is None
                                        or hasattr(type(default), "__set_name__")):
            return None  # a mutable default (refused by dataclasses) or a descriptor
        fields.append(spec)
    return fields


class _LazyMetadata:
    """``__dataclass_fields__`` or ``__dataclass_params__`` of a record made without ``dataclasses``.

    The first read has the standard library make both, for a class with the record's name,
    module, annotations and defaults, and puts them on the record in place of these.
    """

    __slots__ = ("source", "attribute")

    def __init__(self, source: _Source, attribute: str) -> None:
        self.source = source
        self.attribute = attribute

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self.source.build()[self.attribute]


class _Source:
    """What the standard library needs to make a plain record's dataclass metadata."""

    __slots__ = ("record", "body")

    def __init__(self, cls: type) -> None:
        self.record = cls
        annotations = cls.__dict__.get("__annotations__", {})
        self.body: dict[str, Any] = {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__, "__annotations__": dict(annotations)}
        for name in annotations:
            value = getattr(cls, name, _MISSING)
            if value is not _MISSING:
                self.body[name] = value

    def build(self) -> dict[str, Any]:
        import dataclasses

        body = {name: value.to_dataclass_field() if isinstance(value, _FieldArgs) else value
                for name, value in self.body.items()}
        # The options ``_process`` gives dataclasses.dataclass for any other record.
        made: Any = dataclasses.dataclass(type(self.record.__name__, (), body),
                                          init=False, repr=False, eq=False)
        metadata = {"__dataclass_fields__": made.__dataclass_fields__,
                    "__dataclass_params__": made.__dataclass_params__}
        for name, value in metadata.items():
            type.__setattr__(self.record, name, value)
        return metadata


def _make_plain(cls: type[T], fields: list[_Spec], slots: bool) -> type[T]:
    """What ``dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)`` makes.

    For a class ``_plain_fields`` accepted, with the metadata left for first use.
    """
    source = _Source(cls)
    kind: Any = cls
    for spec in fields:  # a field(...) default is replaced by its value (or removed), as there
        if isinstance(cls.__dict__.get(spec.name), _FieldArgs):
            if spec.default is _MISSING:
                delattr(kind, spec.name)
            else:
                setattr(kind, spec.name, spec.default)
    kind.__dataclass_params__ = _LazyMetadata(source, "__dataclass_params__")
    kind.__dataclass_fields__ = _LazyMetadata(source, "__dataclass_fields__")
    if "__match_args__" not in cls.__dict__:
        setattr(kind, "__match_args__", tuple(spec.name for spec in fields if spec.init))  # noqa: B010
    if slots:  # a new class, as dataclasses' _add_slots makes it
        body = dict(cls.__dict__)
        names = tuple(spec.name for spec in fields)
        body["__slots__"] = names
        for name in (*names, "__dict__", "__weakref__"):
            body.pop(name, None)
        qualname = cls.__qualname__
        kind = type(cls.__name__, cls.__bases__, body)
        kind.__qualname__ = qualname
        source.record = kind
    made: type[T] = kind
    return made


def _make_with_dataclasses(cls: type[T], slots: bool) -> tuple[type[T], list[_Spec]]:
    """``dataclasses.dataclass`` does the field processing (any shape it accepts)."""
    import dataclasses

    for name, value in list(cls.__dict__.items()):
        if isinstance(value, _FieldArgs):
            setattr(cls, name, value.to_dataclass_field())
    made = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)
    kind: Any = made
    every = kind.__dataclass_fields__
    fields = list(dataclasses.fields(kind))
    names = {f.name for f in fields}
    for name, f in every.items():
        if name not in names and getattr(f, "_field_type", None) is \
                getattr(dataclasses, "_FIELD_INITVAR", object()):
            raise TypeError(f"{kind.__qualname__}.{name}: InitVar needs dataclasses.dataclass")
    if any(f.kw_only is True for f in fields):
        raise TypeError(f"{kind.__qualname__}: keyword-only fields need dataclasses.dataclass")

    def known(value: Any) -> Any:
        return _MISSING if value is dataclasses.MISSING else value

    return made, [_Spec(f.name, f.type, known(f.default), known(f.default_factory), f.init,
                        f.repr, f.hash, f.compare) for f in fields]


def _process(cls: type[T], frozen: bool, slots: bool) -> type[T]:
    plain = _plain_fields(cls)
    documented = bool(getattr(cls, "__doc__", None))
    if plain is not None:
        made = _make_plain(cls, plain, slots)
        fields = plain
    else:
        if not documented:
            # The standard library would describe the class by ``inspect.signature`` of the
            # ``__init__`` it has before ours (object's: its text signature costs a tokenizer
            # pass, ~5 ms on the first class). The docstring is written below instead.
            cls.__doc__ = cls.__name__
        made, fields = _make_with_dataclasses(cls, slots)
    kind: Any = made  # methods are assigned below, which the type of ``made`` forbids
    names = {f.name for f in fields}
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
        import inspect

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
            raise _frozen(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:  # noqa: N807
        if type(self) is cls or name in names:
            raise _frozen(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)
    cls.__setattr__ = __setattr__
    cls.__delattr__ = __delattr__


def _frozen(message: str) -> Exception:
    from dataclasses import FrozenInstanceError  # only when code assigns to a frozen record

    return FrozenInstanceError(message)


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, frozen: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field, _dataclass_field, _DataclassField))
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
