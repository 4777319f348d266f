"""``ctx gc`` pruning an older ctx's code index, killed before and after each durable operation.

RELIABILITY.md CR-01 for the prune (issue 30): the list under ``.ctx/pruned/`` is written
(temp file, fsync, rename, fsync of the folder) before the first object is deleted. Killed
at any point, between writing the list and deleting, or in the middle of the deletions, the
store verifies, its knowledge state is unchanged, every object that went is one a list
names, and the next ``ctx gc`` finishes the job; the following write and fold work.
"""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _crashlib import copy_store, read_trace, run_cli, scratch_dir, state, verify_errors

from ctxstore.knowledge.nodes import add_node
from ctxstore.prunedlist import read_pruned
from ctxstore.repo import open_store
from ctxstore.session import Session
from ctxstore.staging import commit_stage
from tests.storage._oldindex import old_index_commit

pytestmark = [pytest.mark.crash, pytest.mark.timeout(900)]

FILES = {f"src/m{i}.py": f"def f{i}():\n    return {i}\n".encode() for i in range(4)}


def _template(root: Path) -> Path:
    """A store whose history holds an older ctx's code index (two commits v1) and a mention."""
    ctx = root / "tpl" / ".ctx"
    ctx.parent.mkdir(parents=True)
    assert run_cli(ctx, ["init", "--no-git"]).returncode == 0
    node = run_cli(ctx, ["add", "--type", "fact", "m1 keeps its helper"]).stdout.strip()
    assert run_cli(ctx, ["commit", "-m", "knowledge"]).returncode == 0
    first = old_index_commit(ctx, FILES, mentions={node: "src/m1.py"})
    old_index_commit(ctx, {"src/m0.py": b"def f0():\n    return 100\n"},
                     prev={"src/m0.py": (first["src/m0.py"][0], first["src/m0.py"][3])})
    return ctx.parent


def _objects(ctx: Path) -> set[bytes]:
    return {bytes(o) for o in open_store(ctx).objects.iter_ids()}


def _point(tpl: Path, root: Path, k: int, when: str, digest: str, before: set[bytes],
           after: set[bytes]) -> list[str]:
    work = root / f"p{k}{when[0]}"
    ctx = copy_store(tpl, work)
    trace = work / "trace"
    res = run_cli(ctx, ["gc"], fault=f"kill:*:{k}:{when};trace:{trace}")
    if res.returncode not in (0, -signal.SIGKILL):
        return [f"exit {res.returncode}: {res.stderr[:300]}"]
    problems: list[str] = []
    errs = verify_errors(ctx)
    if errs:
        problems.append(f"verify: {errs[:3]}")
    if state(ctx).digest() != digest:
        problems.append("the knowledge state changed")
    gone = before - _objects(ctx)
    unlisted = gone - read_pruned(ctx).ids
    if unlisted:
        problems.append(f"{len(unlisted)} objects deleted but listed nowhere")
    again = run_cli(ctx, ["gc"])
    if again.returncode != 0:
        problems.append(f"gc after the crash: {again.stderr[:300]}")
    elif _objects(ctx) != after:
        problems.append("gc after the crash left other objects than a clean gc")
    with Session.open(ctx) as db:
        add_node(db, "fact", "after the crash")
    commit_stage(open_store(ctx), "after")
    errs = verify_errors(ctx)
    if errs:
        problems.append(f"verify after the follow-up: {errs[:3]}")
    if read_trace(trace) == [] and res.returncode != 0:
        problems.append("killed before any operation was traced")
    return problems


def test_gc_prune_kill_at_every_operation() -> None:
    with scratch_dir("ctx-crash-prune-") as root:
        tpl = _template(root)
        tpl_ctx = tpl / ".ctx"
        digest = state(tpl_ctx).digest()
        before = _objects(tpl_ctx)
        ref = copy_store(tpl, root / "ref")
        count = root / "count"
        res = run_cli(ref, ["gc"], fault=f"count:{count}")
        assert res.returncode == 0, res.stderr
        after = _objects(ref)
        assert len(before - after) >= 8  # trees, versions and blobs of the old index
        assert not verify_errors(ref)
        ops = int(count.read_text())
        assert ops > len(before - after)  # every deletion, after the list's writes
        points = [(k, when) for k in range(1, ops + 1) for when in ("before", "after")]
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(
                lambda p: _point(tpl, root, *p, digest, before, after), points))
        failures = {f"kill:*:{k}:{w}": probs for (k, w), probs in zip(points, results, strict=True)
                    if probs}
        assert failures == {}
