"""`ctx llm --commit` killed or failing after the HTTP reply: the store stays consistent.

The fault shim (tests/_shim) kills the child at the k-th durable operation, which all come
after the server has answered. Killed before the first, the store is byte-for-byte as it
was; killed anywhere, ``verify_store`` finds no error, the answer's node is there whole or
not at all, and the next ``ctx llm --commit`` works.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _crashlib import ctx_child, pointer_bytes, scratch_dir, state, verify_errors

from ctxstore.init import init_store
from tests.llm._llmserver import ANSWER, Behaviour, serve
from tests.llm.test_llm_cli import PACK


def _llm(ctx: Path, url: str, pack: Path, fault: str | None) -> subprocess.CompletedProcess[str]:
    return ctx_child(["--ctx-dir", str(ctx), "llm", "--server", url, "--pack", str(pack), "--commit"],
                     cwd=ctx.parent, fault=fault)


def _setup(root: Path) -> tuple[Path, Path]:
    work = root / "work"
    work.mkdir(parents=True)
    init_store(work / ".ctx", git=False)
    pack = root / "pack.json"
    pack.write_text(json.dumps(PACK))
    return work / ".ctx", pack


def _files(ctx: Path) -> dict[str, bytes]:
    return {p.relative_to(ctx).as_posix(): p.read_bytes() for p in sorted(ctx.rglob("*"))
            if p.is_file() and p.relative_to(ctx).parts[0] not in ("index", "DERIVED", "LOCK")}


def _llm_nodes(ctx: Path) -> list[str]:
    return [n.id for n in state(ctx).nodes.values() if "source:llm" in n.tags]


def test_llm_killed_after_reply_before_any_write_leaves_store_unchanged() -> None:
    with scratch_dir("ctx-llm-") as root, serve(Behaviour()) as url:
        ctx, pack = _setup(root)
        before = _files(ctx)
        r = _llm(ctx, url, pack, "kill:*:1:before")
        assert r.returncode == -9, r.stderr
        assert _files(ctx) == before
        assert verify_errors(ctx) == []


def test_llm_write_error_is_one_line_and_changes_nothing() -> None:
    with scratch_dir("ctx-llm-") as root, serve(Behaviour()) as url:
        ctx, pack = _setup(root)
        before = pointer_bytes(ctx)
        narrative = {p: p.read_bytes() for p in (ctx / "narrative").rglob("*") if p.is_file()}
        r = _llm(ctx, url, pack, "err:write_all:1:EIO:sticky")
        assert r.returncode == 1 and r.stdout == ANSWER  # shown before the commit failed
        assert r.stderr.startswith("ctx: error[E017]:") and len(r.stderr.splitlines()) == 1
        assert pointer_bytes(ctx) == before
        assert {p: p.read_bytes() for p in (ctx / "narrative").rglob("*") if p.is_file()} \
            == narrative
        assert _llm_nodes(ctx) == []


@pytest.mark.slow
def test_llm_killed_at_every_write_leaves_a_consistent_store(tmp_path: Path) -> None:
    with scratch_dir("ctx-llm-") as root, serve(Behaviour()) as url:
        ctx, pack = _setup(root / "count")
        count = tmp_path / "count.txt"
        assert _llm(ctx, url, pack, f"count:{count}").returncode == 0
        total = int(count.read_text())
        assert total > 3
        for k in range(1, total + 1):
            ctx, pack = _setup(root / f"k{k}")
            r = _llm(ctx, url, pack, f"kill:*:{k}:before")
            # Object ids are new each run, so a run may need one shard directory fewer than
            # the counted run (two objects in one shard): only the last kill points may pass.
            assert r.returncode == -9 or (r.returncode == 0 and k > total - 4), (k, r.stderr)
            assert verify_errors(ctx) == [], k
            nodes = _llm_nodes(ctx)
            assert len(nodes) <= 1, k
            again = _llm(ctx, url, pack, None)
            assert again.returncode == 0, (k, again.stderr)
            assert len(_llm_nodes(ctx)) == len(nodes) + 1, k
