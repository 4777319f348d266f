"""``ctx purge``: remove a node's or an object's content from the ctx history."""

from __future__ import annotations

import sys

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.errors import InvalidInput
from ctxstore.security.purge import purge


@click.command("purge")
@click.argument("targets", nargs=-1, required=True, metavar="ID...")
@click.option("--whole", is_flag=True,
              help="Replace the whole content by [PURGED] (default: redact what the scanner finds).")
@click.option("-m", "--message", default=None, help="The purge commit's message.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation (needed off a terminal).")
@format_option
@pass_env
def purge_command(env: Env, targets: tuple[str, ...], whole: bool, message: str | None,
                  yes: bool) -> None:
    """Remove the content of nodes or objects from the ctx history.

    ID is a node id (every version of the node is scrubbed) or an object id (a blob
    such as a file's content or a command's output; a typed object), as `ctx debug
    secrets` names them; a unique prefix will do. The commits that reach the content
    are rewritten with new ids, a purge record on top names the versions replaced (so a
    Git merge with a clone that still has the old history cannot bring them back into
    the state), and the old objects are left to `ctx gc`. Narrative Markdown holding a
    secret is redacted in place.

    Git's history still holds the old object files: the command lists them and what a
    Git history rewrite still has to do (docs/security.md). Rotate the credential in
    any case: once pushed, it must be taken as known.

    \b
    Examples:
        ctx debug secrets
        ctx purge 01J8Z1N6Q0Y8 --yes
        ctx purge 3fa9c2d1 --whole --yes && ctx gc --aggressive
    """
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInput("ctx purge rewrites history: give --yes to confirm",
                               hint="ctx purge ID --yes")
        click.confirm(f"Rewrite the ctx history to remove the content of {', '.join(targets)}?",
                      abort=True)
    report = purge(env.session(), list(targets), whole=whole, message=message)
    env.index()  # the index follows the rewritten history now
    git_steps = _git_steps(report.old_paths)
    if env.fmt == "json":
        emit_json({"commit": report.commit, "rewritten": report.rewritten,
                   "versions": report.versions, "nodes": report.nodes,
                   "old_paths": report.old_paths, "narrative": report.narrative,
                   "git": git_steps})
        return
    click.echo(f"purged: commit {report.commit[:12]} replaces {len(report.versions)} record "
               f"versions; {len(report.rewritten)} objects written again")
    for path in report.narrative:
        click.echo(f"  redacted {path}")
    click.echo("next:")
    click.echo("  ctx gc --aggressive          # delete the old objects from .ctx/objects now")
    click.echo("  git add -A .ctx && git commit -m 'ctx purge'")
    if report.old_paths:
        click.echo(f"Git's history still holds {len(report.old_paths)} old object files:")
        for line in git_steps:
            click.echo(f"  {line}")


def _git_steps(old_paths: list[str]) -> list[str]:
    """What a history rewrite of the code repository still has to do (docs/security.md)."""
    if not old_paths:
        return []
    return ["rotate the credential: anyone who fetched these commits may have it",
            *[f"remove from every commit: {p}" for p in old_paths],
            "e.g. git filter-repo --invert-paths --paths-from-file FILE (one path a line), then "
            "git push --force --all, and every clone re-clones (or resets) its branches"]
