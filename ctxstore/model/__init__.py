"""Typed objects: the records stored in objects and their canonical codec.

``encode_typed`` turns a record into the payload of a typed object (a canonical
msgpack map with ``type`` and ``v``); ``decode_typed`` reverses it through the
registry of ``model.registry`` (one ``@typed("type", v)`` per record class, keyed by
``(type, v)``) and refuses anything it does not know by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from ctxstore.errors import DeserializationFailed
from ctxstore.model import codec, registry
from ctxstore.model._schema import SchemaError

if TYPE_CHECKING:
    from ctxstore.model.build import CargoMetadataSnapshot, DiagnosticsSnapshot
    from ctxstore.model.code import FileVersion
    from ctxstore.model.commit import Commit, CommitV2, NarrativeRef, Tree, TreeEntry, WorkCommit
    from ctxstore.model.derived import SccView
    from ctxstore.model.knowledge import ChangeBatch

    # The static union of registered classes, for type checkers (a test keeps it equal to
    # the registry).
    TypedObject: TypeAlias = (Commit | CommitV2 | WorkCommit | Tree | ChangeBatch
                              | CargoMetadataSnapshot | DiagnosticsSnapshot | FileVersion | SccView)

__all__ = [
    "Commit", "CommitV2", "WorkCommit", "Tree", "TreeEntry", "NarrativeRef", "ChangeBatch",
    "CargoMetadataSnapshot", "DiagnosticsSnapshot", "FileVersion", "SccView",
    "TypedObject", "DECODERS", "encode_typed", "decode_typed", "type_of_payload",
]

# The record classes, imported on first use (PEP 562): a light path that only needs
# ``model.vocab`` or ``model.scoring`` (a hook, a recall) defines none of them, and
# ``decode_typed`` imports only the module of the type it reads (``TYPE_MODULES``).
_LAZY: dict[str, str] = {
    "CargoMetadataSnapshot": "ctxstore.model.build", "DiagnosticsSnapshot": "ctxstore.model.build",
    "FileVersion": "ctxstore.model.code", "Commit": "ctxstore.model.commit",
    "CommitV2": "ctxstore.model.commit",
    "NarrativeRef": "ctxstore.model.commit", "Tree": "ctxstore.model.commit",
    "TreeEntry": "ctxstore.model.commit", "WorkCommit": "ctxstore.model.commit",
    "SccView": "ctxstore.model.derived", "ChangeBatch": "ctxstore.model.knowledge",
}
_loaded = False
# The module that registers each typed object's ``type``: a decode imports only that one
# (a test keeps this equal to the registry).
TYPE_MODULES: dict[str, str] = {
    "cargo_snapshot": "ctxstore.model.build", "diagnostics": "ctxstore.model.build",
    "file_version": "ctxstore.model.code", "tree": "ctxstore.model.commit",
    "commit": "ctxstore.model.commit", "work_commit": "ctxstore.model.commit",
    "scc_view": "ctxstore.model.derived", "change_batch": "ctxstore.model.knowledge",
}

# Every registered (type, v) and its class: a read-only, live view of the registry.
DECODERS: Mapping[tuple[str, int], type[Any]] = registry.registered_types()


def _load_all() -> None:
    """Import every module that registers a record type (once)."""
    global _loaded
    if not _loaded:
        for module in dict.fromkeys(_LAZY.values()):
            importlib.import_module(module)
        _loaded = True


def __getattr__(name: str) -> Any:
    """The record classes and ``TypedObject``, imported on first use."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name == "TypedObject":
        kinds = [__getattr__(n) for n in ("Commit", "CommitV2", "WorkCommit", "Tree", "ChangeBatch",
                                          "CargoMetadataSnapshot", "DiagnosticsSnapshot",
                                          "FileVersion", "SccView")]
        value = kinds[0]
        for kind in kinds[1:]:
            value = value | kind
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def encode_typed(obj: TypedObject) -> bytes:
    """Return the canonical payload bytes of a typed record.

    Args:
        obj: A record of a registered type.

    Returns:
        The canonical msgpack map with ``type``, ``v`` and the record's fields.
    """
    cls = type(obj)
    return codec.encode({"type": cls.TYPE, "v": cls.V, **obj.to_wire()})


def type_of_payload(payload: bytes) -> tuple[str, int] | None:
    """Return ``(type, v)`` of a typed payload, or None if it has none (cheap peek)."""
    try:
        value = codec.decode(payload)
    except codec.CodecError:
        return None
    if isinstance(value, dict) and isinstance(value.get("type"), str) \
            and isinstance(value.get("v"), int):
        return value["type"], value["v"]
    return None


def decode_typed(payload: bytes, *, oid: bytes | None = None) -> TypedObject:
    """Decode a typed payload into its record.

    Raises:
        DeserializationFailed: for malformed or non-canonical msgpack, a schema
            violation, or an unknown ``(type, v)`` (flagged as ``unsupported``).
    """
    try:
        value: Any = codec.decode(payload)
    except codec.CodecError as exc:
        raise DeserializationFailed(oid, detail=str(exc)) from None
    if not isinstance(value, dict):
        raise DeserializationFailed(oid, detail="typed payload is not a map")
    kind, v = value.get("type"), value.get("v")
    if not isinstance(kind, str) or not isinstance(v, int) or isinstance(v, bool):
        raise DeserializationFailed(oid, detail="typed payload has no type/v")
    module = TYPE_MODULES.get(kind)
    if module is not None:
        importlib.import_module(module)
    cls = registry.find_type(kind, v)
    if cls is None:
        _load_all()  # an unknown pair: the message below lists every known type
        cls = registry.find_type(kind, v)
    if cls is None:
        known = {t for t, _ in DECODERS}
        what = f"written by a newer ctx ({kind} v{v})" if kind in known or v > 1 \
            else f"unknown object type {kind!r} v{v}"
        raise DeserializationFailed(oid, detail=what, unsupported=True)
    body = {k: val for k, val in value.items() if k not in ("type", "v")}
    try:
        return cls.from_wire(body, kind)  # type: ignore[no-any-return]
    except SchemaError as exc:
        raise DeserializationFailed(oid, detail=str(exc)) from None
