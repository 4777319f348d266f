"""ids: ObjectId parsing at the edges, ULID node ids (format, time order, freshness)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore import ids
from ctxstore.errors import InvalidInput
from ctxstore.ids import (
    ULID_ALPHABET,
    ULID_LENGTH,
    ObjectId,
    is_ulid,
    new_ulid,
    parse_object_id,
    ulid_time_ms,
)

# The ULID specification's own example: 1469918176385 ms is "01ARYZ6S41".
SPEC_EXAMPLE_MS = 1469918176385
SPEC_EXAMPLE_PREFIX = "01ARYZ6S41"
# Crockford base32 as ULIDs use it (no I, L, O, U): the text format of every stored node id.
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def test_object_id_parse_round_trips_64_lowercase_hex() -> None:
    raw = bytes(range(32))
    oid = parse_object_id(raw.hex())
    assert oid == raw and isinstance(oid, bytes) and len(oid) == 32
    assert ObjectId(raw) == raw


@pytest.mark.parametrize("text", [
    "", "ab", "0" * 63, "0" * 65, "A" * 64, "g" * 64, " " + "0" * 63, "0" * 62 + "\n0",
])
def test_parse_object_id_refuses_anything_but_64_lowercase_hex(text: str) -> None:
    with pytest.raises(InvalidInput, match="not an object id") as err:
        parse_object_id(text)
    assert err.value.code == "E011"


def test_object_id_old_locations_reexport_the_same_objects() -> None:
    from ctxstore import objects

    assert objects.ObjectId is ids.ObjectId
    assert objects.parse_object_id is ids.parse_object_id


def test_new_ulid_format_is_26_crockford_characters() -> None:
    assert ULID_ALPHABET == CROCKFORD and ULID_LENGTH == 26
    for _ in range(200):
        node_id = new_ulid()
        assert len(node_id) == 26
        assert set(node_id) <= set(CROCKFORD)
        assert node_id[0] in "01234567"  # 128 bits fit in 26 characters
        assert is_ulid(node_id)


def test_new_ulid_time_prefix_matches_the_ulid_specification() -> None:
    node_id = new_ulid(now_ms=SPEC_EXAMPLE_MS)
    assert node_id.startswith(SPEC_EXAMPLE_PREFIX)
    assert ulid_time_ms(node_id) == SPEC_EXAMPLE_MS
    # Existing stores hold ids made by the hand-written encoder; the spec example decodes.
    assert ulid_time_ms("01ARYZ6S41TSV4RRFFQ69G5FAV") == SPEC_EXAMPLE_MS


@given(st.lists(st.integers(0, (1 << 48) - 1), min_size=2, max_size=20, unique=True))
def test_new_ulid_sorts_in_time_order_across_milliseconds(times: list[int]) -> None:
    made = [(t, new_ulid(now_ms=t)) for t in times]
    assert [t for t, _ in sorted(made, key=lambda p: p[1])] == sorted(times)
    assert all(ulid_time_ms(u) == t for t, u in made)


def test_new_ulid_from_the_wall_clock_is_monotonic_in_its_time_prefix() -> None:
    made = [new_ulid() for _ in range(500)]
    stamps = [ulid_time_ms(u) for u in made]
    assert stamps == sorted(stamps)


def test_new_ulid_draws_fresh_randomness_within_one_millisecond() -> None:
    made = {new_ulid(now_ms=SPEC_EXAMPLE_MS) for _ in range(2000)}
    assert len(made) == 2000
    # Not incremented (which would change only the last characters): ids made together
    # differ within the first 8 random characters, so short prefixes tell them apart.
    assert len({u[:18] for u in made}) == 2000


@pytest.mark.parametrize("text", [
    "", "01ARYZ6S41TSV4RRFFQ69G5FA", "01ARYZ6S41TSV4RRFFQ69G5FAVX",
    "01arYZ6S41TSV4RRFFQ69G5FAV", "01ARYZ6S41TSV4RRFFQ69G5FAI", "01ARYZ6S41TSV4RRFFQ69G5FAL",
    "01ARYZ6S41TSV4RRFFQ69G5FAO", "01ARYZ6S41TSV4RRFFQ69G5FAU", "81ARYZ6S41TSV4RRFFQ69G5FAV",
    "01ARYZ6S41TSV4RRFFQ69G5FA\n", None, 42, b"01ARYZ6S41TSV4RRFFQ69G5FAV",
])
def test_is_ulid_refuses_malformed_ids(text: object) -> None:
    assert not is_ulid(text)


def test_ulid_time_ms_refuses_text_that_is_not_a_ulid() -> None:
    with pytest.raises(InvalidInput, match="not a node id"):
        ulid_time_ms("not-a-ulid")


def test_ids_imports_only_errors_and_the_standard_library() -> None:
    tree = ast.parse(Path(ids.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m and m.startswith("ctxstore")} == {"ctxstore.errors"}
    assert "ulid" not in imported  # python-ulid costs a hook ~16 ms of imports (see ids.py)
