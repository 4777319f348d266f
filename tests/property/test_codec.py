"""Canonical msgpack: round-trips, stable bytes, strict decoding."""

from __future__ import annotations

import math

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.errors import DeserializationFailed
from ctxstore.model import Commit, Tree, TreeEntry, WorkCommit, decode_typed, encode_typed
from ctxstore.model.codec import CodecError, decode, encode

leaves = (st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1)
          | st.floats(allow_nan=False, allow_infinity=False) | st.text() | st.binary())
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
oids = st.binary(min_size=32, max_size=32)


def _norm(v):
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


@given(values)
def test_codec_roundtrip(value) -> None:
    assert decode(encode(value)) == _norm(value)


@given(st.dictionaries(st.text(max_size=6), leaves, max_size=8), st.randoms())
def test_codec_bytes_do_not_depend_on_insertion_order(d, rnd) -> None:
    items = list(d.items())
    rnd.shuffle(items)
    assert encode(dict(items)) == encode(d)


@given(st.lists(oids, max_size=3), st.integers(0, 2**40), st.text(), st.one_of(st.none(), oids))
def test_commit_roundtrip_and_stable(parents, ts, msg, tree) -> None:
    c = Commit(parents=tuple(parents), timestamp_unix=ts, message=msg, root_tree=tree)
    payload = encode_typed(c)
    assert decode_typed(payload) == c
    assert encode_typed(decode_typed(payload)) == payload


def test_codec_rejects_nan_and_non_string_keys() -> None:
    with pytest.raises(CodecError):
        encode({"x": math.nan})
    with pytest.raises(CodecError):
        encode({1: "a"})
    with pytest.raises(CodecError):
        encode({"s": {1, 2}})


def test_codec_decode_rejects_duplicate_keys() -> None:
    raw = b"\x82\xa1a\x01\xa1a\x02"  # {"a": 1, "a": 2}
    with pytest.raises(CodecError, match="duplicate"):
        decode(raw)


def test_codec_decode_rejects_ext_types_and_trailing_bytes() -> None:
    with pytest.raises(CodecError, match="ext"):
        decode(msgpack.packb(msgpack.ExtType(5, b"x")))
    with pytest.raises(CodecError):
        decode(encode({"a": 1}) + b"\x00")


def test_codec_decode_rejects_non_canonical_bytes() -> None:
    unsorted = b"\x82\xa1b\x01\xa1a\x02"  # keys out of order
    with pytest.raises(CodecError, match="canonical"):
        decode(unsorted)
    wide_int = b"\xcd\x00\x01"  # 1 as uint16: not the shortest form
    with pytest.raises(CodecError, match="canonical"):
        decode(wide_int)


def test_codec_decode_survives_deep_nesting_and_huge_headers() -> None:
    with pytest.raises(CodecError):
        decode(b"\x91" * 100000 + b"\xc0")
    with pytest.raises(CodecError):
        decode(b"\xdd\xff\xff\xff\xff")


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.update(extra=1), "unknown field"),
    (lambda d: d.pop("message"), "missing field"),
    (lambda d: d.update(parents=[b"short"]), "32-byte"),
    (lambda d: d.update(timestamp_unix="now"), "integer"),
])
def test_decode_typed_enforces_schema(mutate, match) -> None:
    d = {"type": "commit", "v": 1, "parents": [], "timestamp_unix": 1, "message": "m",
         "root_tree": None, "change_batches": [], "edge_batches": [], "narrative_refs": [],
         "cargo_snapshot": None, "code_snapshot": None, "diagnostics_snapshot": None,
         "session_id": None, "aborted_work": None}
    decode_typed(encode(d))
    mutate(d)
    with pytest.raises(DeserializationFailed, match=match):
        decode_typed(encode(d))


def test_decode_typed_refuses_unknown_versions_by_name() -> None:
    with pytest.raises(DeserializationFailed, match=r"newer ctx \(commit v999\)") as err:
        decode_typed(encode({"type": "commit", "v": 999}))
    assert err.value.unsupported
    with pytest.raises(DeserializationFailed, match="unknown object type 'widget'"):
        decode_typed(encode({"type": "widget", "v": 1}))


def test_tree_entries_must_be_sorted_and_valid() -> None:
    e = lambda n: TreeEntry(name=n, kind="blob", id=b"\0" * 32)  # noqa: E731
    decode_typed(encode_typed(Tree(entries=(e("a"), e("b")))))
    with pytest.raises(DeserializationFailed, match="sorted"):
        decode_typed(encode_typed(Tree(entries=(e("b"), e("a")))))
    with pytest.raises(DeserializationFailed, match="invalid entry name"):
        decode_typed(encode_typed(Tree(entries=(e("../x"),))))


def test_work_commit_step_kind_is_checked() -> None:
    w = WorkCommit(parents=(), base=b"\1" * 32, session_id="s", created_at=1, step_kind="note")
    assert decode_typed(encode_typed(w)) == w
    bad = WorkCommit(parents=(), base=b"\1" * 32, session_id="s", created_at=1, step_kind="dance")
    with pytest.raises(DeserializationFailed, match="dance"):
        decode_typed(encode_typed(bad))
