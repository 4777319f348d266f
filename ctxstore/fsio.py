"""Durable file I/O: the only place that writes, renames, fsyncs or unlinks under ``.ctx/``.

Everything that must survive a crash goes through these primitives, so a test shim can
count them, kill the process between any two of them, or make any one of them fail
(see tests/_shim). The rules they implement:

* a new file is written to a temp file in the same directory, opened exclusively,
  and renamed into place, so readers never see a partial file;
* a pointer is fsynced before its rename and its directory after it;
* a batch of objects is made durable with one filesystem barrier (``sync_barrier``)
  instead of one fsync per file; pointers move only after that barrier;
* a write below the store (``*_under``, ``*_in``) goes through directory descriptors: each
  directory below the store root is opened ``O_NOFOLLOW`` relative to its parent's
  descriptor, and the file is created and renamed relative to the last one, so a directory
  swapped for a symlink between a check and the write is never followed (PS-10).

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
    "ensure_dir_under",
    "open_dir_under",
    "open_subdir",
    "write_new_file_in",
    "replace_atomic_in",
    "replace_atomic_under",
    "open_append_in",
    "open_append_under",
    "unlink_under",
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
                  shown: StrPath | None = None) -> tuple[int, os.stat_result]:
    """Open ``path`` with ``flags``, if it is a regular file: its descriptor and ``fstat``.

    Never follows a symlink in the last component (``O_NOFOLLOW``) and never blocks on a
    FIFO (``O_NONBLOCK``, then ``fstat``). ``what`` names the expected file in errors.
    With ``dir_fd``, ``path`` is a name in that directory and ``shown`` the path errors name.

    Raises:
        UnsafePath: (E020) if ``path`` is a symbolic link or not a regular file.
        OSError: any other error of the operating system.
    """
    name = os.fspath(shown if shown is not None else path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode,
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
        want = min(st.st_size, limit) + 1
        chunks: list[bytes] = []
        while want > 0:
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            want -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


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
    file. Missing components are fine (a writer creates them with ``ensure_dir_under``).

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


def ensure_dir_under(root: Path, folder: Path) -> bool:
    """Create ``folder`` and any missing directories between it and ``root``.

    Any component that is a symlink or not a directory is refused. True if one was created.
    Each directory is opened, or created, relative to its parent's descriptor
    (``open_subdir``): a parent swapped for a link meanwhile is refused, never created in.

    Raises:
        UnsafePath: (E020) naming the offending component.
        OSError: if a directory cannot be created.
    """
    try:
        os.close(open_dir_under(root, folder))
        return False
    except FileNotFoundError:
        os.close(open_dir_under(root, folder, create=True, durable=False))
        return True


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


# -- writes through directory descriptors (PS-10) -------------------------------------------
# A check by name (lstat) followed by a write by name loses a race: between the two, another
# process can swap a checked directory for a symlink out of the store, and the write follows
# it. Here every directory below the trusted root is opened O_NOFOLLOW relative to the
# descriptor of its parent, and files are created, renamed and removed relative to the last
# descriptor: a swap after an open changes nothing (the descriptor still names the directory
# that was checked), a swap before it is refused with E020.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _names_below(root: Path, path: StrPath) -> tuple[str, ...]:
    """The names leading from ``root`` to ``path``, refusing ``..`` and paths outside ``root``."""
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        raise UnsafePath(os.fspath(path), detail=f"is outside {root}") from None
    if ".." in rel.parts:
        raise UnsafePath(os.fspath(path), detail="leads out of its directory (..)")
    return rel.parts


def _not_a_directory(dir_fd: int, name: str, where: str) -> UnsafePath | None:
    """The E020 for ``name`` (in ``dir_fd``) that could not be opened as a directory.

    None if it is a directory now: it was swapped back since the open, which may be retried.
    """
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return UnsafePath(where, detail="is not a directory (it changed while being opened)")
    if stat.S_ISDIR(mode):
        return None
    detail = "is a symbolic link" if stat.S_ISLNK(mode) \
        else f"is {file_kind(mode)}, not a directory"
    return UnsafePath(where, detail=detail)


def open_subdir(dir_fd: int, name: str, *, where: str, create: bool = False,
                durable: bool = True) -> int:
    """Open the directory ``name`` inside ``dir_fd`` without following a link; return its descriptor.

    Args:
        dir_fd: The open parent directory.
        name: One path component (no ``/``).
        where: The directory's full path, as errors name it.
        create: Create the directory if it is missing.
        durable: After creating it, fsync the parent, so the new entry survives a crash
            (False when the caller makes its writes durable with one ``sync_barrier``).

    Returns:
        The directory's descriptor (the caller closes it).

    Raises:
        UnsafePath: (E020) if ``name`` is a symbolic link or not a directory.
        FileNotFoundError: if it is missing and ``create`` is False.
        OSError: any other error of the operating system.
    """
    for _ in range(3):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            break
        except OSError as exc:
            # O_NOFOLLOW|O_DIRECTORY on a symlink is ENOTDIR on Linux, ELOOP elsewhere.
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            refused = _not_a_directory(dir_fd, name, where)
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
    return open_subdir(dir_fd, name, where=where, create=False)


def open_dir_under(root: Path, folder: StrPath, *, create: bool = False,
                   durable: bool = True) -> int:
    """Open ``folder`` (``root`` or below it) one directory at a time; return its descriptor.

    ``root`` is trusted (opened as named: a store given with ``--ctx-dir`` may be a link);
    every directory below it is opened ``O_NOFOLLOW`` relative to its parent's descriptor.
    The caller closes the descriptor.

    Args:
        root: The trusted directory (the store, ``.ctx/``).
        folder: The directory to open.
        create: Create missing directories on the way.
        durable: fsync the parent of each directory created (see ``open_subdir``).

    Returns:
        The directory's descriptor (the caller closes it).

    Raises:
        UnsafePath: (E020) naming the first directory that is a link or not a directory,
            or if ``folder`` is not below ``root``.
        FileNotFoundError: if a directory is missing and ``create`` is False.
        OSError: any other error of the operating system.
    """
    names = _names_below(root, folder)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    where = os.fspath(root)
    try:
        for name in names:
            where = os.path.join(where, name)
            child = open_subdir(fd, name, where=where, create=create, durable=durable)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


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


def write_new_file_in(dir_fd: int, name: str, data: bytes, *, mode: int = 0o444) -> None:
    """``write_new_file`` for the name ``name`` in the open directory ``dir_fd``.

    Temp file (``O_CREAT|O_EXCL|O_NOFOLLOW``) and rename, both relative to ``dir_fd``,
    without fsync (the caller's ``sync_barrier`` makes it durable).

    Raises:
        OSError: if it cannot be written.
    """
    tmp = _write_tmp(name, data, durable=False, mode=mode, dir_fd=dir_fd)
    try:
        replace(tmp, name, dir_fd=dir_fd)
    except BaseException:
        _discard(tmp, dir_fd)
        raise


def replace_atomic_in(dir_fd: int, name: str, data: bytes, *, where: str,
                      mode: int = 0o644) -> None:
    """``replace_atomic`` for the name ``name`` in the open directory ``dir_fd``.

    Temp file, fsync, rename, fsync of ``dir_fd``: a crash leaves the old or the new content.

    Args:
        dir_fd: The open directory.
        name: The file's name in it.
        data: The new content.
        where: The file's full path, as errors name it.
        mode: Permission bits of a new file.

    Raises:
        UnsafePath: (E020) if ``name`` is a symbolic link or a special file.
        OSError: if it cannot be written.
    """
    _check_target(dir_fd, name, where)
    tmp = _write_tmp(name, data, durable=True, mode=mode, dir_fd=dir_fd)
    try:
        replace(tmp, name, dir_fd=dir_fd)
    except BaseException:
        _discard(tmp, dir_fd)
        raise
    fsync_dir(dir_fd)


def replace_atomic_under(root: Path, path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Durably replace ``path`` (below ``root``) with ``data``, creating missing directories.

    The directories are opened and created through descriptors (``open_dir_under``, each new
    one made durable), then ``replace_atomic_in``: nothing is written through a link, even
    one swapped in while this runs.

    Raises:
        UnsafePath: (E020) naming a link or a non-directory on the way, or ``path`` if it is
            a link or a special file.
        OSError: if it cannot be written.
    """
    fd = open_dir_under(root, path.parent, create=True)
    try:
        replace_atomic_in(fd, path.name, data, where=os.fspath(path), mode=mode)
    finally:
        os.close(fd)


def open_append_under(root: Path, path: Path, mode: int = 0o644) -> int:
    """``open_append`` for ``path`` below ``root``, its directories opened (and created) by descriptor.

    Args:
        root: The trusted directory (the store).
        path: The file to append to.
        mode: Permission bits of a new file.

    Returns:
        A descriptor open for appending (the caller closes it).

    Raises:
        UnsafePath: (E020) naming a link or a non-directory on the way, or ``path`` if it
            is a link or not a regular file.
        OSError: any other error of the operating system.
    """
    fd = open_dir_under(root, path.parent, create=True)
    try:
        return open_append_in(fd, path.name, where=os.fspath(path), mode=mode)
    finally:
        os.close(fd)


def open_append_in(dir_fd: int, name: str, *, where: str, mode: int = 0o644) -> int:
    """``open_append`` for the name ``name`` in the open directory ``dir_fd``.

    Args:
        dir_fd: The open directory.
        name: The file's name in it.
        where: The file's full path, as errors name it.
        mode: Permission bits of a new file.

    Returns:
        A descriptor open for appending (the caller closes it).

    Raises:
        UnsafePath: (E020) if ``name`` is a symbolic link or not a regular file.
        OSError: any other error of the operating system.
    """
    return _open_regular(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode,
                         dir_fd=dir_fd, shown=where)[0]


def unlink_under(root: Path, path: Path, *, durable: bool = False) -> bool:
    """Remove the file ``path`` below ``root`` through its directory's descriptor.

    A link at ``path`` is removed itself (its target is never touched); a link among the
    directories on the way is refused. True if a file was removed (False: it was missing).

    Args:
        root: The trusted directory (the store).
        path: The file to remove.
        durable: fsync the directory after the removal.

    Returns:
        True if a file was removed, False if there was none.

    Raises:
        UnsafePath: (E020) naming a link or a non-directory on the way.
        OSError: if it cannot be removed.
    """
    try:
        fd = open_dir_under(root, path.parent)
    except FileNotFoundError:
        return False
    try:
        try:
            unlink(path.name, dir_fd=fd)
        except FileNotFoundError:
            return False
        if durable:
            fsync_dir(fd)
        return True
    finally:
        os.close(fd)


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
    (use ``ensure_dir_under`` to check every component below a root).

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
