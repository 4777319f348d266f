"""I/O errors (RELIABILITY.md §2.3 IO-01, IO-02 in spirit).

The fault shim makes the k-th durable-I/O operation of ``ctx add`` / ``ctx commit`` fail
with EIO or ENOSPC (``err:*:k:<errno>:once``; for ``add`` also ``sticky``). For every k:

* the command exits non-zero with exactly one stderr line ``ctx: error[E0..]: ...`` and
  no traceback (I10);
* the store verifies, every acknowledged node is there, pointers not renamed are
  byte-identical, and the knowledge state is the one from before or from after (I3);
* a clean rerun of the command succeeds and verifies.

IO-02: a failed fsync is final: if the fsync of an object, or of the pointer's temp
file, fails (even once), the command fails and no pointer moves.
"""

from __future__ import annotations

import errno
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _crashlib import (
    POINTER_FILES,
    POINTERS,
    PointFailures,
    Template,
    build_templates,
    copy_store,
    ledger_problems,
    nodes_with_text,
    pointer_bytes,
    pointer_renames,
    read_trace,
    run_cli,
    scratch_dir,
    stage_kind,
    state,
    verify_errors,
)

pytestmark = pytest.mark.crash

WORKERS = int(os.environ.get("CTX_CRASH_WORKERS", "0")) or max(2, min(4, os.cpu_count() or 2))
TEXT = "a fact written while the disk fails"

COMMANDS = {
    "add": ("staged", ["add", "--type", "fact", TEXT]),
    "commit": ("staged", ["commit", "-m", "commit while the disk fails"]),
}


@pytest.fixture(scope="module")
def templates():
    with scratch_dir("ctx-io-tpl-") as root:
        yield build_templates(root)


def _count_ops(tpl: Template, args: list[str], root: Path) -> tuple[int, list[dict]]:
    ctx = copy_store(tpl.work, root / "ref")
    tfile = root / "ref-trace"
    res = run_cli(ctx, args, fault=f"count:{root / 'ref-count'};trace:{tfile}")
    assert res.returncode == 0, res.stderr
    return int((root / "ref-count").read_text()), read_trace(tfile)


def _one_error_line(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    probs = []
    if "Traceback" in stderr:
        probs.append("traceback on stderr")
    if len(lines) != 1 or not lines[0].startswith("ctx: error[E0"):
        probs.append(f"stderr is not one `ctx: error[E0..]` line: {stderr.strip()[:300]!r}")
    return probs


def _check(name: str, tpl: Template, ctx: Path, res, trace: list[dict]) -> list[str]:  # type: ignore[no-untyped-def]
    if res.returncode == 0:
        return ["the command succeeded although an operation failed"]
    probs = _one_error_line(res.stderr)
    errs = verify_errors(ctx)
    if errs:
        return probs + [f"verify: {errs[:3]}"]
    moved = pointer_renames(trace)
    now = pointer_bytes(ctx)
    for p in POINTERS:
        if p not in moved and now[p] != tpl.pointers[p]:
            probs.append(f"{p} changed although its rename never completed")
    probs += ledger_problems(ctx, tpl.ledger)
    if name == "add":
        found = [n for n, (_, t) in nodes_with_text(ctx).items() if t == TEXT]
        if len(found) != (1 if "STAGE" in moved else 0):
            probs.append(f"failed add left {len(found)} copies of its node (moved: {moved})")
    else:
        if state(ctx).digest() != tpl.digest:
            probs.append("the knowledge state changed")
        want = "commit" if "STAGE" in moved else "work"
        if stage_kind(ctx) != want:
            probs.append(f"STAGE names a {stage_kind(ctx)}, expected a {want}")
    return probs


def _rerun(name: str, tpl: Template, ctx: Path, args: list[str]) -> list[str]:
    res = run_cli(ctx, args)
    if res.returncode != 0:
        return [f"clean rerun failed: {res.stderr.strip()[:300]}"]
    errs = verify_errors(ctx)
    if errs:
        return [f"verify after rerun: {errs[:3]}"]
    probs = ledger_problems(ctx, tpl.ledger)
    if name == "add":
        nid = res.stdout.strip()
        if nodes_with_text(ctx).get(nid, ("", ""))[1] != TEXT:
            probs.append("the rerun's node is not there")
    elif stage_kind(ctx) != "commit":
        probs.append("after the rerun something is still staged")
    return probs


def _in_derived_refresh(trace: list[dict]) -> bool:
    """Whether the injected error hit the SCC view's refresh, which ``ctx commit`` runs after the
    commit is durable (``DERIVED/`` is derived and rebuildable: a failure there is a notice)."""
    for r in trace:
        if (r.get("path") or "").startswith("DERIVED/"):
            return True
        if r.get("injected"):
            return False
    return False


def _check_derived(ctx: Path, res) -> list[str]:  # type: ignore[no-untyped-def]
    """The commit stands; one notice line says the view was not rebuilt; the store verifies."""
    probs = []
    if res.returncode != 0:
        probs.append(f"a failed SCC view refresh failed the commit: {res.stderr.strip()[:200]}")
    lines = res.stderr.splitlines()
    if len(lines) != 1 or not lines[0].startswith("ctx: SCC view not rebuilt"):
        probs.append(f"stderr is not one SCC notice line: {res.stderr.strip()[:300]!r}")
    errs = verify_errors(ctx)
    if errs:
        probs.append(f"verify: {errs[:3]}")
    if stage_kind(ctx) != "commit":
        probs.append("the commit did not land")
    return probs


def _point(name: str, tpl: Template, args: list[str], root: Path, k: int, code: str, how: str
           ) -> list[str]:
    pdir = root / f"{k}-{code}-{how}"
    ctx = copy_store(tpl.work, pdir)
    tfile = root / f"{k}-{code}-{how}.trace"
    res = run_cli(ctx, args, fault=f"err:*:{k}:{code}:{how};trace:{tfile}")
    trace = read_trace(tfile)
    injected = [r for r in trace if r.get("injected")]
    if not injected:
        return [] if res.returncode == 0 else [f"no injection but exit {res.returncode}"]
    try:
        if _in_derived_refresh(trace):
            return _check_derived(ctx, res)
        probs = _check(name, tpl, ctx, res, trace)
        if res.returncode != 0 and not probs:
            want = errno.errorcode[getattr(errno, code)]
            if "E017" in res.stderr and want not in res.stderr and os.strerror(getattr(errno, code)) \
                    not in res.stderr:
                probs.append(f"the error does not name the cause {want}: {res.stderr.strip()}")
        return probs or _rerun(name, tpl, ctx, args)
    except Exception as exc:
        return [f"check raised {type(exc).__name__}: {exc}"]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_io_error_at_every_operation(name: str, templates: dict[str, Template]) -> None:
    tpl_name, args = COMMANDS[name]
    tpl = templates[tpl_name]
    modes = ["once", "sticky"] if name == "add" else ["once"]
    with scratch_dir(f"ctx-io-{name}-") as root:
        n, _ = _count_ops(tpl, args, root)
        points = [(k, code, how) for k in range(1, n + 1) for code in ("EIO", "ENOSPC")
                  for how in modes]
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(lambda p: _point(name, tpl, args, root, *p), points))
    failures = PointFailures()
    for (k, code, how), probs in zip(points, results, strict=True):
        failures.add(f"{name} err:*:{k}:{code}:{how}", probs)
    print(f"[io] {name}: N={n}, {len(points)} injected errors")
    failures.assert_none(len(points))


# -- IO-02: a failed fsync is final --------------------------------------------------------------

def _fsync_index(trace: list[dict], pred) -> int:  # type: ignore[no-untyped-def]
    fsyncs = [r for r in trace if r["op"] == "fsync_file"]
    for i, r in enumerate(fsyncs, 1):
        if pred(r.get("path") or ""):
            return i
    raise AssertionError(f"no matching fsync in {[r.get('path') for r in fsyncs]}")


@pytest.mark.parametrize("target", ["pointer-temp", "first-object"])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_failed_fsync_is_final(name: str, target: str, templates: dict[str, Template]) -> None:
    tpl_name, args = COMMANDS[name]
    tpl = templates[tpl_name]
    with scratch_dir("ctx-io02-") as root:
        _, ref_trace = _count_ops(tpl, args, root)
        if target == "pointer-temp":
            n = _fsync_index(ref_trace, lambda p: p.endswith(".tmp") and
                             p.split(".")[0] in (POINTER_FILES["STAGE"], "refs/main"))
        else:
            n = _fsync_index(ref_trace, lambda p: p.startswith(("objects/", "local/work/objects/")))
        ctx = copy_store(tpl.work, root / "w")
        before = pointer_bytes(ctx)
        res = run_cli(ctx, args, fault=f"err:fsync_file:{n}:EIO:once")
        assert res.returncode != 0, "a failed fsync was ignored"
        assert not _one_error_line(res.stderr), res.stderr
        assert "E017" in res.stderr, res.stderr
        # No pointer moved: the first pointer written is the one whose fsync failed,
        # or the failure came before any pointer.
        assert pointer_bytes(ctx) == before
        leftovers = [p for p in ctx.rglob("*.tmp") if not p.name.startswith("deadbeef")]
        assert not [p for p in leftovers if p.name.split(".")[0] in ("STAGE", "main")], leftovers
        assert not verify_errors(ctx)
        assert state(ctx).digest() == tpl.digest
        rerun = run_cli(ctx, args)
        assert rerun.returncode == 0, rerun.stderr
        assert not verify_errors(ctx)
