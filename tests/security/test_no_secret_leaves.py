"""Issue 31's check: the fixture's tokens planted in every write path, then `ctx commit`.

After it no decompressed object, narrative file, index or memory database holds a token;
no pack, hook output or MCP answer shows one; explicit writes failed naming the rule.
Everything runs through the installed CLI (subprocesses), the hooks and the MCP server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import zstandard
from conftest import run_ctx
from secret_tokens import TOKENS

from tests.llm._llmserver import Behaviour, serve
from tests.memory.memtx import Transcript

SECRETS = [t.secret for t in TOKENS]
LINES = "\n".join(t.text for t in TOKENS)  # every format, each in the line it is found in
BY_NAME = {t.name: t for t in TOKENS}


def leaks(data: bytes | str) -> list[str]:
    """The fixture's token formats whose secret ``data`` holds."""
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    return [t.name for t in TOKENS if t.secret in text]


def objects_text(ctx_dir: Path) -> list[str]:
    """Every object of the store, decompressed, as text."""
    dctx = zstandard.ZstdDecompressor()
    return [dctx.decompress(p.read_bytes()).decode("utf-8", "replace")
            for p in sorted(ctx_dir.rglob("objects/*/*")) if len(p.name) == 64]


def store_leaks(ctx_dir: Path) -> dict[str, list[str]]:
    """Every file under .ctx/ holding a token: objects decompressed, everything else raw."""
    found: dict[str, list[str]] = {}
    dctx = zstandard.ZstdDecompressor()
    for path in sorted(ctx_dir.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        rel = path.relative_to(ctx_dir).as_posix()
        if "/objects/" in f"/{rel}" and len(path.name) == 64:
            data = dctx.decompress(data)
        if names := leaks(data):
            found[rel] = names
    return found


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "app").mkdir(parents=True)
    (work / "config").mkdir()
    # A repository as a developer has it: a token in code, keys in .env, a private key.
    (work / "app" / "deploy.py").write_text(
        '"""Deploy the app."""\n\nimport os\n\n' + LINES + "\n\n\ndef deploy():\n    return os.getcwd()\n")
    (work / "app" / "settings.py").write_text("DEBUG = False\n" + BY_NAME["stripe-secret-key"].text + "\n")
    (work / ".env").write_text(BY_NAME["aws-access-key-id"].text + "\n"
                               + BY_NAME["aws-secret-access-key"].text + "\n")
    (work / "config" / "id_rsa").write_text(BY_NAME["private-key-pem"].text + "\n")
    (work / ".gitignore").write_text("# .env is deliberately not ignored\n")
    assert run_ctx(["--ctx-dir", str(work / ".ctx"), "init", "--no-git"], cwd=work).returncode == 0
    return work


def ctx(work: Path, *args: str, stdin: str | None = None, code: int = 0):
    res = run_ctx(["--ctx-dir", str(work / ".ctx"), *args], cwd=work, stdin=stdin, timeout=120)
    assert res.returncode == code, (args, res.returncode, res.stdout, res.stderr)
    return res


def hook(work: Path, event: str, payload: dict) -> dict:
    res = run_ctx(["hook", event], cwd=work, stdin=json.dumps(payload), timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.slow
def test_no_secret_leaves_through_any_write_path(work: Path, tmp_path: Path) -> None:
    ctx_dir = work / ".ctx"
    # -- automatic capture: redacted ---------------------------------------------------------
    res = ctx(work, "index")
    assert "sensitive files not read" in res.stderr and ".env" in res.stderr \
        and "config/id_rsa" in res.stderr
    ctx(work, "add", "file", "app/settings.py")
    ctx(work, "add", "command", "--name", "deploy", "--stdin", "--exit-code", "1",
        stdin=f"Deploying...\nerror: auth failed for {LINES}\n")
    ctx(work, "add", "command", "--name", "env dump", "--",
        sys.executable, "-c", f"print({LINES!r})")
    with serve(Behaviour(answer=f"The deploy authenticates with these:\n{LINES}\n")) as url:
        ctx(work, "llm", "--server", url, "--query", "how does the deploy authenticate", "--commit")
    # -- explicit writes: refused, the rule named ---------------------------------------------
    gh, slack = BY_NAME["github-classic-pat"].text, BY_NAME["slack-bot-token"].text
    for args, stdin in ((["add", "note", f"api key in a note: {BY_NAME['openai-api-key'].text}"], None),
                        (["add", "--type", "fact", "--stdin"], LINES),
                        (["add", "decision", "Use the bot", "--body", gh], None),
                        (["import"], json.dumps({"version": 1, "format": "ctx-export", "nodes": [
                            {"id": "01J8Z1N6Q0Y8M5H2W3V4X5Y6Z7", "type": "fact", "content": LINES}]})),
                        (["ingest", str(work / "app" / "deploy.py")], None)):
        res = ctx(work, *args, stdin=stdin, code=1)
        assert res.stderr.startswith("ctx: error[E025]: ") and " on line " in res.stderr, res.stderr
        assert not leaks(res.stderr)
    fact = ctx(work, "add", "--type", "fact", "the deploy reads its keys from the vault").stdout.strip()
    ctx(work, "update", fact, "--content", LINES, code=1)
    # -- the agent: a transcript holding every token, and tags in its last reply --------------
    tx = Transcript()
    tx.prompt(f"the deploy fails, here is my env:\n{LINES}")
    tx.tool("Bash", {"command": "cat .env"}, LINES)
    tx.say("I see the keys. Let me record what matters.\n\n"
           f'<ctx:remember type="fact">the deploy token is {gh}</ctx:remember>\n\n'
           f'<ctx:summarize nodes="{fact}">deploy auth summary: {slack}</ctx:summarize>\n')
    tx.end_turn()
    transcript = tx.write(tmp_path / "session.jsonl")
    base = {"session_id": tx.session, "transcript_path": str(transcript), "cwd": str(work)}
    out = hook(work, "stop", {**base, "hook_event_name": "Stop"})
    assert "remember> failed: content holds a secret (github-pat on line 1)" in out.get("systemMessage", "")
    assert not leaks(json.dumps(out))
    # -- a person pastes a token into today's log by hand --------------------------------------
    log = next((ctx_dir / "narrative" / "log").glob("*.md"))
    log.write_text(log.read_text() + f"\n\nRemember: {BY_NAME['anthropic-api-key'].text}\n")
    res = ctx(work, "commit", "-m", "session with secrets")
    assert "held secrets (anthropic-api-key on line" in res.stderr
    # -- nothing holds a token: objects (decompressed), narrative, index, memory, state -------
    assert store_leaks(ctx_dir) == {}
    objects = objects_text(ctx_dir)
    # Each capture path stored its text, redacted (not dropped): the file, the command's
    # output and command line, the LLM's answer.
    # ctx index keeps what it reads in this clone's code index (index/code.sqlite, never an
    # object): redacted there too, and store_leaks above read that file raw.
    import sqlite3
    import zlib

    from ctxstore.index.codedb import register_functions

    code = sqlite3.connect(ctx_dir / "index" / "code.sqlite")
    register_functions(code)
    chunks = [t for (t,) in code.execute("SELECT text FROM chunks WHERE path = 'app/deploy.py'")]
    # each file's text is kept once, compressed (code schema 4), where a raw read sees no token
    texts = [zlib.decompress(d).decode() for (d,) in code.execute("SELECT data FROM file_text")]
    code.close()
    assert any("[REDACTED:github-pat]" in t for t in chunks) and not leaks("".join(chunks))
    assert texts and not any(leaks(t) for t in texts)
    for marker, rule in (("DEBUG = False", "stripe-access-token"),
                         ("error: auth failed for", "private-key"), ("print(", "openai-api-key"),
                         ("The deploy authenticates with these", "jwt")):
        assert any(marker in o and f"[REDACTED:{rule}]" in o for o in objects), marker
    listed = json.loads(ctx(work, "--format", "json", "list").stdout)["nodes"]
    contents = "\n".join(n["content"] for n in listed)
    assert "[REDACTED:slack-bot-token]" in contents  # the summary was kept, redacted
    assert "[REDACTED:" in (ctx_dir / "narrative" / "log" / log.name).read_text()
    assert (ctx_dir / "local" / "memory.sqlite").exists()
    found = json.loads(ctx(work, "--format", "json", "memory", "search", "deploy env keys").stdout)
    assert found["results"] and "[REDACTED:" in json.dumps(found)
    # -- nothing shows one: packs, hooks, MCP ---------------------------------------------------
    for args in (["pack", "how does the deploy authenticate"],
                 ["--format", "json", "pack", "how does the deploy authenticate"],
                 ["search", "deploy"], ["--format", "json", "diagnostics"],
                 ["compose"], ["--format", "json", "show", fact, "--history"]):
        assert not leaks(ctx(work, *args).stdout), args
    for event, extra in (("session-start", {"source": "startup"}),
                         ("prompt-submit", {"prompt": "how does the deploy authenticate with the keys"})):
        assert not leaks(json.dumps(hook(work, event, {**base, "session_id": "s2", **extra})))
    pytest.importorskip("mcp")
    from tests.mcp.test_server import _call, _fail, _session

    async def body(client) -> None:  # type: ignore[no-untyped-def]
        answers = [await _call(client, "recall", query="deploy"),
                   await _call(client, "search", text="deploy token"),
                   await _call(client, "pack", task="how does the deploy authenticate"),
                   await _call(client, "memory_search", text="deploy env keys")]
        assert not leaks(json.dumps(answers))
        err = await _fail(client, "remember", content=LINES)
        assert "holds a secret" in err and not leaks(err)

    _session(ctx_dir)(body)
    assert store_leaks(ctx_dir) == {}
    # ctx's own scan of the whole store agrees: nothing found, and nothing flagged that is
    # not a secret (node metadata, hook state, memory, the index)
    res = ctx(work, "debug", "secrets")
    assert res.stdout.startswith("no secret found"), res.stdout
