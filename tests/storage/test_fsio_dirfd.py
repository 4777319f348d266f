"""fsio I/O through directory descriptors (PS-10): the ``fsio.Dir`` handle.

Each directory below the trusted root is opened ``O_NOFOLLOW`` from its parent's descriptor:
a link (or a file, or a FIFO) at any level is refused with E020 naming it, and nothing is
written where it leads. Missing directories are created (each made durable in its parent);
a crash or an I/O error between the temp file and the rename leaves the old file
(tests/crash/test_fsio_dir_faults.py). The race itself is tests/test_containment_swap_race.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import patch_fsio

from ctxstore import fsio
from ctxstore.errors import UnsafePath


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A store-like root ``.ctx`` with ``a/b/c/file``, and an ``OUT`` directory beside it."""
    return make_tree(tmp_path)


def make_tree(tmp_path: Path) -> tuple[Path, Path]:
    """The ``tree`` fixture's folders (tests/crash/test_fsio_dir_faults.py uses them too)."""
    root = tmp_path / "work" / ".ctx"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "file").write_bytes(b"old\n")
    out = tmp_path / "OUT"
    (out / "b" / "c").mkdir(parents=True)
    (out / "b" / "c" / "file").write_bytes(b"outside\n")
    (out / "c").mkdir()
    (out / "file").write_bytes(b"outside\n")
    return root, out


def _state(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"")
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("level", ["a", "a/b", "a/b/c"])
def test_replace_atomic_refuses_a_link_at_each_level(tree: tuple[Path, Path], level: str) -> None:
    root, out = tree
    linked = root / level
    os.rename(linked, linked.with_name("real"))
    linked.symlink_to(out, target_is_directory=True)  # OUT holds b/c/file, c/file and file
    before = _state(out)
    with pytest.raises(UnsafePath) as err:
        with fsio.open_dir(root) as d:
            d.replace_atomic(root / "a/b/c/file", b"new\n")
    assert str(err.value).startswith(f"E020: refusing {linked}: is a symbolic link")
    assert _state(out) == before
    with pytest.raises(UnsafePath, match="is a symbolic link"):
        with fsio.open_dir(root) as d:
            d.open_append(root / "a/b/c/file")
    with pytest.raises(UnsafePath, match="is a symbolic link"):
        with fsio.open_dir(root) as d:
            d.unlink(root / "a/b/c/file")
    assert _state(out) == before


def test_replace_atomic_refuses_a_linked_file_and_special_files(tree: tuple[Path, Path]) -> None:
    root, out = tree
    path = root / "a/b/c/file"
    path.unlink()
    path.symlink_to(out / "file")
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a symbolic link"):
        with fsio.open_dir(root) as d:
            d.replace_atomic(path, b"new\n")
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a symbolic link"):
        with fsio.open_dir(root) as d:
            d.open_append(path)
    assert (out / "file").read_bytes() == b"outside\n"
    path.unlink()
    os.mkfifo(path)  # never opened, so never waited on
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a FIFO"):
        with fsio.open_dir(root) as d:
            d.replace_atomic(path, b"new\n")
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a FIFO, not a regular file"):
        with fsio.open_dir(root) as d:
            d.open_append(path)


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_file_where_a_directory_belongs_is_refused(tree: tuple[Path, Path], kind: str) -> None:
    root, _ = tree
    folder = root / "a" / "b"
    os.rename(folder, root / "a" / "real")
    if kind == "fifo":
        os.mkfifo(folder)
    else:
        folder.write_bytes(b"x")
    what = "a FIFO" if kind == "fifo" else "a regular file"
    with pytest.raises(UnsafePath, match=f"refusing {folder}: is {what}, not a directory"):
        with fsio.open_dir(root) as d:
            d.replace_atomic(folder / "c" / "file", b"new\n")


def test_outside_the_root_or_dotdot_is_refused(tree: tuple[Path, Path]) -> None:
    root, out = tree
    with pytest.raises(UnsafePath, match="is outside"):
        with fsio.open_dir(root) as d:
            d.replace_atomic(out / "file", b"x")
    with pytest.raises(UnsafePath, match=r"leads out of its directory \(\.\.\)"):
        with fsio.open_dir(root) as d:
            d.replace_atomic(root / "a" / ".." / ".." / "x", b"x")
    assert (out / "file").read_bytes() == b"outside\n"


def test_missing_directories_are_created_and_files_replaced(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    with fsio.open_dir(root) as d:
        d.replace_atomic(root / "x" / "y" / "z", b"one\n", mode=0o600)
    assert (root / "x" / "y" / "z").read_bytes() == b"one\n"
    assert (root / "x" / "y" / "z").stat().st_mode & 0o777 == 0o600
    with fsio.open_dir(root) as d:
        d.replace_atomic(root / "a/b/c/file", b"new\n")
    assert (root / "a/b/c/file").read_bytes() == b"new\n"
    with fsio.open_dir(root) as d:
        fd = d.open_append(root / "n" / "log")
    try:
        fsio.write_all(fd, b"line\n")
    finally:
        os.close(fd)
    with fsio.open_dir(root) as d:
        fd = d.open_append("n/log")  # a path relative to the handle works the same
    try:
        fsio.write_all(fd, b"more\n")
    finally:
        os.close(fd)
    assert (root / "n" / "log").read_bytes() == b"line\nmore\n"
    assert sorted(p.name for p in (root / "a/b/c").iterdir()) == ["file"]  # no temp left


def test_unlink_removes_a_link_itself_never_its_target(tree: tuple[Path, Path]) -> None:
    root, out = tree
    link = root / "a" / "b" / "c" / "link"
    link.symlink_to(out / "file")
    with fsio.open_dir(root) as d:
        assert d.unlink(link, durable=True)
        assert not os.path.lexists(link) and (out / "file").read_bytes() == b"outside\n"
        assert not d.unlink(link)
        assert not d.unlink(root / "missing" / "dir" / "file")


def test_open_dir_without_create_reports_a_missing_directory(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    with pytest.raises(FileNotFoundError):
        fsio.open_dir(root, root / "nope" / "deeper")
    assert not (root / "nope").exists()
    with fsio.open_dir(root, root) as same:  # the root itself: opened as named
        assert same.path == root and same.fileno() >= 0
    assert same.fileno() == -1  # closed by the with block
    with fsio.open_dir(root) as d, pytest.raises(FileNotFoundError):
        d.dir("nope")


# -- crashes and faults (child processes with the fault shim) ----------------------------------


def test_ensure_dir_never_creates_through_a_parent_swapped_meanwhile(
        tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent turns into a link just before the new directory is made: it is made in the
    directory that was checked (held open), never where the link leads."""
    root, out = tree
    before = _state(out)
    real_mkdir = fsio.mkdir

    def swap_then_mkdir(path: fsio.StrPath, *, dir_fd: int | None = None) -> None:
        if not (root / "a.real").exists():
            (root / "a").rename(root / "a.real")
            (root / "a").symlink_to(out)
        real_mkdir(path, dir_fd=dir_fd)

    patch_fsio(monkeypatch, "mkdir", swap_then_mkdir)
    with fsio.open_dir(root) as d:
        assert d.ensure_dir(root / "a" / "new") is True
    assert _state(out) == before  # nothing made where the link leads
    assert (root / "a.real" / "new").is_dir()
    monkeypatch.undo()
    # the link now in place is refused, naming it
    with pytest.raises(UnsafePath, match="is a symbolic link"):
        with fsio.open_dir(root) as d:
            d.ensure_dir(root / "a" / "other")
    assert _state(out) == before


# -- the handle's reads, directories and the user's own links ----------------------------------
def test_read_goes_through_descriptors_and_refuses_links_and_special_files(
        tree: tuple[Path, Path]) -> None:
    root, out = tree
    with fsio.open_dir(root) as d:
        assert d.read("a/b/c/file", 100) == b"old\n"
        assert d.read(root / "a/b/c/file", 2) == b"old"  # limit + 1 bytes, no more
        with pytest.raises(FileNotFoundError):
            d.read("a/b/missing/file", 100)
    (root / "a" / "b" / "c" / "link").symlink_to(out / "file")
    os.mkfifo(root / "a" / "fifo")  # never waited on: opened O_NONBLOCK, then refused
    with fsio.open_dir(root) as d:
        with pytest.raises(UnsafePath, match="is a symbolic link"):
            d.read("a/b/c/link", 100)
        with pytest.raises(UnsafePath, match="is a FIFO, not a regular file"):
            d.read("a/fifo", 100)
    os.rename(root / "a" / "b", root / "a" / "b.real")
    (root / "a" / "b").symlink_to(out, target_is_directory=True)
    with fsio.open_dir(root) as d, pytest.raises(UnsafePath, match=f"refusing {root / 'a' / 'b'}: "
                                                 "is a symbolic link"):
        d.read("a/b/c/file", 100)


def test_follow_links_reads_and_writes_through_linked_directories_never_a_linked_file(
        tmp_path: Path) -> None:
    """The user's own configuration: a folder linked into a dotfiles repository is followed."""
    home, dotfiles = tmp_path / "home", tmp_path / "dotfiles"
    (dotfiles / "claude").mkdir(parents=True)
    (dotfiles / "settings.json").write_bytes(b"{}\n")
    home.mkdir()
    (home / ".claude").symlink_to(dotfiles / "claude", target_is_directory=True)
    (dotfiles / "claude" / "settings.json").symlink_to(dotfiles / "settings.json")
    with fsio.open_dir(home, follow_links=True) as d:
        assert d.read(".claude/settings.json", 100) == b"{}\n"  # a linked file is read through
        d.replace_atomic(".claude/skills/ctx/SKILL.md", b"skill\n")
        with pytest.raises(UnsafePath, match="is a symbolic link"):
            d.replace_atomic(".claude/settings.json", b"[]\n")  # a write never replaces a link
    assert (dotfiles / "claude" / "skills" / "ctx" / "SKILL.md").read_bytes() == b"skill\n"
    assert (dotfiles / "settings.json").read_bytes() == b"{}\n"
    (home / "gone").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    with fsio.open_dir(home, follow_links=True) as d, \
            pytest.raises(UnsafePath, match="is a symbolic link to a missing folder"):
        d.replace_atomic("gone/file", b"x")
    assert not (tmp_path / "nowhere").exists()
    with fsio.open_dir(home) as d, pytest.raises(UnsafePath, match="is a symbolic link"):
        d.read(".claude/settings.json", 100)  # without follow_links the same link is refused


def test_dir_and_rmdir_stay_below_the_handle(tree: tuple[Path, Path]) -> None:
    root, out = tree
    with fsio.open_dir(root) as d:
        with d.dir("a/b") as sub:
            assert sub.path == root / "a" / "b"
            assert sub.read("c/file", 100) == b"old\n"
        with d.dir("new/deep", create=True) as made:
            assert made.path.is_dir()
        d.rmdir("new/deep")
        assert not (root / "new" / "deep").exists() and (root / "new").is_dir()
        with pytest.raises(OSError):
            d.rmdir("a/b")  # not empty: left as it is
        with pytest.raises(UnsafePath, match=r"leads out of its directory \(\.\.\)"):
            d.dir("a/../../OUT")
    (root / "x").symlink_to(out / "c", target_is_directory=True)
    with fsio.open_dir(root) as d, pytest.raises(UnsafePath, match="is a symbolic link"):
        d.rmdir("x/anything")
    assert (out / "c").is_dir()
