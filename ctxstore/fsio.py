"""Durable file I/O: the only place that writes, renames, fsyncs or unlinks under ``.ctx/``.

Everything that must survive a crash goes through these primitives, so a test shim can
count them, kill the process between any two of them, or make any one of them fail
(see tests/_shim). The rules they implement:

* a new file is written to a temp file in the same directory, opened exclusively,
  and renamed into place, so readers never see a partial file;
* a pointer is fsynced before its rename and its directory after it;
* a batch of objects is made durable with one filesystem barrier (``sync_barrier``)
  instead of one fsync per file; pointers move only after that barrier;
* I/O below a trusted directory (the store, a project folder) goes through one handle,
  ``Dir`` (``open_dir``): each directory below the root is opened ``O_NOFOLLOW`` relative to
  its parent's descriptor, and the file is created, renamed, read or removed relative to the
  last one, so a directory swapped for a symlink between a check and the write is never
  followed (PS-10).

This module must not import anything from ctxstore except ``errors``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from ctxstore.errors import InvalidInput, LockConflict, UnsafePath

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
    "write_output",
    "mode_of",
    "ensure_dir",
    "hold_lock",
    "lock_is_held",
    "read_lock_pid",
    "file_kind",
    "read_regular",
    "check_under",
    "check_store_link",
    "Dir",
    "open_dir",
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


# -- the directory handle: I/O through directory descriptors (PS-10) --------------------------
# A check by name (lstat) followed by a write by name loses a race: between the two, another
# process can swap a checked directory for a symlink out of the store, and the write follows
# it. A ``Dir`` holds an open directory; every directory below it is opened O_NOFOLLOW relative
# to the descriptor of its parent, and files are created, renamed, read and removed relative
# to the last descriptor: a swap after an open changes nothing (the descriptor still names the
# directory that was checked), a swap before it is refused with E020.
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


def _not_a_directory(dir_fd: int, name: str, where: str, follow: bool) -> UnsafePath | None:
    """The E020 for ``name`` (in ``dir_fd``) that could not be opened as a directory.

    None if it is a directory now: it was swapped back since the open, which may be retried.
    """
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=follow).st_mode
    except OSError:
        return UnsafePath(where, detail="is not a directory (it changed while being opened)")
    if stat.S_ISDIR(mode):
        return None
    detail = "is a symbolic link" if stat.S_ISLNK(mode) \
        else f"is {file_kind(mode)}, not a directory"
    return UnsafePath(where, detail=detail)


def _open_subdir(dir_fd: int, name: str, *, where: str, create: bool, durable: bool,
                 follow: bool) -> int:
    """Open the directory ``name`` inside ``dir_fd``; return its descriptor (see ``Dir.dir``).

    Raises:
        UnsafePath: (E020) if ``name`` is a symbolic link (unless ``follow``) or not a directory.
        FileNotFoundError: if it is missing and ``create`` is False.
        OSError: any other error of the operating system.
    """
    flags = _DIR_FOLLOW_FLAGS if follow else _DIR_FLAGS
    for _ in range(3):
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            if follow:
                try:
                    os.lstat(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    break
                # A link to nothing: mkdir would fail on the link, and nothing is made
                # where it leads.
                raise UnsafePath(where, detail="is a symbolic link to a missing folder") from None
            break
        except OSError as exc:
            # O_NOFOLLOW|O_DIRECTORY on a symlink is ENOTDIR on Linux, ELOOP elsewhere.
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            refused = _not_a_directory(dir_fd, name, where, follow)
            if refused is not None:
                raise refused from None
            # A directory again: swapped back since the open. Retry, a few times only.
    else:
        raise UnsafePath(where, detail="is not a directory (it changed while being opened)")
    try:
        mkdir(name, dir_fd=dir_fd)
    except FileExistsError:
        pass  # made by someone else meanwhile: opened (and checked) below like any other
    else:
        if durable:
            fsync_dir(dir_fd)
    return _open_subdir(dir_fd, name, where=where, create=False, durable=durable, follow=follow)


def _check_target(dir_fd: int, name: str, where: str) -> None:
    """Refuse a final name that is a symlink or a special file (a directory fails on rename)."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise UnsafePath(where, detail="is a symbolic link")
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UnsafePath(where, detail=f"is {file_kind(mode)}")


class Dir:
    """An open directory: the one handle for path-safe I/O below a trusted directory.

    Every path a method takes is relative to this directory, or an absolute path below it
    (``..`` is refused). Each directory on the way is opened relative to its parent's
    descriptor, ``O_NOFOLLOW``, and the file is created, renamed, read or removed relative
    to the last one, so nothing is ever written through a link, even one swapped in while
    a call runs (PS-10). A link, a FIFO or a device where a directory or a file belongs is
    refused with E020 naming it.

    ``follow_links`` is for the user's own configuration (``~/.claude`` linked into a
    dotfiles repository): directories on the way may then be links to directories, and a
    read follows a linked file; a write still never replaces a link (the caller resolves
    one and writes its target).

    Open one with ``open_dir``; close it (or use it as a context manager).
    """

    __slots__ = ("_fd", "_path", "_where", "follow_links")

    def __init__(self, fd: int, path: StrPath, *, follow_links: bool = False) -> None:
        self._fd = fd
        self._where = os.fspath(path)
        self._path: Path | None = None  # built when asked for: a Path costs microseconds
        self.follow_links = follow_links

    @property
    def path(self) -> Path:
        """The directory's path, as it was opened (errors name paths below it)."""
        if self._path is None:
            self._path = Path(self._where)
        return self._path

    def fileno(self) -> int:
        """The directory's descriptor (for ``os.scandir``, ``os.stat(dir_fd=...)``, ...)."""
        return self._fd

    def close(self) -> None:
        """Close the descriptor (a second close does nothing)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> Dir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Dir({self._where!r}, fd={self._fd})"

    def _names(self, rel: StrPath) -> tuple[str, ...]:
        if isinstance(rel, str) and "/" not in rel and rel not in ("", ".", ".."):
            return (rel,)  # the common case, one name: no Path to build
        path = Path(rel)
        if path.is_absolute():
            return _names_below(self.path, path)
        if ".." in path.parts:
            raise UnsafePath(os.fspath(self.path / path), detail="leads out of its directory (..)")
        return path.parts

    def _walk(self, names: Sequence[str], *, create: bool, durable: bool) -> tuple[int, str]:
        """Open the directories ``names`` one below the other: the last one's descriptor and path.

        The descriptor is this directory's own when ``names`` is empty (not to be closed).
        """
        fd, where = self._fd, self._where
        try:
            for name in names:
                where = os.path.join(where, name)
                child = _open_subdir(fd, name, where=where, create=create, durable=durable,
                                     follow=self.follow_links)
                if fd != self._fd:
                    os.close(fd)
                fd = child
        except BaseException:
            if fd != self._fd:
                os.close(fd)
            raise
        return fd, where

    def _open_parent(self, rel: StrPath, *, create: bool = False,
                     durable: bool = True) -> tuple[int, str, str]:
        """The open parent of the file ``rel``: its descriptor, the file's name and full path.

        The caller closes the descriptor unless it is this directory's own.
        """
        if isinstance(rel, str) and "/" not in rel and rel not in ("", ".", ".."):
            return self._fd, rel, f"{self._where}/{rel}"  # a name in this directory
        names = self._names(rel)
        if not names:
            raise UnsafePath(self._where, detail="is a directory, not a file")
        fd, where = self._walk(names[:-1], create=create, durable=durable)
        return fd, names[-1], os.path.join(where, names[-1])

    def _done(self, fd: int) -> None:
        if fd != self._fd:
            os.close(fd)

    def dir(self, rel: StrPath, *, create: bool = False, durable: bool = True) -> Dir:
        """Open the directory ``rel`` below this one (``"."``: this one again).

        Args:
            rel: The directory, relative to this one (or an absolute path below it).
            create: Create missing directories on the way.
            durable: After creating a directory, fsync its parent, so the new entry survives a
                crash (False when the caller makes its writes durable with one
                ``sync_barrier``).

        Returns:
            A new handle (the caller closes it).

        Raises:
            UnsafePath: (E020) naming the first directory that is a link or not a directory,
                or if ``rel`` leads out of this directory.
            FileNotFoundError: if a directory is missing and ``create`` is False.
            OSError: any other error of the operating system.
        """
        if isinstance(rel, str) and "/" not in rel and rel not in ("", ".", ".."):
            # One name (an object shard on every write): no walk, no Path.
            where = f"{self._where}/{rel}"
            fd = _open_subdir(self._fd, rel, where=where, create=create, durable=durable,
                              follow=self.follow_links)
            return Dir(fd, where, follow_links=self.follow_links)
        fd, where = self._walk(self._names(rel), create=create, durable=durable)
        if fd == self._fd:
            fd = os.dup(fd)
        return Dir(fd, where, follow_links=self.follow_links)

    def ensure_dir(self, rel: StrPath) -> bool:
        """Create the directory ``rel`` and the missing ones on the way; True if one was created.

        Each is created relative to its parent's descriptor: a parent swapped for a link
        meanwhile is refused, never created in.

        Raises:
            UnsafePath: (E020) naming a link or a non-directory on the way.
            OSError: if a directory cannot be created.
        """
        names = self._names(rel)
        try:
            fd, _ = self._walk(names, create=False, durable=False)
            created = False
        except FileNotFoundError:
            fd, _ = self._walk(names, create=True, durable=False)
            created = True
        self._done(fd)
        return created

    def read(self, rel: StrPath, limit: int) -> bytes:
        """Read the regular file ``rel``, at most ``limit + 1`` bytes (see ``read_regular``).

        Raises:
            FileNotFoundError: if there is no such file (or directory on the way).
            UnsafePath: (E020) if it, or a directory on the way, is a link (a linked file
                is read through with ``follow_links``) or not a regular file / directory.
            OSError: any other error of the operating system.
        """
        fd, name, where = self._open_parent(rel)
        try:
            file_fd, st = _open_regular(name, os.O_RDONLY, dir_fd=fd, shown=where,
                                        follow=self.follow_links)
        finally:
            self._done(fd)
        try:
            return _read_bounded(file_fd, st, limit)
        finally:
            os.close(file_fd)

    def replace_atomic(self, rel: StrPath, data: bytes, *, mode: int = 0o644) -> None:
        """Durably replace the file ``rel`` with ``data``, creating missing directories.

        Temp file, fsync, rename, fsync of the directory (``replace_atomic``), all relative to
        the directory's descriptor; each directory created is made durable in its parent. A
        crash leaves the old or the new content.

        Args:
            rel: The file.
            data: The new content.
            mode: Permission bits of a new file.

        Raises:
            UnsafePath: (E020) naming a link or a non-directory on the way, or the file if it
                is a link or a special file.
            OSError: if it cannot be written.
        """
        fd, name, where = self._open_parent(rel, create=True)
        try:
            _check_target(fd, name, where)
            tmp = _write_tmp(name, data, durable=True, mode=mode, dir_fd=fd)
            try:
                replace(tmp, name, dir_fd=fd)
            except BaseException:
                _discard(tmp, fd)
                raise
            fsync_dir(fd)
        finally:
            self._done(fd)

    def write_new_file(self, rel: StrPath, data: bytes, *, mode: int = 0o444) -> None:
        """``write_new_file`` for the file ``rel``, whose directory exists.

        Temp file (``O_CREAT|O_EXCL|O_NOFOLLOW``) and rename, both relative to the directory's
        descriptor, without fsync (the caller's ``sync_barrier`` makes it durable).

        Raises:
            UnsafePath: (E020) naming a link or a non-directory on the way.
            FileNotFoundError: if a directory on the way is missing.
            OSError: if it cannot be written.
        """
        fd, name, _where = self._open_parent(rel)
        try:
            tmp = _write_tmp(name, data, durable=False, mode=mode, dir_fd=fd)
            try:
                replace(tmp, name, dir_fd=fd)
            except BaseException:
                _discard(tmp, fd)
                raise
        finally:
            self._done(fd)

    def open_append(self, rel: StrPath, *, mode: int = 0o644, durable: bool = True) -> int:
        """``open_append`` for the file ``rel``, creating missing directories.

        Args:
            rel: The file to append to.
            mode: Permission bits of a new file.
            durable: fsync the parent of each directory created.

        Returns:
            A descriptor open for appending (the caller closes it).

        Raises:
            UnsafePath: (E020) naming a link or a non-directory on the way, or the file if it
                is a link or not a regular file.
            OSError: any other error of the operating system.
        """
        fd, name, where = self._open_parent(rel, create=True, durable=durable)
        try:
            return _open_regular(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode,
                                 dir_fd=fd, shown=where)[0]
        finally:
            self._done(fd)

    def unlink(self, rel: StrPath, *, durable: bool = False) -> bool:
        """Remove the file ``rel``; True if one was removed (False: it, or its directory, was missing).

        A link there is removed itself (its target is never touched); a link among the
        directories on the way is refused.

        Raises:
            UnsafePath: (E020) naming a link or a non-directory on the way.
            OSError: if it cannot be removed.
        """
        try:
            fd, name, _where = self._open_parent(rel)
        except FileNotFoundError:
            return False
        try:
            try:
                unlink(name, dir_fd=fd)
            except FileNotFoundError:
                return False
            if durable:
                fsync_dir(fd)
            return True
        finally:
            self._done(fd)

    def rmdir(self, rel: StrPath) -> None:
        """Remove the empty directory ``rel`` (a link on the way is refused).

        Raises:
            UnsafePath: (E020) naming a link or a non-directory on the way.
            OSError: if it is not empty, missing or cannot be removed.
        """
        fd, name, _where = self._open_parent(rel)
        try:
            rmdir(name, dir_fd=fd)
        finally:
            self._done(fd)


def open_dir(root: StrPath, below: StrPath | None = None, *, create: bool = False,
             durable: bool = True, follow_links: bool = False) -> Dir:
    """Open the trusted directory ``root`` (or the directory ``below`` it) as a ``Dir``.

    ``root`` is trusted and opened as named (a store given with ``--ctx-dir`` may be a link);
    every directory between it and ``below`` is opened as ``Dir.dir`` does.

    Args:
        root: The trusted directory (the store, ``.ctx/``; a project folder).
        below: A directory below ``root`` to open instead (absolute, or relative to ``root``).
        create: Create missing directories below ``root``.
        durable: fsync the parent of each directory created.
        follow_links: See ``Dir``.

    Returns:
        The handle (the caller closes it).

    Raises:
        UnsafePath: (E020) naming the first directory below ``root`` that is a link or not a
            directory, or if ``below`` is not below ``root``.
        FileNotFoundError: if a directory is missing and ``create`` is False.
        OSError: any other error of the operating system.
    """
    top = Dir(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), root,
              follow_links=follow_links)
    if below is None:
        return top
    with top:
        return top.dir(below, create=create, durable=durable)


def write_output(path: StrPath, data: bytes, *, store: Path, also: Sequence[Path] = ()) -> None:
    """Write a file the user named (``--output FILE``) as a shell redirect would, never into ``store``.

    A FIFO or a character device is opened and written directly (a rename would replace the
    device node or the pipe itself); a symlink is followed and its target written; a regular
    file (or a new one) is replaced atomically, keeping its permission bits. The final target,
    symlinks and ``..`` resolved, must not lie inside ``store``: ctx's own files are never
    overwritten by an export or a pack.

    Args:
        path: The file name as given (any bytes, as ``os.fsencode`` takes them).
        data: What to write.
        store: The store directory (``.ctx/``) the output must stay out of.
        also: Other stores it must stay out of (the user store ``~/.ctx``).

    Raises:
        InvalidInput: (E011) if ``path`` is empty, inside ``store``, a directory, or a
            special file other than a FIFO or a character device.
        OSError: any error of the operating system (the CLI reports E017).
    """
    name = os.fspath(path)
    if not name:
        raise InvalidInput("the output file name is empty",
                           hint="name a file, or - for standard output")
    real = os.path.realpath(name)
    for root in (store, *also):
        if _inside(Path(real), Path(root)):
            raise InvalidInput(f"refusing to write {name}: it is inside the store {root}",
                               hint="write the output outside the .ctx/ directory")
    try:
        st = os.stat(name)  # follows symlinks: the kind of the final target
    except FileNotFoundError:
        st = None  # a new file (or a dangling link: its target is created)
    if st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        # As `>` does: open and write (blocking until a FIFO has a reader); nothing renamed.
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a file since the stat
                raise InvalidInput(f"{name} changed while being opened", hint="try again")
            write_all(fd, data)
        finally:
            os.close(fd)
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InvalidInput(f"refusing to write {name}: it is {file_kind(st.st_mode)}",
                           hint="name a regular file, a FIFO or a character device")
    if st is None and not os.path.isdir(os.path.dirname(real) or "."):
        raise InvalidInput(f"cannot write {name}: the directory {os.path.dirname(real)} does "
                           "not exist", hint="create it first, or name a file in an existing one")
    replace_atomic(Path(real), data, mode=mode_of(Path(real)))


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (already resolved) is ``root`` or lies below it.

    By name after resolving both, and by identity (device and inode) for each existing
    ancestor, so a case-insensitive file system or a second mount of the store is caught too.
    """
    root_real = Path(os.path.realpath(root))
    if path == root_real or root_real in path.parents:
        return True
    try:
        root_st = os.stat(root_real)
    except OSError:
        return False
    for folder in (path, *path.parents):
        try:
            if os.path.samestat(os.stat(folder), root_st):
                return True
        except OSError:
            continue
    return False


def mode_of(path: Path, default: int = 0o644) -> int:
    """The permission bits of ``path``, or ``default`` if there is no such file.

    Rewriting a file the user owns (settings.json, CLAUDE.md) or copying it to a backup
    must not widen its permissions: a 0o600 file may hold secrets. Pass the result as
    ``replace_atomic``'s ``mode``.
    """
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return default


def ensure_dir(path: Path) -> bool:
    """Create ``path`` (and missing parents) if needed; return True if any was created.

    ``path`` itself must be a real directory: a symlink there is refused, never followed
    (use ``Dir.ensure_dir`` to check every component below a root).

    Raises:
        UnsafePath: (E020) if ``path`` is a symlink or exists as something else.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode):
            return False
        raise UnsafePath(os.fspath(path), detail=f"is {file_kind(st.st_mode)}, not a directory")
    if not path.parent.is_dir():
        ensure_dir(path.parent)
    try:
        mkdir(path)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise
        return False
    return True


def read_lock_pid(path: Path) -> int | None:
    """Return the pid recorded in a lock file, or None if unreadable."""
    try:
        text = read_regular(path, 64)[:64].decode("ascii", "replace").strip()
    except (OSError, UnsafePath):
        return None
    return int(text) if text.isdigit() else None


def lock_is_held(path: Path) -> bool:
    """Whether another open file description holds ``hold_lock``'s flock on ``path`` now.

    A probe that never waits and never creates the file: a missing file is a free lock. It
    takes a shared flock for an instant (``hold_lock`` retries past it), so a reader can tell
    "someone is at it" without a write of its own.

    Raises:
        UnsafePath: (E020) if the lock file is a symlink or not a regular file.
    """
    try:
        fd, _ = _open_regular(path, os.O_RDONLY, what="a lock file")
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    finally:
        os.close(fd)  # releases the probe's shared lock
    return False


@contextmanager
def hold_lock(path: Path, *, timeout: float, poll: float = 0.01) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the duration of the block.

    ``flock`` (not ``lockf``) is used on purpose: a POSIX record lock is dropped when
    *any* descriptor of the file is closed in the holding process, for example by a
    status read of the holder's pid; a flock belongs to this open file description
    only. The lock dies with the process, so a ``kill -9`` leaves no stale lock.

    The file is opened without ``O_TRUNC`` and with ``O_NOFOLLOW``, and must be a regular
    file: a committed ``LOCK`` symlink would otherwise make every writer truncate and
    overwrite its target (PS-09).

    Raises:
        LockConflict: if the lock is still held by another process after ``timeout``.
        UnsafePath: (E020) if the lock file is a symlink or not a regular file.
    """
    fd, _ = _open_regular(path, os.O_RDWR | os.O_CREAT, what="a lock file")
    try:
        start = time.monotonic()
        delay = poll
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            waited = time.monotonic() - start
            if waited >= timeout:
                raise LockConflict(str(path), pid=read_lock_pid(path), waited=waited)
            time.sleep(min(delay, max(timeout - waited, 0.001)))
            delay = min(delay * 1.5, 0.05)
        # The pid is advisory (for the error message), so it is not fsynced.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
