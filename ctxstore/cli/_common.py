"""Shared CLI plumbing: the per-invocation environment, store opening, output helpers."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import click

from ctxstore.repo import Store, discover_store, open_store

__all__ = ["Env", "pass_env", "format_option", "emit_json", "progress_printer", "fmt_time"]


@dataclass
class Env:
    """Options of the root group, plus the lazily opened store."""

    ctx_dir: str | None
    fmt: str
    debug: bool
    _store: Store | None = field(default=None, repr=False)

    def store_path(self) -> Path:
        """Where the store is: --ctx-dir/CTX_DIR, else the nearest .ctx/ upwards."""
        if self.ctx_dir:
            path = Path(self.ctx_dir)
            if not (path / "HEAD").exists() and (path / ".ctx" / "HEAD").exists():
                return path / ".ctx"
            return path
        return discover_store(Path(os.getcwd()))

    def store(self) -> Store:
        """Open (once) and return the store."""
        if self._store is None:
            self._store = open_store(self.store_path())
        return self._store


pass_env = click.make_pass_decorator(Env)


def format_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--format`` on a subcommand; overrides the root group's ``--format``."""
    def callback(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            ctx.find_object(Env).fmt = value  # type: ignore[union-attr]
        return value

    return click.option("--format", "fmt_override", type=click.Choice(["text", "json", "markdown"]),
                        default=None, expose_value=False, callback=callback, is_eager=False,
                        help="Output format (same as the global --format).")(func)


def emit_json(value: Any) -> None:
    """Print one JSON document with ``"version": 1``."""
    if isinstance(value, dict) and "version" not in value:
        value = {"version": 1, **value}
    click.echo(json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False))


def progress_printer(label: str) -> Callable[[int, int], None] | None:
    """A (done, total) callback that draws progress on stderr, only on a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\r{label}: {done}/{total}{end}")
        sys.stderr.flush()

    return show


def fmt_time(seconds: float) -> str:
    """UTC ISO-8601 text of a Unix time."""
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
