"""``LooseObjectStore``: one zstd frame of the canonical bytes per file at ``objects/<2>/<64 hex>``.

Every read decompresses with a cap, rejects trailing bytes, re-hashes and checks the envelope,
so corruption is always detected and named; memory is bounded by what is declared before
anything is allocated (a decompression bomb, RELIABILITY.md).
"""

from __future__ import annotations

import os
import stat
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from ctxstore import fsio
from ctxstore.errors import HashMismatch, InvalidEnvelope, ObjectNotFound, OutOfMemory, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.objects.envelope import (
    _CHUNK,
    _HEADER,
    _HEX,
    _KINDS,
    _MAX_WINDOW,
    DEFAULT_MAX_OBJECT_BYTES,
    ENVELOPE_MAGIC,
    HEADER_SIZE,
    RETAIN_BYTES,
    StoredObject,
    canonical_bytes,
    parse_envelope,
)
from ctxstore.objects.protocol import _resolve

if TYPE_CHECKING:  # zstandard is imported lazily: `ctx --help` must not load it
    import zstandard

__all__ = ["LooseObjectStore"]

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
