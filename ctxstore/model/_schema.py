"""A small field-spec language shared by the typed records (private).

A record class is a frozen dataclass with ``FIELDS``: an ordered mapping of field
name to spec. Specs: ``"oid"`` (32 raw bytes), ``"str"``, ``"int"``, ``"bool"``,
``"num"`` (int or finite float), ``"json"`` (any canonical msgpack value), a record
class, ``Opt(spec)``, ``ListOf(spec)``, ``MapOf(spec)`` (string keys), ``OneOf(...)``
(a string from a fixed set) and ``RefSpec`` (an endpoint ``[kind, key]``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ctxstore.records import dataclass

__all__ = ["SchemaError", "Opt", "ListOf", "MapOf", "OneOf", "REF", "Record", "to_wire", "from_wire"]


class SchemaError(ValueError):
    """A payload does not match its record schema."""


@dataclass(frozen=True)
class Opt:
    inner: Any


@dataclass(frozen=True)
class ListOf:
    inner: Any


@dataclass(frozen=True)
class MapOf:
    inner: Any


@dataclass(frozen=True)
class OneOf:
    choices: frozenset[str]


REF = "ref"


class Record:
    """Base for schema-described records (subclasses are frozen dataclasses).

    ``FIELDS`` names every dataclass field, in order, with its wire spec; a test
    (tests/model/test_model_registry.py) proves it agrees with the annotations for every
    record reachable from the registry. Deriving it from the annotations at run time
    would cost every hook process about a millisecond of ``get_type_hints``. Typed
    objects also get ``TYPE`` and ``V`` from ``model.registry.typed``.
    """

    FIELDS: ClassVar[dict[str, Any]] = {}
    TYPE: ClassVar[str]
    V: ClassVar[int]

    def to_wire(self) -> dict[str, Any]:
        """Return the payload map of this record (without ``type`` and ``v``).

        Returns:
            Plain msgpack-ready data, one entry per field.
        """
        return to_wire(self, type(self))  # type: ignore[no-any-return]

    @classmethod
    def from_wire(cls, value: dict[str, Any], where: str) -> Any:
        """Validate a payload map (without ``type`` and ``v``) and build the record.

        Args:
            value: The decoded map.
            where: The name errors start with (the object type).

        Returns:
            An instance of ``cls``.

        Raises:
            SchemaError: naming the offending field path.
        """
        return from_wire(value, cls, where)


def to_wire(value: Any, spec: Any) -> Any:
    """Convert a record (or nested value) to plain msgpack-ready data."""
    if isinstance(spec, type) and issubclass(spec, Record):
        return {name: to_wire(getattr(value, name), sub) for name, sub in spec.FIELDS.items()}
    if isinstance(spec, Opt):
        return None if value is None else to_wire(value, spec.inner)
    if isinstance(spec, ListOf):
        return [to_wire(v, spec.inner) for v in value]
    if isinstance(spec, MapOf):
        return {k: to_wire(v, spec.inner) for k, v in value.items()}
    if spec == REF:
        return [value[0], value[1]]
    return value


def from_wire(value: Any, spec: Any, where: str) -> Any:
    """Validate plain data against ``spec`` and build records.

    Raises:
        SchemaError: naming the offending field path.
    """
    if isinstance(spec, type) and issubclass(spec, Record):
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected a map")
        unknown = set(value) - set(spec.FIELDS)
        if unknown:
            raise SchemaError(f"{where}: unknown field(s) {sorted(unknown)}")
        missing = set(spec.FIELDS) - set(value)
        if missing:
            raise SchemaError(f"{where}: missing field(s) {sorted(missing)}")
        kwargs = {name: from_wire(value[name], sub, f"{where}.{name}")
                  for name, sub in spec.FIELDS.items()}
        obj = spec(**kwargs)
        check = getattr(obj, "check", None)
        if check is not None:
            check(where)
        return obj
    if isinstance(spec, Opt):
        return None if value is None else from_wire(value, spec.inner, where)
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list")
        return tuple(from_wire(v, spec.inner, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected a map")
        return {k: from_wire(v, spec.inner, f"{where}.{k}") for k, v in value.items()}
    if isinstance(spec, OneOf):
        if value not in spec.choices:
            raise SchemaError(f"{where}: {value!r} is not one of {sorted(spec.choices)}")
        return value
    if spec == "oid":
        if not isinstance(value, bytes) or len(value) != 32:
            raise SchemaError(f"{where}: expected a 32-byte object id")
        return value
    if spec == "str":
        if not isinstance(value, str):
            raise SchemaError(f"{where}: expected a string")
        return value
    if spec == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise SchemaError(f"{where}: expected an integer")
        return value
    if spec == "bool":
        if not isinstance(value, bool):
            raise SchemaError(f"{where}: expected a boolean")
        return value
    if spec == "num":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SchemaError(f"{where}: expected a number")
        return value
    if spec == REF:
        if (not isinstance(value, list) or len(value) != 2
                or not all(isinstance(p, str) and p for p in value)):
            raise SchemaError(f"{where}: expected an endpoint [kind, key]")
        return (value[0], value[1])
    if spec == "json":
        return value
    raise SchemaError(f"{where}: unknown spec {spec!r}")  # pragma: no cover - programming error
