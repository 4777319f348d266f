"""The ``ctx`` command: a thin click layer over the library.

Only this package reads the environment, argv, stdin and the terminal. Commands are
loaded lazily (``--help`` and hot commands import only what they use), and every
error goes through one funnel: ``CtxGroup.invoke`` (``ctxstore.cli.root``) turns a
``CtxError`` into one line ``ctx: error[E00x]: ...`` and its exit code, and anything
unexpected into "internal error (rerun with --debug)". This module itself imports no
click: ``ctx hook EVENT``, run on every prompt, takes a path without it
(``ctxstore.cli.hook_run``). ``ctxstore.cli.cli`` is the root group, loaded on first use.
"""

from __future__ import annotations

import atexit
import gc
import sys
from typing import Any, NoReturn

__all__ = ["cli", "main", "COMMANDS", "ADD_COMMANDS"]


def main() -> None:
    """Console-script entry point (``ctx hook EVENT`` takes a fast path: hooks run on every prompt)."""
    # Interpreter shutdown runs a full garbage collection over every module object (10-15 ms
    # here). Nothing of ours relies on it: writes are durable before the command returns and
    # SQLite connections close by reference counting. Freezing the heap at exit skips it.
    atexit.register(gc.freeze)
    if sys.argv[1:2] == ["hook"]:
        from ctxstore.cli.hook_run import fast_main

        if (code := fast_main(sys.argv[2:])) is not None:
            _leave(code)
    from ctxstore.cli import _collector

    _collector.pause()  # while the command line starts (root.CtxGroup.get_command resumes)
    from ctxstore.cli.root import cli

    try:
        cli(prog_name="ctx")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            _leave(exc.code or 0)
        raise


def _leave(code: int) -> NoReturn:
    """End the process once its output is flushed, without the interpreter's teardown.

    Every write of a command is durable before it returns (transactions, committed state)
    and nothing of ctx starts threads that must finish, so freeing every module and object
    at exit (5-20 ms: more after a large ``ctx index``) buys nothing. Exit handlers still
    run. Open SQLite connections are left to the operating system: the index is derived,
    and a write-ahead log left behind is replayed by the next open.
    """
    import os

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away: nothing more to say
            pass
    os._exit(code)


def __getattr__(name: str) -> Any:
    """``ctxstore.cli.cli`` and the command table, imported on first use.

    The root group brings click; the table (``cli.table``) is read by ``ctx --help`` and the
    root group, never by a hook.
    """
    if name == "cli":
        from ctxstore.cli.root import cli

        return cli
    if name in ("COMMANDS", "ADD_COMMANDS"):
        from ctxstore.cli import table

        return getattr(table, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
