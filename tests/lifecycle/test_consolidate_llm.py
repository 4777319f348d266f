"""``ctx consolidate --apply`` drafting the merged text with an LLM server (issue 16 item 2).

A real HTTP server on 127.0.0.1 (``tests/llm/_llmserver.py``) and the installed ``ctx`` as a
subprocess; every request is made before the first write, so a failing server leaves the
store as it was.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx, session_of, store_digest

from ctxstore.index import open_index
from ctxstore.index.read import edges_of, find_node
from ctxstore.knowledge.nodes import add_node
from ctxstore.repo import open_store
from tests.llm._llmserver import Behaviour, dead_port, serve

MERGED = "Retries back off exponentially with jitter, capped at 30 s."


def _project(tmp_path: Path, *, git: bool = False) -> tuple[Path, str, list[str]]:
    """A project store with two similar decisions; returns it, the proposal id and the members."""
    work = tmp_path / "p"
    work.mkdir()
    if git:
        subprocess.run(["git", "init", "-q", str(work)], check=True)
    assert run_ctx(["init"], cwd=work).returncode == 0
    store = open_store(work / ".ctx")
    a = add_node(session_of(store), "decision", "upload retries back off exponentially with jitter").node
    b = add_node(session_of(store), "decision", "upload retries back off exponentially, capped at 30 s").node
    out = json.loads(run_ctx(["consolidate", "--dry-run", "--format", "json"], cwd=work).stdout)
    [proposal] = out["proposals"]
    assert sorted(proposal["members"]) == sorted([a.id, b.id])
    return work, proposal["id"], [a.id, b.id]


def _summary(work: Path, summary_id: str):  # type: ignore[no-untyped-def]
    conn = open_index(open_store(work / ".ctx"))
    try:
        return find_node(conn, summary_id), edges_of(conn, summary_id, "out", "DERIVED_FROM")
    finally:
        conn.close()


def test_consolidate_drafts_the_merged_text_with_the_configured_server(tmp_path: Path) -> None:
    work, pid, members = _project(tmp_path)
    b = Behaviour(protocol="openai", answer=f"\n{MERGED}\n")
    with serve(b) as url:
        res = run_ctx(["consolidate", "--apply", pid, "--format", "json"], cwd=work,
                      env={"CTX_LLM_SERVER": url})
    assert res.returncode == 0, res.stderr
    [applied] = json.loads(res.stdout)["applied"]
    assert applied["drafted_by"].startswith("llm:")
    summary, edges = _summary(work, applied["summary"])
    assert summary.content == MERGED
    assert summary.metadata["consolidation"]["drafted_by"] == applied["drafted_by"]
    assert sorted(e.to_key for e in edges) == sorted(members)  # every source reachable
    assert b.paths() == ["GET /props", "GET /v1/models", "POST /v1/chat/completions"]
    [chat] = [r for r in b.requests if r["path"] == "/v1/chat/completions"]
    prompt = chat["body"]["messages"][1]["content"]
    assert all(m in prompt for m in members) and "capped at 30 s" in prompt and "jitter" in prompt


def test_consolidate_without_a_configured_server_asks_nothing(tmp_path: Path) -> None:
    work, pid, _ = _project(tmp_path)
    b = Behaviour()
    with serve(b):  # listening, but nothing names it: the default URL is not "configured"
        res = run_ctx(["consolidate", "--apply", pid, "--format", "json"], cwd=work)
    assert res.returncode == 0, res.stderr
    [applied] = json.loads(res.stdout)["applied"]
    assert applied["drafted_by"] is None
    summary, _ = _summary(work, applied["summary"])
    assert "jitter" in summary.content and "capped at 30 s" in summary.content  # mechanical
    assert "drafted_by" not in summary.metadata["consolidation"]
    assert b.requests == []


@pytest.mark.slow
def test_consolidate_content_and_no_llm_skip_the_server(tmp_path: Path) -> None:
    work, pid, _ = _project(tmp_path)
    b = Behaviour()
    with serve(b) as url:
        res = run_ctx(["consolidate", "--apply", pid, "--no-llm"], cwd=work,
                      env={"CTX_LLM_SERVER": url})
        assert res.returncode == 0, res.stderr
        assert run_ctx(["consolidate", "--undo"], cwd=work).returncode == 0
        res = run_ctx(["consolidate", "--apply", pid, "--content", "mine", "--format", "json"],
                      cwd=work, env={"CTX_LLM_SERVER": url})
    assert res.returncode == 0, res.stderr
    summary, _ = _summary(work, json.loads(res.stdout)["applied"][0]["summary"])
    assert summary.content == "mine"
    assert b.requests == []
    bad = run_ctx(["consolidate", "--llm"], cwd=work)
    assert bad.returncode == 1 and bad.stderr.startswith("ctx: error[E011]: --llm/--no-llm needs")


def test_consolidate_failing_server_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    work, pid, _ = _project(tmp_path)
    before = store_digest(work / ".ctx")
    res = run_ctx(["consolidate", "--apply", pid], cwd=work,
                  env={"CTX_LLM_SERVER": f"http://127.0.0.1:{dead_port()}"})
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("ctx: error[E022]:") and len(res.stderr.strip().splitlines()) == 1
    b = Behaviour(answer="   \n")
    with serve(b) as url:
        res = run_ctx(["consolidate", "--apply", pid, "--llm"], cwd=work,
                      env={"CTX_LLM_SERVER": url})
    assert res.returncode == 1 and "answered with empty text" in res.stderr
    assert "--content" in res.stderr
    assert store_digest(work / ".ctx") == before


def test_consolidate_refuses_a_remote_server_named_by_a_clones_config(tmp_path: Path) -> None:
    work, pid, _ = _project(tmp_path, git=True)
    cfg = work / ".ctx" / "config.toml"
    cfg.write_text(cfg.read_text().replace('server_url = "http://127.0.0.1:8080"',
                                           'server_url = "http://llm.example.invalid:8080"'))
    before = store_digest(work / ".ctx")
    res = run_ctx(["consolidate", "--apply", pid], cwd=work)
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E015]:")
    assert store_digest(work / ".ctx") == before
    # --no-llm needs no server at all.
    assert run_ctx(["consolidate", "--apply", pid, "--no-llm"], cwd=work).returncode == 0
