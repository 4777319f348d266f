"""Pointer files: accepted forms, refused forms, multi-head pointers after Git merges."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxstore import refs
from ctxstore.errors import RefNotFound

A = "a" * 64
B = "b" * 64
C = "c" * 64


@pytest.mark.parametrize("data", [A, A + "\n", A + "\r\n"])
def test_parse_pointer_accepts_hex_with_or_without_newline(data: str) -> None:
    ptr = refs.parse_pointer("refs/main", data.encode())
    assert ptr.heads == (bytes.fromhex(A),)
    assert not ptr.conflicted


@pytest.mark.parametrize("data", [
    "", "\n", "a" * 63, "a" * 65, A.upper(), "xyz", A + " \n", "\ufeff" + A, "\0" * 64,
    A + "\n" + "zz\n",
])
def test_parse_pointer_refuses_garbage_naming_the_file(data: str) -> None:
    with pytest.raises(RefNotFound) as err:
        refs.parse_pointer("refs/main", data.encode())
    assert err.value.code == "E005"
    assert "refs/main" in str(err.value)


def test_parse_pointer_refuses_huge_file() -> None:
    with pytest.raises(RefNotFound):
        refs.parse_pointer("STAGE", (A + "\n").encode() * 2000)


def test_parse_pointer_reads_union_merge_as_sorted_heads() -> None:
    ptr = refs.parse_pointer("refs/main", f"{B}\n{A}\n{B}\n".encode())
    assert ptr.heads == (bytes.fromhex(A), bytes.fromhex(B))
    assert ptr.conflicted


@pytest.mark.parametrize("style", ["merge", "diff3"])
def test_parse_pointer_reads_conflict_markers_as_both_sides(style: str) -> None:
    base = f"||||||| base\n{C}\n" if style == "diff3" else ""
    text = f"<<<<<<< HEAD\n{A}\n{base}=======\n{B}\n>>>>>>> side\n"
    ptr = refs.parse_pointer("refs/main", text.encode())
    # the base section of diff3 is ignored: a merge commit never has the base as a parent (GM-06)
    assert set(ptr.heads) == {bytes.fromhex(A), bytes.fromhex(B)}


@pytest.mark.parametrize("name", ["refs/../../x", "/etc/passwd", "refs/", "refs/a/../b",
                                  "refs/.hidden", "objects/ab", "refs/a b"])
def test_validate_ref_name_refuses_escapes(name: str) -> None:
    with pytest.raises(RefNotFound):
        refs.validate_ref_name(name)


@pytest.mark.parametrize("head,ok", [
    ("ref: refs/main\n", True), ("ref: refs/main", True), ("ref: refs/main\r\n", True),
    ("ref: refs/../../x\n", False), ("ref: /etc/passwd\n", False), (A + "\n", False),
    ("ref: refs/main\nextra\n", False),
])
def test_read_head_target(tmp_path: Path, head: str, ok: bool) -> None:
    (tmp_path / "HEAD").write_text(head)
    if ok:
        assert refs.read_head_target(tmp_path) == "refs/main"
    else:
        with pytest.raises(RefNotFound):
            refs.read_head_target(tmp_path)


def test_write_and_read_pointer(tmp_path: Path) -> None:
    oid = bytes.fromhex(A)
    refs.write_pointer(tmp_path, "refs/main", oid)
    assert (tmp_path / "refs" / "main").read_bytes() == (A + "\n").encode()
    assert refs.read_pointer(tmp_path, "refs/main").single == oid
    assert refs.read_pointer(tmp_path, "STAGE") is None
    assert not list(tmp_path.rglob("*.tmp"))


def test_read_pointer_directory_is_e005(tmp_path: Path) -> None:
    (tmp_path / "STAGE").mkdir()
    with pytest.raises(RefNotFound, match="directory"):
        refs.read_pointer(tmp_path, "STAGE")
