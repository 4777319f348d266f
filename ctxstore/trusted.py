"""The clone's consent records: ``ctx.trusted`` values in the clone's own Git configuration.

``.ctx/config.toml`` is committed, so a cloned repository chooses its values. What a
committed setting may only do with the user's consent (raise a resource limit,
``ctxstore.limits``; weaken the secret policy, ``ctxstore.security.consent``; write CLAUDE.md
outside the store, ``ctxstore.claude.trust``) is consented to by a record here. As Git keeps
merge drivers in ``.git/config``, which ``git clone`` never copies, nothing a repository
carries can forge one. Each record is canonical JSON naming the store (relative to the Git
top level) and the values consented to; the modules above decide what a record means.

Git runs as a subprocess with a time limit, only when config.toml asks for something that
needs consent; when it cannot be run, consent counts as missing (fail closed).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ctxstore.errors import ConfigInvalid

__all__ = ["TRUST_KEY", "ConsentRequired", "add_record", "git_config", "read_records",
           "remove_record", "store_name"]

TRUST_KEY = "ctx.trusted"  # the key every consent is recorded under
_GIT_TIMEOUT = 10.0


class ConsentRequired(ConfigInvalid):
    """E015: a committed setting that needs consent has not been consented to in this clone.

    Consent is given with ``ctx trust``.
    """


def git_config(worktree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run git in ``worktree``, never in a repository that the clone itself carries.

    A clone can commit a directory that looks like a bare repository (``HEAD``,
    ``objects/``, ``refs/`` and a ``config`` holding a ``ctx.trusted`` record); git run
    inside it would read that committed ``config`` as the clone's own. Git discovers such
    a repository only while ``safe.bareRepository`` is ``all`` (its default), and honours
    the setting only from protected configuration, the command line included: there it is
    ``explicit``, so git refuses that directory and the consent reads as missing.

    Raises:
        ConsentRequired: if git cannot be run (missing, hung), so no consent can be read.
    """
    try:
        return subprocess.run(["git", "-c", "safe.bareRepository=explicit", "-C", str(worktree),
                               *args], capture_output=True, text=True, check=False,
                              timeout=_GIT_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConsentRequired(f"cannot read this clone's Git configuration ({exc})",
                              hint="install git") from None


def store_name(worktree: Path, dirname: str) -> str:
    """The store directory ``dirname`` of ``worktree`` relative to the Git top level.

    Returns ``.ctx`` for a store at the top, ``sub/.ctx`` for one below it.

    Raises:
        ConsentRequired: if Git does not see a work tree here.
    """
    res = git_config(worktree, "rev-parse", "--show-prefix")
    if res.returncode != 0:
        raise ConsentRequired(f"Git does not accept {worktree} as a work tree: "
                              f"{res.stderr.strip() or 'rev-parse failed'}")
    return res.stdout.strip() + dirname


def read_records(worktree: Path) -> list[tuple[str, Any]]:
    """Every ``ctx.trusted`` value of this clone: the raw text and its JSON (None if not JSON).

    Raises:
        ConsentRequired: if git cannot read the clone's configuration.
    """
    res = git_config(worktree, "config", "--local", "--get-all", TRUST_KEY)
    if res.returncode not in (0, 1):  # 1: no such key
        raise ConsentRequired(f"cannot read this clone's Git configuration: {res.stderr.strip()}")
    out: list[tuple[str, Any]] = []
    for line in res.stdout.splitlines():
        if not line:
            continue
        try:
            out.append((line, json.loads(line)))
        except (ValueError, RecursionError):  # a hand-edited record: not one of ours
            out.append((line, None))
    return out


def add_record(worktree: Path, text: str) -> None:
    """Add one record to this clone's Git configuration.

    Raises:
        ConsentRequired: if git cannot write it.
    """
    res = git_config(worktree, "config", "--local", "--add", TRUST_KEY, text)
    if res.returncode != 0:
        raise ConsentRequired(f"cannot write this clone's Git configuration: {res.stderr.strip()}")


def remove_record(worktree: Path, raw: str) -> None:
    """Remove one record (its exact text) from this clone's Git configuration.

    Raises:
        ConsentRequired: if git cannot write it.
    """
    res = git_config(worktree, "config", "--local", "--fixed-value", "--unset-all",
                     TRUST_KEY, raw)
    if res.returncode not in (0, 5):  # 5: already gone
        raise ConsentRequired(f"cannot write this clone's Git configuration: {res.stderr.strip()}")
