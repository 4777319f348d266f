"""Running the installed CLI under a bound on time (and optionally memory) as the assertion.

Issue 34: every input a clone or a user can supply costs bounded time and memory. A test runs
``python -m ctxstore.cli`` in a child process with a wall-clock timeout and, where memory is
the question, an address-space limit (``RLIMIT_AS``); exceeding either fails the test with
what was being run. No timed unit test: the bound is the process's.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


def _limit_memory(limit: int | None) -> Callable[[], None] | None:
    if limit is None:
        return None

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_bounded(args: list[str], *, seconds: float, cwd: Path | None = None,
                stdin: bytes | str | None = None, memory: int | None = None,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``ctx ARGS`` and fail the test if it outlives ``seconds`` (or ``memory`` bytes).

    Returns the finished process (stdout and stderr decoded); asserts no traceback.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    try:
        proc = subprocess.run([sys.executable, "-m", "ctxstore.cli", *args], cwd=cwd, input=data,
                              capture_output=True, env=full_env, timeout=seconds,
                              preexec_fn=_limit_memory(memory))
    except subprocess.TimeoutExpired:
        pytest.fail(f"ctx {' '.join(args)[:200]} did not finish within {seconds} s")
    res = subprocess.CompletedProcess(proc.args, proc.returncode,
                                      proc.stdout.decode("utf-8", "replace"),
                                      proc.stderr.decode("utf-8", "replace"))
    assert "Traceback (most recent call last)" not in res.stderr, res.stderr[-3000:]
    assert "internal error" not in res.stderr, res.stderr[-3000:]
    return res
