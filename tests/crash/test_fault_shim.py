"""The fault shim itself (tests/_shim/sitecustomize.py): its modes do what they say."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from _crashlib import (
    POINTER_FILES,
    build_templates,
    child_env,
    copy_store,
    pointer_bytes,
    read_trace,
    run_cli,
    run_cli_spawned,
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


# -- the fork server (_forkserver.py) against a fresh process ---------------------------------------

def _ops(trace: list[dict], work: Path) -> list[tuple[str, str, str]]:
    """The operations of a trace, in a form two runs on two copies of a store share.

    Object names (hashes of content that holds new node ids and times) and the shard
    directories made for them differ from run to run; so does the scratch directory.
    """
    out = []
    for r in trace:
        if r["op"] == "stdout":
            continue
        path, dst = (re.sub(r"objects/[0-9a-f]{2}(/[0-9a-f]+)?", "objects/S/O",
                            re.sub(r"\.[0-9a-f]{6,}\.tmp$", ".T.tmp", str(r.get(k)).replace(str(work), "W")))
                     for k in ("path", "dst"))
        if r["op"] in ("mkdir", "fsync_dir") and path.endswith("objects/S/O"):
            continue  # a new shard directory or not: it depends on the object's name
        out.append((r["op"], path, dst))
    return sorted(out)


@pytest.fixture(scope="module")
def shim_templates():  # type: ignore[no-untyped-def]
    with scratch_dir("ctx-shim-tpl-") as root:
        yield build_templates(root)


@pytest.mark.parametrize(("template", "args"), [
    (None, ["init", "--no-git"]),
    ("staged", ["add", "--type", "fact", "forked or not"]),
    ("staged", ["commit", "-m", "forked or not"]),
    ("staged", ["stage", "compact", "-m", "forked or not"]),
    ("garbage", ["gc", "--keep-days", "0"]),
    ("legacy", ["upgrade"]),
])
def test_forked_child_does_what_a_fresh_process_does(shim_templates, template: str | None,  # type: ignore[no-untyped-def]
                                                     args: list[str]) -> None:
    """A child of the fork server runs exactly the durable operations of ``python -m ctxstore.cli``
    (same operations on the same files, same exit code and output), and a kill in it is a
    ``SIGKILL`` at the named operation."""
    with scratch_dir("ctx-shim-fork-") as root:
        runs = {}
        for mode in ("spawned", "forked"):
            work = root / mode
            if template is None:
                (work / "w").mkdir(parents=True)
                ctx = work / "w" / ".ctx"
            else:
                ctx = copy_store(shim_templates[template].work, work / "w")
            fault = f"count:{work / 'n'};trace:{work / 't'}"
            if mode == "spawned":
                res = run_cli_spawned(["--ctx-dir", str(ctx), *args], cwd=ctx.parent,
                                      env=child_env(fault))
            else:
                res = run_cli(ctx, args, fault=fault)
            assert res.returncode == 0, res.stderr
            trace = read_trace(work / "t")
            ops = _ops(trace, work)
            assert int((work / "n").read_text()) == len([r for r in trace if r["op"] != "stdout"])
            runs[mode] = (ops, res.stderr, len(res.stdout.splitlines()))
        assert runs["forked"] == runs["spawned"]
        # killed at its 5th operation: by SIGKILL, with nothing run after it
        ctx = copy_store(shim_templates[template].work, root / "k" / "w") if template else None
        if ctx is None:
            (root / "k" / "w").mkdir(parents=True)
            ctx = root / "k" / "w" / ".ctx"
        res = run_cli(ctx, args, fault=f"kill:*:5:after;trace:{root / 'kt'}")
        assert res.returncode == -signal.SIGKILL and res.stdout == ""
        trace = read_trace(root / "kt")
        assert [r["seq"] for r in trace] == [1, 2, 3, 4, 5] + [5] * (len(trace) - 5)
