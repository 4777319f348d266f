"""fsio writes through directory descriptors (PS-10): ``replace_atomic_under`` and its kin.

Each directory below the trusted root is opened ``O_NOFOLLOW`` from its parent's descriptor:
a link (or a file, or a FIFO) at any level is refused with E020 naming it, and nothing is
written where it leads. Missing directories are created (each made durable in its parent);
a crash or an I/O error between the temp file and the rename leaves the old file. The
race itself is tests/test_ps10_swap_race.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxstore import fsio
from ctxstore.errors import UnsafePath
from tests.crash._crashlib import read_trace, run_python


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A store-like root ``.ctx`` with ``a/b/c/file``, and an ``OUT`` directory beside it."""
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
def test_replace_atomic_under_refuses_a_link_at_each_level(tree: tuple[Path, Path], level: str) -> None:
    root, out = tree
    linked = root / level
    os.rename(linked, linked.with_name("real"))
    linked.symlink_to(out, target_is_directory=True)  # OUT holds b/c/file, c/file and file
    before = _state(out)
    with pytest.raises(UnsafePath) as err:
        fsio.replace_atomic_under(root, root / "a/b/c/file", b"new\n")
    assert str(err.value).startswith(f"E020: refusing {linked}: is a symbolic link")
    assert _state(out) == before
    with pytest.raises(UnsafePath, match="is a symbolic link"):
        fsio.open_append_under(root, root / "a/b/c/file")
    with pytest.raises(UnsafePath, match="is a symbolic link"):
        fsio.unlink_under(root, root / "a/b/c/file")
    assert _state(out) == before


def test_replace_atomic_under_refuses_a_linked_file_and_special_files(tree: tuple[Path, Path]) -> None:
    root, out = tree
    path = root / "a/b/c/file"
    path.unlink()
    path.symlink_to(out / "file")
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a symbolic link"):
        fsio.replace_atomic_under(root, path, b"new\n")
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a symbolic link"):
        fsio.open_append_under(root, path)
    assert (out / "file").read_bytes() == b"outside\n"
    path.unlink()
    os.mkfifo(path)  # never opened, so never waited on
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a FIFO"):
        fsio.replace_atomic_under(root, path, b"new\n")
    with pytest.raises(UnsafePath, match=f"refusing {path}: is a FIFO, not a regular file"):
        fsio.open_append_under(root, path)


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
        fsio.replace_atomic_under(root, folder / "c" / "file", b"new\n")


def test_outside_the_root_or_dotdot_is_refused(tree: tuple[Path, Path]) -> None:
    root, out = tree
    with pytest.raises(UnsafePath, match="is outside"):
        fsio.replace_atomic_under(root, out / "file", b"x")
    with pytest.raises(UnsafePath, match=r"leads out of its directory \(\.\.\)"):
        fsio.replace_atomic_under(root, root / "a" / ".." / ".." / "x", b"x")
    assert (out / "file").read_bytes() == b"outside\n"


def test_missing_directories_are_created_and_files_replaced(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    fsio.replace_atomic_under(root, root / "x" / "y" / "z", b"one\n", mode=0o600)
    assert (root / "x" / "y" / "z").read_bytes() == b"one\n"
    assert (root / "x" / "y" / "z").stat().st_mode & 0o777 == 0o600
    fsio.replace_atomic_under(root, root / "a/b/c/file", b"new\n")
    assert (root / "a/b/c/file").read_bytes() == b"new\n"
    fd = fsio.open_append_under(root, root / "n" / "log")
    try:
        fsio.write_all(fd, b"line\n")
    finally:
        os.close(fd)
    fd = fsio.open_append_under(root, root / "n" / "log")
    try:
        fsio.write_all(fd, b"more\n")
    finally:
        os.close(fd)
    assert (root / "n" / "log").read_bytes() == b"line\nmore\n"
    assert sorted(p.name for p in (root / "a/b/c").iterdir()) == ["file"]  # no temp left


def test_unlink_under_removes_a_link_itself_never_its_target(tree: tuple[Path, Path]) -> None:
    root, out = tree
    link = root / "a" / "b" / "c" / "link"
    link.symlink_to(out / "file")
    assert fsio.unlink_under(root, link, durable=True)
    assert not os.path.lexists(link) and (out / "file").read_bytes() == b"outside\n"
    assert not fsio.unlink_under(root, link)
    assert not fsio.unlink_under(root, root / "missing" / "dir" / "file")


def test_open_dir_under_without_create_reports_a_missing_directory(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    with pytest.raises(FileNotFoundError):
        fsio.open_dir_under(root, root / "nope" / "deeper")
    assert not (root / "nope").exists()
    fd = fsio.open_dir_under(root, root)  # the root itself: opened as named
    os.close(fd)


# -- crashes and faults (child processes with the fault shim) ----------------------------------
def _replace_code(root: Path, rel: str, data: bytes) -> str:
    return ("from pathlib import Path\nfrom ctxstore import fsio\n"
            f"root = Path({str(root)!r})\n"
            f"fsio.replace_atomic_under(root, root / {rel!r}, {data!r})\nprint('done')\n")


@pytest.mark.parametrize("fault", ["kill:replace:1:before", "kill:fsync_file:1:after",
                                   "kill:write_all:1:after", "kill:open_excl:1:after"])
def test_a_crash_before_the_rename_leaves_the_old_file(tree: tuple[Path, Path], fault: str) -> None:
    root, _ = tree
    res = run_python(_replace_code(root, "a/b/c/file", b"new\n"), fault=fault)
    assert res.returncode == -9 and "done" not in res.stdout
    assert (root / "a/b/c/file").read_bytes() == b"old\n"


def test_a_crash_after_the_rename_leaves_the_new_file(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    res = run_python(_replace_code(root, "a/b/c/file", b"new\n"), fault="kill:replace:1:after")
    assert res.returncode == -9
    assert (root / "a/b/c/file").read_bytes() == b"new\n"
    assert sorted(p.name for p in (root / "a/b/c").iterdir()) == ["file"]


@pytest.mark.parametrize("op", ["write_all", "fsync_file", "replace"])
def test_an_io_error_leaves_the_old_file_and_no_temp(tree: tuple[Path, Path], op: str) -> None:
    root, _ = tree
    res = run_python(_replace_code(root, "a/b/c/file", b"new\n"), fault=f"err:{op}:1:EIO:once")
    assert res.returncode == 1 and "OSError" in res.stderr and "done" not in res.stdout
    assert (root / "a/b/c/file").read_bytes() == b"old\n"
    assert sorted(p.name for p in (root / "a/b/c").iterdir()) == ["file"]


def test_durable_order_traced_with_paths(tree: tuple[Path, Path], tmp_path: Path) -> None:
    """New directories fsynced into their parents, then temp, write, fsync, rename, fsync dir."""
    root, _ = tree
    tfile = tmp_path / "trace"
    res = run_python(_replace_code(root, "x/y/file", b"new\n"), fault=f"trace:{tfile}")
    assert res.stdout.strip() == "done", res.stderr
    ops = [(r["op"], r.get("path"), r.get("dst")) for r in read_trace(tfile) if r["op"] != "stdout"]
    tmp = ops[4][1]
    assert tmp.startswith("x/y/file.") and tmp.endswith(".tmp"), ops
    assert ops == [("mkdir", "x", None), ("fsync_dir", ".", None),
                   ("mkdir", "x/y", None), ("fsync_dir", "x", None),
                   ("open_excl", tmp, None), ("write_all", tmp, None), ("fsync_file", tmp, None),
                   ("replace", tmp, "x/y/file"), ("fsync_dir", "x/y", None)], json.dumps(ops)


def test_ensure_dir_under_never_creates_through_a_parent_swapped_meanwhile(
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

    monkeypatch.setattr(fsio, "mkdir", swap_then_mkdir)
    assert fsio.ensure_dir_under(root, root / "a" / "new") is True
    assert _state(out) == before  # nothing made where the link leads
    assert (root / "a.real" / "new").is_dir()
    monkeypatch.undo()
    # the link now in place is refused, naming it
    with pytest.raises(UnsafePath, match="is a symbolic link"):
        fsio.ensure_dir_under(root, root / "a" / "other")
    assert _state(out) == before
