"""Pointer files: HEAD, refs/*, STAGE. Parsing, atomic writes, compare-and-swap.

HEAD and refs/* are committed with the repository; STAGE is per clone and lives at
``local/STAGE`` (never committed: a Git commit of unfolded work carries no pointer to
it). Stores made before that kept a committed ``.ctx/STAGE``: it is still read while
``local/STAGE`` does not exist (``LEGACY_STAGE``), and never written.

A pointer holds one 64-hex object id and a newline (CRLF and a missing newline are
tolerated). After a Git merge a pointer may hold several ids: one per line when Git's
``union`` merge joined both sides, or between conflict markers when a text merge did.
Both are read as a *multi-head* pointer; readers replay all heads, and the next write
(or ``ctx rebuild``) replaces them with a merge commit. Anything else is refused with
E005 naming the file; a write never silently replaces a pointer it could not parse.

HEAD is symbolic (``ref: refs/main``); its target is validated before any path is
opened, so ``ref: ../../x`` cannot reach outside ``.ctx/``.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import RefNotFound
from ctxstore.ids import ObjectId
from ctxstore.records import dataclass

__all__ = [
    "Pointer",
    "MAX_POINTER_BYTES",
    "validate_ref_name",
    "parse_pointer",
    "read_pointer",
    "read_head_target",
    "read_head",
    "write_pointer",
    "delete_pointer",
    "render_pointer",
    "LEGACY_STAGE",
    "STAGE_PATH",
    "reads_legacy_stage",
    "stage_file",
]

MAX_POINTER_BYTES = 64 * 1024
_HEX_DIGITS = b"0123456789abcdef"
_REF_NAME = re.compile(r"refs(/[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*)+")
_MARKERS = (b"<<<<<<<", b"|||||||", b"=======", b">>>>>>>")


@dataclass(frozen=True, slots=True)
class Pointer:
    """A parsed pointer: one head normally, several after an unresolved Git merge."""

    name: str
    heads: tuple[ObjectId, ...]
    raw: bytes

    @property
    def conflicted(self) -> bool:
        """True when the pointer names more than one commit (needs a merge commit)."""
        return len(self.heads) > 1

    @property
    def single(self) -> ObjectId:
        """The only head (callers check ``conflicted`` first)."""
        return self.heads[0]


def validate_ref_name(name: str) -> str:
    """Check a pointer name: ``HEAD``, ``STAGE`` or ``refs/<name>``.

    Raises:
        RefNotFound: for any other form (absolute paths, ``..``, odd characters).
    """
    if name in ("HEAD", "STAGE") or (_REF_NAME.fullmatch(name) and ".." not in name):
        return name
    raise RefNotFound(name, detail="is not a valid pointer name")


def _lines(data: bytes) -> list[bytes]:
    text = data[:-1] if data.endswith(b"\n") else data
    return [line[:-1] if line.endswith(b"\r") else line for line in text.split(b"\n")]


def parse_pointer(name: str, data: bytes) -> Pointer:
    """Parse pointer bytes into a Pointer.

    Raises:
        RefNotFound: (E005) naming the pointer if the bytes are not a valid pointer.
    """
    if len(data) > MAX_POINTER_BYTES:
        raise RefNotFound(name, detail=f"is not a pointer ({len(data)} bytes)")
    heads: list[ObjectId] = []
    in_base = False
    for line in _lines(data):
        if line.startswith(_MARKERS):
            # Conflict markers from a Git text merge: keep both sides' ids, but not the
            # merge base's (diff3/zdiff3 show it between ||||||| and =======).
            in_base = line.startswith(b"|||||||")
            continue
        if in_base:
            continue
        # 64 lower-case hex digits (``bytes.translate`` deletes them all: nothing left).
        if len(line) != 64 or line.translate(None, _HEX_DIGITS):
            shown = line[:40].decode("utf-8", "replace")
            raise RefNotFound(name, detail=f"does not hold an object id (found {shown!r})",
                              hint="restore it from Git or run `ctx stage recover`")
        heads.append(ObjectId(bytes.fromhex(line.decode())))
    if not heads:
        raise RefNotFound(name, detail="is empty",
                          hint="restore it from Git or run `ctx stage recover`")
    # Order-independent: the same merge gives the same pointer on every machine.
    unique = tuple(sorted(set(heads)))
    return Pointer(name, unique, data)


STAGE_PATH = "local/STAGE"
LEGACY_STAGE = "STAGE"


def _path(ctx_dir: Path, name: str) -> Path:
    return ctx_dir / (STAGE_PATH if validate_ref_name(name) == "STAGE" else name)


def stage_file(ctx_dir: Path) -> Path:
    """The file STAGE is read from: ``local/STAGE``, or an older store's ``.ctx/STAGE``."""
    return ctx_dir / (LEGACY_STAGE if reads_legacy_stage(ctx_dir) else STAGE_PATH)


def reads_legacy_stage(ctx_dir: Path) -> bool:
    """True when STAGE is read from the committed ``.ctx/STAGE`` of an older store."""
    return not os.path.lexists(ctx_dir / STAGE_PATH) and os.path.lexists(ctx_dir / LEGACY_STAGE)


def _read(ctx_dir: Path, name: str, limit: int) -> bytes | None:
    """A pointer file's bytes (at most ``limit + 1``), or None if it does not exist.

    The file is reached through real directories only and must be a regular file: a
    committed symlink, FIFO or ``/dev/zero`` link is refused, never followed, waited on
    or read without bound.

    Raises:
        UnsafePath: (E020) naming the link or special file.
        RefNotFound: if it is a directory or cannot be read.
    """
    path = stage_file(ctx_dir) if name == "STAGE" else _path(ctx_dir, name)
    fsio.check_under(ctx_dir, path)
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise RefNotFound(name, detail="is a directory, not a pointer file")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RefNotFound(name, detail=f"cannot be read ({exc.strerror})") from None
    try:
        return fsio.read_regular(path, limit)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RefNotFound(name, detail=f"cannot be read ({exc.strerror})") from None


def read_pointer(ctx_dir: Path, name: str) -> Pointer | None:
    """Read a pointer; None if it does not exist.

    Raises:
        RefNotFound: if it exists but is not a valid pointer.
        UnsafePath: (E020) if it (or a directory on its way) is a symlink or a special file.
    """
    data = _read(ctx_dir, name, MAX_POINTER_BYTES)
    return None if data is None else parse_pointer(name, data)


def read_head_target(ctx_dir: Path) -> str:
    """Return the ref HEAD points to (e.g. ``refs/main``).

    Raises:
        RefNotFound: if HEAD is missing or not ``ref: refs/<name>``.
        UnsafePath: (E020) if HEAD is a symlink or a special file.
    """
    data = _read(ctx_dir, "HEAD", 1024)
    if data is None:
        raise RefNotFound("HEAD")
    lines = _lines(data)
    if len(lines) != 1 or not lines[0].startswith(b"ref: "):
        raise RefNotFound("HEAD", detail="is not of the form 'ref: refs/<name>'")
    target = lines[0][5:].decode("utf-8", "replace").strip()
    if not target.startswith("refs/"):
        raise RefNotFound("HEAD", detail=f"points outside refs/ ({target!r})")
    validate_ref_name(target)
    return target


def read_head(ctx_dir: Path) -> Pointer:
    """Read the pointer HEAD names (no store handle needed).

    Raises:
        RefNotFound: if HEAD or its target is missing or malformed.
        UnsafePath: (E020) if a pointer file is a symlink or a special file.
    """
    name = read_head_target(ctx_dir)
    pointer = read_pointer(ctx_dir, name)
    if pointer is None:
        raise RefNotFound(name, hint="run `ctx init --force` to start a new history")
    return pointer


def render_pointer(oid: ObjectId) -> bytes:
    """Return the bytes of a single-head pointer."""
    return oid.hex().encode() + b"\n"


def write_pointer(ctx_dir: Path, name: str, oid: ObjectId) -> None:
    """Durably point ``name`` at ``oid`` (temp, fsync, rename, fsync directory).

    The caller holds the store lock and has made ``oid`` durable.

    Raises:
        UnsafePath: (E020) if a directory on the way is a symlink or not a directory, or
            the pointer is a special file: nothing is written through a link.
    """
    # Through directory descriptors, each new directory fsynced into its parent: a
    # directory swapped for a link while this runs is refused, never written through (PS-10).
    with fsio.open_dir(ctx_dir) as store_dir:
        store_dir.replace_atomic(_path(ctx_dir, name), render_pointer(oid))


def delete_pointer(ctx_dir: Path, name: str) -> None:
    """Durably remove a pointer (a missing one is fine).

    Raises:
        UnsafePath: (E020) if a directory on the way is a symlink or not a directory.
    """
    path = _path(ctx_dir, name)
    fsio.check_under(ctx_dir, path)  # E020 for a pointer that is a link, as on reading
    with fsio.open_dir(ctx_dir) as store_dir:
        store_dir.unlink(path, durable=True)
