"""``ctx upgrade``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env

if TYPE_CHECKING:
    from ctxstore.history.upgrade import UpgradeResult


@click.command("upgrade")
@format_option
@pass_env
def upgrade_command(env: Env) -> None:
    """Bring an older store's layout up to date; changes nothing on a current store.

    Stores made before STAGE moved to .ctx/local/STAGE kept it committed as .ctx/STAGE, so a
    clone may have received somebody's unfolded session through Git. Such work is folded
    into one canonical commit here (its records are kept and shared), and .ctx/STAGE is
    never read again. Until then every write refuses the store (E026) and points here;
    `ctx rebuild` runs this step too. Idempotent; the store is staged in Git afterwards
    when Git tracks it, as after `ctx commit`.

    \b
    Examples:
        ctx upgrade
        ctx upgrade --format json
    """
    from ctxstore.cli.commit import echo_after, echo_notices
    from ctxstore.history.upgrade import upgrade

    res = upgrade(env.session())
    fold = res.fold
    if env.fmt == "json":
        emit_json({"upgraded": res.upgraded,
                   "commit": fold.commit.hex() if fold and fold.commit else None,
                   "records": fold.records if fold else 0,
                   "work_commits": fold.work_commits if fold else 0,
                   "session_id": fold.session_id if fold else None,
                   "git_staged": res.after.git_staged})
        echo_notices(res.after.notices)
        return
    if fold is None:
        click.echo("nothing to upgrade: the store's layout is current")
        return
    click.echo(upgrade_line(res))
    echo_after(res.after)


def upgrade_line(res: UpgradeResult) -> str:
    """``upgraded the store's layout: ...``: the line ``ctx upgrade`` and ``ctx rebuild`` print."""
    fold = res.fold
    assert fold is not None
    commit = fold.commit.hex() if fold.commit else "nothing"
    return (f"upgraded the store's layout: folded {fold.work_commits} work commits "
            f"({fold.records} records) that the committed .ctx/STAGE of an older ctx named "
            f"into {commit}; .ctx/STAGE is no longer read")
