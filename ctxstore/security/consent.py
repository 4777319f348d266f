"""Consent, per clone, to committed settings: the records behind ``ctx trust``.

``.ctx/config.toml`` is committed, so a cloned repository chooses its values. Settings that
reach outside the store (``[claude]``'s CLAUDE.md writes, ``ctxstore.claude.trust``) or that
weaken the secret policy (``[security]``: a channel set to ``allow``, rules disabled, values
allowed, sensitive files indexed) apply only when the user consented to exactly those values
in this clone. As Git keeps merge drivers in ``.git/config``, which ``git clone`` never
copies, the consent is a record in the clone's own Git configuration (``git config --local
ctx.trusted``): nothing a repository carries can grant it. Each record is canonical JSON
naming the store (relative to the Git top level) and the values; a pull that changes the
values makes a record stale, not valid. A store outside any Git work tree (the user store
``~/.ctx``) did not arrive by clone: its configuration is the user's own.

This module owns the records (read, add, remove) and the ``[security]`` decision
(``policy_for``); it never reads the environment. Git runs as a subprocess with a time limit,
and only when config.toml asks for something that needs consent.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore.errors import ConfigInvalid
from ctxstore.git import in_git_work_tree
from ctxstore.security.secrets import Policy, policy_from_config

if TYPE_CHECKING:
    from ctxstore.config import Config
    from ctxstore.repo import Store

__all__ = ["TRUST_KEY", "ConsentRequired", "add_record", "git_config", "grant_security",
           "in_git_work_tree", "policy_for", "policy_for_dir", "read_records", "remove_record",
           "revoke_security", "policy_from_config", "security_record", "store_name"]

TRUST_KEY = "ctx.trusted"
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
                               *args], capture_output=True,
                              text=True, check=False, timeout=_GIT_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConsentRequired(f"cannot read this clone's Git configuration ({exc})",
                              hint="install git") from None


def store_name(store: Store) -> str:
    """The store's directory relative to the Git top level (``.ctx``, ``sub/.ctx``).

    Raises:
        ConsentRequired: if Git does not see a work tree here.
    """
    res = git_config(store.worktree, "rev-parse", "--show-prefix")
    if res.returncode != 0:
        raise ConsentRequired(f"Git does not accept {store.worktree} as a work tree: "
                              f"{res.stderr.strip() or 'rev-parse failed'}")
    return res.stdout.strip() + store.root.name


def read_records(store: Store) -> list[tuple[str, Any]]:
    """Every ``ctx.trusted`` value of this clone: the raw text and its JSON (None if not JSON).

    Raises:
        ConsentRequired: if git cannot read the clone's configuration.
    """
    res = git_config(store.worktree, "config", "--local", "--get-all", TRUST_KEY)
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


def add_record(store: Store, text: str) -> None:
    """Add one record to this clone's Git configuration.

    Raises:
        ConsentRequired: if git cannot write it.
    """
    res = git_config(store.worktree, "config", "--local", "--add", TRUST_KEY, text)
    if res.returncode != 0:
        raise ConsentRequired(f"cannot write this clone's Git configuration: {res.stderr.strip()}")


def remove_record(store: Store, raw: str) -> None:
    """Remove one record (its exact text) from this clone's Git configuration.

    Raises:
        ConsentRequired: if git cannot write it.
    """
    res = git_config(store.worktree, "config", "--local", "--fixed-value", "--unset-all",
                     TRUST_KEY, raw)
    if res.returncode not in (0, 5):  # 5: already gone
        raise ConsentRequired(f"cannot write this clone's Git configuration: {res.stderr.strip()}")


def security_record(name: str, policy: Policy) -> str:
    """The canonical record of consent to ``policy``'s weakenings for the store ``name``."""
    return json.dumps({"store": name, "security": policy.fingerprint()}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True)


def _is_security_record(data: Any, name: str) -> bool:
    return isinstance(data, dict) and data.get("store") == name and "security" in data


def policy_for(store: Store) -> Policy:
    """The ``[security]`` policy in force for ``store``.

    What config.toml asks for, except that settings which let secrets through apply only
    outside Git or with this clone's consent (``ctx trust``); without it they are set aside,
    the defaults apply, and ``Policy.ignored`` names them. Git is asked only when config.toml
    weakens the policy.

    Returns:
        The policy; when git cannot be read the consent counts as missing (fail closed).
    """
    wanted = policy_from_config(store.config)
    weak = wanted.weakenings()
    if not weak or not in_git_work_tree(store.worktree):
        return wanted
    try:
        name = store_name(store)
        if security_record(name, wanted) in {raw for raw, _ in read_records(store)}:
            return wanted
    except ConsentRequired:
        pass  # consent cannot be read: fail closed, the defaults apply
    return Policy(ignored=tuple(weak))


class _StoreDir:
    """What ``policy_for`` reads of a store, for callers that hold only its directory."""

    __slots__ = ("root", "config", "worktree")

    def __init__(self, root: Path, config: Config) -> None:
        self.root = root
        self.config = config
        self.worktree = root.parent


def policy_for_dir(ctx_dir: Path, config: Config) -> Policy:
    """``policy_for`` of the store at ``ctx_dir`` whose config is ``config`` (no ``Store``)."""
    return policy_for(_StoreDir(Path(ctx_dir).resolve(), config))  # type: ignore[arg-type]


def grant_security(store: Store) -> tuple[str | None, bool]:
    """Record consent to the ``[security]`` weakenings of config.toml (replacing older ones).

    Returns:
        The record text (None when the policy weakens nothing) and whether it was new.

    Raises:
        ConsentRequired: if git cannot read or write the clone's configuration.
    """
    wanted = policy_from_config(store.config)
    if not wanted.weakenings():
        return None, False
    name = store_name(store)
    text = security_record(name, wanted)
    present = read_records(store)
    if any(raw == text for raw, _ in present):
        return text, False
    for raw, data in present:
        if _is_security_record(data, name):
            remove_record(store, raw)
    add_record(store, text)
    return text, True


def revoke_security(store: Store) -> int:
    """Remove this store's ``[security]`` consents; the number removed.

    Raises:
        ConsentRequired: if git cannot read or write the clone's configuration.
    """
    name = store_name(store)
    removed = 0
    for raw, data in read_records(store):
        if _is_security_record(data, name):
            remove_record(store, raw)
            removed += 1
    return removed

