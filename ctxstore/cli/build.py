"""Build commands: ``ctx add cargo``, ``ctx add command`` and ``ctx diagnostics``.

Each parses its options, calls one library function (``code.cargo.add_cargo``,
``code.runs.record_command``, ``code.runs.latest_diagnostics``) and renders the result;
the environment, the working directory and standard input are read here only.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, fmt_time, format_option, pass_env, plural
from ctxstore.cli._render import echo_stored
from ctxstore.code.cargo import add_cargo, read_metadata_file
from ctxstore.code.diagnostics import TOOLS
from ctxstore.code.runs import latest_diagnostics, latest_runs, read_bounded, record_command, run_bounded
from ctxstore.errors import InvalidInput

if TYPE_CHECKING:
    from ctxstore.index.build import CommandRunRow, DiagnosticRow
    from ctxstore.model.build import Diagnostic

# Diagnostics a text summary lists before "... and N more".
_SHOWN = 10


def _cargo_program() -> str:
    """The cargo program: ``CARGO`` (as cargo names itself), else on PATH, else rustup's place."""
    found = os.environ.get("CARGO") or shutil.which("cargo")
    if found:
        return found
    rustup = Path(os.path.expanduser("~")) / ".cargo" / "bin" / "cargo"
    return str(rustup) if rustup.is_file() else "cargo"


def _find_manifest(start: Path, top: Path) -> Path:
    """The nearest ``Cargo.toml`` from ``start`` up to ``top`` (the repository root)."""
    here = start.absolute()
    while True:
        if (here / "Cargo.toml").is_file():
            return here / "Cargo.toml"
        if here == top.absolute() or here.parent == here:
            return start / "Cargo.toml"
        here = here.parent


@click.command("cargo")
@click.option("--manifest-path", "manifest", default=None, metavar="PATH",
              type=click.Path(dir_okay=False, path_type=Path),
              help="The Cargo.toml (default: the nearest one from here up).")
@click.option("--metadata", "metadata_file", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Read recorded `cargo metadata --format-version 1` JSON instead of running cargo.")
@format_option
@pass_env
def add_cargo_command(env: Env, manifest: Path | None, metadata_file: Path | None) -> None:
    """Snapshot the Cargo workspace: packages, targets and dependency edges.

    Runs `cargo metadata --format-version 1 --offline --locked` (never the network, never a
    write to the work tree) and stages the snapshot with DependsOn (package -> package),
    TargetOf (target -> package) and CrateFromTarget (crate -> target) edges. Without a
    usable Cargo.lock (none, or out of date) the snapshot holds the workspace's own packages
    and their declared dependencies, and a note says so (`cargo generate-lockfile` makes
    one). A new snapshot of a workspace replaces the previous one.

    \b
    Examples:
        ctx add cargo
        ctx add cargo --manifest-path crates/core/Cargo.toml
        ctx add cargo --metadata metadata.json --format json
    """
    store = env.store()
    metadata = read_metadata_file(metadata_file) if metadata_file is not None else None
    if manifest is None:
        manifest = None if metadata is not None else _find_manifest(Path.cwd(), store.worktree)
    if manifest is None and isinstance(metadata, dict) \
            and isinstance(metadata.get("workspace_root"), str):
        manifest = Path(metadata["workspace_root"]) / "Cargo.toml"
    added = add_cargo(env.session(), manifest or Path("Cargo.toml"), metadata=metadata,
                      cargo=_cargo_program(), env=dict(os.environ))
    snap = added.snapshot
    if added.lock_problem is not None:
        click.echo(f"ctx: note: Cargo.lock is {added.lock_problem} and ctx does not let cargo "
                   "write it: the snapshot holds the workspace's own packages and their declared "
                   "dependencies, no resolved graph (run `cargo generate-lockfile` for it)",
                   err=True)
    members = sum(p.member for p in snap.packages)
    targets = sum(len(p.targets) for p in snap.packages)
    if env.fmt == "json":
        emit_json({"workspace_root": snap.workspace_root, "manifest_path": snap.manifest_path,
                   "packages": len(snap.packages), "members": members, "targets": targets,
                   "dependencies": len(snap.resolve), "edges": added.edges,
                   "snapshot": added.snapshot_id.hex(),
                   "work_commit": added.staged.work_commit.hex(), "replaced": added.replaced,
                   "lock_problem": added.lock_problem})
        return
    click.echo(f"cargo workspace {snap.workspace_root}: {plural(len(snap.packages), 'package')} "
               f"({members} in the workspace), {plural(targets, 'target')}, "
               f"{plural(len(snap.resolve), 'dependency', 'dependencies')}, "
               f"{plural(added.edges, 'edge')}")
    click.echo(f"snapshot {added.snapshot_id.hex()[:12]}"
               + (" (replaces the previous one)" if added.replaced else ""))


def _read_stdin(timeout: float) -> tuple[bytes, int]:
    """Standard input to its end, bounded, within ``timeout`` seconds.

    Raises:
        InvalidInput: (E011) if it is a terminal, or does not end in time (a FIFO whose
            writer never closes it).
    """
    if sys.stdin is None or sys.stdin.isatty():
        raise InvalidInput("--stdin reads the output from standard input, which is a terminal",
                           hint="cargo test 2>&1 | ctx add command --stdin --name 'cargo test'")
    try:
        got = read_bounded(sys.stdin.fileno(), timeout=timeout)
    except OSError as exc:
        raise InvalidInput(f"cannot read standard input: {exc.strerror or exc}") from None
    if got.timed_out:
        raise InvalidInput(f"standard input did not end within {timeout:g} s; nothing stored",
                           hint="pipe a command that finishes, or raise --timeout")
    return got.data, got.total_bytes


@click.command("command", context_settings={"allow_interspersed_args": False})
@click.option("--name", required=True, help="The command's name; a new run replaces the last one.")
@click.option("--exit-code", "exit_code", type=int, default=None,
              help="Its exit status (with --stdin; a command run by ctx reports its own).")
@click.option("--tool", default=None, metavar="TOOL",
              help="The parser: cargo, rustc, clippy, pytest, mypy, ruff, tsc, gcc, clang or "
                   "custom (default: detected from the command and its output).")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the output from standard input.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=600.0, show_default=True,
              help="Seconds before the command (or standard input) is given up on.")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD...]")
@format_option
@pass_env
def add_command_command(env: Env, name: str, exit_code: int | None, tool: str | None,
                        from_stdin: bool, timeout: float, argv: tuple[str, ...]) -> None:
    """Store a command's output and the diagnostics parsed from it.

    With `-- CMD...` ctx runs the command here (stdout and stderr, bounded, with a timeout)
    and keeps its exit status; with --stdin it reads what another command printed.
    Diagnostics of rustc/cargo (JSON and human), pytest, mypy, ruff, tsc and gcc/clang are
    parsed, with References edges to the files and symbols they name; `ctx diagnostics`
    lists the latest run of each name.

    \b
    Examples:
        cargo test 2>&1 | ctx add command --stdin --name "cargo test"
        ctx add command --name pytest -- python -m pytest -q
        mypy src | ctx add command --stdin --name mypy --exit-code 1 --format json
    """
    if tool is not None and tool not in TOOLS:
        raise InvalidInput(f"--tool: unknown tool {tool!r}", hint="one of " + ", ".join(TOOLS))
    if from_stdin == bool(argv):
        raise InvalidInput("give the output with --stdin, or the command after `--` (not both)",
                           hint="ctx add command --name NAME -- CMD ARGS...")
    if argv and exit_code is not None:
        raise InvalidInput("--exit-code is for --stdin: a command ctx runs reports its own")
    notes: list[str] = []
    if from_stdin:
        output, total = _read_stdin(timeout)
    else:
        res = run_bounded(argv, cwd=Path.cwd(), env=dict(os.environ), timeout=timeout)
        output, total, exit_code = res.output, res.total_bytes, res.exit_code
        if res.timed_out:
            notes.append(f"timed out after {timeout:g} s: stopped")
    if total > len(output):
        notes.append(f"kept the first and last bytes of {total} written")
    run = record_command(env.session(), name, output, argv=argv, exit_code=exit_code, tool=tool,
                         total_bytes=total, cwd=Path.cwd(), notes=notes)
    _render_run(env, run.snapshot, run.snapshot_id.hex(), run.staged.work_commit.hex(),
                run.replaced)


def _diag_json(diag: Diagnostic) -> dict[str, Any]:
    return {"severity": diag.severity, "code": diag.code, "message": diag.message,
            "spans": [{"path": s.path, "line": s.start_line, "col": s.start_col,
                       "end_line": s.end_line, "end_col": s.end_col, "primary": s.primary,
                       "item": s.item}
                      for s in diag.spans],
            "related": list(diag.related)}


def _first_line(text: str | None) -> str:
    lines = text.splitlines() if text else []
    return lines[0] if lines else ""


def _where(path: str | None, line: int | None, col: int | None) -> str:
    if not path:
        return "-"
    return path + (f":{line}" if line else "") + (f":{col}" if line and col else "")


def _render_run(env: Env, snap: Any, snapshot: str, work_commit: str, replaced: bool) -> None:
    if env.fmt == "json":
        emit_json({"name": snap.name, "tool": snap.tool, "exit_code": snap.exit_code,
                   "output_bytes": snap.output_bytes, "notes": list(snap.notes),
                   "diagnostics": [_diag_json(d) for d in snap.diagnostics],
                   "snapshot": snapshot, "work_commit": work_commit, "replaced": replaced})
        return
    counts: dict[str, int] = {}
    for diag in snap.diagnostics:
        counts[diag.severity] = counts.get(diag.severity, 0) + 1
    summary = ", ".join(plural(n, sev) for sev, n in counts.items()) or "no diagnostics"
    status = "exit ?" if snap.exit_code is None else f"exit {snap.exit_code}"
    echo_stored(f"command {snap.name!r} [{snap.tool}]: {status}, {summary}"
                + (" (replaces the previous run)" if replaced else ""))
    for diag in snap.diagnostics[:_SHOWN]:
        first = diag.spans[0] if diag.spans else None
        where = _where(first.path, first.start_line, first.start_col) if first else "-"
        code = f"[{diag.code}]" if diag.code else ""
        echo_stored(f"  {diag.severity}{code} {where} {_first_line(diag.message)}")
    if len(snap.diagnostics) > _SHOWN:
        click.echo(f"  ... and {len(snap.diagnostics) - _SHOWN} more (ctx diagnostics)")
    for note in snap.notes:
        click.echo(f"ctx: note: {note}", err=True)


def _row_json(row: DiagnosticRow) -> dict[str, Any]:
    return {"id": row.id, "command": row.command, "tool": row.tool, "severity": row.severity,
            "code": row.code, "message": row.message, "path": row.path, "line": row.line,
            "col": row.col}


def _run_json(run: CommandRunRow) -> dict[str, Any]:
    return {"name": run.name, "tool": run.tool, "exit_code": run.exit_code,
            "run_at": fmt_time(run.run_at / 1000), "diagnostics": run.diagnostics,
            "output_bytes": run.output_bytes, "output_blob": run.output_blob.hex(),
            "argv": run.argv, "notes": run.notes}


@click.command("diagnostics")
@click.option("--name", default=None, help="Only this command's latest run (its runs with --history).")
@click.option("--history", is_flag=True,
              help="Every stored run, newest first, each with its status and diagnostics.")
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="Only diagnostics in this repository-relative file (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True,
              help="List at most this many diagnostics.")
@format_option
@pass_env
def diagnostics_command(env: Env, name: str | None, history: bool, paths: tuple[str, ...],
                        limit: int) -> None:
    """List the diagnostics of the latest run of each stored command (errors first).

    A new run of a name replaces the last one here; `--history` lists every run kept,
    newest first: a test run that failed before it passed, and what it reported.

    \b
    Examples:
        ctx diagnostics
        ctx diagnostics --name "cargo test" --format json
        ctx diagnostics --path src/lib.rs
        ctx diagnostics --history --name pytest
    """
    session = env.session()
    if history:
        _history(env, session, name, paths, limit)
        return
    runs = latest_runs(session, name)
    rows = latest_diagnostics(session, paths or None, name=name, limit=limit)
    if env.fmt == "json":
        emit_json({"runs": [_run_json(r) for r in runs], "diagnostics": [_row_json(r) for r in rows]})
        return
    if not runs:
        _none_stored(name)
        return
    for run in runs:
        echo_stored(f"{run.name} [{run.tool}]  {_exit(run.exit_code)}  {fmt_time(run.run_at / 1000)}  "
                    f"{plural(run.diagnostics, 'diagnostic')}")
        for row in (r for r in rows if r.command == run.name):
            code = f"[{row.code}]" if row.code else ""
            # Compiler output is anyone's text: escapes and tags go through ``shown``.
            echo_stored(f"  {row.severity}{code} {_where(row.path, row.line, row.col)} "
                        f"{_first_line(row.message)}")


def _exit(code: int | None) -> str:
    """A stored run's exit status as its lines show it (``exit ?`` when it was not recorded)."""
    return "exit ?" if code is None else f"exit {code}"


def _none_stored(name: str | None) -> None:
    """The line ``ctx diagnostics`` prints when no run is stored (of ``name``, or at all)."""
    click.echo(f"no command named {name!r} was stored" if name else
               "no command output stored (ctx add command)")


def _history(env: Env, session: Any, name: str | None, paths: tuple[str, ...], limit: int) -> None:
    """``ctx diagnostics --history``: every stored run, newest first, with its diagnostics."""
    from ctxstore.code.runs import diagnostics_summary, run_history

    runs = run_history(session, name, limit=limit)
    wanted = set(paths)

    def shown(diags: Any) -> list[Diagnostic]:
        return [d for d in diags if not wanted or (d.spans and d.spans[0].path in wanted)]

    if env.fmt == "json":
        emit_json({"runs": [{"name": r.name, "tool": r.tool, "exit_code": r.exit_code,
                             "status": r.status, "run_at": fmt_time(r.run_at / 1000),
                             "snapshot": r.snapshot.hex(), "argv": list(r.argv),
                             "diagnostics": [_diag_json(d) for d in shown(r.diagnostics)]}
                            for r in runs]})
        return
    if not runs:
        _none_stored(name)
        return
    for run in runs:
        echo_stored(f"{run.name} [{run.tool}]  {run.status}  {_exit(run.exit_code)}  "
                    f"{fmt_time(run.run_at / 1000)}  {diagnostics_summary(run.diagnostics)}")
        for diag in shown(run.diagnostics)[:_SHOWN]:
            first = diag.spans[0] if diag.spans else None
            where = _where(first.path, first.start_line, first.start_col) if first else "-"
            code = f"[{diag.code}]" if diag.code else ""
            echo_stored(f"  {diag.severity}{code} {where} {_first_line(diag.message)}")
