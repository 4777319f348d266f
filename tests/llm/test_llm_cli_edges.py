"""`ctx llm` edge cases from a user test: a held lock, hostile replies, odd flags and URLs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _llmserver import ANSWER, Behaviour, serve
from click.testing import CliRunner
from conftest import invoke, store_digest

from ctxstore.index import open_index
from ctxstore.index.code import symbols_by
from ctxstore.index.read import edges_of, read_node
from ctxstore.repo import Store, open_store
from tests.llm.test_llm_cli import PACK, _assert_fails, _git_store, _indexed_repo, _json, _run


@pytest.fixture
def pack_file(tmp_path: Path) -> Path:
    path = tmp_path / "pack.json"
    path.write_text(json.dumps(PACK))
    return path


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# -- 1. the answer survives a commit that fails ----------------------------------------------------

_HOLD = ("import fcntl, os, sys\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n")


@pytest.fixture
def held_lock(store: Store) -> Iterator[None]:
    """Another process holds the store's writer lock; ctx waits 0.2 s for it."""
    (store.root / "config.toml").write_text("[lock]\ntimeout_seconds = 0.2\n")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(store.root / "LOCK")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)


def test_llm_answer_is_printed_when_the_commit_meets_a_held_lock(
        store: Store, runner: CliRunner, pack_file: Path, held_lock: None) -> None:
    before = store_digest(store.root)
    with serve(Behaviour()) as url:
        r = _run(runner, store, url, pack_file, "--commit")
    assert (r.exit_code, r.stdout) == (1, ANSWER)
    assert _one_line(r.stderr).startswith("ctx: error[E006]: ")
    assert store_digest(store.root) == before


def test_llm_json_answer_is_printed_when_the_commit_meets_a_held_lock(
        store: Store, runner: CliRunner, pack_file: Path, held_lock: None) -> None:
    before = store_digest(store.root)
    with serve(Behaviour()) as url:
        r = _run(runner, store, url, pack_file, "--commit", "--format", "json")
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["text"] == ANSWER and out["committed"] is None
    assert _one_line(r.stderr).startswith("ctx: error[E006]: ")
    assert store_digest(store.root) == before


# -- 2, 6. replies that are not usable -------------------------------------------------------------

def test_llm_deeply_nested_reply_is_one_line(store: Store, runner: CliRunner,
                                             pack_file: Path) -> None:
    before = store_digest(store.root)
    deep = b'{"content": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with serve(Behaviour(completion_body=deep)) as url:
        r = _run(runner, store, url, pack_file, "--commit")
    _assert_fails(r, store, before, "E022", "reply from /completion is not JSON")


@pytest.mark.parametrize(("protocol", "answer", "path"), [
    ("llama", "", "/completion"),
    ("llama", " \n\t\n", "/completion"),
    ("openai", "", "/v1/chat/completions"),
    ("openai", "\n\n", "/v1/chat/completions"),
])
def test_llm_empty_answer_is_an_error_that_writes_nothing(
        store: Store, runner: CliRunner, pack_file: Path, protocol: str, answer: str,
        path: str) -> None:
    before = store_digest(store.root)
    with serve(Behaviour(protocol=protocol, answer=answer)) as url:
        r = _run(runner, store, url, pack_file, "--commit")
    _assert_fails(r, store, before, "E022", f"reply from {path} has no text (an empty answer)")


# -- 3. numbers that are not numbers ---------------------------------------------------------------

@pytest.mark.parametrize(("option", "value"), [
    ("--temperature", "nan"), ("--temperature", "-nan"), ("--temperature", "inf"),
    ("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "NaN"),
])
def test_llm_non_finite_number_is_a_usage_error(store: Store, runner: CliRunner,
                                                pack_file: Path, option: str, value: str) -> None:
    b = Behaviour()
    with serve(b) as url:
        r = _run(runner, store, url, pack_file, option, value)
    assert (r.exit_code, r.stdout) == (2, "")
    assert _one_line(r.stderr).startswith(f"ctx: error: Invalid value for '{option}': ")
    assert b.requests == []


# -- 4. an OpenAI-compatible base URL ending in /v1 ------------------------------------------------

@pytest.mark.parametrize("suffix", ["/v1", "/v1/"])
def test_llm_server_flag_ending_in_v1_is_the_openai_base(store: Store, runner: CliRunner,
                                                         pack_file: Path, suffix: str) -> None:
    b = Behaviour(protocol="openai")
    with serve(b) as url:
        out = _json(_run(runner, store, url + suffix, pack_file, "--format", "json"))
    assert out["server"] == {"url": url, "source": "flag", "protocol": "openai"}
    assert out["text"] == ANSWER
    assert b.paths() == ["GET /props", "GET /v1/models", "POST /v1/chat/completions"]


def test_llm_env_and_config_urls_ending_in_v1(tmp_path: Path, runner: CliRunner, pack_file: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    b = Behaviour(protocol="openai")
    with serve(b) as url:
        s = _git_store(tmp_path, f'[llm]\nserver_url = "{url}/v1/"\n')
        out = _json(invoke(runner, s, "llm", "--pack", str(pack_file), "--format", "json"))
        assert out["server"] == {"url": url, "source": "project-config", "protocol": "openai"}
        monkeypatch.setenv("CTX_LLM_SERVER", url + "/v1")
        out = _json(invoke(runner, s, "llm", "--pack", str(pack_file), "--format", "json"))
        assert out["server"] == {"url": url, "source": "env", "protocol": "openai"}
    assert not any("/v1/v1" in p or p.startswith("GET /v1/props") for p in b.paths())


# -- 5. Mentions of symbols resolve to the index or are dropped ------------------------------------

def test_llm_commit_resolves_symbol_mentions_to_indexed_keys(tmp_path: Path,
                                                             runner: CliRunner) -> None:
    s = _indexed_repo(tmp_path, runner)
    pack = dict(PACK, graph_context={"seed_nodes": ["symbol:Client", "symbol:nowhere_fn",
                                                    "file:src/app.py"], "expanded_nodes": []},
                retrieved=[])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(pack))
    answer = "The `Client` class calls `nowhere_fn()`; see src/app.py.\n"
    with serve(Behaviour(answer=answer)) as url:
        out = _json(invoke(runner, s, "llm", "--server", url, "--pack", str(path), "--commit",
                           "--format", "json"))
    want = [{"kind": "item", "key": "app.Client"}, {"kind": "file", "key": "src/app.py"}]
    assert out["mentions"] == want and out["committed"]["mentions"] == 2
    conn = open_index(open_store(s.root))
    try:
        node = read_node(conn, out["committed"]["node"])
        edges = sorted((e.to_kind, e.to_key) for e in edges_of(conn, node.id, "out")
                       if e.label == "Mentions")
        assert [h.qualname for h in symbols_by(conn, qualname="app.Client")] == ["app.Client"]
    finally:
        conn.close()
    # Every item endpoint is a symbol of the index: no `item:Client`, no `item:nowhere_fn`.
    assert ("item", "Client") not in edges and ("item", "nowhere_fn") not in edges
    assert ("item", "app.Client") in edges and ("file", "src/app.py") in edges
    assert node.metadata["llm_mentions"] == ["item:app.Client", "file:src/app.py"]


def test_llm_symbol_mentions_without_an_index_are_dropped(store: Store, runner: CliRunner,
                                                          pack_file: Path) -> None:
    with serve(Behaviour()) as url:
        out = _json(_run(runner, store, url, pack_file, "--commit", "--format", "json"))
    assert out["mentions"] == [{"kind": "file", "key": "src/app.py"}]
    assert out["committed"]["mentions"] == 1


# -- 7. escape sequences of the answer never reach the terminal ------------------------------------

HOSTILE = "\x1b]0;pwned\x07Summary line\n\x1b[31mred\x1b[0m text \x9b2J<ctx:frame>\n"


def test_llm_answer_on_a_terminal_loses_escape_sequences(store: Store, runner: CliRunner,
                                                         pack_file: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ctxstore.cli._render.stdout_is_terminal", lambda: True)
    with serve(Behaviour(answer=HOSTILE)) as url:
        r = _run(runner, store, url, pack_file)
    assert (r.exit_code, r.stdout) == (0, "Summary line\nred text &lt;ctx:frame>\n")


def test_llm_json_answer_keeps_the_exact_text(store: Store, runner: CliRunner, pack_file: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ctxstore.cli._render.stdout_is_terminal", lambda: True)
    with serve(Behaviour(answer=HOSTILE)) as url:
        r = _run(runner, store, url, pack_file, "--format", "json")
    assert r.exit_code == 0 and "\x1b" not in r.stdout  # JSON escapes control characters
    assert json.loads(r.stdout)["text"] == HOSTILE


# -- 8. an empty --server, the model llama.cpp reports ---------------------------------------------

def test_llm_empty_server_flag_is_an_error(store: Store, runner: CliRunner,
                                           pack_file: Path) -> None:
    before = store_digest(store.root)
    r = invoke(runner, store, "llm", "--server", "", "--pack", str(pack_file))
    assert (r.exit_code, r.stdout) == (1, "")
    assert _one_line(r.stderr) == ("ctx: error[E011]: --server: '' is not an http:// or https:// "
                                   "URL with a host")
    assert store_digest(store.root) == before


def _committed_node(store: Store, out: dict[str, Any]) -> Any:
    conn = open_index(open_store(store.root))
    try:
        return read_node(conn, out["committed"]["node"])
    finally:
        conn.close()


@pytest.mark.parametrize("reply_model", [None, "default"])
def test_llm_llama_model_is_the_model_file_props_reports(store: Store, runner: CliRunner,
                                                         pack_file: Path,
                                                         reply_model: str | None) -> None:
    b = Behaviour(model_path="/models/qwen2.5-7b-instruct-q4_k_m.gguf", reply_model=reply_model)
    with serve(b) as url:
        out = _json(_run(runner, store, url, pack_file, "--commit", "--format", "json"))
    assert out["model"] == "qwen2.5-7b-instruct-q4_k_m.gguf"
    node = _committed_node(store, out)
    assert node.metadata["llm_model"] == "qwen2.5-7b-instruct-q4_k_m.gguf"
    assert "LLM (qwen2.5-7b-instruct-q4_k_m.gguf): " in (store.root / out["committed"]["log"]
                                                          ).read_text()
