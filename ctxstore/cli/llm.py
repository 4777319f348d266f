"""``ctx llm``: send a prompt pack to a local LLM server (spec 002 §13.2.8, §14)."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, pass_env, plural
from ctxstore.cli._render import shown, strip_terminal_controls
from ctxstore.errors import CtxError, InvalidInput
from ctxstore.knowledge._files import read_regular_file
from ctxstore.llm.ask import ask, call_settings, settle
from ctxstore.llm.prompt import MAX_PACK_BYTES, parse_pack

if TYPE_CHECKING:
    from ctxstore.llm.ask import Answer
    from ctxstore.llm.client import ServerChoice

def _read_pack_bytes(pack_file: str | None) -> tuple[bytes, str]:
    """The pack's bytes and what to call them (``--pack FILE`` or stdin)."""
    if pack_file is not None and pack_file != "-":
        return read_regular_file(Path(pack_file), MAX_PACK_BYTES, "prompt pack"), pack_file
    if sys.stdin is None or sys.stdin.isatty():
        raise InvalidInput("no prompt pack", hint="pipe one in (ctx pack TEXT --format json | "
                                                  "ctx llm), or use --pack FILE or --query TEXT")
    return sys.stdin.buffer.read(MAX_PACK_BYTES + 1), "stdin"


def _query_pack(env: Env, text: str, budget: int, reserve: int) -> bytes:
    """A §12.4 pack for ``text`` from the retrieval library (``ctx pack``), as JSON bytes.

    Raises:
        InvalidInput: if this build has no pack builder.
    """
    try:  # built alongside (ctx pack); absent from builds without it
        build = importlib.import_module("ctxstore.packs.pack").build_pack
    except (ImportError, AttributeError):
        raise InvalidInput("--query needs the prompt-pack builder (ctxstore.packs.pack), "
                           "which this build of ctx lacks",
                           hint="write a pack with `ctx pack TEXT --format json > pack.json` "
                                "and pass --pack pack.json") from None
    built: Any = build(env.session(), text, budget=budget, reserve=reserve)
    return json.dumps(built).encode("utf-8")


def _echo_text(answer: Answer) -> None:
    """The answer on stdout, then the notes on stderr: shown before anything is committed.

    The answer is untrusted (a model wrote it from repository content), so it goes through
    ``shown`` as stored text does: no escape sequences or controls reach a terminal.
    """
    click.echo(shown(answer.completion.text.rstrip("\n")))
    for note in answer.notes:
        click.echo(f"ctx: note: {strip_terminal_controls(note)}", err=True)


def _echo_json(answer: Answer, choice: ServerChoice) -> None:
    c = answer.completion
    committed = answer.committed
    emit_json({
        "server": {"url": choice.url, "source": choice.source, "protocol": c.protocol},
        "model": c.model, "text": c.text,
        "prompt": {"tokens": answer.prompt.tokens, "included": list(answer.prompt.included),
                   "skipped": list(answer.prompt.skipped)},
        "usage": {"prompt_tokens": c.tokens_prompt, "cached_tokens": c.tokens_cached,
                  "completion_tokens": c.tokens_predicted},
        "cache": {"restored": answer.cache_restored, "saved": answer.cache_saved},
        "mentions": [{"kind": m.kind, "key": m.key} for m in answer.mentions],
        "committed": None if committed is None else {
            "node": committed.node_id, "log": f"narrative/{committed.log}",
            "response_blob": committed.response_blob,
            "mentions": len(committed.mentions)},
        "notes": list(answer.notes)})


class _FiniteFloatRange(click.FloatRange):
    """A ``FloatRange`` that also refuses NaN (it passes every range comparison)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


@click.command("llm")
@click.option("--server", metavar="URL",
              help="LLM server URL (else CTX_LLM_SERVER, [llm] server_url, http://127.0.0.1:8080).")
@click.option("--pack", "pack_file", metavar="FILE",
              help="Prompt pack JSON (ctx pack --format json); default: standard input.")
@click.option("--query", metavar="TEXT", help="Build the pack for TEXT first (as ctx pack does).")
@click.option("--model", metavar="NAME", help="Model name (else [llm] model).")
@click.option("--budget", type=click.IntRange(1, 10_000_000), default=None, metavar="TOKENS",
              help="Tokens for prompt and answer together (else CTX_DEFAULT_BUDGET or [retrieval] "
                   "default_budget); never more than the context llama.cpp reports.")
@click.option("--max-tokens", type=click.IntRange(1, 1_000_000), metavar="N",
              help="Response token limit (else [llm] max_response_tokens).")
@click.option("--temperature", type=_FiniteFloatRange(0, 5), metavar="T",
              help="Sampling temperature (else [llm] temperature).")
@click.option("--timeout", type=_FiniteFloatRange(0.1, 86_400), metavar="S",
              help="Seconds a request may take (else [llm] timeout_seconds).")
@click.option("--commit", "commit", is_flag=True,
              help="Keep the answer: summary to today's log, node, blob and Mentions edges.")
@click.option("--format", "fmt_override", type=click.Choice(["text", "json"]), default=None,
              help="Output format: the answer's text, or JSON with usage and mentions.")
@pass_env
def llm_command(env: Env, server: str | None, pack_file: str | None, query: str | None,
                model: str | None, budget: int | None, max_tokens: int | None,
                temperature: float | None,
                timeout: float | None, commit: bool, fmt_override: str | None) -> None:
    """Send a prompt pack to an LLM server (llama.cpp or OpenAI-compatible) and print the answer.

    The protocol is detected (GET /props: llama.cpp /completion, with prompt-cache reuse;
    GET /v1/models: /v1/chat/completions) unless [llm] protocol says. A server URL from a
    cloned repository's config.toml is used only when it is on this machine. --commit
    appends the answer's summary to today's log as a source:llm observation and links it
    (Mentions) to the files and symbols the answer names.

    \b
    Examples:
        ctx pack "Explain the Client struct" --format json | ctx llm
        ctx llm --pack pack.json --server http://127.0.0.1:8080 --commit
        ctx llm --query "Why does connect time out?" --format json
        ctx llm --query "Why does connect time out?" --budget 6000 --max-tokens 1000
    """
    if fmt_override is not None:
        env.fmt = fmt_override
    if query is not None and pack_file is not None:
        raise click.UsageError("--query and --pack cannot be combined")
    store = env.store()
    choice = env.llm_server(server)
    total = budget if budget is not None else env.default_budget()
    settings = call_settings(store.config, choice.url, total_budget=total, model=model,
                             max_tokens=max_tokens, temperature=temperature, timeout=timeout)
    if query is not None:
        if not query.strip():
            raise InvalidInput("--query is empty")
        data, where = _query_pack(env, query, total, settings.max_tokens), "--query"
    else:
        data, where = _read_pack_bytes(pack_file)
    pack = parse_pack(data, where)
    worktree = None if env.kind == "user" else store.worktree
    answer = ask(store, pack, settings, worktree=worktree)
    as_json = env.fmt == "json"
    if not as_json:
        _echo_text(answer)  # before the commit, which a held lock may still refuse
    try:
        answer = settle(env.session(), answer, choice.url, commit=commit)
    except CtxError:
        if as_json:  # the answer as the server gave it, committed null; then the error line
            _echo_json(answer, choice)
        raise
    if answer.committed is not None:
        env.index()  # index the new node and edges now, not at the next read
    if as_json:
        _echo_json(answer, choice)
    elif answer.committed is not None:
        click.echo(f"committed {answer.committed.node_id} to narrative/{answer.committed.log} "
                   f"({plural(len(answer.committed.mentions), 'mention')})", err=True)
