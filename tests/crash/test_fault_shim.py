"""The fault shim itself (tests/_shim/sitecustomize.py): its modes do what they say."""

from __future__ import annotations

import signal

import pytest
from _crashlib import (
    POINTER_FILES,
    copy_store,
    pointer_bytes,
    read_trace,
    run_cli,
    run_python,
    scratch_dir,
)

pytestmark = pytest.mark.crash


@pytest.fixture
def work(store):  # type: ignore[no-untyped-def]
    with scratch_dir("ctx-shim-") as root:
        yield copy_store(store.root.parent, root / "w")


def test_count_matches_trace(work) -> None:  # type: ignore[no-untyped-def]
    root = work.parent.parent
    res = run_cli(work, ["add", "--type", "fact", "counted"],
                  fault=f"count:{root / 'n'};trace:{root / 't'}")
    assert res.returncode == 0, res.stderr
    ops = [r for r in read_trace(root / "t") if r["op"] != "stdout"]
    assert int((root / "n").read_text()) == len(ops) > 5
    assert {r["op"] for r in ops} >= {"open_excl", "write_all", "replace", "fsync_file", "fsync_dir"}
    assert read_trace(root / "t")[-1]["op"] == "stdout"


@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_before_or_after_the_pointer_rename(work, when: str) -> None:  # type: ignore[no-untyped-def]
    before = pointer_bytes(work)["STAGE"]
    # the only `replace` of STAGE is the last replace of an add into an open session
    trace_file = work.parent.parent / "t"
    run_cli(work, ["add", "--type", "fact", "probe"], fault=f"trace:{trace_file}")
    renames = [r for r in read_trace(trace_file) if r["op"] == "replace"]
    n = len(renames)
    assert renames[-1]["dst"] == POINTER_FILES["STAGE"]
    stage = pointer_bytes(work)["STAGE"]
    assert stage != before
    res = run_cli(work, ["add", "--type", "fact", "killed"], fault=f"kill:replace:{n}:{when}")
    assert res.returncode == -signal.SIGKILL
    assert res.stdout == ""
    after = pointer_bytes(work)["STAGE"]
    assert (after == stage) == (when == "before")


@pytest.mark.parametrize("code", ["ENOSPC", "28"])
def test_err_once_names_errno(work, code: str) -> None:  # type: ignore[no-untyped-def]
    res = run_cli(work, ["add", "--type", "fact", "x"], fault=f"err:write_all:1:{code}:once")
    assert res.returncode == 1
    assert res.stderr.startswith("ctx: error[E017]") and "No space left on device" in res.stderr


def test_err_sticky_keeps_failing(work) -> None:  # type: ignore[no-untyped-def]
    root = work.parent.parent
    code = ("from ctxstore import fsio\n"
            "import os\n"
            "fails = 0\n"
            "for i in range(3):\n"
            "    try:\n"
            f"        fsio.mkdir(__import__('pathlib').Path({str(root)!r}) / f'd{{i}}')\n"
            "    except OSError as e:\n"
            "        fails += 1\n"
            "print(fails)\n")
    assert run_python(code, fault="err:mkdir:2:EIO:sticky").stdout.strip() == "2"
    assert run_python(code.replace("d{i}", "e{i}"), fault="err:mkdir:2:EIO:once").stdout.strip() == "1"


def test_no_fault_no_shim(work) -> None:  # type: ignore[no-untyped-def]
    res = run_python("from ctxstore import fsio; print(hasattr(fsio.replace, '__ctx_fault_shim__'))")
    assert res.stdout.strip() == "False"
    res = run_python("from ctxstore import fsio; print(hasattr(fsio.replace, '__ctx_fault_shim__'))",
                     fault="count:/dev/null")
    assert res.stdout.strip() == "True"


def test_unknown_mode_is_refused() -> None:
    res = run_python("print('ran')", fault="explode:now")
    assert res.returncode != 0 and "unknown mode" in res.stderr
