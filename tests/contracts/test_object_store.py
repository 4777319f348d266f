"""The ObjectStore contract: one suite, run against every implementation.

dulwich's ``ObjectStoreTests`` pattern: ``ObjectStoreContract`` holds the behaviour a
caller of ``ctxstore.objects.ObjectStore`` relies on; each backend gets it through the
parametrised ``make_store`` fixture. Backend-specific behaviour (files, fsync, hostile
paths) stays in tests/storage/test_objects.py, tests/test_corruption.py and friends.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctxstore.errors import AmbiguousPrefix, HashMismatch, InvalidEnvelope, InvalidInput, ObjectNotFound
from ctxstore.model import codec
from ctxstore.objects import (
    KIND_BLOB,
    KIND_TYPED,
    LayeredObjectStore,
    LooseObjectStore,
    MemoryObjectStore,
    ObjectId,
    ObjectStore,
    object_id_of,
)

MakeStore = Callable[..., ObjectStore]
CAP = 4096


def _loose(tmp_path: Path) -> MakeStore:
    count = iter(range(1000))

    def make(**kw: int) -> ObjectStore:
        return LooseObjectStore(tmp_path / f"objects{next(count)}", **kw)
    return make


def _memory(tmp_path: Path) -> MakeStore:
    def make(**kw: int) -> ObjectStore:
        kw.pop("compression_level", None)  # nothing to compress
        return MemoryObjectStore(**kw)
    return make


def _layered(tmp_path: Path) -> MakeStore:
    count = iter(range(1000))

    def make(**kw: int) -> ObjectStore:
        n = next(count)
        return LayeredObjectStore(LooseObjectStore(tmp_path / f"canonical{n}", **kw),
                                  LooseObjectStore(tmp_path / f"staging{n}", **kw))
    return make


BACKENDS = {"loose": _loose, "memory": _memory, "layered": _layered}


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> MakeStore:
    return BACKENDS[request.param](tmp_path)


@pytest.fixture
def objects(make_store: MakeStore) -> ObjectStore:
    return make_store()


def _ids_with_shared_prefix(n: int, length: int) -> list[bytes]:
    """Payloads whose ids share their first ``length`` hex characters (brute force)."""
    seen: dict[str, list[bytes]] = {}
    i = 0
    while True:
        payload = f"p{i}".encode()
        i += 1
        group = seen.setdefault(object_id_of(KIND_BLOB, payload).hex()[:length], [])
        group.append(payload)
        if len(group) == n:
            return group


class ObjectStoreContract:
    """What every ObjectStore does. Subclassed once; the fixture picks the backend."""

    def test_object_store_implements_protocol(self, objects: ObjectStore) -> None:
        assert isinstance(objects, ObjectStore)

    def test_object_store_blob_round_trip(self, objects: ObjectStore) -> None:
        oid, wrote = objects.write(KIND_BLOB, b"hello\x00world")
        assert wrote and len(oid) == 32
        got = objects.read(oid)
        assert (got.oid, got.kind, got.payload) == (oid, KIND_BLOB, b"hello\x00world")

    def test_object_store_typed_round_trip(self, objects: ObjectStore) -> None:
        payload = codec.encode({"type": "note", "v": 1, "text": "é", "n": [1, 2]})
        oid, _ = objects.write(KIND_TYPED, payload)
        got = objects.read(oid)
        assert (got.kind, got.payload) == (KIND_TYPED, payload)
        assert codec.decode(got.payload) == {"type": "note", "v": 1, "text": "é", "n": [1, 2]}

    def test_object_store_empty_payload_round_trip(self, objects: ObjectStore) -> None:
        oid, _ = objects.write(KIND_BLOB, b"")
        assert objects.read(oid).payload == b""

    def test_object_store_id_is_the_envelope_hash(self, objects: ObjectStore) -> None:
        oid, _ = objects.write(KIND_BLOB, b"x")
        assert oid == object_id_of(KIND_BLOB, b"x")

    def test_object_store_kind_changes_the_id(self, objects: ObjectStore) -> None:
        assert objects.write(KIND_BLOB, b"x")[0] != objects.write(KIND_TYPED, b"x")[0]

    def test_object_store_write_dedups(self, objects: ObjectStore) -> None:
        first = objects.write(KIND_BLOB, b"same")
        second = objects.write(KIND_BLOB, b"same")
        assert (first[1], second[1]) == (True, False) and first[0] == second[0]
        assert list(objects.iter_ids()) == [first[0]]

    def test_object_store_ids_independent_of_compression(self, make_store: MakeStore) -> None:
        low = make_store(compression_level=1).write(KIND_BLOB, b"z" * 5000)[0]
        high = make_store(compression_level=19).write(KIND_BLOB, b"z" * 5000)[0]
        assert low == high == object_id_of(KIND_BLOB, b"z" * 5000)

    def test_object_store_same_ids_across_backends(self, objects: ObjectStore,
                                                   tmp_path: Path) -> None:
        other: list[ObjectStore] = [LooseObjectStore(tmp_path / "ref"), MemoryObjectStore()]
        for payload in (b"", b"a", b"\xff" * 300):
            oid = objects.write(KIND_BLOB, payload)[0]
            assert all(o.write(KIND_BLOB, payload)[0] == oid for o in other)

    def test_object_store_read_missing_is_e001(self, objects: ObjectStore) -> None:
        missing = ObjectId(b"\x01" * 32)
        assert not objects.exists(missing)
        with pytest.raises(ObjectNotFound) as exc:
            objects.read(missing)
        assert exc.value.code == "E001" and "0101" in str(exc.value)

    def test_object_store_exists_after_write(self, objects: ObjectStore) -> None:
        oid, _ = objects.write(KIND_BLOB, b"here")
        assert objects.exists(oid)

    def test_object_store_iter_ids_sorted_and_complete(self, objects: ObjectStore) -> None:
        assert list(objects.iter_ids()) == []
        ids = {objects.write(KIND_BLOB, f"o{i}".encode())[0] for i in range(40)}
        listed = list(objects.iter_ids())
        assert listed == sorted(ids) and len(listed) == 40

    def test_object_store_prefix_resolves_unique(self, objects: ObjectStore) -> None:
        oid, _ = objects.write(KIND_BLOB, b"prefix me")
        hexid = oid.hex()
        for n in (4, 7, 12, 63, 64):
            assert objects.resolve_prefix(hexid[:n]) == oid
        assert objects.resolve_prefix("  " + hexid[:8].upper() + "\n") == oid

    def test_object_store_prefix_ambiguous_lists_candidates(self, objects: ObjectStore) -> None:
        a, b = _ids_with_shared_prefix(2, 4)
        ida, idb = objects.write(KIND_BLOB, a)[0], objects.write(KIND_BLOB, b)[0]
        with pytest.raises(AmbiguousPrefix) as exc:
            objects.resolve_prefix(ida.hex()[:4])
        assert exc.value.code == "E016"
        assert exc.value.candidates == sorted([ida.hex(), idb.hex()])

    @pytest.mark.parametrize("bad", ["", "abc", "xyzw", "12 34", "g" * 64, "a" * 65])
    def test_object_store_prefix_refuses_short_or_non_hex(self, objects: ObjectStore,
                                                          bad: str) -> None:
        objects.write(KIND_BLOB, b"something")
        with pytest.raises(InvalidInput):
            objects.resolve_prefix(bad)

    @pytest.mark.parametrize("length", [4, 64])
    def test_object_store_prefix_matching_nothing_is_e001(self, objects: ObjectStore,
                                                          length: int) -> None:
        oid, _ = objects.write(KIND_BLOB, b"one")
        other = "0000" if not oid.hex().startswith("0000") else "ffff"
        with pytest.raises(ObjectNotFound):
            objects.resolve_prefix((other * 16)[:length])

    def test_object_store_cap_allows_exactly_max(self, make_store: MakeStore) -> None:
        small = make_store(max_object_bytes=CAP)
        oid, _ = small.write(KIND_BLOB, b"q" * CAP)
        assert small.read(oid).payload == b"q" * CAP

    def test_object_store_cap_refuses_one_over(self, make_store: MakeStore) -> None:
        small = make_store(max_object_bytes=CAP)
        oid, _ = small.write(KIND_BLOB, b"q" * (CAP + 1))
        with pytest.raises(InvalidEnvelope) as exc:
            small.read(oid)
        assert exc.value.code == "E003" and "limit" in exc.value.detail

    def test_object_store_errors_are_typed_not_os(self, objects: ObjectStore) -> None:
        # Errors a caller may see from read: the CtxError tree, never a bare exception.
        for oid in (ObjectId(b"\x00" * 32), ObjectId(b"\xff" * 32)):
            with pytest.raises((ObjectNotFound, HashMismatch, InvalidEnvelope)):
                objects.read(oid)


class TestObjectStore(ObjectStoreContract):
    """Runs the contract against each backend in ``BACKENDS``."""


def test_memory_store_damaged_entry_is_named_like_a_damaged_file() -> None:
    store = MemoryObjectStore()
    oid, _ = store.write(KIND_BLOB, b"payload")
    store.objects[oid] = store.objects[oid][:-1] + b"!"
    with pytest.raises(HashMismatch) as exc:
        store.read(oid)
    assert exc.value.code == "E002"
    assert store.write(KIND_BLOB, b"payload") == (oid, True)  # rewritten, as the loose store does
    assert store.read(oid).payload == b"payload"


# -- the layered store: canonical objects over a clone's staging objects -----------------------

def _two_areas(tmp_path: Path) -> LayeredObjectStore:
    return LayeredObjectStore(LooseObjectStore(tmp_path / "objects"),
                              LooseObjectStore(tmp_path / "local" / "work" / "objects"))


def test_layered_writes_go_to_the_staging_area_until_promoted(tmp_path: Path) -> None:
    store = _two_areas(tmp_path)
    oid, wrote = store.write(KIND_BLOB, b"staged")
    assert wrote and store.staging.exists(oid) and not store.is_canonical(oid)
    stored, path = store.promote(oid)
    assert stored.payload == b"staged" and path == store.canonical.path_for(oid)
    assert store.is_canonical(oid) and store.canonical.read(oid).payload == b"staged"
    assert len(store.paths_for(oid)) == 2  # the staging copy stays until gc
    assert store.promote(oid)[1] is None  # already canonical: nothing copied
    # A write of an object the canonical area holds dedups there, never a new staging copy.
    other, _ = store.write(KIND_BLOB, b"canonical")
    store.promote(other)
    store.staging.path_for(other).unlink()
    assert store.write(KIND_BLOB, b"canonical") == (other, False)
    assert not store.staging.exists(other)


def test_layered_ids_and_prefixes_span_both_areas_once(tmp_path: Path) -> None:
    store = _two_areas(tmp_path)
    ids = [store.write(KIND_BLOB, f"o{i}".encode())[0] for i in range(20)]
    for oid in ids[:10]:
        store.promote(oid)  # in both areas now
    for oid in ids[10:15]:
        store.promote(oid)
        store.staging.path_for(oid).unlink()  # canonical only
    assert list(store.iter_ids()) == sorted(ids)
    for oid in ids:
        assert store.resolve_prefix(oid.hex()[:12]) == oid


def test_layered_promote_never_copies_damage(tmp_path: Path) -> None:
    store = _two_areas(tmp_path)
    oid, _ = store.write(KIND_BLOB, b"will be damaged")
    path = store.staging.path_for(oid)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises((HashMismatch, InvalidEnvelope)):
        store.promote(oid)
    assert not store.is_canonical(oid)
    with pytest.raises(ObjectNotFound):
        store.promote(ObjectId(b"\x01" * 32))


def test_layered_reads_prefer_the_canonical_copy_and_repair_it_in_place(tmp_path: Path) -> None:
    store = _two_areas(tmp_path)
    oid, _ = store.write(KIND_BLOB, b"both")
    store.promote(oid)
    canonical = store.canonical.path_for(oid)
    canonical.write_bytes(b"garbage")
    with pytest.raises((HashMismatch, InvalidEnvelope)):
        store.read(oid)  # damage is named, never hidden behind the staging copy
    assert store.write(KIND_BLOB, b"both") == (oid, True)  # rewritten where it is read
    assert store.read(oid).payload == b"both"
