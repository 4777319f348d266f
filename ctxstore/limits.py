"""Which resource limits of a store's config.toml apply: the committed-config rule.

``.ctx/config.toml`` is committed, so a cloned repository chooses its values, and a limit it
raises (``[storage] max_object_bytes`` to 16 GiB, ``[ingestion] max_file_bytes`` to 16 GiB)
would let the repository decide how much memory and time ctx spends on its content. So a
limit above its committed ceiling (``config.LIMITS``) applies only

- when the configuration is the user's own: the store is outside any Git work tree (the
  user store ``~/.ctx``, a plain directory), so it did not arrive by clone; or
- with this clone's consent to exactly those values: a ``ctx.trusted`` record in the
  clone's own Git configuration (``git config --local``), which ``git clone`` never copies
  and nothing a repository carries can forge (the mechanism of ``ctx trust``,
  ``ctxstore.claude.trust``), of the form ``{"store": ".ctx", "limits": {"section.key": N}}``.

Otherwise the limit is clamped to its ceiling (``config.clamp_limits``) and the command
warns. Git is asked only when a limit is raised; when it cannot be asked, consent counts as
missing (fail closed). No value passes the top of its range, the hard ceiling.

This module reads only; ``grant`` and ``revoke`` write the records for ``ctx trust``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxstore.config import Config, clamp_limits, load_config, raised_limits
from ctxstore.errors import ConfigInvalid

__all__ = ["TRUST_KEY", "apply_consent", "grant", "limits_record", "listed", "load_store_config",
           "recorded", "requested", "revoke"]

TRUST_KEY = "ctx.trusted"  # the key ``ctx trust`` records every consent under (ctxstore.trusted)


def load_store_config(ctx_dir: Path) -> Config:
    """The configuration of the store at ``ctx_dir``, its resource limits decided.

    Raises:
        ConfigInvalid, UnsafePath, UnsupportedStoreVersion: as ``config.load_config``.
    """
    config = load_config(Path(ctx_dir) / "config.toml")
    apply_consent(config, Path(ctx_dir))
    return config


def apply_consent(config: Config, ctx_dir: Path) -> None:
    """Clamp the limits ``config`` raises unless they are the user's own or consented to."""
    raised = raised_limits(config)
    if not raised:
        return
    # Imported here: every store open comes through this function, and only a config.toml
    # that raises a limit needs Git (ctxstore.git costs ~2 ms to import on a session start).
    from ctxstore.git import in_git_work_tree

    worktree = ctx_dir.resolve().parent
    if not in_git_work_tree(worktree):
        return  # the user's own configuration: it applies as written
    try:
        name = _store_name(worktree, ctx_dir.name)
        if limits_record(name, raised) in recorded(worktree):
            return
    except ConfigInvalid:
        pass  # git cannot be asked: consent counts as missing
    clamp_limits(config)


def requested(config: Config) -> dict[str, Any]:
    """The raised limits a consent would cover, as ``{"section.key": value}``."""
    return {f"{s}.{k}": v for (s, k), v in sorted(raised_limits(config).items())}


def limits_record(name: str, raised: dict[tuple[str, str], Any]) -> str:
    """The canonical record of consent to ``raised`` for the store ``name`` (``.ctx``)."""
    values = {f"{s}.{k}": v for (s, k), v in raised.items()}
    return json.dumps({"store": name, "limits": values}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True)


def _store_name(worktree: Path, dirname: str) -> str:
    from ctxstore import trusted  # only for a config.toml that raises a limit

    return trusted.store_name(worktree, dirname)


def recorded(worktree: Path) -> list[str]:
    """Every ``ctx.trusted`` record of the clone holding ``worktree``, as stored.

    Raises:
        ConfigInvalid: (E015) if git cannot read the clone's configuration.
    """
    from ctxstore import trusted

    return [raw for raw, _ in trusted.read_records(worktree)]


def _limits_records(worktree: Path, name: str) -> list[tuple[str, dict[str, Any]]]:
    from ctxstore import trusted

    return [(raw, data["limits"]) for raw, data in trusted.read_records(worktree)
            if isinstance(data, dict) and data.get("store") == name
            and isinstance(data.get("limits"), dict)]


def grant(config: Config, ctx_dir: Path) -> tuple[dict[str, Any], bool]:
    """Record consent to the limits config.toml raises (replacing this store's older ones).

    Returns:
        The values consented to (empty when nothing is raised) and whether the record is new.

    Raises:
        ConfigInvalid: (E015) if git cannot read or write the clone's configuration.
    """
    from ctxstore import trusted

    raised = raised_limits(config)
    if not raised:
        return {}, False
    worktree = Path(ctx_dir).resolve().parent
    name = _store_name(worktree, Path(ctx_dir).name)
    text = limits_record(name, raised)
    present = _limits_records(worktree, name)
    if any(raw == text for raw, _ in present):
        return requested(config), False
    for raw, _ in present:  # this store's stale records go
        trusted.remove_record(worktree, raw)
    trusted.add_record(worktree, text)
    return requested(config), True


def revoke(ctx_dir: Path) -> list[dict[str, Any]]:
    """Remove every limits consent recorded for this store; the values they held.

    Raises:
        ConfigInvalid: (E015) if git cannot read or write the clone's configuration.
    """
    from ctxstore import trusted

    worktree = Path(ctx_dir).resolve().parent
    name = _store_name(worktree, Path(ctx_dir).name)
    removed = []
    for raw, values in _limits_records(worktree, name):
        trusted.remove_record(worktree, raw)
        removed.append(values)
    return removed


def listed(config: Config, ctx_dir: Path) -> list[tuple[dict[str, Any], bool]]:
    """The limits consents recorded for this store, each with whether it is current.

    Raises:
        ConfigInvalid: (E015) if git cannot read the clone's configuration.
    """
    worktree = Path(ctx_dir).resolve().parent
    name = _store_name(worktree, Path(ctx_dir).name)
    want = requested(config)
    return [(values, values == want) for _, values in _limits_records(worktree, name)]
