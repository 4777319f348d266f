"""Content-addressed objects: ids, the CTXO1 envelope, and the object stores.

An object's canonical bytes are ``b"CTXO1" + kind + u64le(len(payload)) + payload``;
its id is the BLAKE3 hash of those bytes. ``ObjectStore`` is the protocol the rest of
the library programs against (write, read, exists, iter_ids, resolve_prefix); it has
two implementations, checked by one contract suite (``tests/contracts``):

- ``LooseObjectStore``: one zstd frame of the canonical bytes per file at
  ``objects/<2 hex>/<64 hex>``. Every read decompresses with a cap, rejects trailing
  bytes, re-hashes and checks the envelope, so corruption is always detected and named.
  Memory is bounded by what is declared before anything is allocated (a decompression
  bomb, RELIABILITY.md): the frame's content size and the envelope's length are checked
  against the cap of the read (the store's ``max_object_bytes``, or less: a commit is
  small), and an object over ``RETAIN_BYTES`` is hashed as it decompresses, in chunks,
  before its bytes are kept, so one that does not hash to its name never costs its size.
  File paths (``path_for``, ``iter_tmp_files``) exist only here: gc, verify and a
  transaction's durability barrier work on files, so they need the loose store.
- ``LayeredObjectStore``: the store's two loose areas read as one: the committed
  canonical objects (``.ctx/objects``) over this clone's staging objects
  (``.ctx/local/work/objects``, never committed). New objects go to the staging area;
  ``promote`` copies one to the canonical area when a canonical commit reaches it
  (``ctxstore.repo.Transaction``), so Git only ever sees what a canonical commit names.
- ``MemoryObjectStore``: a dict, for tests and scratch work; same ids, same errors,
  same size cap, no files.

This module stores bytes; it knows nothing of typed payloads (see ``ctxstore.model``)
or of pointers (see ``ctxstore.refs``), and it never imports a layer above it.
"""

from __future__ import annotations

import heapq
import os
import stat
import struct
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import blake3

from ctxstore import fsio
from ctxstore.errors import (
    AmbiguousPrefix,
    HashMismatch,
    InvalidEnvelope,
    InvalidInput,
    ObjectNotFound,
    OutOfMemory,
    UnsafePath,
)
from ctxstore.ids import ObjectId, parse_object_id
from ctxstore.records import dataclass

if TYPE_CHECKING:  # zstandard is imported lazily: `ctx --help` must not load it
    import zstandard

__all__ = [
    "ObjectId",
    "ENVELOPE_MAGIC",
    "KIND_BLOB",
    "KIND_TYPED",
    "HEADER_SIZE",
    "DEFAULT_MAX_OBJECT_BYTES",
    "parse_object_id",
    "canonical_bytes",
    "object_id_of",
    "parse_envelope",
    "ObjectStore",
    "LooseObjectStore",
    "LayeredObjectStore",
    "MemoryObjectStore",
    "RETAIN_BYTES",
    "StoredObject",
]

ENVELOPE_MAGIC = b"CTXO1"
KIND_BLOB = 1
KIND_TYPED = 2
_KINDS = (KIND_BLOB, KIND_TYPED)
_HEADER = struct.Struct("<5sBQ")
HEADER_SIZE = _HEADER.size  # 14
DEFAULT_MAX_OBJECT_BYTES = 1 << 30
# Objects up to this size are decoded in one pass and then hashed; a larger one is hashed
# while it streams (``_CHUNK`` at a time) and decoded again only once it verified.
RETAIN_BYTES = 64 << 20
_CHUNK = 1 << 20
# The largest zstd window a streamed read allocates (zstd's own default limit, level 22's
# window): a frame asking for more is refused, never given the memory.
_MAX_WINDOW = 1 << 27
_HEX = frozenset("0123456789abcdef")


def canonical_bytes(kind: int, payload: bytes) -> bytes:
    """Return the envelope of ``payload``: the bytes an object id is computed over."""
    return _HEADER.pack(ENVELOPE_MAGIC, kind, len(payload)) + payload


def object_id_of(kind: int, payload: bytes) -> ObjectId:
    """Return the id an object with this kind and payload has (pure)."""
    return ObjectId(blake3.blake3(canonical_bytes(kind, payload)).digest())


def parse_envelope(data: bytes, *, oid: bytes | None = None, path: str = "?") -> tuple[int, bytes]:
    """Split canonical bytes into (kind, payload), checking magic, kind and length.

    Raises:
        InvalidEnvelope: if the bytes are not a well-formed CTXO1 envelope.
    """
    if len(data) < HEADER_SIZE:
        raise InvalidEnvelope(oid, path=path, detail=f"envelope too short ({len(data)} bytes)")
    magic, kind, length = _HEADER.unpack_from(data)
    if magic != ENVELOPE_MAGIC:
        raise InvalidEnvelope(oid, path=path, detail=f"unknown envelope magic {magic!r}")
    if kind not in _KINDS:
        raise InvalidEnvelope(oid, path=path, detail=f"unknown object kind {kind}")
    if length != len(data) - HEADER_SIZE:
        raise InvalidEnvelope(
            oid, path=path,
            detail=f"envelope declares {length} payload bytes but holds {len(data) - HEADER_SIZE}",
        )
    return kind, data[HEADER_SIZE:]


@dataclass(frozen=True, slots=True)
class StoredObject:
    """A verified object: its id, kind and payload."""

    oid: ObjectId
    kind: int
    payload: bytes


@runtime_checkable
class ObjectStore(Protocol):
    """What the library needs of an object store: content-addressed, verified bytes.

    Every implementation gives the same ids for the same (kind, payload), raises the
    same errors (``ObjectNotFound``, ``AmbiguousPrefix``, ``InvalidInput``,
    ``InvalidEnvelope`` for an object over ``max_object_bytes``) and enumerates ids in
    ascending byte order. ``tests/contracts/test_object_store.py`` runs against each.
    """

    max_object_bytes: int

    def write(self, kind: int, payload: bytes) -> tuple[ObjectId, bool]:
        """Store an object unless an intact copy is already there.

        Args:
            kind: ``KIND_BLOB`` or ``KIND_TYPED``.
            payload: The object's bytes (the envelope is added by the store).

        Returns:
            The id and whether the object was written (False: deduplicated).

        Raises:
            OSError: if a file-backed store cannot write.
        """
        ...

    def read(self, oid: ObjectId, *, max_payload: int | None = None) -> StoredObject:
        """Return the verified object ``oid``.

        Args:
            oid: The object's id.
            max_payload: The largest payload this read accepts, when the caller knows its
                kind needs less than ``max_object_bytes`` (a commit); None: that cap.

        Returns:
            Its id, kind and payload.

        Raises:
            ObjectNotFound: (E001) if there is no such object.
            InvalidEnvelope: (E003) if it is malformed or over its cap.
            HashMismatch: (E002) if its content does not hash to ``oid``.
            OutOfMemory: (E010) if a valid object is larger than the memory available.
        """
        ...

    def exists(self, oid: ObjectId) -> bool:
        """Return True if the store holds ``oid`` (without verifying it).

        Args:
            oid: The object's id.

        Returns:
            Whether an object is stored under that id.
        """
        ...

    def iter_ids(self) -> Iterator[ObjectId]:
        """Yield the id of every stored object (unverified), ascending.

        Returns:
            An iterator over ids.
        """
        ...

    def resolve_prefix(self, prefix: str) -> ObjectId:
        """Resolve a unique hex prefix (4 to 64 characters) to an id.

        Args:
            prefix: Hex text, case-insensitive, surrounding white space ignored.

        Returns:
            The one id that starts with ``prefix``.

        Raises:
            InvalidInput: if the prefix is too short or not hex.
            ObjectNotFound: (E001) if nothing matches.
            AmbiguousPrefix: (E016) if several objects match.
        """
        ...


def _normalize_prefix(prefix: str) -> str:
    """Lower-case and check an abbreviated id; a full id must be exact hex.

    Raises:
        InvalidInput: if it is under 4 or over 64 characters or not hex.
    """
    prefix = prefix.strip().lower()
    if len(prefix) == 64:
        parse_object_id(prefix)  # raises InvalidInput with its own message
        return prefix
    if not 4 <= len(prefix) <= 64 or not _HEX.issuperset(prefix):
        raise InvalidInput(f"not an object id or prefix: {prefix!r} (want 4-64 hex characters)")
    return prefix


def _resolve(prefix: str, exists: Callable[[ObjectId], bool],
             names_with: Callable[[str], list[str]]) -> ObjectId:
    """Resolve a hex prefix: a full id that ``exists``, else the one name ``names_with`` gives.

    Raises:
        InvalidInput, ObjectNotFound, AmbiguousPrefix: as ``LooseObjectStore.resolve_prefix``.
    """
    prefix = _normalize_prefix(prefix)
    if len(prefix) == 64:
        oid = ObjectId(bytes.fromhex(prefix))
        if not exists(oid):
            raise ObjectNotFound(prefix)
        return oid
    return _unique_match(prefix, names_with(prefix))


def _unique_match(prefix: str, names: list[str]) -> ObjectId:
    """Return the one id among sorted hex ``names``.

    Raises:
        ObjectNotFound: if ``names`` is empty.
        AmbiguousPrefix: if it holds several.
    """
    if not names:
        raise ObjectNotFound(prefix)
    if len(names) > 1:
        raise AmbiguousPrefix(prefix, names)
    return ObjectId(bytes.fromhex(names[0]))


def _not_a_shard(folder: str, mode: int) -> UnsafePath:
    """The error for a shard entry that is a symlink or not a directory (E020)."""
    detail = "is a symbolic link" if stat.S_ISLNK(mode) \
        else f"is {fsio.file_kind(mode)}, not a directory"
    return UnsafePath(folder, detail=detail)


class LooseObjectStore:
    """Loose objects under one ``objects/`` directory (implements ``ObjectStore``).

    Writes are temp-file + rename and are *not* individually fsynced: the caller
    (a transaction in ``ctxstore.repo``) issues one ``fsio.sync_barrier`` for the
    whole batch before any pointer names the new objects.
    """

    def __init__(self, root: Path, *, compression_level: int = 3,
                 max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
                 anchor: Path | None = None) -> None:
        """Open the area at ``root`` (created on the first write).

        Args:
            root: The area's directory (``objects/``, ``local/work/objects/``, ...).
            compression_level: zstd level of new objects.
            max_object_bytes: The largest object file read.
            anchor: The trusted directory writes are opened from (the store, ``.ctx/``):
                every directory from it down to a shard is opened without following a
                link. Default: ``root`` itself.
        """
        self.root = root
        self.compression_level = compression_level
        self.max_object_bytes = max_object_bytes
        self._anchor = anchor if anchor is not None else root
        self._cctx: zstandard.ZstdCompressor | None = None
        self._dctx: zstandard.ZstdDecompressor | None = None
        # The hot path builds paths as str: pathlib costs ~10 us per object here.
        self._root_str = os.fspath(root)
        # Shard directories checked to be real directories (not links out of the store).
        self._checked: set[str] = set()
        # The area's directory, opened once through descriptors from the anchor (see _area).
        self._area_fd: fsio.Dir | None = None

    # -- paths -------------------------------------------------------------------------
    def path_for(self, oid: ObjectId) -> Path:
        """Return the file path of ``oid`` (which may not exist)."""
        hexid = oid.hex()
        return self.root / hexid[:2] / hexid

    # -- writing -----------------------------------------------------------------------
    def write(self, kind: int, payload: bytes) -> tuple[ObjectId, bool]:
        """Store an object unless an intact copy is already there.

        Returns:
            The id and whether a file was written (False: deduplicated).

        Raises:
            OSError: if the file cannot be written.
        """
        canon = canonical_bytes(kind, payload)
        oid = ObjectId(blake3.blake3(canon).digest())
        return oid, self.store_canonical(oid, canon)

    def store_canonical(self, oid: ObjectId, canon: bytes) -> bool:
        """Store canonical bytes already hashed to ``oid``; True if a file was written.

        Raises:
            UnsafePath: (E020) if the shard (or a directory above it) is a symlink or not
                a directory: nothing is written through it.
            OSError: if the file cannot be written.
        """
        hexid = oid.hex()
        self._check_shard(hexid[:2])
        path = f"{self._root_str}/{hexid[:2]}/{hexid}"
        if os.path.exists(path) and self._is_intact(oid, path):
            # Dedup: an existing file is trusted only after it verifies; a damaged
            # one (empty, truncated, misnamed) is replaced below by temp + rename.
            return False
        self._write_file(hexid, self._compress(canon))
        return True

    def store_file(self, oid: ObjectId, data: bytes) -> None:
        """Store an object file's bytes as they are (``data`` already verified to be ``oid``).

        Raises:
            UnsafePath: (E020) if the shard (or a directory above it) is a symlink or not
                a directory.
            OSError: if the file cannot be written.
        """
        self._write_file(oid.hex(), data)

    def _area(self) -> fsio.Dir:
        """The area directory, opened (and created) on first use, kept open.

        Opened one directory at a time from the anchor without following links, then
        kept: a swap of the area (or a directory above it) for a link afterwards cannot
        redirect it, and each write pays for one shard open instead of the whole walk.
        Closed when this object is collected.
        """
        if self._area_fd is None:
            if self._anchor is self.root:
                fsio.ensure_dir(self.root)  # a standalone area: created as named, parents too
            area = fsio.open_dir(self._anchor, self.root, create=True, durable=False)
            self._area_fd = area
            weakref.finalize(self, area.close)
        return self._area_fd

    def _write_file(self, hexid: str, data: bytes) -> None:
        """Write an object file by temp + rename in its shard, opened from the area's descriptor.

        The shard is opened ``O_NOFOLLOW`` (created if missing; its entry is made durable by
        the transaction's barrier, as the file is), and the temp file is created and renamed
        relative to it: a shard swapped for a link is refused (E020), never written through
        (PS-10). If the area itself was removed since it was opened, it is opened again once.
        """
        shard = hexid[:2]
        for attempt in (1, 2):
            try:
                folder = self._area().dir(shard, create=True, durable=False)
            except FileNotFoundError:
                if attempt == 2:
                    raise
                self._area_fd = None  # the stale descriptor is closed with this object (finalizer)
                continue
            with folder:
                folder.write_new_file(hexid, data)
            return

    def _compress(self, canon: bytes) -> bytes:
        if self._cctx is None:
            import zstandard

            self._cctx = zstandard.ZstdCompressor(level=self.compression_level,
                                                  write_content_size=True)
        return bytes(self._cctx.compress(canon))

    def _is_intact(self, oid: ObjectId, path: str | Path) -> bool:
        try:
            self._read_path(oid, path)
        except (HashMismatch, InvalidEnvelope, ObjectNotFound):
            return False
        return True

    def _check_shard(self, shard: str) -> None:
        """Refuse a shard directory that is a symlink or not a directory (once per shard).

        Raises:
            UnsafePath: (E020) naming the shard.
        """
        if shard in self._checked:
            return
        folder = f"{self._root_str}/{shard}"
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return  # no shard: the object is simply missing
        if not stat.S_ISDIR(mode):
            raise _not_a_shard(folder, mode)
        self._checked.add(shard)

    # -- reading -----------------------------------------------------------------------
    def exists(self, oid: ObjectId) -> bool:
        """Return True if a file exists for ``oid`` (without verifying it)."""
        return self.path_for(oid).is_file()

    def read(self, oid: ObjectId, *, max_payload: int | None = None) -> StoredObject:
        """Read, decompress and verify an object.

        Args:
            oid: The object's id.
            max_payload: The largest payload this read accepts (None: ``max_object_bytes``;
                a larger value is lowered to it).

        Raises:
            ObjectNotFound: if there is no file for ``oid``.
            InvalidEnvelope: if the file is not one zstd frame of a CTXO1 envelope, declares
                more than the cap, or is not a regular file (a symlink, a FIFO, a directory:
                never followed or read).
            HashMismatch: if the content does not hash to ``oid``.
            UnsafePath: (E020) if its shard directory is a symlink or not a directory.
            OutOfMemory: (E010) if a valid object does not fit in the memory available.
        """
        self._check_shard(oid.hex()[:2])
        return self._read_path(oid, self.path_for(oid), max_payload)

    def read_file(self, oid: ObjectId) -> tuple[StoredObject, bytes]:
        """Read and verify ``oid`` like ``read``, returning the file's bytes as well.

        Raises:
            The errors of ``read``.
        """
        self._check_shard(oid.hex()[:2])
        path = self.path_for(oid)
        raw = self._read_raw(oid, path)
        return self._verify(oid, raw, path, None), raw

    def _read_path(self, oid: ObjectId, path: str | Path,
                   max_payload: int | None = None) -> StoredObject:
        return self._verify(oid, self._read_raw(oid, path), path, max_payload)

    def _read_raw(self, oid: ObjectId, path: str | Path) -> bytes:
        try:
            # O_NOFOLLOW | O_NONBLOCK, regular files only, at most cap + 1 bytes (it asks
            # for the file's size, not the cap: CPython mmaps a buffer of the requested size).
            raw = fsio.read_regular(path, self.max_object_bytes)
        except FileNotFoundError:
            raise ObjectNotFound(oid) from None
        except NotADirectoryError:
            raise UnsafePath(str(Path(path).parent), detail="is not a directory") from None
        except UnsafePath as exc:
            raise InvalidEnvelope(oid, path=str(path), detail=exc.detail) from None
        return raw

    def _verify(self, oid: ObjectId, raw: bytes, path: str | Path,
                max_payload: int | None) -> StoredObject:
        cap = self.max_object_bytes if max_payload is None \
            else min(max_payload, self.max_object_bytes)
        try:
            canon = self._decompress(raw, oid, path, cap)
            digest = blake3.blake3(canon).digest()
            if digest != oid:
                raise HashMismatch(oid, path=str(path), actual=digest)
            kind, payload = parse_envelope(canon, oid=oid, path=str(path))
        except MemoryError:
            # A valid object larger than the memory this process may use (the decompressor,
            # the hash and the copies are all bounded by what the object declares).
            raise OutOfMemory(f"reading object {oid.hex()} ({path})") from None
        return StoredObject(oid, kind, payload)

    def _decompressor(self) -> zstandard.ZstdDecompressor:
        if self._dctx is None:
            import zstandard

            self._dctx = zstandard.ZstdDecompressor(max_window_size=_MAX_WINDOW)
        return self._dctx

    def _decompress(self, raw: bytes, oid: ObjectId, path: str | Path, cap: int) -> bytes:
        """The canonical bytes of one object file, decoded within ``cap`` payload bytes.

        What the frame and the envelope declare is checked against the cap before any
        output buffer is allocated. Up to ``RETAIN_BYTES`` the frame is decoded in one
        call, bounded by the size it declares; a larger object is first hashed as it
        streams (``_streamed_digest``), and decoded whole only when the hash matches: one
        that does not (a bomb of zeros behind a valid header) costs time, never its size.

        Raises:
            InvalidEnvelope: (E003) not one zstd frame, trailing bytes, a declared size
                over the cap, or an envelope the bytes do not match.
            HashMismatch: (E002) a large object whose content does not hash to ``oid``.
        """
        import zstandard

        dctx = self._decompressor()
        where = str(path)
        limit = cap + HEADER_SIZE
        try:
            params = zstandard.get_frame_parameters(raw)
        except zstandard.ZstdError as exc:
            raise InvalidEnvelope(oid, path=where, detail=f"not a zstd frame ({exc})") from None
        size = params.content_size
        # A declared size is honoured by the decoder, so it is checked *before*
        # decoding: a few KiB of frame must not expand to gigabytes.
        if size != zstandard.CONTENTSIZE_UNKNOWN and size > limit:
            raise InvalidEnvelope(oid, path=where,
                                  detail=f"declares {size} bytes, over the {limit}-byte limit")
        if size == zstandard.CONTENTSIZE_UNKNOWN or size > RETAIN_BYTES:
            # The envelope's header says how much the frame may hold: read it first.
            total = self._declared_total(raw, oid, where, limit)
            if size not in (zstandard.CONTENTSIZE_UNKNOWN, total):
                raise InvalidEnvelope(oid, path=where, detail=(
                    f"frame declares {size} bytes but its envelope {total}"))
            if total > RETAIN_BYTES:
                self._streamed_digest(raw, oid, where, total)  # verified before it is kept
            limit = total
        try:
            return bytes(dctx.decompress(raw, max_output_size=limit, allow_extra_data=False))
        except zstandard.ZstdError as exc:
            raise InvalidEnvelope(oid, path=where, detail=f"bad zstd data ({exc})") from None

    def _declared_total(self, raw: bytes, oid: ObjectId, where: str, limit: int) -> int:
        """The canonical size the envelope header declares (header included), within ``limit``.

        Raises:
            InvalidEnvelope: (E003) if there is no envelope header or it declares too much.
        """
        import zstandard

        try:
            head = self._decompressor().stream_reader(raw, read_across_frames=False) \
                .read(HEADER_SIZE)
        except zstandard.ZstdError as exc:
            raise InvalidEnvelope(oid, path=where, detail=f"bad zstd data ({exc})") from None
        if len(head) < HEADER_SIZE:
            raise InvalidEnvelope(oid, path=where,
                                  detail=f"envelope too short ({len(head)} bytes)")
        magic, kind, length = _HEADER.unpack(head)
        length = int(length)
        if magic != ENVELOPE_MAGIC:
            raise InvalidEnvelope(oid, path=where, detail=f"unknown envelope magic {magic!r}")
        if kind not in _KINDS:
            raise InvalidEnvelope(oid, path=where, detail=f"unknown object kind {kind}")
        if HEADER_SIZE + length > limit:
            raise InvalidEnvelope(oid, path=where, detail=(
                f"declares {HEADER_SIZE + length} bytes, over the {limit}-byte limit"))
        return HEADER_SIZE + length

    def _streamed_digest(self, raw: bytes, oid: ObjectId, where: str, total: int) -> None:
        """Hash the frame's output in ``_CHUNK`` pieces, keeping none, and check it.

        Raises:
            InvalidEnvelope: (E003) if it holds more or fewer than ``total`` bytes.
            HashMismatch: (E002) if it does not hash to ``oid``.
        """
        import zstandard

        hasher = blake3.blake3()
        seen = 0
        try:
            for chunk in self._decompressor().read_to_iter(raw, write_size=_CHUNK):
                seen += len(chunk)
                if seen > total:  # a frame that expands past its envelope: stop here
                    raise InvalidEnvelope(oid, path=where, detail=(
                        f"holds more than the {total} bytes its envelope declares"))
                hasher.update(chunk)
        except zstandard.ZstdError as exc:
            raise InvalidEnvelope(oid, path=where, detail=f"bad zstd data ({exc})") from None
        if seen != total:
            raise InvalidEnvelope(oid, path=where, detail=(
                f"envelope declares {total} bytes but the frame holds {seen}"))
        digest = hasher.digest()
        if digest != oid:
            raise HashMismatch(oid, path=where, actual=digest)

    # -- enumeration -------------------------------------------------------------------
    def iter_ids(self) -> Iterator[ObjectId]:
        """Yield the id of every object file (unverified), skipping temp files.

        Raises:
            UnsafePath: (E020) if a shard directory is a symlink or not a directory.
        """
        try:
            shards = sorted(os.scandir(self.root), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for shard in shards:
            if len(shard.name) != 2 or not _HEX.issuperset(shard.name):
                continue
            if not shard.is_dir(follow_symlinks=False):
                # Refused, not skipped: gc deletes what this yields and verify counts it,
                # and a linked shard's files are outside the store.
                raise _not_a_shard(shard.path, shard.stat(follow_symlinks=False).st_mode)
            for entry in sorted(os.scandir(shard.path), key=lambda e: e.name):
                name = entry.name
                if len(name) == 64 and name.startswith(shard.name) and _HEX.issuperset(name):
                    yield ObjectId(bytes.fromhex(name))

    def iter_tmp_files(self) -> Iterator[Path]:
        """Yield leftover temp files from interrupted writes."""
        if not self.root.is_dir():
            return
        for shard in os.scandir(self.root):
            if shard.is_dir(follow_symlinks=False):
                for entry in os.scandir(shard.path):
                    if entry.name.endswith(fsio.TMP_SUFFIX):
                        yield Path(entry.path)

    def resolve_prefix(self, prefix: str) -> ObjectId:
        """Resolve a unique hex prefix (at least 4 characters) to an id.

        Raises:
            InvalidInput: if the prefix is too short or not hex.
            ObjectNotFound: if nothing matches.
            AmbiguousPrefix: if several objects match.
        """
        return _resolve(prefix, self.exists, self.names_with_prefix)

    def names_with_prefix(self, prefix: str) -> list[str]:
        """The sorted hex names of the objects whose id starts with a normalized ``prefix``.

        Raises:
            UnsafePath: (E020) if the shard directory is a symlink or not a directory.
        """
        self._check_shard(prefix[:2])
        shard = self.root / prefix[:2]
        try:
            return sorted(e.name for e in os.scandir(shard)
                          if e.name.startswith(prefix) and len(e.name) == 64)
        except FileNotFoundError:
            return []


class LayeredObjectStore:
    """Canonical objects over this clone's staging objects (implements ``ObjectStore``).

    Reads try the canonical area first, then the staging area; ``iter_ids`` and
    ``resolve_prefix`` see the union. Writes go to the staging area unless the canonical
    area already holds an intact copy. ``promote`` copies a staging object to the
    canonical area (the verified file as it is: the id does not change); the caller makes
    the copies durable with its transaction's barrier.
    """

    def __init__(self, canonical: LooseObjectStore, staging: LooseObjectStore) -> None:
        self.canonical = canonical
        self.staging = staging
        self.max_object_bytes = canonical.max_object_bytes

    @property
    def root(self) -> Path:
        """The canonical area's directory (``.ctx/objects``)."""
        return self.canonical.root

    @property
    def roots(self) -> tuple[Path, Path]:
        """Both areas' directories, canonical first."""
        return self.canonical.root, self.staging.root

    def path_for(self, oid: ObjectId) -> Path:
        """The existing file of ``oid`` (canonical first), else where the staging area would put it."""
        path = self.canonical.path_for(oid)
        return path if path.is_file() else self.staging.path_for(oid)

    def paths_for(self, oid: ObjectId) -> list[Path]:
        """Every existing file of ``oid``: a promoted object has two."""
        return [p for p in (self.canonical.path_for(oid), self.staging.path_for(oid)) if p.is_file()]

    def write(self, kind: int, payload: bytes) -> tuple[ObjectId, bool]:
        """Store an object in the staging area unless an intact copy exists in either area.

        Raises:
            OSError: if the file cannot be written.
        """
        canon = canonical_bytes(kind, payload)
        oid = ObjectId(blake3.blake3(canon).digest())
        if self.canonical.path_for(oid).is_file():
            # Reads try the canonical copy first: a damaged one is repaired in place.
            return oid, self.canonical.store_canonical(oid, canon)
        return oid, self.staging.store_canonical(oid, canon)

    def read(self, oid: ObjectId, *, max_payload: int | None = None) -> StoredObject:
        """Read and verify ``oid`` from the canonical area, else from the staging area.

        Raises:
            The errors of ``LooseObjectStore.read``.
        """
        try:
            return self.canonical.read(oid, max_payload=max_payload)
        except ObjectNotFound:
            return self.staging.read(oid, max_payload=max_payload)

    def exists(self, oid: ObjectId) -> bool:
        """True if either area holds a file for ``oid`` (unverified)."""
        return self.canonical.exists(oid) or self.staging.exists(oid)

    def is_canonical(self, oid: ObjectId) -> bool:
        """True if the canonical (committed) area holds a file for ``oid``."""
        return self.canonical.exists(oid)

    def promote(self, oid: ObjectId) -> tuple[StoredObject, Path | None]:
        """Copy ``oid`` from the staging area to the canonical area, verified, if not there yet.

        Returns:
            The object, and the new canonical file (None: it was already canonical).

        Raises:
            The errors of ``LooseObjectStore.read`` (a missing or damaged staging object
            is never copied), OSError if the copy cannot be written.
        """
        path = self.canonical.path_for(oid)
        if path.is_file():
            return self.canonical.read(oid), None
        stored, raw = self.staging.read_file(oid)
        self.canonical.store_file(oid, raw)
        return stored, path

    def iter_ids(self) -> Iterator[ObjectId]:
        """Every id in either area, ascending, each once.

        Raises:
            UnsafePath: (E020) if a shard directory is a symlink or not a directory.
        """
        last = None
        for oid in heapq.merge(self.canonical.iter_ids(), self.staging.iter_ids()):
            if oid != last:
                yield oid
                last = oid

    def iter_tmp_files(self) -> Iterator[Path]:
        """Leftover temp files of both areas."""
        yield from self.canonical.iter_tmp_files()
        yield from self.staging.iter_tmp_files()

    def resolve_prefix(self, prefix: str) -> ObjectId:
        """Resolve a unique hex prefix over both areas.

        Raises:
            InvalidInput, ObjectNotFound, AmbiguousPrefix: as ``LooseObjectStore.resolve_prefix``.
        """
        return _resolve(prefix, self.exists, lambda p: sorted(
            set(self.canonical.names_with_prefix(p)) | set(self.staging.names_with_prefix(p))))


_MEMORY_PATH = "<memory>"


class MemoryObjectStore:
    """Objects in a dict, keyed by id (implements ``ObjectStore``; no files, no locks).

    It keeps the canonical bytes, so ids never depend on compression, and a read
    re-hashes and re-parses them exactly as the loose store does after decompressing:
    a test that damages ``objects[oid]`` sees the same errors a damaged file gives.
    """

    def __init__(self, *, max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES) -> None:
        """Create an empty store.

        Args:
            max_object_bytes: The largest payload a read accepts (the loose store's cap).
        """
        self.max_object_bytes = max_object_bytes
        self.objects: dict[ObjectId, bytes] = {}

    def write(self, kind: int, payload: bytes) -> tuple[ObjectId, bool]:
        """Store an object unless an intact copy is already there.

        Args:
            kind: ``KIND_BLOB`` or ``KIND_TYPED``.
            payload: The object's bytes.

        Returns:
            The id and whether it was stored (False: deduplicated).
        """
        canon = canonical_bytes(kind, payload)
        oid = ObjectId(blake3.blake3(canon).digest())
        if self.objects.get(oid) == canon:
            return oid, False
        self.objects[oid] = canon  # a damaged entry is replaced, as the loose store does
        return oid, True

    def read(self, oid: ObjectId, *, max_payload: int | None = None) -> StoredObject:
        """Return the verified object ``oid``.

        Args:
            oid: The object's id.
            max_payload: The largest payload this read accepts (None: ``max_object_bytes``).

        Returns:
            Its id, kind and payload.

        Raises:
            ObjectNotFound: (E001) if there is no such object.
            InvalidEnvelope: (E003) if it is malformed or over its cap.
            HashMismatch: (E002) if its content does not hash to ``oid``.
        """
        canon = self.objects.get(oid)
        if canon is None:
            raise ObjectNotFound(oid)
        cap = (self.max_object_bytes if max_payload is None
               else min(max_payload, self.max_object_bytes)) + HEADER_SIZE
        if len(canon) > cap:
            # The loose store refuses the declared frame size before decoding; same words.
            raise InvalidEnvelope(oid, path=_MEMORY_PATH,
                                  detail=f"declares {len(canon)} bytes, over the {cap}-byte limit")
        digest = blake3.blake3(canon).digest()
        if digest != oid:
            raise HashMismatch(oid, path=_MEMORY_PATH, actual=digest)
        kind, payload = parse_envelope(canon, oid=oid, path=_MEMORY_PATH)
        return StoredObject(oid, kind, payload)

    def exists(self, oid: ObjectId) -> bool:
        """Return True if the store holds ``oid`` (without verifying it).

        Args:
            oid: The object's id.

        Returns:
            Whether an object is stored under that id.
        """
        return oid in self.objects

    def iter_ids(self) -> Iterator[ObjectId]:
        """Yield every stored id, ascending (a snapshot: writing while iterating is safe).

        Returns:
            An iterator over ids.
        """
        yield from sorted(self.objects)

    def resolve_prefix(self, prefix: str) -> ObjectId:
        """Resolve a unique hex prefix (4 to 64 characters) to an id.

        Args:
            prefix: Hex text, case-insensitive, surrounding white space ignored.

        Returns:
            The one id that starts with ``prefix``.

        Raises:
            InvalidInput: if the prefix is too short or not hex.
            ObjectNotFound: (E001) if nothing matches.
            AmbiguousPrefix: (E016) if several objects match.
        """
        prefix = _normalize_prefix(prefix)
        if len(prefix) == 64:
            if ObjectId(bytes.fromhex(prefix)) not in self.objects:
                raise ObjectNotFound(prefix)
            return ObjectId(bytes.fromhex(prefix))
        names = sorted(h for h in (oid.hex() for oid in self.objects) if h.startswith(prefix))
        return _unique_match(prefix, names)
