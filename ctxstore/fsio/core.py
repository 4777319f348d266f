"""The primitives of durable file I/O, the ones the fault shim counts and fails.

``open_excl``, ``write_all``, ``fsync_file``, ``fsync_dir``, ``replace``, ``link``,
``unlink``, ``mkdir``, ``rmdir`` and ``sync_barrier``, with the bounded reads, the
containment checks and the atomic writes by name built on them. Everything in this module
and in ``dirs``, ``paths`` and ``locks`` calls a primitive through this module
(``core.replace``), so a test that replaces one here (``monkeypatch.setattr(fsio.core, ...)``)
reaches every caller inside the package; callers outside use the names the package
re-exports (``fsio.replace``). See the package's docstring for the rules.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ctxstore.errors import UnsafePath

__all__ = [
    "TMP_SUFFIX",
    "open_excl",
    "open_append",
    "write_all",
    "fsync_file",
    "fsync_dir",
    "fsync_path",
    "replace",
    "link",
    "unlink",
    "mkdir",
    "rmdir",
    "sync_barrier",
    "tmp_path_for",
    "write_new_file",
    "replace_atomic",
    "file_kind",
    "read_regular",
    "check_under",
    "check_store_link",
]

TMP_SUFFIX = ".tmp"
StrPath = str | os.PathLike[str]


def open_excl(path: StrPath, mode: int = 0o644, *, dir_fd: int | None = None) -> int:
    """Create ``path`` exclusively for writing and return its descriptor.

    ``O_EXCL`` already refuses an existing name, a planted symlink included (PS-08);
    ``O_NOFOLLOW`` says so explicitly. With ``dir_fd``, ``path`` is a name in that directory.

    Raises:
        OSError: ``FileExistsError`` if the path exists, or any OS error.
    """
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                   mode, dir_fd=dir_fd)


def open_append(path: StrPath, mode: int = 0o644) -> int:
    """Open (or create) a regular file for appending and return its descriptor.

    Never follows a symlink in the last component (``O_NOFOLLOW``) and never blocks on a
    FIFO (``O_NONBLOCK``, then ``fstat``): a planted link or special file is refused.

    Raises:
        UnsafePath: (E020) if ``path`` is a symbolic link or not a regular file.
        OSError: any other error of the operating system.
    """
    return _open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)[0]


def _open_regular(path: StrPath, flags: int, mode: int = 0o644, *,
                  what: str = "a regular file", dir_fd: int | None = None,
                  shown: StrPath | None = None, follow: bool = False) -> tuple[int, os.stat_result]:
    """Open ``path`` with ``flags``, if it is a regular file: its descriptor and ``fstat``.

    Never follows a symlink in the last component (``O_NOFOLLOW``, unless ``follow``: the
    user's own linked file, whose target must still be a regular file) and never blocks on a
    FIFO (``O_NONBLOCK``, then ``fstat``). ``what`` names the expected file in errors.
    With ``dir_fd``, ``path`` is a name in that directory and ``shown`` the path errors name.

    Raises:
        UnsafePath: (E020) if ``path`` is a symbolic link or not a regular file.
        OSError: any other error of the operating system.
    """
    name = os.fspath(shown if shown is not None else path)
    nofollow = 0 if follow else os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | nofollow | os.O_NONBLOCK | os.O_CLOEXEC, mode,
                     dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(name, detail="is a symbolic link") from None
        if exc.errno == errno.EISDIR:
            raise UnsafePath(name, detail=f"is a directory, not {what}") from None
        if exc.errno == errno.ENXIO:  # opened for writing: a FIFO without a reader, a socket
            kind = file_kind(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            raise UnsafePath(name, detail=f"is {kind}, not {what}") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(name, detail=f"is {file_kind(st.st_mode)}, not {what}")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


# -- containment: nothing under .ctx/ is followed out of the store -------------------------
def file_kind(mode: int) -> str:
    """``a symbolic link`` / ``a FIFO`` / ... for an ``st_mode``, as error messages say it."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "a special file"


def read_regular(path: StrPath, limit: int) -> bytes:
    """Read a regular file, at most ``limit + 1`` bytes (so a caller can tell "too large").

    Never follows a symlink in the last component (``O_NOFOLLOW``), never blocks on a FIFO
    (``O_NONBLOCK``, then ``fstat``), never reads a device: a committed ``.ctx/`` file
    that is a link to ``/dev/zero`` or a FIFO is refused, not read without bound.

    Raises:
        FileNotFoundError: if there is no such file.
        UnsafePath: (E020) if it is a symbolic link or not a regular file.
        OSError: any other error of the operating system.
    """
    fd, st = _open_regular(path, os.O_RDONLY)
    try:
        return _read_bounded(fd, st, limit)
    finally:
        os.close(fd)


def _read_bounded(fd: int, st: os.stat_result, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the open file ``fd`` (``st`` its ``fstat``)."""
    want = min(st.st_size, limit) + 1
    chunks: list[bytes] = []
    while want > 0:
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        want -= len(chunk)
    return b"".join(chunks)


def _parts_below(root: Path, path: Path) -> list[Path]:
    """``path`` and each of its ancestors strictly below ``root``, top-down."""
    out: list[Path] = []
    here = Path(root)
    for part in _names_below(root, path):
        here = here / part
        out.append(here)
    return out


def check_under(root: Path, path: Path) -> None:
    """Check that writing or deleting ``path`` stays inside ``root``.

    Every existing directory between ``root`` and ``path`` must be a real directory (not
    a symlink), and ``path`` itself, if it exists, must not be a symlink or a special
    file. Missing components are fine (a writer creates them with ``Dir.ensure_dir``).

    Raises:
        UnsafePath: (E020) naming the first component that fails.
    """
    parts = _parts_below(root, path)
    for i, part in enumerate(parts):
        try:
            st = os.lstat(part)
        except FileNotFoundError:
            return
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(os.fspath(part), detail="is a symbolic link")
        if not last and not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(os.fspath(part), detail=f"is {file_kind(st.st_mode)}, not a directory")
        if last and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise UnsafePath(os.fspath(part), detail=f"is {file_kind(st.st_mode)}")


def check_store_link(ctx_dir: Path) -> None:
    """Refuse a store directory that is a symlink leading out of its parent directory.

    A ``.ctx`` found by walking up from the working directory comes from the repository,
    which may be a hostile clone: a committed ``.ctx -> /somewhere`` would send every
    write there. (A directory the user names explicitly may be a link; this is for
    discovered stores.)

    Raises:
        UnsafePath: (E020) naming the link.
    """
    if not os.path.islink(ctx_dir):
        return
    parent = Path(os.path.realpath(Path(ctx_dir).parent))
    target = Path(os.path.realpath(ctx_dir))
    if target != parent and parent not in target.parents:
        raise UnsafePath(os.fspath(ctx_dir),
                         detail=f"is a symbolic link out of its repository (to {target})")


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``, looping over short writes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_file(fd: int) -> None:
    """Flush a file's data and metadata to stable storage."""
    os.fsync(fd)


def fsync_dir(path: Path | int) -> None:
    """Flush a directory's entries (creates, renames) to stable storage.

    ``path`` may be an open directory descriptor (which stays open).
    """
    if isinstance(path, int):
        os.fsync(path)
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: Path) -> None:
    """Flush an existing file's data and metadata (opened read-only) to stable storage."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fsync_file(fd)
    finally:
        os.close(fd)


def replace(src: StrPath, dst: StrPath, *, dir_fd: int | None = None) -> None:
    """Atomically rename ``src`` over ``dst`` (with ``dir_fd``: both names in that directory)."""
    os.replace(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def link(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst``; fails if ``dst`` exists."""
    os.link(src, dst)


def unlink(path: StrPath, *, dir_fd: int | None = None) -> None:
    """Remove a file (with ``dir_fd``: a name in that directory)."""
    os.unlink(path, dir_fd=dir_fd)


def mkdir(path: StrPath, *, dir_fd: int | None = None) -> None:
    """Create one directory, its parent existing (with ``dir_fd``: a name in that directory)."""
    os.mkdir(path, dir_fd=dir_fd)


def rmdir(path: StrPath, *, dir_fd: int | None = None) -> None:
    """Remove an empty directory (with ``dir_fd``: a name in that directory)."""
    os.rmdir(path, dir_fd=dir_fd)


# libc's syncfs, looked up once: None until then, False where the C library has none.
_syncfs: Callable[[int], int] | Literal[False] | None = None


def sync_barrier(anchor: Path) -> None:
    """Make every write so far on ``anchor``'s filesystem durable, in one call.

    Uses ``syncfs(2)`` where the C library has it (Linux), else ``sync(2)``. One
    barrier covers any number of files and directory entries, which is what lets
    a transaction of N objects avoid N fsyncs.

    Raises:
        OSError: if the kernel reports a write-back error.
    """
    global _syncfs
    if _syncfs is None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        found: Callable[[int], int] | None = getattr(libc, "syncfs", None)
        _syncfs = found if found is not None else False
    if not _syncfs:
        os.sync()
        return
    fd = os.open(anchor, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _syncfs(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(anchor))
    finally:
        os.close(fd)


def tmp_path_for(path: StrPath) -> str:
    """Return a fresh temp-file path in the same directory as ``path``.

    The name is 6 random bytes as hex, exactly what ``secrets.token_hex(6)`` gives;
    ``os.urandom`` spares every process the ``secrets`` import (hmac, OpenSSL: ~3 ms).
    """
    return f"{os.fspath(path)}.{os.urandom(6).hex()}{TMP_SUFFIX}"


def _write_tmp(path: StrPath, data: bytes, *, durable: bool, mode: int,
               dir_fd: int | None = None) -> str:
    tmp = tmp_path_for(path)
    fd = open_excl(tmp, mode, dir_fd=dir_fd)
    try:
        write_all(fd, data)
        if durable:
            fsync_file(fd)
    except BaseException:
        os.close(fd)
        _discard(tmp, dir_fd)
        raise
    os.close(fd)
    return tmp


def _discard(tmp: StrPath, dir_fd: int | None = None) -> None:
    # Best effort: a leftover temp file is harmless (gc removes it) and the
    # original error is the one worth reporting.
    try:
        unlink(tmp, dir_fd=dir_fd)
    except OSError:
        pass


def write_new_file(path: StrPath, data: bytes, *, mode: int = 0o444) -> None:
    """Write an immutable file by temp + rename, *without* fsync.

    The caller makes it durable later with ``sync_barrier`` (objects of one
    transaction share one barrier). An existing file at ``path`` is replaced,
    which is how a corrupt object is repaired.
    """
    tmp = _write_tmp(path, data, durable=False, mode=mode)
    try:
        replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


def replace_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Durably replace ``path`` with ``data``: temp, fsync, rename, fsync directory.

    After return, a crash leaves either the old or the new content, never a mix.
    """
    tmp = _write_tmp(path, data, durable=True, mode=mode)
    try:
        replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise
    fsync_dir(path.parent)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FOLLOW_FLAGS = _DIR_FLAGS & ~os.O_NOFOLLOW


def _names_below(root: Path, path: StrPath) -> tuple[str, ...]:
    """The names leading from ``root`` to ``path``, refusing ``..`` and paths outside ``root``."""
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        raise UnsafePath(os.fspath(path), detail=f"is outside {root}") from None
    if ".." in rel.parts:
        raise UnsafePath(os.fspath(path), detail="leads out of its directory (..)")
    return rel.parts
