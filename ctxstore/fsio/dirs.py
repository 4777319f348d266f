"""The directory handle ``Dir``: I/O through directory descriptors (PS-10).

Every directory below a trusted root is opened ``O_NOFOLLOW`` relative to its parent's
descriptor, and files are created, renamed, read and removed relative to the last one, so a
directory swapped for a symlink between a check and the write is never followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ctxstore.errors import UnsafePath
from ctxstore.fsio import core as _fsio
from ctxstore.fsio.core import _DIR_FLAGS, _DIR_FOLLOW_FLAGS, StrPath

__all__ = ["Dir", "open_dir"]

# A check by name (lstat) followed by a write by name loses a race: between the two, another
# process can swap a checked directory for a symlink out of the store, and the write follows
# it. A ``Dir`` holds an open directory; every directory below it is opened O_NOFOLLOW relative
# to the descriptor of its parent, and files are created, renamed, read and removed relative
# to the last descriptor: a swap after an open changes nothing (the descriptor still names the
# directory that was checked), a swap before it is refused with E020.


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
        else f"is {_fsio.file_kind(mode)}, not a directory"
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
        _fsio.mkdir(name, dir_fd=dir_fd)
    except FileExistsError:
        pass  # made by someone else meanwhile: opened (and checked) below like any other
    else:
        if durable:
            _fsio.fsync_dir(dir_fd)
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
        raise UnsafePath(where, detail=f"is {_fsio.file_kind(mode)}")


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
            return _fsio._names_below(self.path, path)
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
            file_fd, st = _fsio._open_regular(name, os.O_RDONLY, dir_fd=fd, shown=where,
                                        follow=self.follow_links)
        finally:
            self._done(fd)
        try:
            return _fsio._read_bounded(file_fd, st, limit)
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
            tmp = _fsio._write_tmp(name, data, durable=True, mode=mode, dir_fd=fd)
            try:
                _fsio.replace(tmp, name, dir_fd=fd)
            except BaseException:
                _fsio._discard(tmp, fd)
                raise
            _fsio.fsync_dir(fd)
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
            tmp = _fsio._write_tmp(name, data, durable=False, mode=mode, dir_fd=fd)
            try:
                _fsio.replace(tmp, name, dir_fd=fd)
            except BaseException:
                _fsio._discard(tmp, fd)
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
            return _fsio._open_regular(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode,
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
                _fsio.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                return False
            if durable:
                _fsio.fsync_dir(fd)
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
            _fsio.rmdir(name, dir_fd=fd)
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
