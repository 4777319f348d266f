"""Deep JSON (and TOML) on every reader of untrusted text (issue 34 item 8; RELIABILITY: deep JSON).

Python's ``json`` (and ``tomllib``) recurse once per level of nesting and raise
``RecursionError``, which is not a ``ValueError``: a reader that caught only the latter let
one line of ``[[[[...`` end a process as an internal error. Each reader is driven through the
installed CLI (or the MCP and hook entry points) with a value nested 100,000 levels deep
(and one just under the parser's limit where the reader copies what it parsed), under a
process timeout; a static check finds every ``json.loads`` whose ``try`` does not cover
``RecursionError``.
"""

from __future__ import annotations

import ast
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.init import init_store
from tests.mcp.test_server import _exchange, _raw_server

PKG = Path(__file__).resolve().parent.parent / "ctxstore"
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


def _store(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    init_store(work / ".ctx", git=False)
    assert run_ctx(["--ctx-dir", str(work / ".ctx"), "add", "--type", "fact", "a deep fact"]).returncode == 0
    return work / ".ctx"


def _initialised(ctx_dir: Path) -> subprocess.Popen[str]:
    proc = _raw_server(ctx_dir)
    init = _exchange(proc, json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}))
    assert init["id"] == 1 and "result" in init
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    return proc


def test_mcp_deeply_nested_line_is_a_parse_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    # Before: internal error: ExceptionGroup, exit 1, the ping after it never answered.
    proc = _initialised(_store(tmp_path))
    try:
        deep_field = '{"jsonrpc": "2.0", "id": 5, "x": ' + DEEP_ARRAY + "}"
        for line in ("[" * 2000 + "]" * 2000, DEEP_OBJECT, deep_field):
            reply = _exchange(proc, line, timeout=10)
            assert reply["error"]["code"] == -32700 and reply["id"] is None, reply
        # Just under the parser's limit: parsed, refused as a request, never a crash.
        reply = _exchange(proc, "[" * 980 + "]" * 980, timeout=10)
        assert reply["error"]["code"] in (-32700, -32600), reply
        pong = _exchange(proc, '{"jsonrpc": "2.0", "id": 9, "method": "ping"}', timeout=10)
        assert pong == {"jsonrpc": "2.0", "id": 9, "result": {}}
        assert proc.poll() is None  # still serving
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            code = proc.wait(timeout=10)
        finally:
            proc.kill()
        stderr = proc.stderr.read() if proc.stderr is not None else ""
    assert code == 0 and "internal error" not in stderr, stderr


def test_config_nested_too_deeply_is_e015(tmp_path: Path) -> None:
    # A committed config.toml of nested arrays: tomllib recursed into an internal error.
    ctx_dir = _store(tmp_path)
    with (ctx_dir / "config.toml").open("a") as fh:
        fh.write("\n[deep]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    res = run_ctx(["--ctx-dir", str(ctx_dir), "list"], timeout=20)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("ctx: error[E015]:") and "nested too deeply" in res.stderr
    res = run_ctx(["hook", "session-start"], stdin="{}", env={"CTX_DIR": str(ctx_dir)}, timeout=20)
    assert res.returncode == 0 and "E015" not in res.stdout or "nested" in res.stdout


@pytest.mark.parametrize(("key", "event", "want"), [("injected:s1", "prompt-submit", "zebra"),
                                                    ("view_cache", "session-start", "pinned rule")])
@pytest.mark.slow
def test_hook_state_value_nested_too_deeply_is_ignored(tmp_path: Path, key: str, event: str,
                                                       want: str) -> None:
    # Values of local/state.sqlite are read back as JSON on every prompt; a damaged one that
    # nests too deeply must cost the hook that value, never the prompt.
    ctx_dir = _store(tmp_path)
    for args in (["--tag", "tier:pinned", "pinned rule"], ["the zebra database uses sqlite"]):
        assert run_ctx(["--ctx-dir", str(ctx_dir), "add", "--type", "fact", *args]).returncode == 0
    payload = json.dumps({"session_id": "s1", "cwd": str(ctx_dir.parent),
                          "prompt": "which database does zebra use", "source": "startup"})
    env = {"CTX_DIR": str(ctx_dir)}
    assert run_ctx(["hook", "session-start"], stdin=payload, env=env).returncode == 0
    with sqlite3.connect(ctx_dir / "local" / "state.sqlite") as conn:
        conn.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, DEEP_ARRAY))
    conn.close()
    res = run_ctx(["hook", event], stdin=payload, env=env, timeout=20)
    assert res.returncode == 0 and "internal error" not in res.stderr, res.stderr
    out = json.loads(res.stdout)
    assert want in out["hookSpecificOutput"]["additionalContext"], out


def test_hook_stdin_nested_too_deeply_is_an_empty_payload(tmp_path: Path) -> None:
    ctx_dir = _store(tmp_path)
    for event in ("session-start", "prompt-submit", "stop"):
        res = run_ctx(["hook", event], stdin=DEEP_OBJECT, env={"CTX_DIR": str(ctx_dir)}, timeout=20)
        assert res.returncode == 0 and "internal error" not in res.stderr, res.stderr
        assert isinstance(json.loads(res.stdout), dict)


def test_transcript_line_nested_too_deeply_is_skipped(tmp_path: Path) -> None:
    # The Stop hook and `ctx memory backfill` read transcript lines as JSON: a line nested
    # too deeply is passed over, and the turn's command after it still runs.
    ctx_dir = _store(tmp_path)
    transcript = tmp_path / "t.jsonl"
    lines = [{"type": "user", "uuid": "u1", "sessionId": "s1",
              "message": {"role": "user", "content": "remember the deep thing"}},
             None,
             {"type": "assistant", "uuid": "a1", "sessionId": "s1", "message": {
                 "id": "m1", "role": "assistant", "content": [
                     {"type": "text", "text": "<ctx:remember>the deep thing survives</ctx:remember>"}]}}]
    transcript.write_text("".join((json.dumps(x) if x is not None else
                                   '{"type": "user", "x": ' + DEEP_ARRAY + "}") + "\n" for x in lines))
    payload = json.dumps({"session_id": "s1", "cwd": str(ctx_dir.parent),
                          "transcript_path": str(transcript)})
    res = run_ctx(["hook", "stop"], stdin=payload, env={"CTX_DIR": str(ctx_dir)}, timeout=30)
    assert res.returncode == 0 and "internal error" not in res.stderr, res.stderr
    assert "the deep thing survives" in run_ctx(["--ctx-dir", str(ctx_dir), "list"]).stdout
    res = run_ctx(["--ctx-dir", str(ctx_dir), "memory", "backfill", str(transcript)], timeout=30)
    assert res.returncode == 0 and "internal error" not in res.stderr, res.stderr


def test_import_document_nested_too_deeply_is_e011(tmp_path: Path) -> None:
    ctx_dir = _store(tmp_path)
    doc = tmp_path / "deep.json"
    doc.write_text('{"version": 1, "nodes": ' + DEEP_ARRAY + "}")
    res = run_ctx(["--ctx-dir", str(ctx_dir), "import", str(doc)], timeout=20)
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E011]:"), res.stderr


def test_local_caches_nested_too_deeply_are_ignored(tmp_path: Path) -> None:
    # The LLM slot state (local/llm_state.json) is rebuilt from scratch when unreadable.
    ctx_dir = _store(tmp_path)
    src = ctx_dir.parent / "m.py"
    src.write_text("def deep_function():\n    return 1\n")
    res = run_ctx(["--ctx-dir", str(ctx_dir), "index"], cwd=ctx_dir.parent, timeout=30)
    assert res.returncode == 0 and "internal error" not in res.stderr, res.stderr
    (ctx_dir / "local" / "llm_state.json").write_text(DEEP_OBJECT)
    pack = tmp_path / "pack.json"
    pack.write_text(json.dumps({"task": "why"}))
    res = run_ctx(["--ctx-dir", str(ctx_dir), "llm", "--server", "http://127.0.0.1:9",
                   "--pack", str(pack), "--timeout", "2"], timeout=30)
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E022]:"), res.stderr


# -- every json.loads covers RecursionError -------------------------------------------------

# Readers of rows ctx itself derived from objects whose nesting the codec bounds
# (codec.MAX_DEPTH = 64), or of text ctx built a line before: never deeper than that.
_DERIVED = {
    ("query/executor.py", "select_scorable"),
    ("memory/db/handle.py", "_turn"),
    ("claude/transcript.py", "_string_prefix"),  # one JSON string literal: no nesting
    ("security/secrets.py", "_rule_document"),  # the rule file shipped in the package
}


def _json_reads(tree: ast.Module) -> list[tuple[str, ast.Call, list[ast.AST]]]:
    """Every ``json.loads`` call with its enclosing function name and ancestors."""
    found: list[tuple[str, ast.Call, list[ast.AST]]] = []

    def walk(node: ast.AST, parents: list[ast.AST]) -> None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "loads" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in ("json", "tomllib"):
            funcs = [p for p in parents if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))]
            found.append((funcs[-1].name if funcs else "<module>", node, list(parents)))
        for child in ast.iter_child_nodes(node):
            walk(child, [*parents, node])

    walk(tree, [])
    return found


def _covers_recursion(parents: list[ast.AST], call: ast.Call) -> bool:
    for parent in reversed(parents):
        if isinstance(parent, ast.Try) and any(call is n for stmt in parent.body for n in ast.walk(stmt)):
            for handler in parent.handlers:
                names = ([] if handler.type is None else
                         [e.id for e in (handler.type.elts if isinstance(handler.type, ast.Tuple)
                                         else [handler.type]) if isinstance(e, ast.Name)])
                if handler.type is None or {"RecursionError", "Exception", "BaseException"} & set(names):
                    return True
    return False


@pytest.mark.slow
def test_every_json_reader_covers_recursion_error() -> None:
    missing, exempt = [], set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        for func, call, parents in _json_reads(ast.parse(path.read_text(), rel)):
            if not _covers_recursion(parents, call):
                if (rel, func) in _DERIVED:
                    exempt.add((rel, func))
                else:
                    missing.append(f"{rel}:{call.lineno} in {func}")
    assert missing == []
    assert exempt == _DERIVED  # no stale exemption


def test_json_reader_check_finds_a_planted_reader() -> None:
    tree = ast.parse("import json\ndef f(t):\n    try:\n        return json.loads(t)\n"
                     "    except ValueError:\n        return None\n")
    (func, call, parents), = _json_reads(tree)
    assert func == "f" and not _covers_recursion(parents, call)
