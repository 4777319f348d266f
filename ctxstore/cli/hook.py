"""``ctx hook session-start|prompt-submit|stop|pre-compact|session-end``.

Claude Code runs these on every session start, prompt and reply, so two rules hold:
1. stdout is exactly one JSON object, always, and the exit code is 0, also for invalid
   input, an unknown event, a usage error, a missing store or a held lock; only a
   corrupt store exits 1 (still with JSON on stdout, and never a traceback). Claude
   Code treats exit 2 as "block", so a hook never exits 2 (RELIABILITY.md HK-02, I8).
2. It is cheap: ``fast_main`` handles ``ctx hook EVENT`` without building the root click
   group or importing the store modules a handler does not need (bench/hooks.py).

The handlers live in ``ctxstore.claude.hooks`` (dict in, dict out); this module reads
stdin, finds the store (``--ctx-dir``/``CTX_DIR``, else upwards from the payload's
``cwd``) and prints.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

import click

__all__ = ["EVENTS", "MAX_STDIN_BYTES", "hook_group", "fast_main", "read_payload", "run_event"]

EVENTS = ("session-start", "prompt-submit", "stop", "pre-compact", "session-end")
MAX_STDIN_BYTES = 16 << 20


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_payload(stream: BinaryIO | None) -> dict[str, Any]:
    """The hook input as a dict; anything else (empty, invalid, too large, not an
    object, too deeply nested) is an empty payload."""
    if stream is None or stream.isatty():
        return {}
    try:
        raw = stream.read(MAX_STDIN_BYTES + 1)
    except OSError:
        return {}
    if not raw or len(raw) > MAX_STDIN_BYTES:
        return {}
    text = raw.decode("utf-8", "replace").lstrip("\ufeff")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _clean(value: Any) -> Any:
    from ctxstore.claude.inject import sanitize_text

    if isinstance(value, str):
        return sanitize_text(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _emit(out: dict[str, Any]) -> None:
    data = json.dumps(_clean(out), ensure_ascii=False).encode("utf-8") + b"\n"
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _warn(text: str) -> None:
    sys.stderr.write(text.replace("\n", " ") + "\n")
    if os.environ.get("CTX_DEBUG") == "1":
        import traceback

        traceback.print_exc(file=sys.stderr)


def run_event(event: str, ctx_dir: str | None, *, response: str | None = None) -> int:
    """Run one hook event end to end: read stdin, handle, print one JSON object.

    Returns:
        The exit code: 1 for a corrupt store, else 0.
    """
    payload = read_payload(getattr(sys.stdin, "buffer", None))
    code = 0
    try:
        from ctxstore.claude import hooks

        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
        home = Path(os.path.expanduser("~"))
        root = hooks.find_store_root(cwd, ctx_dir or os.environ.get("CTX_DIR") or None, home)
        if event == "stop":
            out = hooks.stop(root, payload, response=response)
        elif event in hooks.HANDLERS:
            out = hooks.HANDLERS[event](root, payload)
        else:
            _warn(f"ctx hook: unknown event {event!r} (one of {', '.join(EVENTS)})")
            out = {}
    except Exception as exc:  # the hook funnel: never a traceback, never exit 2
        from ctxstore.errors import CtxError, StoreCorrupt

        if isinstance(exc, StoreCorrupt):
            code = 1
            out = {"systemMessage": f"ctx: the store is damaged ({exc.code}: {exc.message}); "
                                    "run `ctx debug verify`"}
            _warn(f"ctx: error[{exc.code}]: {exc.message}")
        elif isinstance(exc, CtxError):
            out = {"systemMessage": f"ctx: {exc.message}"}
            _warn(f"ctx: error[{exc.code}]: {exc.message}")
        else:
            out = {}
            _warn(f"ctx hook: internal error: {type(exc).__name__} (CTX_DEBUG=1 for a traceback)")
    _emit(out)
    return code


def fast_main(argv: list[str]) -> int | None:
    """``ctx hook EVENT [--response TEXT] [ignored ...]`` without the click machinery.

    Returns:
        The exit code, or None when click should handle the command line (``--help``).
    """
    if any(a in ("-h", "--help") for a in argv):
        return None
    event = argv[0] if argv else ""
    response = None
    if event == "stop":
        for i, arg in enumerate(argv):
            if arg == "--response" and i + 1 < len(argv):
                response = argv[i + 1]
            elif arg.startswith("--response="):
                response = arg.split("=", 1)[1]
    return run_event(event, None, response=response)


class HookGroup(click.Group):
    """The hook group: usage errors and unknown events print ``{}`` and exit 0."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort) as exc:
            message = exc.format_message() if isinstance(exc, click.ClickException) else "aborted"
            _warn(f"ctx hook: {message}")
            _emit({})
            raise click.exceptions.Exit(0) from None


_LENIENT = {"ignore_unknown_options": True, "allow_extra_args": True}


def _root_ctx_dir() -> str | None:
    params = click.get_current_context().find_root().params
    return params.get("ctx_dir") or params.get("db")


@click.group("hook", cls=HookGroup, invoke_without_command=True, no_args_is_help=False,
             context_settings=_LENIENT)
@click.pass_context
def hook_group(ctx: click.Context) -> None:
    """Claude Code hook entry points: JSON on stdin, one JSON object on stdout, exit 0.

    Configured by `ctx install`. See docs/hooks.md for what each event does.

    \b
    Examples:
        echo '{"session_id":"s1","cwd":"'"$PWD"'","source":"startup"}' | ctx hook session-start
        echo '{"session_id":"s1","transcript_path":"/path/t.jsonl"}' | ctx hook stop
    """
    if ctx.invoked_subcommand is None:
        _warn("ctx hook: no event given (one of " + ", ".join(EVENTS) + ")")
        _emit({})


def _event_command(event: str, doc: str) -> click.Command:
    @click.pass_context
    def command(ctx: click.Context) -> None:
        ctx.exit(run_event(event, _root_ctx_dir()))

    command.__doc__ = doc
    return hook_group.command(event, context_settings=_LENIENT)(command)


session_start_command = _event_command("session-start", """Inject the default view of memory
    (capped at 9,000 characters) plus results pending for the session.

    \b
    Example:
        echo '{"session_id":"s1","cwd":"'"$PWD"'","source":"startup"}' | ctx hook session-start
    """)
prompt_submit_command = _event_command("prompt-submit", """Deliver pending recall, status and
    expand results once.

    \b
    Example:
        echo '{"session_id":"s1","cwd":"'"$PWD"'","prompt":"hi"}' | ctx hook prompt-submit
    """)
pre_compact_command = _event_command("pre-compact", """Run deferred commands and note the
    compaction (memory is injected again by the next session-start).

    \b
    Example:
        echo '{"session_id":"s1","cwd":"'"$PWD"'","trigger":"auto"}' | ctx hook pre-compact
    """)
session_end_command = _event_command("session-end", """Run commands deferred by a held lock,
    if the lock is free.

    \b
    Example:
        echo '{"session_id":"s1","cwd":"'"$PWD"'","reason":"other"}' | ctx hook session-end
    """)


@hook_group.command("stop", context_settings=_LENIENT)
@click.option("--response", default=None,
              help="Use this text as the assistant's reply instead of reading the transcript.")
def stop_command(response: str | None) -> None:
    """Run the <ctx:*> commands of the last assistant turn, each exactly once.

    \b
    Example:
        echo '{"session_id":"s1","cwd":"'"$PWD"'","transcript_path":"/p/t.jsonl"}' | ctx hook stop
    """
    click.get_current_context().exit(run_event("stop", _root_ctx_dir(), response=response))
