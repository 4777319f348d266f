"""The object store: envelope, ids, dedup, verification on read, caps."""

from __future__ import annotations

import os
from pathlib import Path

import blake3
import pytest
import zstandard

from ctxstore.errors import AmbiguousPrefix, HashMismatch, InvalidEnvelope, InvalidInput, ObjectNotFound
from ctxstore.objects import (
    KIND_BLOB,
    KIND_TYPED,
    LooseObjectStore,
    canonical_bytes,
    object_id_of,
    parse_envelope,
    parse_object_id,
)


@pytest.fixture
def objects(tmp_path: Path) -> LooseObjectStore:
    return LooseObjectStore(tmp_path / "objects")


def test_object_id_is_blake3_of_envelope() -> None:
    canon = canonical_bytes(KIND_BLOB, b"hello")
    assert canon == b"CTXO1" + bytes([1]) + (5).to_bytes(8, "little") + b"hello"
    assert object_id_of(KIND_BLOB, b"hello") == blake3.blake3(canon).digest()
    # the kind is part of the id: a blob and a typed object never collide
    assert object_id_of(KIND_BLOB, b"x") != object_id_of(KIND_TYPED, b"x")


def test_objects_write_then_read_roundtrip(objects: LooseObjectStore) -> None:
    oid, wrote = objects.write(KIND_BLOB, b"payload")
    assert wrote
    path = objects.path_for(oid)
    assert path == objects.root / oid.hex()[:2] / oid.hex()
    got = objects.read(oid)
    assert (got.kind, got.payload) == (KIND_BLOB, b"payload")
    raw = zstandard.ZstdDecompressor().decompress(path.read_bytes())
    assert raw == canonical_bytes(KIND_BLOB, b"payload")


def test_objects_id_does_not_depend_on_compression_level(tmp_path: Path) -> None:
    a = LooseObjectStore(tmp_path / "a", compression_level=1).write(KIND_BLOB, b"z" * 1000)[0]
    b = LooseObjectStore(tmp_path / "b", compression_level=19).write(KIND_BLOB, b"z" * 1000)[0]
    assert a == b


def test_objects_write_dedups_intact_object(objects: LooseObjectStore) -> None:
    oid, _ = objects.write(KIND_BLOB, b"same")
    before = objects.path_for(oid).stat().st_ino
    again, wrote = objects.write(KIND_BLOB, b"same")
    assert (again, wrote) == (oid, False)
    assert objects.path_for(oid).stat().st_ino == before


@pytest.mark.parametrize("damage", ["empty", "truncated", "other-object"])
def test_objects_write_replaces_damaged_existing_file(objects: LooseObjectStore, damage: str) -> None:
    oid = object_id_of(KIND_BLOB, b"the real content" * 10)
    path = objects.path_for(oid)
    path.parent.mkdir(parents=True)
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        full = zstandard.ZstdCompressor().compress(canonical_bytes(KIND_BLOB, b"the real content" * 10))
        path.write_bytes(full[: len(full) // 2])
    else:
        other, _ = objects.write(KIND_BLOB, b"something else")
        path.write_bytes(objects.path_for(other).read_bytes())
    got, wrote = objects.write(KIND_BLOB, b"the real content" * 10)
    assert (got, wrote) == (oid, True)
    assert objects.read(oid).payload == b"the real content" * 10


def test_objects_read_missing_is_e001(objects: LooseObjectStore) -> None:
    with pytest.raises(ObjectNotFound) as err:
        objects.read(object_id_of(KIND_BLOB, b"nope"))
    assert err.value.code == "E001"


def _corrupt(objects: LooseObjectStore, data: bytes) -> bytes:
    oid, _ = objects.write(KIND_BLOB, b"abc" * 100)
    path = objects.path_for(oid)
    os.chmod(path, 0o644)
    path.write_bytes(data)
    return oid


def test_objects_read_detects_flipped_byte_in_content(objects: LooseObjectStore) -> None:
    oid, _ = objects.write(KIND_BLOB, b"abcdefgh" * 50)
    path = objects.path_for(oid)
    raw = bytearray(path.read_bytes())
    raw[-6] ^= 0x01
    os.chmod(path, 0o644)
    path.write_bytes(bytes(raw))
    with pytest.raises((HashMismatch, InvalidEnvelope)) as err:
        objects.read(oid)
    assert oid.hex() in str(err.value)


def test_objects_read_rejects_trailing_bytes_after_frame(objects: LooseObjectStore) -> None:
    oid, _ = objects.write(KIND_BLOB, b"x" * 64)
    path = objects.path_for(oid)
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes() + b"GARBAGE")
    with pytest.raises(InvalidEnvelope, match="unused data"):
        objects.read(oid)


def test_objects_read_refuses_oversized_declared_frame(tmp_path: Path) -> None:
    small = LooseObjectStore(tmp_path / "o", max_object_bytes=4096)
    payload = b"\0" * (8 << 20)
    oid = object_id_of(KIND_BLOB, payload)
    path = small.path_for(oid)
    path.parent.mkdir(parents=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(canonical_bytes(KIND_BLOB, payload)))
    assert path.stat().st_size < 4096  # a tiny file that would expand to 8 MiB
    with pytest.raises(InvalidEnvelope, match="limit"):
        small.read(oid)


def test_objects_read_refuses_frame_without_size_over_cap(tmp_path: Path) -> None:
    small = LooseObjectStore(tmp_path / "o", max_object_bytes=4096)
    payload = b"\0" * (1 << 20)
    oid = object_id_of(KIND_BLOB, payload)
    path = small.path_for(oid)
    path.parent.mkdir(parents=True)
    frame = zstandard.ZstdCompressor(write_content_size=False)
    chunker = frame.compressobj()
    path.write_bytes(chunker.compress(canonical_bytes(KIND_BLOB, payload)) + chunker.flush())
    with pytest.raises(InvalidEnvelope):
        small.read(oid)


@pytest.mark.parametrize("canon,detail", [
    (b"CTXO", "too short"),
    (b"CTXO2" + bytes([1]) + (0).to_bytes(8, "little"), "magic"),
    (b"CTXO1" + bytes([7]) + (0).to_bytes(8, "little"), "kind"),
    (b"CTXO1" + bytes([1]) + (5).to_bytes(8, "little") + b"abc", "declares 5"),
])
def test_parse_envelope_rejects_malformed(canon: bytes, detail: str) -> None:
    with pytest.raises(InvalidEnvelope, match=detail):
        parse_envelope(canon)


def test_objects_read_rejects_valid_frame_with_bad_envelope(objects: LooseObjectStore) -> None:
    canon = b"CTXO9" + bytes([1]) + (3).to_bytes(8, "little") + b"abc"
    oid = blake3.blake3(canon).digest()
    path = objects.path_for(oid)
    path.parent.mkdir(parents=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(canon))
    with pytest.raises(InvalidEnvelope, match="magic"):
        objects.read(oid)


def test_objects_resolve_prefix(objects: LooseObjectStore) -> None:
    ids = [objects.write(KIND_BLOB, str(i).encode())[0] for i in range(50)]
    target = ids[0]
    assert objects.resolve_prefix(target.hex()[:12]) == target
    assert objects.resolve_prefix(target.hex()) == target
    with pytest.raises(InvalidInput):
        objects.resolve_prefix("ab")
    with pytest.raises(InvalidInput):
        objects.resolve_prefix("zzzz")
    with pytest.raises(ObjectNotFound):
        objects.resolve_prefix("ffff" if not any(i.hex().startswith("ffff") for i in ids) else "fffe")


def test_objects_ambiguous_prefix_lists_candidates(objects: LooseObjectStore) -> None:
    seen: dict[str, bytes] = {}
    i = 0
    while True:
        oid, _ = objects.write(KIND_BLOB, str(i).encode())
        key = oid.hex()[:4]
        if key in seen:
            break
        seen[key] = oid
        i += 1
    with pytest.raises(AmbiguousPrefix) as err:
        objects.resolve_prefix(key)
    assert oid.hex() in str(err.value) and seen[key].hex() in str(err.value)


def test_parse_object_id() -> None:
    oid = object_id_of(KIND_BLOB, b"a")
    assert parse_object_id(oid.hex()) == oid
    for bad in ("", oid.hex()[:-1], oid.hex().upper(), oid.hex() + "0", "g" * 64):
        with pytest.raises(InvalidInput):
            parse_object_id(bad)


def test_objects_iter_ids_skips_temp_files(objects: LooseObjectStore) -> None:
    oid, _ = objects.write(KIND_BLOB, b"a")
    (objects.path_for(oid).parent / (oid.hex() + ".abc.tmp")).write_bytes(b"half")
    assert list(objects.iter_ids()) == [oid]
    assert len(list(objects.iter_tmp_files())) == 1
