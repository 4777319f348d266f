"""`ctx llm` against a real HTTP server on 127.0.0.1 (issue 14 item 4, spec 002 §13.2.8, §14)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import REPO_ROOT, invoke, run_ctx, store_digest

from ctxstore.index import open_index
from ctxstore.index.read import edges_of, read_node
from ctxstore.repo import Store, open_store
from ctxstore.tokens import estimate_tokens
from tests.llm._llmserver import ANSWER, Behaviour, dead_port, serve

PACK: dict[str, Any] = {
    "task": "Why does Client.connect hang?",
    "head_commit": None,
    "retrieved": [
        {"title": "File: src/app.py", "object_id": "ab12", "relevance_score": 0.9,
         "chunk_kind": "FileContent", "why": "matched: connect",
         "snippet": "class Client:\n    def connect(self):\n        while True:\n            pass"},
        {"title": "Symbol: app.Client.connect", "object_id": "cd34", "relevance_score": 0.8,
         "chunk_kind": "Symbol", "why": "Contains from src/app.py",
         "snippet": "def connect(self):\n    while True: pass"},
        {"title": "Decision: retry policy", "object_id": "ef56", "relevance_score": 0.5,
         "chunk_kind": "Decision", "why": "matched: retry", "snippet": "We retry with backoff."},
    ],
    "graph_context": {"seed_nodes": ["app.Client"], "expanded_nodes": ["app.Client.connect"],
                      "expansion_depth": 2, "scc_dag_used": False},
    "recent_narrative": "## 2026-01-20\n\n- looked at connect",
    "token_budget": {"total": 16000, "used": 300, "reserved_for_response": 2048},
}


@pytest.fixture
def pack_file(tmp_path: Path) -> Path:
    path = tmp_path / "pack.json"
    path.write_text(json.dumps(PACK))
    return path


def _run(runner: CliRunner, store: Store, url: str, pack: Path, *extra: str) -> Any:
    return invoke(runner, store, "llm", "--server", url, "--pack", str(pack), *extra)


def _json(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _completion(b: Behaviour) -> dict[str, Any]:
    return next(r for r in b.requests if r["method"] == "POST" and not r["path"].startswith("/slots"))


def _local_state(store: Store) -> Path:
    return store.root / "local" / "llm_state.json"


# -- protocols and detection ---------------------------------------------------------------------

def test_llm_llama_detected_and_prompt_holds_pack_items(store: Store, runner: CliRunner,
                                                         pack_file: Path) -> None:
    b = Behaviour(protocol="llama")
    with serve(b) as url:
        out = _json(_run(runner, store, url, pack_file, "--format", "json", "--max-tokens", "99",
                         "--temperature", "0.5"))
    assert out["server"] == {"url": url, "source": "flag", "protocol": "llama"}
    assert out["text"] == ANSWER and out["model"] == "fake-llama"
    assert b.paths() == ["GET /props", "POST /completion"]
    body = _completion(b)["body"]
    assert body["n_predict"] == 99 and body["temperature"] == 0.5 and body["cache_prompt"] is True
    assert "id_slot" not in body  # no slots advertised
    prompt = body["prompt"]
    assert prompt.index("## Task") < prompt.index("## Retrieved Context") < prompt.index(
        "## Recent Notes") < prompt.index("## Response")
    for item in PACK["retrieved"]:
        assert f"### {item['title']}" in prompt and item["snippet"] in prompt
    assert out["prompt"]["included"] == [i["title"] for i in PACK["retrieved"]]
    assert out["usage"] == {"prompt_tokens": 42, "cached_tokens": 7, "completion_tokens": 21}
    assert out["committed"] is None


def test_llm_openai_detected_when_props_missing(store: Store, runner: CliRunner,
                                                pack_file: Path) -> None:
    b = Behaviour(protocol="openai")
    with serve(b) as url:
        out = _json(_run(runner, store, url, pack_file, "--format", "json", "--model", "m1"))
    assert out["server"]["protocol"] == "openai" and out["text"] == ANSWER
    assert b.paths() == ["GET /props", "GET /v1/models", "POST /v1/chat/completions"]
    body = _completion(b)["body"]
    assert body["model"] == "m1" and body["max_tokens"] == 2048
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "### File: src/app.py" in body["messages"][1]["content"]


def test_llm_protocol_from_config_skips_detection(store: Store, runner: CliRunner,
                                                  pack_file: Path) -> None:
    (store.root / "config.toml").write_text('[llm]\nprotocol = "openai"\n')
    b = Behaviour(protocol="openai")
    with serve(b) as url:
        _json(_run(runner, store, url, pack_file, "--format", "json"))
    assert b.paths() == ["POST /v1/chat/completions"]


def test_llm_text_output_is_the_answer(store: Store, runner: CliRunner, pack_file: Path) -> None:
    with serve(Behaviour()) as url:
        r = _run(runner, store, url, pack_file)
    assert r.exit_code == 0 and r.stdout == ANSWER


def test_llm_reads_pack_from_stdin_in_a_subprocess(store: Store, tmp_path: Path) -> None:
    b = Behaviour()
    with serve(b) as url:
        r = run_ctx(["--ctx-dir", str(store.root), "llm", "--server", url, "--commit",
                     "--format", "json"], stdin=json.dumps(PACK), cwd=tmp_path,
                    env={"PYTHONPATH": str(REPO_ROOT)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["committed"]["mentions"] == 1  # src/app.py; no index, so no symbol to name


# -- budget --------------------------------------------------------------------------------------

def test_llm_prompt_stays_within_the_pack_budget(store: Store, runner: CliRunner,
                                                 tmp_path: Path) -> None:
    big = dict(PACK, retrieved=[
        {"title": f"File: src/m{i}.py", "snippet": f"# module {i}\n" + "x = 1\n" * 200}
        for i in range(10)], token_budget={"total": 2000, "reserved_for_response": 500})
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    b = Behaviour()
    with serve(b) as url:
        out = _json(_run(runner, store, url, path, "--format", "json"))
    prompt = _completion(b)["body"]["prompt"]
    assert estimate_tokens(prompt) <= 1500
    assert out["prompt"]["included"] and out["prompt"]["skipped"]
    assert out["prompt"]["included"][0] == "File: src/m0.py"  # pack order (ranked) is kept
    for title in out["prompt"]["skipped"]:
        assert title not in prompt


# -- --commit: log, node, blob, Mentions ---------------------------------------------------------

def test_llm_commit_appends_log_and_links_mentions(tmp_path: Path, runner: CliRunner,
                                                   pack_file: Path) -> None:
    store = _indexed_repo(tmp_path, runner)  # app.Client.connect is a symbol of the index
    with serve(Behaviour()) as url:
        out = _json(_run(runner, store, url, pack_file, "--commit", "--format", "json"))
    committed = out["committed"]
    log = (store.root / committed["log"]).read_text()
    assert "Connect retries forever without a deadline" in log
    assert {(m["kind"], m["key"]) for m in out["mentions"]} == {("file", "src/app.py"),
                                                                ("item", "app.Client.connect")}
    s = open_store(store.root)
    conn = open_index(s)
    try:
        node = read_node(conn, committed["node"])
        edges = edges_of(conn, node.id, "out")
    finally:
        conn.close()
    assert node.type == "observation" and "source:llm" in node.tags
    assert node.metadata["llm_response_blob"] == committed["response_blob"]
    assert s.read_blob(bytes.fromhex(committed["response_blob"])).decode() == ANSWER
    assert sorted((e.label, e.to_kind, e.to_key) for e in edges) == [
        ("Mentions", "file", "src/app.py"), ("Mentions", "item", "app.Client.connect")]


def test_llm_mentions_only_files_that_exist_in_the_work_tree(store: Store, runner: CliRunner,
                                                             tmp_path: Path) -> None:
    (store.worktree / "docs").mkdir()
    (store.worktree / "docs" / "nothing-here.md").write_text("x")
    pack = dict(PACK, retrieved=[])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(pack))
    with serve(Behaviour()) as url:
        out = _json(_run(runner, store, url, path, "--format", "json"))
    keys = [m["key"] for m in out["mentions"]]
    assert "docs/nothing-here.md" in keys and "src/app.py" not in keys  # not in the pack or tree
    assert not any("passwd" in k for k in keys)


def test_llm_without_commit_writes_no_knowledge(store: Store, runner: CliRunner,
                                                pack_file: Path) -> None:
    before = store_digest(store.root)
    with serve(Behaviour()) as url:
        _json(_run(runner, store, url, pack_file, "--format", "json"))
    assert store_digest(store.root) == before


# -- prompt cache (§14.4) ------------------------------------------------------------------------

def test_llm_slots_saved_then_restored_on_the_same_prefix(store: Store, runner: CliRunner,
                                                          pack_file: Path) -> None:
    b = Behaviour(slots=True)
    with serve(b) as url:
        first = _json(_run(runner, store, url, pack_file, "--format", "json"))
        assert b.paths() == ["GET /props", "POST /completion", "POST /slots/0?action=save"]
        assert _completion(b)["body"]["id_slot"] == 0
        saved_as = b.requests[-1]["body"]["filename"]
        b.requests.clear()
        second = _json(_run(runner, store, url, pack_file, "--format", "json"))
    assert first["cache"] == {"restored": False, "saved": True}
    assert second["cache"] == {"restored": True, "saved": True}
    assert b.paths() == ["GET /props", "POST /slots/0?action=restore", "POST /completion",
                         "POST /slots/0?action=save"]
    assert b.requests[1]["body"] == {"filename": saved_as}
    state = json.loads(_local_state(store).read_text())
    assert state["servers"][url]["session_file"] == saved_as


def test_llm_slot_not_restored_for_another_prompt(store: Store, runner: CliRunner,
                                                  pack_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(PACK, task="Something else entirely")))
    b = Behaviour(slots=True)
    with serve(b) as url:
        _json(_run(runner, store, url, pack_file, "--format", "json"))
        b.requests.clear()
        out = _json(_run(runner, store, url, other, "--format", "json"))
    assert out["cache"]["restored"] is False
    assert "POST /slots/0?action=restore" not in b.paths()


def test_llm_server_refusing_slot_actions_is_not_asked_again(store: Store, runner: CliRunner,
                                                             pack_file: Path) -> None:
    b = Behaviour(slots=True, slot_actions_ok=False)
    with serve(b) as url:
        first = _json(_run(runner, store, url, pack_file, "--format", "json"))
        b.requests.clear()
        _json(_run(runner, store, url, pack_file, "--format", "json"))
    assert first["cache"] == {"restored": False, "saved": False}
    assert b.paths() == ["GET /props", "POST /completion"]  # cache_prompt still sent
    assert _completion(b)["body"]["cache_prompt"] is True


# -- failures: one line, non-zero exit, nothing written ------------------------------------------

def _assert_fails(result: Any, store: Store, before: str, code: str, fragment: str) -> None:
    assert result.exit_code == 1, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ctx: error[{code}]:"), result.stderr
    assert fragment in lines[0]
    assert store_digest(store.root) == before
    assert not _local_state(store).exists()


def test_llm_dead_port_is_one_line(store: Store, runner: CliRunner, pack_file: Path) -> None:
    before = store_digest(store.root)
    r = _run(runner, store, f"http://127.0.0.1:{dead_port()}", pack_file, "--commit")
    _assert_fails(r, store, before, "E022", "connection refused")


def test_llm_timeout_is_one_line(store: Store, runner: CliRunner, pack_file: Path) -> None:
    before = store_digest(store.root)
    with serve(Behaviour(sleep=1.5)) as url:
        r = _run(runner, store, url, pack_file, "--commit", "--timeout", "0.3")
    _assert_fails(r, store, before, "E022", "no reply within 0.3 s")


def test_llm_malformed_json_reply(store: Store, runner: CliRunner, pack_file: Path) -> None:
    before = store_digest(store.root)
    with serve(Behaviour(completion_body=b'{"content": "unterminated')) as url:
        r = _run(runner, store, url, pack_file, "--commit")
    _assert_fails(r, store, before, "E022", "reply from /completion is not JSON")


def test_llm_reply_without_text(store: Store, runner: CliRunner, pack_file: Path) -> None:
    before = store_digest(store.root)
    with serve(Behaviour(completion_body=b'{"content": 7}')) as url:
        r = _run(runner, store, url, pack_file, "--commit")
    _assert_fails(r, store, before, "E022", 'no "content" text')


def test_llm_http_error(store: Store, runner: CliRunner, pack_file: Path) -> None:
    before = store_digest(store.root)
    with serve(Behaviour(completion_status=500)) as url:
        r = _run(runner, store, url, pack_file, "--commit")
    _assert_fails(r, store, before, "E022", "HTTP 500 from /completion")


def test_llm_huge_reply_is_bounded(store: Store, runner: CliRunner, pack_file: Path) -> None:
    (store.root / "config.toml").write_text("[llm]\nmax_reply_bytes = 65536\n")
    before = store_digest(store.root)
    huge = json.dumps({"content": "x" * 1_000_000}).encode()
    with serve(Behaviour(completion_body=huge)) as url:
        r = _run(runner, store, url, pack_file, "--commit")
    _assert_fails(r, store, before, "E022", "larger than the limit of 65536")


def test_llm_server_speaking_neither_protocol(store: Store, runner: CliRunner,
                                              pack_file: Path) -> None:
    before = store_digest(store.root)
    with serve(Behaviour(protocol="none")) as url:
        r = _run(runner, store, url, pack_file)
    _assert_fails(r, store, before, "E022", "answers neither GET /props")


@pytest.mark.parametrize(("data", "fragment"), [
    ("", "no prompt pack (empty input)"),
    ("not json", "prompt pack is not JSON"),
    ('{"retrieved": []}', "not a prompt pack"),
    ("[1, 2]", "not a prompt pack"),
])
def test_llm_bad_pack_is_one_line(store: Store, runner: CliRunner, tmp_path: Path, data: str,
                                  fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(data)
    before = store_digest(store.root)
    b = Behaviour()
    with serve(b) as url:
        r = _run(runner, store, url, path)
    _assert_fails(r, store, before, "E011", fragment)
    assert b.requests == []  # the pack is checked before the server is asked


def test_llm_bad_items_are_noted_not_fatal(store: Store, runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(dict(PACK, retrieved=[1, {"title": "t"}, PACK["retrieved"][0]])))
    with serve(Behaviour()) as url:
        out = _json(_run(runner, store, url, path, "--format", "json"))
    assert out["notes"] == ["retrieved[0]: not an object, skipped",
                            "retrieved[1]: no title or snippet text, skipped"]
    assert out["prompt"]["included"] == ["File: src/app.py"]


def _indexed_repo(tmp_path: Path, runner: CliRunner) -> Store:
    s = _git_store(tmp_path, "")
    (s.worktree / "src").mkdir()
    (s.worktree / "src" / "app.py").write_text(
        "class Client:\n    def connect(self):\n        while True:\n            pass\n")
    r = invoke(runner, s, "index", str(s.worktree))
    assert r.exit_code == 0, r.stderr
    return s


def test_llm_query_builds_the_pack_with_ctx_pack(tmp_path: Path, runner: CliRunner) -> None:
    s = _indexed_repo(tmp_path, runner)
    b = Behaviour()
    with serve(b) as url:
        out = _json(invoke(runner, s, "llm", "--server", url, "--query", "why does connect hang",
                           "--commit", "--format", "json"))
    prompt = _completion(b)["body"]["prompt"]
    assert "why does connect hang" in prompt and "def connect(self):" in prompt
    assert out["prompt"]["included"][0].startswith("Symbol: app.Client (src/app.py")
    assert {(m["kind"], m["key"]) for m in out["mentions"]} >= {("file", "src/app.py")}


def test_llm_reads_what_ctx_pack_writes(tmp_path: Path, runner: CliRunner) -> None:
    s = _indexed_repo(tmp_path, runner)
    pack = invoke(runner, s, "pack", "connect", "--format", "json")
    assert pack.exit_code == 0, pack.stderr
    b = Behaviour()
    with serve(b) as url:
        out = _json(invoke(runner, s, "llm", "--server", url, "--format", "json",
                           input=pack.stdout))
    assert out["notes"] == [] and out["prompt"]["included"]


def test_llm_query_without_pack_builder_or_with_pack(store: Store, runner: CliRunner,
                                                     pack_file: Path) -> None:
    r = invoke(runner, store, "llm", "--query", "x", "--pack", str(pack_file))
    assert r.exit_code == 2


# -- where the server URL may come from ----------------------------------------------------------

def _git_store(tmp_path: Path, config: str) -> Store:
    from ctxstore.init import init_store

    work = tmp_path / "clone"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    init_store(work / ".ctx", git=False)
    (work / ".ctx" / "config.toml").write_text(config)
    return open_store(work / ".ctx")


def test_llm_remote_url_from_a_cloned_config_is_refused(tmp_path: Path, runner: CliRunner,
                                                        pack_file: Path) -> None:
    s = _git_store(tmp_path, '[llm]\nserver_url = "http://203.0.113.9:8080"\n')
    before = store_digest(s.root)
    r = invoke(runner, s, "llm", "--pack", str(pack_file))
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.startswith("ctx: error[E015]: [llm] server_url = 'http://203.0.113.9:8080' "
                               "comes from this repository's committed config.toml")
    assert store_digest(s.root) == before


def test_llm_loopback_url_from_a_cloned_config_is_used(tmp_path: Path, runner: CliRunner,
                                                       pack_file: Path) -> None:
    b = Behaviour()
    with serve(b) as url:
        s = _git_store(tmp_path, f'[llm]\nserver_url = "{url}"\n')
        out = _json(invoke(runner, s, "llm", "--pack", str(pack_file), "--format", "json"))
    assert out["server"]["source"] == "project-config" and b.requests


def test_llm_flag_and_env_win_over_config(tmp_path: Path, runner: CliRunner, pack_file: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    s = _git_store(tmp_path, '[llm]\nserver_url = "http://203.0.113.9:8080"\n')
    b = Behaviour()
    with serve(b) as url:
        out = _json(invoke(runner, s, "llm", "--server", url, "--pack", str(pack_file),
                           "--format", "json"))
        assert out["server"]["source"] == "flag"
        monkeypatch.setenv("CTX_LLM_SERVER", url)
        out = _json(invoke(runner, s, "llm", "--pack", str(pack_file), "--format", "json"))
        assert out["server"]["source"] == "env"


def test_llm_user_config_url_is_used(store: Store, runner: CliRunner, pack_file: Path) -> None:
    import os

    b = Behaviour()
    with serve(b) as url:
        home = Path(os.environ["HOME"]) / ".ctx"
        home.mkdir()
        (home / "config.toml").write_text(f'[llm]\nserver_url = "{url}"\n')
        out = _json(_run_no_server(runner, store, pack_file))
    assert out["server"] == {"url": url, "source": "user-config", "protocol": "llama"}


def _run_no_server(runner: CliRunner, store: Store, pack: Path) -> Any:
    return invoke(runner, store, "llm", "--pack", str(pack), "--format", "json")


def test_llm_bad_server_flag(store: Store, runner: CliRunner, pack_file: Path) -> None:
    r = invoke(runner, store, "llm", "--server", "file:///etc/passwd", "--pack", str(pack_file))
    assert r.exit_code == 1 and r.stderr.startswith("ctx: error[E011]: --server: ")


def test_llm_help_has_an_example() -> None:
    r = subprocess.run([sys.executable, "-m", "ctxstore.cli", "llm", "--help"], cwd=REPO_ROOT,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "ctx llm --pack pack.json" in r.stdout


def test_llm_hostile_answer_is_kept_safely(store: Store, runner: CliRunner,
                                           pack_file: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text("x")
    (store.worktree / "leak.py").symlink_to(outside)
    answer = ("\x00<!-- ctx:id=01AAAAAAAAAAAAAAAAAAAAAAAA --> \ud800 bad\n"
              "see leak.py, ../secret.py and src/app.py")
    with serve(Behaviour(answer=answer)) as url:
        out = _json(_run(runner, store, url, pack_file, "--commit", "--format", "json"))
    assert [m["key"] for m in out["mentions"]] == ["src/app.py"]
    log = (store.root / out["committed"]["log"]).read_text()
    assert "&lt;!-- ctx:id=01AAAAAAAAAAAAAAAAAAAAAAAA" in log and "\x00" not in log
    blob = open_store(store.root).read_blob(bytes.fromhex(out["committed"]["response_blob"]))
    assert blob == answer.encode("utf-8", "replace")
    assert not any(p.name == "secret.py" for p in store.root.rglob("*"))


def test_llm_refused_restore_is_not_fatal(store: Store, runner: CliRunner,
                                          pack_file: Path) -> None:
    b = Behaviour(slots=True)
    with serve(b) as url:
        _json(_run(runner, store, url, pack_file, "--format", "json"))
        b.slot_actions_ok = False  # e.g. restarted without --slot-save-path
        b.requests.clear()
        out = _json(_run(runner, store, url, pack_file, "--format", "json"))
    assert out["cache"] == {"restored": False, "saved": False} and out["text"] == ANSWER
    assert b.paths() == ["GET /props", "POST /slots/0?action=restore", "POST /completion",
                         "POST /slots/0?action=save"]
    assert json.loads(_local_state(store).read_text())["servers"][url]["slot_actions"] is False


def _big_pack(tmp_path: Path, items: int = 40, chars: int = 1_600) -> Path:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(dict(PACK, budget=None, retrieved=[
        {"title": f"File: src/m{i}.py", "object_id": f"{i:04x}", "relevance_score": 1 - i / 100,
         "chunk_kind": "FileContent", "why": "matched: connect", "snippet": "x = 1\n" * (chars // 6)}
        for i in range(items)])))
    return path


def test_llm_prompt_fits_the_context_llama_cpp_reports(store: Store, runner: CliRunner,
                                                      tmp_path: Path) -> None:
    # /props says n_ctx 4096: with 1,000 tokens for the answer the prompt may take ~3,096,
    # however large the budget; the items left out are said.
    b = Behaviour(n_ctx=4096)
    with serve(b) as url:
        out = _json(_run(runner, store, url, _big_pack(tmp_path), "--max-tokens", "1000",
                         "--budget", "100000", "--format", "json"))
    assert out["prompt"]["tokens"] <= 4096 - 1000
    assert out["prompt"]["skipped"] and out["prompt"]["included"]
    assert any("server's context is 4096 tokens" in n for n in out["notes"])
    # a larger context lets more in; --budget below it is what limits then
    with serve(Behaviour(n_ctx=65536)) as url:
        roomy = _json(_run(runner, store, url, _big_pack(tmp_path), "--max-tokens", "1000",
                           "--budget", "6000", "--format", "json"))
    assert roomy["prompt"]["tokens"] <= 6000 - 1000 < 4096 * 2
    assert not any("server's context" in n for n in roomy["notes"])
    assert len(roomy["prompt"]["included"]) > len(out["prompt"]["included"])


def test_llm_context_too_small_for_the_answer_is_one_line(store: Store, runner: CliRunner,
                                                          tmp_path: Path) -> None:
    before = store_digest(store.root)
    with serve(Behaviour(n_ctx=2048)) as url:
        r = _run(runner, store, url, _big_pack(tmp_path), "--max-tokens", "2000")
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "server's context of 2048 tokens leaves no room" in r.stderr
    assert store_digest(store.root) == before
