"""The one canonical MessagePack codec for typed object payloads.

``encode`` writes maps with sorted string keys, bytes as msgpack ``bin``, and refuses
NaN, infinities and unsupported types, so equal values always give equal bytes (and so
equal object ids). ``decode`` is strict: no ext types, no duplicate keys, no trailing
bytes, and the input must be exactly what ``encode`` would write.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack

__all__ = ["JsonValue", "CodecError", "encode", "decode", "canonicalize", "jsonable"]

JsonValue = Any  # msgpack/JSON edge values: None, bool, int, float, str, bytes, list, dict

MAX_DEPTH = 64


class CodecError(ValueError):
    """Raised for values that cannot be encoded or bytes that are not canonical."""


def canonicalize(value: JsonValue, depth: int = 0) -> JsonValue:
    """Return ``value`` with every map's keys sorted, checking every leaf.

    Raises:
        CodecError: for NaN/inf floats, non-string keys, too deep nesting or other types.
    """
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise CodecError(f"integer out of range: {value}")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"non-finite float {value!r} cannot be stored")
        return value
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise CodecError(f"map key must be a string, got {type(key).__name__}")
        return {k: canonicalize(value[k], depth + 1) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [canonicalize(v, depth + 1) for v in value]
    raise CodecError(f"cannot encode {type(value).__name__}")


def encode(value: JsonValue) -> bytes:
    """Encode ``value`` canonically (sorted keys, bin for bytes, no NaN)."""
    return msgpack.packb(canonicalize(value), use_bin_type=True)


def _reject_ext(code: int, data: bytes) -> None:
    raise CodecError(f"msgpack ext type {code} is not allowed")


def _pairs(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise CodecError("duplicate map key")
    return result


def decode(data: bytes) -> JsonValue:
    """Decode canonical bytes strictly.

    Raises:
        CodecError: for malformed, non-canonical or disallowed msgpack.
    """
    try:
        value = msgpack.unpackb(
            data, raw=False, use_list=True, strict_map_key=True,
            ext_hook=_reject_ext, object_pairs_hook=_pairs,
        )
    except CodecError:
        raise
    except (ValueError, TypeError, msgpack.StackError, msgpack.ExtraData,
            msgpack.FormatError, UnicodeDecodeError) as exc:
        raise CodecError(f"malformed msgpack: {type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise CodecError("msgpack nested too deeply") from None
    if encode(value) != data:
        raise CodecError("msgpack is not in canonical form")
    return value


def jsonable(value: JsonValue) -> JsonValue:
    """The same value with bytes as hex and tuples as lists, ready for ``json.dumps``."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
