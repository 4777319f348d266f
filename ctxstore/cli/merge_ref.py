"""``ctx merge-ref``: the Git merge driver for pointer files."""

from __future__ import annotations

from pathlib import Path

import click

from ctxstore.git import merge_pointer_files


@click.command("merge-ref")
@click.argument("base", type=click.Path(dir_okay=False))
@click.argument("ours", type=click.Path(dir_okay=False))
@click.argument("theirs", type=click.Path(dir_okay=False))
def merge_ref_command(base: str, ours: str, theirs: str) -> None:
    """Merge two versions of a ctx pointer file, as a Git merge driver (%O %A %B).

    Writes the result into OURS: the side that moved, or, when both moved, both
    heads (sorted, one per line), which ctx's next write turns into a merge commit
    whose parents are both sides. `ctx init` registers it; by hand:

    \b
    Example:
        git config merge.ctx-ref.driver "ctx merge-ref %O %A %B"
    """
    merge_pointer_files(Path(base), Path(ours), Path(theirs))
