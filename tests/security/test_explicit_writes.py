"""Explicit writes that hold a secret are refused, naming the rule and the line, and write
nothing: through the installed CLI, the Stop hook's <ctx:remember> and MCP ``remember``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_ctx, session_of, store_digest
from secret_tokens import TOKENS

BY_NAME = {t.name: t for t in TOKENS}
GH = BY_NAME["github-classic-pat"]
AWS = BY_NAME["aws-access-key-id"]
PEM = BY_NAME["private-key-pem"]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    res = run_ctx(["--ctx-dir", str(work / ".ctx"), "init", "--no-git"], cwd=work)
    assert res.returncode == 0, res.stderr
    return work


def ctx(work: Path, *args: str, stdin: str | None = None):
    return run_ctx(["--ctx-dir", str(work / ".ctx"), *args], cwd=work, stdin=stdin)


def refused(work: Path, rule: str, line: int, *args: str, stdin: str | None = None) -> str:
    before = store_digest(work / ".ctx")
    res = ctx(work, *args, stdin=stdin)
    assert (res.returncode, res.stdout) == (1, ""), (res.returncode, res.stdout, res.stderr)
    assert res.stderr.startswith("ctx: error[E025]: "), res.stderr
    assert f"{rule} on line {line}" in res.stderr, res.stderr
    assert store_digest(work / ".ctx") == before
    for token in TOKENS:
        assert token.secret not in res.stderr
    return res.stderr


@pytest.mark.slow
def test_explicit_cli_writes_with_a_secret_are_refused(work: Path, tmp_path: Path) -> None:
    note = f"Deploy notes\nthe bot uses {GH.text}\n"
    err = refused(work, "github-pat", 2, "add", "note", note)
    assert err.startswith("ctx: error[E025]: the note holds a secret (github-pat on line 2)")
    refused(work, "aws-access-token", 1, "add", "--type", "fact", AWS.text)
    refused(work, "private-key", 2, "add", "--type", "fact", "--stdin", stdin="key:\n" + PEM.text)
    refused(work, "github-pat", 2, "add", "decision", "Rotate deploy keys", "--body", note)
    refused(work, "github-pat", 2, "add", "task", "Fix deploy", "--stdin", stdin=note)
    refused(work, "github-pat", 1, "add", "--type", "fact", "ok", "--meta", f"token={GH.secret}")
    nid = ctx(work, "add", "--type", "fact", "the deploy authenticates with a bot token").stdout.strip()
    refused(work, "github-pat", 2, "update", nid, "--content", note)
    refused(work, "github-pat", 1, "update", nid, "--summary", GH.text)
    refused(work, "github-pat", 1, "summarize", nid, "--content", GH.text)
    doc = {"version": 1, "format": "ctx-export",
           "nodes": [{"id": "01J8Z1N6Q0Y8M5H2W3V4X5Y6Z7", "type": "fact", "content": note}]}
    err = refused(work, "github-pat", 2, "import", stdin=json.dumps(doc))
    assert "nodes[0].content holds a secret" in err
    refused(work, "github-pat", 1, "view", "create", "deploy", "--query", "type:fact",
            "--description", GH.text)
    refused(work, "github-pat", 1, "relate", nid, "RELATES_TO", nid, "--evidence", GH.text)
    refused(work, "github-pat", 1, "commit", "-m", f"deploy with {GH.secret}")
    refused(work, "github-pat", 1, "stage", "compact", "-m", f"deploy with {GH.secret}")
    source = tmp_path / "deploy.env"
    source.write_text(f"REGION=eu-west-1\n{AWS.text}\n")
    err = refused(work, "aws-access-token", 2, "ingest", str(source))
    assert f"{source} holds a secret" in err


def test_allow_secret_stores_an_explicit_write(work: Path) -> None:
    res = ctx(work, "add", "--type", "fact", GH.text, "--allow-secret")
    assert res.returncode == 0, res.stderr
    shown = json.loads(ctx(work, "--format", "json", "show", res.stdout.strip()).stdout)
    assert shown["content"] == GH.text


def test_clean_text_near_secret_words_is_stored(work: Path) -> None:
    for text in ("The deploy reads GITHUB_TOKEN from the environment",
                 "password_hash = generate_password_hash(password)",
                 "DATABASE_URL=postgres://user:password@localhost/app"):
        res = ctx(work, "add", "--type", "fact", text)
        assert res.returncode == 0, res.stderr


def _stop(work: Path, reply: str) -> dict:
    payload = json.dumps({"session_id": "s1", "cwd": str(work), "hook_event_name": "Stop",
                          "last_assistant_message": reply})
    res = run_ctx(["hook", "stop"], cwd=work, stdin=payload)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_stop_hook_remember_with_a_secret_is_refused_and_reported(work: Path) -> None:
    before = store_digest(work / ".ctx")
    out = _stop(work, f'Done.\n\n<ctx:remember type="fact">deploy token\n{GH.text}</ctx:remember>\n')
    message = out.get("systemMessage", "")
    assert "remember> failed: content holds a secret (github-pat on line 2)" in message, out
    assert GH.secret not in json.dumps(out)
    assert store_digest(work / ".ctx") == before
    log = (work / ".ctx" / "local" / "hooks.log").read_text()
    assert "github-pat" in log and GH.secret not in log
    ok = _stop(work, '<ctx:remember type="fact">the deploy reads its token from the vault</ctx:remember>')
    assert "holds a secret" not in ok.get("systemMessage", "")
    listed = json.loads(ctx(work, "--format", "json", "list").stdout)["nodes"]
    assert [n["content"] for n in listed] == ["the deploy reads its token from the vault"]


def test_mcp_remember_with_a_secret_is_a_tool_error(work: Path) -> None:
    pytest.importorskip("mcp")
    from tests.mcp.test_server import _call, _fail, _session

    before = store_digest(work / ".ctx")

    async def body(client) -> None:  # type: ignore[no-untyped-def]
        text = await _fail(client, "remember", content=f"the key is {AWS.text}")
        assert "E025" in text and "aws-access-token on line 1" in text
        assert AWS.secret not in text
        await _call(client, "remember", content="the deploy key lives in the vault")

    _session(work / ".ctx")(body)
    assert store_digest(work / ".ctx") != before  # the clean one was stored
    listed = json.loads(ctx(work, "--format", "json", "list").stdout)["nodes"]
    assert [n["content"] for n in listed] == ["the deploy key lives in the vault"]


def test_consolidate_content_with_a_secret_is_refused(store) -> None:
    from ctxstore.errors import SecretRefused
    from ctxstore.lifecycle.consolidate import apply_proposals

    before = store_digest(store.root)
    with pytest.raises(SecretRefused) as err:
        apply_proposals(session_of(store), ["p1"], content=f"merged:\n{GH.text}")
    assert err.value.rule == "github-pat" and err.value.line == 2
    assert store_digest(store.root) == before
