"""The exchange document of spec 000: its format, its values checked, its parsing.

An import is hostile input: parsing bounds its size and nesting, refuses NaN, duplicate keys
and lone surrogates; every value is checked by type and range before it becomes a record.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ctxstore.clock import clamp_future
from ctxstore.errors import InvalidInput
from ctxstore.ids import is_ulid
from ctxstore.knowledge._files import read_regular_file

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "MAX_DOCUMENT_BYTES", "MAX_METADATA_DEPTH",
           "parse_document", "read_document_file"]

EXPORT_FORMAT = "ctx-export"
EXPORT_VERSION = 1
MAX_DOCUMENT_BYTES = 256 << 20
# Metadata is stored inside a change batch, whose canonical encoding allows 64 levels in
# all (codec.MAX_DEPTH); the batch, record and metadata map take a few of them.
MAX_METADATA_DEPTH = 32

_T = TypeVar("_T")
_STATUS = re.compile(r"[a-z][a-z_-]{0,31}")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})",
                  re.ASCII)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_SHOWN_IDS = 5

_NODE_FIELDS = ("id", "type", "content", "summary", "tags", "metadata", "status",
                "superseded_by", "created_at", "updated_at", "author")
_EDGE_FIELDS = ("from", "to", "type", "weight", "metadata", "created_at", "updated_at")
_VIEW_FIELDS = ("name", "query", "budget", "description", "created_at", "updated_at")
_TOP_FIELDS = ("version", "format", "nodes", "edges", "views")


# -- time -----------------------------------------------------------------------------------------

def _iso_ms(ms: int) -> str:
    # Integer arithmetic only: ms / 1000 as a float can land a millisecond off.
    moment = _EPOCH + dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond // 1000:03d}Z"


def _parse_time(value: Any, where: str) -> int:
    if not isinstance(value, str) or not _ISO.fullmatch(value):
        raise InvalidInput(f"{where}: invalid time {_short(value)} "
                           "(want ISO-8601 UTC, e.g. 2026-01-31T12:00:00.000Z)")
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{where}: invalid time {value!r}") from None
    ms = (moment - _EPOCH) // dt.timedelta(milliseconds=1)
    if ms < 0:
        raise InvalidInput(f"{where}: time {value!r} is before 1970")
    return ms


def _times(item: Mapping[str, Any], where: str, now: int) -> tuple[int, int]:
    """(created_at, updated_at) in ms; missing means now, the future is clamped to now."""
    created = now if item.get("created_at") is None \
        else _parse_time(item["created_at"], f"{where}.created_at")
    updated = created if item.get("updated_at") is None \
        else _parse_time(item["updated_at"], f"{where}.updated_at")
    # A stamp from the future would win every last-writer-wins merge forever (IM-02).
    updated = clamp_future(updated, now=now)
    created = min(created, updated)
    return created, updated


# -- value checks ---------------------------------------------------------------------------------

def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(value: Any, where: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: expected a string, got {_json_type(value)}")
    _check_unicode(value, where)
    return value


def _check_unicode(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{where}: not valid Unicode (lone surrogate)") from None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _check_json_value(value: Any, where: str, depth: int = 0) -> None:
    """Check a metadata value: what the canonical codec can store.

    Nested at most ``MAX_METADATA_DEPTH`` levels (recursion is bounded by that depth).
    """
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInput(f"{where}: nested deeper than {MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise InvalidInput(f"{where}: integer out of the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where}: NaN and Infinity are not allowed")
        return
    if isinstance(value, str):
        _check_unicode(value, where)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_value(item, f"{where}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{where}: object keys must be strings")
            _check_unicode(key, f"{where} key {_short(key)}")
            _check_json_value(item, f"{where}.{key}", depth + 1)
        return
    raise InvalidInput(f"{where}: not a JSON value ({type(value).__name__})")


def _metadata(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected an object, got {_json_type(value)}")
    _check_json_value(value, where)
    return dict(value)


def _object(value: Any, where: str, allowed: Sequence[str], required: Sequence[str]
            ) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected an object, got {_json_type(value)}")
    unknown = sorted(k for k in value if k not in allowed)
    if unknown:
        raise InvalidInput(f"{where}: unknown field {_short(unknown[0])}",
                           hint="fields: " + ", ".join(allowed))
    for name in required:
        if name not in value:
            raise InvalidInput(f"{where}: missing field {name!r}")
    return value


def _node_id(value: Any, where: str) -> str:
    if not is_ulid(value):
        raise InvalidInput(f"{where}: not a node id: {_short(value)} "
                           "(want a 26-character upper-case ULID)")
    return str(value)


def _relabel(exc: InvalidInput, where: str) -> InvalidInput:
    return InvalidInput(f"{where}: {exc.message}", hint=exc.hint)


def _checked(value: Any, where: str, check: Callable[[str], _T]) -> _T:
    """``check`` of a required string, its errors prefixed with ``where``."""
    text = _text(value, where)
    assert text is not None
    try:
        return check(text)
    except InvalidInput as exc:
        raise _relabel(exc, where) from None


# -- parsing --------------------------------------------------------------------------------------

def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {_short(key)}")
            seen.add(key)
    return result


def parse_document(data: bytes | str) -> dict[str, Any]:
    """Parse the text of an export document (strict JSON, bounded).

    Args:
        data: UTF-8 bytes (no BOM) or text, at most ``MAX_DOCUMENT_BYTES``.

    Returns:
        The top-level JSON object (its fields are checked by ``import_document``).

    Raises:
        InvalidInput: for an oversized document, bytes that are not UTF-8, malformed JSON,
            nesting too deep to parse, NaN/Infinity, duplicate keys or a top level that is
            not an object.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise InvalidInput(f"import document is larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"import document is not UTF-8 text (byte {exc.start})") from None
    else:
        text = data
    if text.startswith("\ufeff"):
        raise InvalidInput("import document starts with a byte-order mark",
                           hint="save it as UTF-8 without a BOM")
    try:
        doc = json.loads(text, parse_constant=_reject_constant,
                         object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise InvalidInput("import document is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"import document is not valid JSON: {exc.msg} "
                           f"(line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # NaN/Infinity, duplicate keys, huge integer literals
        raise InvalidInput(f"import document is not valid: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"import document must be a JSON object, got {_json_type(doc)}")
    return doc


def read_document_file(path: Path) -> bytes:
    """Read an export document from a file, refusing more than ``MAX_DOCUMENT_BYTES``.

    Args:
        path: The file to read.

    Returns:
        Its bytes (parse them with ``parse_document``).

    Raises:
        InvalidInput: if the file is missing, a directory, not a regular file,
            unreadable or too large.
    """
    return read_regular_file(path, MAX_DOCUMENT_BYTES, "file")
