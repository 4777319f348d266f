"""The hook fast path: ``ctx hook EVENT`` read, handled and printed without click.

Claude Code runs a hook on every session start, prompt and reply: ``ctxstore.cli.main``
sends ``ctx hook ...`` here before anything imports click or builds the root group
(bench/hooks.py measures the cost). The click commands of ``ctxstore.cli.hook`` (for
``--help`` and ``--ctx-dir``) call ``run_event`` too, so both paths behave the same.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["EVENTS", "MAX_STDIN_BYTES", "TRANSCRIPT_TIMEOUT", "fast_main", "transcript_timeout",
           "read_payload", "run_event", "emit", "warn"]

EVENTS = ("session-start", "prompt-submit", "stop", "pre-compact", "session-end")
MAX_STDIN_BYTES = 16 << 20
TRANSCRIPT_TIMEOUT = 5.0  # seconds; spec 001 §10, overridden by CTX_TRANSCRIPT_TIMEOUT


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_payload(stream: BinaryIO | None) -> dict[str, Any]:
    """The hook input as a dict.

    Anything else (empty, invalid, too large, not an object, too deeply nested) is an empty payload.
    """
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


def emit(out: dict[str, Any]) -> None:
    """Print ``out`` as one JSON line on stdout, its text sanitised (the hook's only output)."""
    data = json.dumps(_clean(out), ensure_ascii=False).encode("utf-8") + b"\n"
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def warn(text: str) -> None:
    """Write ``text`` as one line on stderr; with ``CTX_DEBUG=1`` also the current traceback."""
    sys.stderr.write(text.replace("\n", " ") + "\n")
    if os.environ.get("CTX_DEBUG") == "1":
        import traceback

        traceback.print_exc(file=sys.stderr)


def transcript_timeout() -> tuple[float, str | None]:
    """The seconds the Stop hook may spend reading the transcript (spec 001 §10).

    ``CTX_TRANSCRIPT_TIMEOUT`` (seconds, a positive number), else ``TRANSCRIPT_TIMEOUT``.

    Returns:
        The timeout, and a problem to report when the variable is set but not usable.
    """
    raw = os.environ.get("CTX_TRANSCRIPT_TIMEOUT")
    if raw is None or not raw.strip():
        return TRANSCRIPT_TIMEOUT, None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:  # NaN fails this too
        return TRANSCRIPT_TIMEOUT, (f"CTX_TRANSCRIPT_TIMEOUT={raw[:40]!r} is not a number of seconds "
                                    f"(0 < s <= 3600); using {TRANSCRIPT_TIMEOUT:g}")
    return value, None


def _with_problem(out: dict[str, Any], problem: str | None) -> dict[str, Any]:
    if not problem:
        return out
    message = out.get("systemMessage")
    return {**out, "systemMessage": f"{message}; {problem}" if message else f"ctx: {problem}"}


def run_event(event: str, ctx_dir: str | None, *, response: str | None = None) -> int:
    """Run one hook event end to end: read stdin, handle, print one JSON object.

    Every problem reported (``systemMessage``, an internal error) is also appended to the
    store's ``local/hooks.log`` (``claude.hooklog``).

    Returns:
        The exit code, always 0: Claude Code ignores the output of a hook that fails
        (any other exit), so a damaged store is reported in ``systemMessage`` with exit 0.
    """
    payload = read_payload(getattr(sys.stdin, "buffer", None))
    root = None
    logged: str | None = None  # a problem said on stderr only
    try:
        from ctxstore.claude import hooks

        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
        home = Path(os.path.expanduser("~"))
        root = hooks.find_store_root(cwd, ctx_dir or os.environ.get("CTX_DIR") or None, home)
        if event == "stop":
            timeout, problem = transcript_timeout()
            out = _with_problem(hooks.stop(root, payload, response=response,
                                           transcript_timeout=timeout), problem)
        elif event in hooks.HANDLERS:
            out = hooks.HANDLERS[event](root, payload)
        else:
            logged = f"unknown event {event!r} (one of {', '.join(EVENTS)})"
            warn(f"ctx hook: {logged}")
            out = {}
    except Exception as exc:  # the hook funnel: never a traceback, never exit 2
        from ctxstore.errors import CtxError, OutOfMemory, StoreCorrupt

        if isinstance(exc, MemoryError):  # named, not an internal error
            exc = OutOfMemory(f"running the {event} hook")
        if isinstance(exc, StoreCorrupt):
            # Exit 0: Claude Code drops the JSON of a hook that exits non-zero, and the
            # message is the only way the user learns of the damage.
            out = {"systemMessage": f"ctx: the store is damaged ({exc.code}: {exc.message}); "
                                    "run `ctx debug verify`"}
            warn(f"ctx: error[{exc.code}]: {exc.message}")
        elif isinstance(exc, CtxError):
            out = {"systemMessage": f"ctx: {exc.message}"}
            warn(f"ctx: error[{exc.code}]: {exc.message}")
        else:
            out = {}
            logged = f"internal error: {type(exc).__name__}: {exc}"
            warn(f"ctx hook: internal error: {type(exc).__name__} (CTX_DEBUG=1 for a traceback)")
    emit(out)
    _log(root, event, out, logged)
    return 0


def _log(root: Path | None, event: str, out: dict[str, Any], extra: str | None) -> None:
    """Append the problems of this run to ``local/hooks.log`` (after the output: never delays it)."""
    message = out.get("systemMessage")
    texts = [t for t in (message if isinstance(message, str) else None, extra) if t]
    if not texts or root is None:
        return
    from ctxstore.claude.hooklog import log_problem

    for text in texts:
        log_problem(root, event or "-", text.removeprefix("ctx: "))


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
