"""`ctx purge` killed before and after each of its durable operations (RELIABILITY.md CR-01).

Every crash leaves a store that verifies, whose state is the one before the purge or the
one after it (after it as soon as refs/main moved), and that the next write and fold
work on; once refs/main moved, the state holds no secret.
"""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _crashlib import (
    copy_store,
    pointer_renames,
    read_trace,
    run_cli,
    scratch_dir,
    state,
    verify_errors,
)

from ctxstore.knowledge.nodes import add_node
from ctxstore.repo import open_store
from ctxstore.session import Session
from ctxstore.staging import commit_stage
from tests.security.secret_tokens import TOKENS

pytestmark = [pytest.mark.crash, pytest.mark.timeout(900)]

GH = next(t for t in TOKENS if t.name == "github-classic-pat")


def _digest(ctx: Path) -> str:
    """The state's digest without the purge record (its id and stamp differ from run to run)."""
    kept = state(ctx)
    kept.winners = {k: w for k, w in kept.winners.items() if k[0] != "purge"}
    return kept.digest()


def _template(root: Path) -> tuple[Path, str]:
    """The work directory of a store with a secret committed and a note staged after it."""
    ctx = root / "tpl" / ".ctx"
    ctx.parent.mkdir(parents=True)
    assert run_cli(ctx, ["init", "--no-git"]).returncode == 0
    assert run_cli(ctx, ["add", "--type", "fact", "a fact that stays"]).returncode == 0
    sid = run_cli(ctx, ["add", "--type", "fact", f"deploy uses {GH.text}", "--allow-secret"]).stdout.strip()
    assert run_cli(ctx, ["commit", "-m", "with a secret"]).returncode == 0
    assert run_cli(ctx, ["add", "note", "staged work after it"]).returncode == 0
    return ctx.parent, sid


def _point(tpl: Path, sid: str, root: Path, k: int, when: str, before: str,
           after: str) -> list[str]:
    work = root / f"p{k}{when[0]}"
    ctx = copy_store(tpl, work)
    trace = work / "trace"
    res = run_cli(ctx, ["purge", sid, "--yes"], fault=f"kill:*:{k}:{when};trace:{trace}")
    if res.returncode not in (0, -signal.SIGKILL):
        return [f"exit {res.returncode}: {res.stderr[:300]}"]
    errs = verify_errors(ctx)
    if errs:
        return [f"verify: {errs[:3]}"]
    digest = _digest(ctx)
    moved = pointer_renames(read_trace(trace))
    if "refs/main" in moved and digest != after:
        return ["refs/main moved but the state is not the purged one"]
    if digest not in (before, after):
        return ["the state is neither the one before nor the one after"]
    nodes = state(ctx).nodes
    if "refs/main" in moved and any(GH.secret in (n.content or "") for n in nodes.values()):
        return ["refs/main moved but a node still holds the secret"]
    with Session.open(ctx) as db:
        add_node(db, "fact", "after the crash")
    commit_stage(open_store(ctx), "after")
    errs = verify_errors(ctx)
    return [f"verify after the follow-up: {errs[:3]}"] if errs else []


def test_purge_kill_at_every_operation() -> None:
    with scratch_dir("ctx-crash-purge-") as root:
        tpl, sid = _template(root)
        before = _digest(tpl / ".ctx")
        ref = copy_store(tpl, root / "ref")
        count = root / "count"
        res = run_cli(ref, ["purge", sid, "--yes"], fault=f"count:{count}")
        assert res.returncode == 0, res.stderr
        after = _digest(ref)
        assert after != before
        ops = int(count.read_text())
        assert ops > 0
        points = [(k, when) for k in range(1, ops + 1) for when in ("before", "after")]
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda p: _point(tpl, sid, root, *p, before, after), points))
        failures = {f"kill:*:{k}:{w}": probs for (k, w), probs in zip(points, results, strict=True)
                    if probs}
        assert failures == {}
