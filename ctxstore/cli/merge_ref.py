"""``ctx merge-ref``: the Git merge driver for pointer files."""

from __future__ import annotations

from pathlib import Path

import click

from ctxstore.cli._common import Env, pass_env


@click.command("merge-ref")
@click.argument("base", type=click.Path(dir_okay=False))
@click.argument("ours", type=click.Path(dir_okay=False))
@click.argument("theirs", type=click.Path(dir_okay=False))
@pass_env
def merge_ref_command(env: Env, base: str, ours: str, theirs: str) -> None:
    """Merge two versions of a ctx pointer file, as a Git merge driver (%O %A %B).

    Writes the result into OURS. When both sides moved it writes a merge commit whose
    parents are both sides. `ctx init` registers it; by hand:

    \b
    Example:
        git config merge.ctx-ref.driver "ctx merge-ref %O %A %B"
    """
    from ctxstore.errors import StoreNotFound
    from ctxstore.gitglue import merge_pointer_files

    try:
        store = env.store()
    except StoreNotFound:
        store = None
    merge_pointer_files(store, Path(base), Path(ours), Path(theirs))
