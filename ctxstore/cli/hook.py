"""``ctx hook session-start|prompt-submit|stop|pre-compact|session-end``.

Claude Code runs these on every session start, prompt and reply, so two rules hold:
1. stdout is exactly one JSON object, always, and the exit code is 0, also for invalid
   input, an unknown event, a usage error, a missing store, a held lock or a corrupt
   store (named in ``systemMessage``: Claude Code ignores the output of a hook that
   exits non-zero). Claude Code treats exit 2 as "block", so a hook never exits 2
   (RELIABILITY.md HK-02, I8).
2. It is cheap: ``ctxstore.cli.hook_run.fast_main`` handles ``ctx hook EVENT`` without
   click or the store modules a handler does not need (bench/hooks.py); the click group
   here serves ``--help`` and the root options.

The handlers live in ``ctxstore.claude.hooks`` (dict in, dict out); this module reads
stdin, finds the store (``--ctx-dir``/``CTX_DIR``, else upwards from the payload's
``cwd``) and prints.
"""

from __future__ import annotations

from typing import Any

import click

from ctxstore.cli.hook_run import EVENTS, MAX_STDIN_BYTES, emit, fast_main, read_payload, run_event, warn

__all__ = ["EVENTS", "MAX_STDIN_BYTES", "hook_group", "fast_main", "read_payload", "run_event"]


class HookGroup(click.Group):
    """The hook group: usage errors and unknown events print ``{}`` and exit 0."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort) as exc:
            message = exc.format_message() if isinstance(exc, click.ClickException) else "aborted"
            warn(f"ctx hook: {message}")
            emit({})
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
        warn("ctx hook: no event given (one of " + ", ".join(EVENTS) + ")")
        emit({})


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

    CTX_TRANSCRIPT_TIMEOUT (seconds, default 5) bounds the time spent reading the
    transcript. Problems are also logged to .ctx/local/hooks.log.

    \b
    Example:
        echo '{"session_id":"s1","cwd":"'"$PWD"'","transcript_path":"/p/t.jsonl"}' | ctx hook stop
    """
    click.get_current_context().exit(run_event("stop", _root_ctx_dir(), response=response))
