"""Shared CLI plumbing: the per-invocation environment, store opening, output helpers.

Only the CLI reads the environment: the store location (``--ctx-dir``/``CTX_DIR``,
``--db``/``CTX_DB``), ``CTX_DEFAULT_BUDGET`` and the home directory of the user store.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._notices import user_store
from ctxstore.discovery import discover_store
from ctxstore.errors import InvalidInput, StoreNotFound
from ctxstore.records import dataclass, field
from ctxstore.session import Session

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.config import Config
    from ctxstore.llm.client import ServerChoice
    from ctxstore.repo import Store

__all__ = ["Env", "pass_env", "format_option", "emit_json", "progress_printer", "fmt_time",
           "parse_since", "default_budget", "node_json", "preview", "plural",
           "finish_progress", "DEFAULT_BUDGET", "output_option", "write_output"]


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
        found = _project_store()
        if found is not None:
            return found
        # No project store: the user store ~/.ctx (DESIGN §2), created on first use.
        self.kind = "user"
        home = user_store()
        if not (home / "HEAD").exists():
            from ctxstore.init import init_store

            init_store(home, git=False)
        return home

    def require_project(self, what: str) -> None:
        """Refuse to run ``what`` on the user store ~/.ctx (it has no work tree to read).

        Checked before the store is opened, so nothing (no ~/.ctx) is created.

        Raises:
            StoreNotFound: (E012) when no --ctx-dir is given and no project store is found.
        """
        if not self.ctx_dir and _project_store() is None:
            raise StoreNotFound(f"{what} needs a project store, and there is none here",
                                hint="run `ctx init` at the repository's root first")

    def session(self) -> Session:
        """Open (once) and return the session of this command."""
        if self._session is None:
            self._session = Session.open(self.store_path())
            _warn_unknown_keys(self._session)
            _warn_clamped_limits(self._session)
        return self._session

    def default_budget(self) -> int:
        """``CTX_DEFAULT_BUDGET``, else this store's ``[retrieval] default_budget``.

        Raises:
            InvalidInput: if the variable is not a positive integer.
        """
        return default_budget(self.session().config)

    def llm_server(self, flag: str | None) -> ServerChoice:
        """The LLM server of a call: ``--server``, ``CTX_LLM_SERVER``, the project's or user's config.

        Raises:
            InvalidInput: if the chosen value is not an http(s) URL.
            ConfigInvalid: (E015) if a cloned repository's config names a remote server.
        """
        from ctxstore.llm.ask import choose_server

        return choose_server(self.store(), flag=flag,
                             env_server=os.environ.get("CTX_LLM_SERVER") or None,
                             home=Path(os.path.expanduser("~")), user_store=self.kind == "user")

    def store(self) -> Store:
        """Open (once) and return the store."""
        return self.session().store

    def index(self) -> sqlite3.Connection:
        """The session's derived index, brought up to date with HEAD and STAGE.

        A large catch-up (an import, a pull of many commits) shows progress on a terminal.
        """
        return self.session().index(progress=progress_printer("indexing records",
                                                              min_total=INDEX_PROGRESS_MIN))

    def failed(self, exc: BaseException) -> None:
        """The command failed with ``exc``: a damaged index is marked for the next command."""
        from ctxstore.errors import IndexCorrupt

        if self._session is not None and isinstance(exc, IndexCorrupt):
            self._session.index_damaged(exc)

    def close(self) -> None:
        """Close the session (its index connection), if one was opened."""
        if self._session is not None:
            self._session.close()


def _warn_unknown_keys(session: Session) -> None:
    """One stderr line naming config.toml keys this ctx does not know (a newer ctx's, or typos).

    Not an error: a store shared with a newer ctx may carry settings this one lacks.
    """
    unknown = session.config.unknown
    path = str(session.root / "config.toml")
    if unknown:  # the session is opened once per command: one warning per command
        click.echo(f"ctx: warning: {path}: unknown {'key' if len(unknown) == 1 else 'keys'} "
                   f"{', '.join(unknown)} (ignored)", err=True)


def _warn_clamped_limits(session: Session) -> None:
    """One stderr line naming the resource limits a committed config.toml raised without consent.

    They apply at their committed ceiling (``ctxstore.limits``) until ``ctx trust``.
    """
    clamped = session.config.clamped
    if not clamped:
        return
    values = ", ".join(f"[{s}] {k} = {v} (using {session.config.get(s, k)})"
                       for (s, k), v in sorted(clamped.items()))
    click.echo(f"ctx: warning: {session.root / 'config.toml'}: a committed config.toml raises "
               f"resource limits only with your consent; {values}; run `ctx trust` to allow "
               "them", err=True)


pass_env = click.make_pass_decorator(Env)

# Records the index must catch up with before `Env.index` draws a bar (about a second's work).
INDEX_PROGRESS_MIN = 2000


def format_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--format`` on a subcommand; overrides the root group's ``--format``."""
    def callback(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            ctx.find_object(Env).fmt = value  # type: ignore[union-attr]
        return value

    return click.option("--format", "fmt_override", type=click.Choice(["text", "json", "markdown"]),
                        default=None, expose_value=False, callback=callback, is_eager=False,
                        help="Output format (same as the global --format).")(func)


def _project_store() -> Path | None:
    """The nearest project store above the working directory; None if there is only ~/.ctx.

    A ``.ctx/`` directory without HEAD on the way up raises RefNotFound (E005): a damaged
    project store is reported, never replaced by the user store.
    """
    home = user_store()
    try:
        found = discover_store(Path(os.getcwd()), user_store=home)
    except StoreNotFound:
        return None
    return None if found.absolute() == home.absolute() else found


def output_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--output/-o FILE`` of a command that writes one document (``write_output`` writes it).

    A path (``click.Path``), so a name that is not UTF-8 is accepted as file names are.

    Args:
        what: What is written, for the help text ("the pack").
    """
    return click.option("--output", "-o", "output", default=None, metavar="FILE",
                        type=click.Path(dir_okay=False, allow_dash=True),
                        help=f"Write {what} to FILE instead of standard output (a regular file "
                             "atomically; a FIFO or device directly; never inside .ctx/).")


def write_output(env: Env, output: str | None, data: bytes) -> None:
    """Print ``data``, or write it to the ``--output`` file (``fsio.write_output``).

    Args:
        env: The command's environment (its store is the directory refused).
        output: The option's value (None or ``-``: standard output).
        data: The document.

    Raises:
        InvalidInput: (E011) for an empty name or a path inside the store.
    """
    if output is None or output == "-":
        click.echo(data, nl=False)  # bytes: no dependence on the terminal's encoding
        return
    from ctxstore import fsio

    try:  # never into this store, nor into the user store ~/.ctx (--global reads it)
        fsio.write_output(output, data, store=env.session().root, also=[user_store()])
    except InvalidInput as exc:
        raise InvalidInput(f"--output: {exc.message}", hint=exc.hint) from None


def emit_json(value: Any) -> None:
    """Print one JSON document with ``"version": 1``."""
    if isinstance(value, dict) and "version" not in value:
        value = {"version": 1, **value}
    click.echo(json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False))


def progress_printer(label: str, *, min_total: int = 0) -> Callable[[int, int], None] | None:
    """A (done, total) callback that draws ``click.progressbar`` on stderr, only on a terminal.

    Piped or redirected stderr gets nothing (None: the library then skips its counting). The
    bar is finished (its line ended) when ``done`` reaches ``total``, and by ``finish_progress``
    when the command ends early; a label names what is counted ("verify objects").

    Args:
        label: What is being counted, shown before the bar.
        min_total: Draw nothing when the total is below this (quick work needs no bar).

    Returns:
        The callback, or None when stderr is not a terminal.
    """
    stream = sys.stderr
    if not stream.isatty():
        return None
    state: dict[str, Any] = {"bar": None, "done": 0}

    def show(done: int, total: int) -> None:
        if total < min_total:
            return
        bar = state["bar"]
        if bar is None or bar.length != total:
            if bar is not None:
                bar.render_finish()
            bar = click.progressbar(length=max(total, 1), label=label, file=stream,
                                    show_pos=True, show_eta=False)
            bar.__enter__()
            state["bar"], state["done"] = bar, 0
        step = max(0, min(done, total) - state["done"])
        state["done"] += step
        bar.update(step) if step else bar.render_progress()
        if done >= total:
            bar.__exit__(None, None, None)
            state["bar"] = None

    _open_bars.append(state)
    return show


_open_bars: list[dict[str, Any]] = []


def finish_progress() -> None:
    """End the line of every progress bar still drawn (a command that stopped early)."""
    while _open_bars:
        bar = _open_bars.pop()["bar"]
        if bar is not None:
            bar.__exit__(None, None, None)


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """``1 node``, ``2 nodes``, ``0 nodes`` (``plural_noun`` for irregular words).

    Args:
        count: How many.
        noun: The singular.
        plural_noun: The plural when it is not ``noun + "s"``.

    Returns:
        The count and the noun in the right number.
    """
    return f"{count} {noun if count == 1 else (plural_noun or noun + 's')}"


def fmt_time(seconds: float) -> str:
    """UTC ISO-8601 text of a Unix time."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: any time the query language accepts (``query.parser.parse_time``).

    ``1h``/``7d``/``2w`` ago, ``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM:SSZ`` (UTC) → a Unix time.

    Raises:
        InvalidInput: (E011) for anything else, naming the option.
    """
    from ctxstore.query.parser import parse_time

    try:
        return float(parse_time(text.strip(), now=time.time() if now is None else now))
    except InvalidInput as exc:
        raise InvalidInput(f"--since: {exc.message}") from None


DEFAULT_BUDGET = 50_000


def default_budget(config: Config | None = None) -> int:
    """``CTX_DEFAULT_BUDGET``, else the store's ``[retrieval] default_budget``, else 50,000.

    Args:
        config: The store's configuration (None: no store at hand).

    Returns:
        The token budget of a composition that names none.

    Raises:
        InvalidInput: if the variable is not a positive integer.
    """
    raw = os.environ.get("CTX_DEFAULT_BUDGET")
    if raw is None or not raw.strip():
        if config is not None:
            return int(config.get("retrieval", "default_budget"))
        return DEFAULT_BUDGET
    if not raw.strip().isdigit() or int(raw) < 1:
        raise InvalidInput(f"CTX_DEFAULT_BUDGET must be a positive integer, got {raw!r}")
    return int(raw)


def preview(text: str, width: int = 70) -> str:
    """First line of ``text``, cut to ``width`` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def node_json(node: Any) -> dict[str, Any]:
    """A node as JSON (times as ISO-8601), with its provenance (None when it records none)."""
    from ctxstore.knowledge.nodes.provenance import provenance_json
    from ctxstore.packs.compose import iso_ms, tier_of

    return {"id": node.id, "type": node.type, "content": node.content, "summary": node.summary,
            "tags": node.tags, "tier": tier_of(node), "metadata": node.metadata,
            "status": node.status, "superseded_by": node.superseded_by,
            "token_estimate": node.tokens, "created_at": iso_ms(node.created_at),
            "updated_at": iso_ms(node.updated_at), "provenance": provenance_json(node.metadata)}
