"""The table of typed object kinds: one ``@typed("type", v)`` declaration per record class.

Owns the mapping ``(type, v) -> record class`` that ``model.decode_typed`` dispatches on
(STYLE §2.5): a new object type, or a new version of one, is a frozen dataclass record
with this decorator and nothing else to edit. Old versions stay registered forever,
since objects are immutable and committed to Git. It must not encode or decode
(``model.encode_typed`` / ``decode_typed`` do) nor import anything above ``model``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypeVar

from ctxstore.model._schema import Record

__all__ = ["typed", "registered_types", "find_type"]

_R = TypeVar("_R", bound=type[Record])

# Written only by ``typed`` while modules are imported; read by every decode.
_TYPES: dict[tuple[str, int], type[Record]] = {}


def typed(type_name: str, v: int) -> Callable[[_R], _R]:
    """Register a record class as the typed object ``(type_name, v)``.

    Put it above ``@dataclass(frozen=True, slots=True)``: ``slots=True`` makes a new
    class, and the registry must hold the one instances are made of. The decorator
    sets the class's ``TYPE`` and ``V``.

    Args:
        type_name: The payload's ``"type"`` (``commit``, ``tree``, ...).
        v: The schema version written as ``"v"``.

    Returns:
        A class decorator that returns the class unchanged but registered.

    Raises:
        TypeError: at import time, for a class that is not a dataclass ``Record``,
            whose ``FIELDS`` do not name its dataclass fields in order, or for a pair
            already registered to another class (programming errors, not bad input).
    """
    def register(cls: _R) -> _R:
        if not (dataclasses.is_dataclass(cls) and issubclass(cls, Record)):
            raise TypeError(f"@typed({type_name!r}, {v}) goes above @dataclass on a Record "
                            f"subclass, not on {cls.__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        if list(cls.FIELDS) != names:
            raise TypeError(f"{cls.__name__}: FIELDS {list(cls.FIELDS)} do not match the "
                            f"fields {names}")
        key = (type_name, v)
        old = _TYPES.get(key)
        if old is not None and old is not cls:
            raise TypeError(f"{type_name} v{v} is already registered ({old.__name__})")
        cls.TYPE = type_name
        cls.V = v
        _TYPES[key] = cls
        return cls
    return register


def registered_types() -> Mapping[tuple[str, int], type[Record]]:
    """A read-only, live view of every registered ``(type, v)`` and its class.

    Returns:
        The registry; it grows as modules defining types are imported.
    """
    return _TYPES_VIEW


def find_type(type_name: str, v: int) -> type[Record] | None:
    """The record class registered for ``(type_name, v)``, or None.

    Args:
        type_name: The payload's ``"type"``.
        v: The payload's ``"v"``.

    Returns:
        The class, or None when no such pair is registered.
    """
    return _TYPES.get((type_name, v))


_TYPES_VIEW: Mapping[tuple[str, int], type[Record]] = MappingProxyType(_TYPES)
