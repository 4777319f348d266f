"""fsio.Dir.replace_atomic killed or failing at each step, in a child with the fault shim.

A crash before the rename leaves the old file, after it the new one, an I/O error the old file and
no temp file; the trace shows the durable order (new directories fsynced into their parents,
then temp, write, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.crash._crashlib import read_trace, run_python
from tests.storage.test_fsio_dirfd import make_tree


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A store-like root ``.ctx`` with ``a/b/c/file``, and an ``OUT`` directory beside it."""
    return make_tree(tmp_path)


def _replace_code(root: Path, rel: str, data: bytes) -> str:
    return ("from pathlib import Path\nfrom ctxstore import fsio\n"
            f"root = Path({str(root)!r})\n"
            f"with fsio.open_dir(root) as d:\n    d.replace_atomic(root / {rel!r}, {data!r})\n"
            "print('done')\n")


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
