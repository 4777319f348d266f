"""Code commands: ``ctx add file``, ``ctx add rust``, ``ctx index``, ``ctx relate``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, plural, progress_printer

if TYPE_CHECKING:
    from ctxstore.code.ingest import IngestReport


def _report(env: Env, report: IngestReport) -> None:
    """Print a run: gate drops and per-file notes on stderr (one line each), a summary on stdout."""
    for line in report.dropped:
        click.echo(f"ctx: dropped: {line}", err=True)
    if env.fmt == "json":
        emit_json(report.to_json())
        return
    for note in report.notes:
        click.echo(f"ctx: note: {note.path!r}: {note.note}", err=True)
    parts = [f"indexed {plural(len(report.written), 'file')}",
             f"{report.unchanged} unchanged", f"{report.deduplicated} same content"]
    if report.removed:
        parts.append(f"{len(report.removed)} removed")
    if report.notes:
        parts.append(f"{plural(len(report.notes), 'note')}")
    click.echo(", ".join(parts) + f" ({plural(report.symbols, 'symbol')}, "
               f"{plural(report.relations, 'relation')})")


def _repo_paths(env: Env, paths: tuple[str, ...]) -> list[str]:
    from ctxstore.code.ingest import repo_path

    cwd = Path(os.getcwd())
    return [repo_path(env.store(), p, cwd) for p in paths]


@click.command("file")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--extract-semantics", is_flag=True,
              help="Also extract symbols and relations (imports, calls, ...).")
@format_option
@pass_env
def add_file_command(env: Env, paths: tuple[str, ...], extract_semantics: bool) -> None:
    """Snapshot files into the store (a FileVersion each); unchanged content is not stored again.

    Honours the per-step budgets of [ingestion] (max_files_per_step, max_bytes_per_step,
    max_edges_per_step); what a gate drops is one line on stderr.

    \b
    Example:
        ctx add file src/net/client.rs --extract-semantics
    """
    from ctxstore.code.ingest import add_files

    _report(env, add_files(env.session(), _repo_paths(env, paths), semantics=extract_semantics))


@click.command("rust")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@format_option
@pass_env
def add_rust_command(env: Env, paths: tuple[str, ...]) -> None:
    """`ctx add file --extract-semantics` for Rust sources (the files must end in .rs).

    \b
    Example:
        ctx add rust crates/core/src/retry/mod.rs
    """
    from ctxstore.code.ingest import add_files
    from ctxstore.errors import InvalidInput

    rel = _repo_paths(env, paths)
    wrong = [p for p in rel if not p.endswith(".rs")]
    if wrong:
        raise InvalidInput(f"{wrong[0]}: is not a Rust file (.rs)", hint="ctx add file PATH")
    _report(env, add_files(env.session(), rel, semantics=True))


@click.command("index")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--jobs", type=click.IntRange(min=1, max=64), default=None,
              help="Processes extracting symbols [default: one per CPU, at most 8; runs of "
                   "under 256 KiB of changed source use one].")
@click.option("--full", is_flag=True,
              help="Read and derive every file again (a code index edited or damaged by hand).")
@format_option
@pass_env
def index_command(env: Env, paths: tuple[str, ...], jobs: int | None, full: bool) -> None:
    """Index the work tree (or the files below PATHs): files, symbols and relations.

    Honours .gitignore and [ingestion] ignore_globs, skips binaries, symlinks out of the
    tree and files over max_file_bytes (one note each), and reads only files whose size or
    time changed since the last run. Files gone from the tree, ignored now or no longer
    indexable leave the index. The code index is this clone's (.ctx/index/code.sqlite,
    ignored by Git): nothing is staged and nothing reaches Git; every clone builds its own.
    The search index and import cycles are current when it returns.

    \b
    Examples:
        ctx index
        ctx index src/ --format json
        ctx index --full
    """
    env.require_project("ctx index")  # the user store ~/.ctx has no code to index
    from ctxstore.code.ingest import index_tree

    report = index_tree(env.session(), _repo_paths(env, paths), jobs=jobs,
                        progress=progress_printer("indexing files", min_total=200), full=full,
                        environ=os.environ)
    _refresh_tantivy(env)
    _report(env, report)


def _refresh_tantivy(env: Env) -> None:
    """Keep the Tantivy index of a large index current (derived: a failure is a notice)."""
    from ctxstore.search.tantivy_index import refresh_tantivy

    notice = refresh_tantivy(env.session())
    if notice:
        click.echo(f"ctx: {notice}", err=True)


@click.command("relate")
@click.argument("from_ref", metavar="FROM")
@click.argument("label", metavar="LABEL")
@click.argument("to_ref", metavar="TO")
@click.option("--confidence", type=click.Choice(["high", "medium", "low"]), default="high",
              show_default=True, help="How sure the relation is.")
@click.option("--evidence", "evidence", default=None, metavar="TEXT", help="Why (free text).")
@click.option("--span", default=None, metavar="S:E", help="Byte offsets in the code endpoint's file.")
@format_option
@pass_env
def relate_command(env: Env, from_ref: str, label: str, to_ref: str, confidence: str,
                   evidence: str | None, span: str | None) -> None:
    """Relate two things: nodes, files (paths), symbols (qualified names), tasks (task_N).

    LABEL is any edge label: Mentions, References, DependsOn, ..., or DEPENDS_ON, ...

    \b
    Examples:
        ctx relate task_004312 Mentions crates/core/src/retry/mod.rs
        ctx relate 01HQ1A2B Mentions "core::net::Client::connect" --evidence "the retry loop"
    """
    from ctxstore.code.relate import parse_span, relate

    rec, created = relate(env.session(), from_ref, label, to_ref, cwd=Path(os.getcwd()),
                          confidence=confidence, evidence=evidence,
                          span=parse_span(span) if span is not None else None)
    if env.fmt == "json":
        emit_json({"created": created, "from": list(rec.from_ref), "label": rec.label,
                   "to": list(rec.to_ref), "evidence": rec.evidence})
        return
    what = "related" if created else "already related"
    click.echo(f"{what}: {rec.from_ref[0]}:{rec.from_ref[1]} -{rec.label}-> "
               f"{rec.to_ref[0]}:{rec.to_ref[1]}")
