"""Shared CLI plumbing: the per-invocation environment, store opening, output helpers.

Only the CLI reads the environment: the store location (``--ctx-dir``/``CTX_DIR``,
``--db``/``CTX_DB``), ``CTX_DEFAULT_BUDGET`` and the home directory of the user store.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxstore.errors import InvalidInput, StoreNotFound
from ctxstore.repo import Store, discover_store
from ctxstore.session import Session

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Env", "pass_env", "format_option", "emit_json", "progress_printer", "fmt_time",
           "parse_since", "default_budget", "node_json", "preview"]


@dataclass
class Env:
    """Options of the root group, plus the lazily opened ``Session`` (store and index).

    The session is closed when the command ends (``close``, registered by the root group).
    """

    ctx_dir: str | None
    fmt: str
    debug: bool
    kind: str = "project"
    _session: Session | None = field(default=None, repr=False)

    def store_path(self) -> Path:
        """--ctx-dir/CTX_DIR (or --db/CTX_DB), else the nearest .ctx/ upwards, else ~/.ctx."""
        if self.ctx_dir:
            self.kind = "explicit"
            path = Path(self.ctx_dir)
            if not (path / "HEAD").exists() and (path / ".ctx").is_dir():
                # The project holding the store: its .ctx/ (E005 if that has no HEAD).
                return discover_store(path)
            return path
        home = Path(os.path.expanduser("~")) / ".ctx"
        try:
            # A .ctx/ directory without HEAD on the way up raises RefNotFound (E005): a
            # damaged project store is reported, never replaced by the user store.
            found = discover_store(Path(os.getcwd()), user_store=home)
        except StoreNotFound:
            pass
        else:
            if found.absolute() == home.absolute():
                self.kind = "user"
            return found
        # No project store: the user store ~/.ctx (DESIGN §2), created on first use.
        self.kind = "user"
        if not (home / "HEAD").exists():
            from ctxstore.init import init_store

            init_store(home, git=False)
        return home

    def session(self) -> Session:
        """Open (once) and return the session of this command."""
        if self._session is None:
            self._session = Session.open(self.store_path())
        return self._session

    def store(self) -> Store:
        """Open (once) and return the store."""
        return self.session().store

    def index(self) -> sqlite3.Connection:
        """The session's derived index, brought up to date with HEAD and STAGE."""
        return self.session().index()

    def close(self) -> None:
        """Close the session (its index connection), if one was opened."""
        if self._session is not None:
            self._session.close()


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
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: float | None = None) -> float:
    """``1h``/``7d``/``2w`` (ago) or ``YYYY-MM-DD`` → a Unix time.

    Raises:
        InvalidInput: for anything else.
    """
    now = time.time() if now is None else now
    m = _DURATION.fullmatch(text.strip())
    if m:
        return now - int(m.group(1)) * _UNIT[m.group(2)]
    try:
        day = dt.datetime.strptime(text.strip(), "%Y-%m-%d").replace(tzinfo=dt.UTC)
    except ValueError:
        raise InvalidInput(f"invalid --since {text!r} (want e.g. 1h, 7d, 2w or 2026-01-31)") from None
    return day.timestamp()


def default_budget() -> int:
    """``CTX_DEFAULT_BUDGET`` or 50,000.

    Raises:
        InvalidInput: if the variable is not a positive integer.
    """
    raw = os.environ.get("CTX_DEFAULT_BUDGET")
    if raw is None or not raw.strip():
        return 50_000
    if not raw.strip().isdigit() or int(raw) < 1:
        raise InvalidInput(f"CTX_DEFAULT_BUDGET must be a positive integer, got {raw!r}")
    return int(raw)


def preview(text: str, width: int = 70) -> str:
    """First line of ``text``, cut to ``width`` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def node_json(node: Any) -> dict[str, Any]:
    """A node as JSON (times as ISO-8601)."""
    from ctxstore.packs.compose import iso_ms, tier_of

    return {"id": node.id, "type": node.type, "content": node.content, "summary": node.summary,
            "tags": node.tags, "tier": tier_of(node), "metadata": node.metadata,
            "status": node.status, "superseded_by": node.superseded_by,
            "token_estimate": node.tokens, "created_at": iso_ms(node.created_at),
            "updated_at": iso_ms(node.updated_at)}
