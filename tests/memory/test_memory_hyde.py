"""HyDE: with vectors on and ``[llm]`` configured, ``ctx memory search`` embeds a drafted answer.

Against a real HTTP server on 127.0.0.1 (``tests/llm/_llmserver.py``), through the installed
CLI: the draft is asked for, joins the question's vector and finds the turn the question alone
misses; it is cached per clone; a failing server leaves the plain search and a note; the
prompt hook never asks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.repo import Store
from tests.llm._llmserver import Behaviour, serve
from tests.memory.test_memory_vectors import _talk, _vectors

pytest.importorskip("wordllama")

# No word (nor stem) of the puppy turn, and its vector alone ranks that turn low.
QUESTION = "who keeps me company at home"
DRAFT = "I have a young dog named Rex who chews shoes."


def _search(store: Store, url: str | None, *extra: str) -> tuple[dict, str]:
    env = {"CTX_LLM_SERVER": url} if url else None
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "memory", "search", QUESTION,
                   "--limit", "1", *extra], env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), res.stderr


def _completions(b: Behaviour) -> list[dict]:
    return [r for r in b.requests if r["method"] == "POST"]


@pytest.fixture
def memory(store: Store, tmp_path: Path) -> Store:
    _vectors(store, True)
    res = run_ctx(["--ctx-dir", str(store.root), "memory", "backfill",
                   str(_talk(tmp_path / "s.jsonl"))])
    assert res.returncode == 0, res.stderr
    return store


@pytest.mark.slow
def test_hyde_draft_is_asked_for_used_and_cached(memory: Store) -> None:
    plain, _ = _search(memory, None)
    assert "puppy" not in plain["results"][0]["text"] and "hyde" not in plain
    b = Behaviour(protocol="llama", answer=DRAFT)
    with serve(b) as url:
        found, err = _search(memory, url)
        assert "puppy named Rex" in found["results"][0]["text"], found
        assert found["hyde"] == {"draft": DRAFT, "failures": []} and err == ""
        sent = _completions(b)
        assert [r["path"] for r in sent] == ["/completion"]
        assert QUESTION in sent[0]["body"]["prompt"] and sent[0]["body"]["n_predict"] <= 128
        again, _ = _search(memory, url)  # cached: nothing sent, the same draft used
        assert len(_completions(b)) == 1 and again["hyde"]["draft"] == DRAFT
        assert "puppy named Rex" in again["results"][0]["text"]
        off, _ = _search(memory, url, "--no-hyde")
        assert "hyde" not in off and off["results"] == plain["results"]
    cache = json.loads((memory.root / "local" / "hyde.json").read_text())
    assert list(cache["drafts"].values()) == [DRAFT]


def test_hyde_failure_falls_back_to_the_question(memory: Store) -> None:
    plain, _ = _search(memory, None)
    b = Behaviour(protocol="llama", completion_status=500, answer=DRAFT)
    with serve(b) as url:
        found, err = _search(memory, url)
    assert _completions(b)  # it was asked
    assert found["results"] == plain["results"] and found["hyde"]["draft"] is None
    assert found["hyde"]["failures"] and "HTTP 500" in found["hyde"]["failures"][0]
    assert err.startswith("ctx: note: HyDE: ") and "searched with the question alone" in err
    assert not (memory.root / "local" / "hyde.json").exists()  # a failure is not cached


def test_hyde_is_not_asked_without_vectors_nor_by_the_prompt_hook(memory: Store) -> None:
    b = Behaviour(protocol="llama", answer=DRAFT)
    with serve(b) as url:
        payload = {"session_id": "another", "transcript_path": "", "cwd": str(memory.root.parent),
                   "hook_event_name": "UserPromptSubmit", "prompt": QUESTION}
        res = run_ctx(["hook", "prompt-submit"], stdin=json.dumps(payload),
                      env={"CTX_LLM_SERVER": url})
        assert res.returncode == 0 and json.loads(res.stdout) is not None
        _vectors(memory, False)
        found, _ = _search(memory, url)
        assert "hyde" not in found
    assert b.requests == []


def test_hyde_cache_that_is_a_link_is_never_written_through(memory: Store, out: Path) -> None:
    (memory.root / "local" / "hyde.json").symlink_to(out / "canary")
    b = Behaviour(protocol="llama", answer=DRAFT)
    with serve(b) as url:
        found, _ = _search(memory, url)
    assert "puppy named Rex" in found["results"][0]["text"]  # drafted, used
    assert (out / "canary").read_bytes() == b"canary bytes\n"
    assert sorted(p.name for p in out.iterdir()) == ["canary"]
