"""Consent for settings with effects outside ``.ctx/`` (RELIABILITY.md §2.11 CF-01, I12).

``.ctx/config.toml`` is committed, so a cloned repository chooses its values. Settings
whose effect reaches outside the store (today: the Stop hook writing CLAUDE.md and
AGENTS.md, ``[claude] claude_md_on_stop``, ``agents_md_on_stop`` and their paths)
therefore apply only when the user has consented to exactly those values in this clone.
As Git defines merge drivers only in ``.git/config``, which ``git clone`` never copies,
the consent is a record in the clone's
own Git configuration (``git config --local ctx.trusted``): nothing a repository carries,
``.ctx/local/`` included (``git add -f`` can commit it), can grant it.

A record names the store (relative to the Git top level) and the values consented to,
as canonical JSON; a pull that changes the values makes the record stale, not valid.
A store outside any Git work tree (the user store ``~/.ctx``, a plain directory) did not
arrive by clone: its configuration is the user's own and needs no consent.

This module decides and records; it never writes CLAUDE.md (``claudemd`` does) and never
reads the environment. The records themselves (Git's configuration, read and written by a
git subprocess with a time limit) are ``ctxstore.security.consent``'s, shared with the
``[security]`` policy.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Literal

from ctxstore.errors import InvalidInput
from ctxstore.git import in_git_work_tree
from ctxstore.records import dataclass
from ctxstore.security import consent
from ctxstore.security.consent import TRUST_KEY, ConsentRequired

if TYPE_CHECKING:
    from ctxstore.repo import Store

__all__ = [
    "TRUST_KEY",
    "ConsentRequired",
    "Decision",
    "TrustRecord",
    "decide",
    "grant",
    "in_git_work_tree",
    "list_records",
    "requested",
    "revoke",
]


Decision = Literal["own", "consented", "needs-consent"]


@dataclass(frozen=True, slots=True)
class TrustRecord:
    """One consent: the store it is for and the values consented to."""

    store: str
    claude_md_on_stop: bool
    claude_md_path: str
    agents_md_path: str | None = None  # set when ``agents_md_on_stop`` is

    def encode(self) -> str:
        """The canonical text stored in Git's configuration (sorted keys, ASCII).

        ``agents_md_path`` only when set, so a record made before it existed stays valid.
        """
        data: dict[str, object] = {"store": self.store, "claude_md_on_stop": self.claude_md_on_stop,
                                   "claude_md_path": self.claude_md_path}
        if self.agents_md_path is not None:
            data["agents_md_path"] = self.agents_md_path
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    def files(self) -> list[str]:
        """The files the Stop hook would write with this consent (CLAUDE.md, AGENTS.md)."""
        return ([self.claude_md_path] if self.claude_md_on_stop else []) + (
            [self.agents_md_path] if self.agents_md_path is not None else [])

    def fingerprint(self) -> str:
        """A short stable digest of the record (keys "said once" notices)."""
        return hashlib.sha256(self.encode().encode("ascii")).hexdigest()[:16]


def _decode(text: str) -> TrustRecord | None:
    """A record from Git's configuration, or None for a value ctx did not write."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    store, on_stop, path = data.get("store"), data.get("claude_md_on_stop"), data.get("claude_md_path")
    agents = data.get("agents_md_path")
    if isinstance(store, str) and isinstance(on_stop, bool) and isinstance(path, str) \
            and (agents is None or isinstance(agents, str)):
        return TrustRecord(store, on_stop, path, agents)
    return None


def _store_name(store: Store) -> str:
    """The store's directory relative to the Git top level (``.ctx``, ``sub/.ctx``).

    Raises:
        ConsentRequired: if Git does not see a work tree here.
    """
    return consent.store_name(store)


def requested(store: Store, name: str | None = None) -> TrustRecord | None:
    """The consent the store's config asks for, or None.

    None when it asks for nothing that reaches outside ``.ctx/`` (``claude_md_on_stop`` and
    ``agents_md_on_stop`` are false).

    Args:
        store: the store whose config.toml is read (already loaded).
        name: the store's name relative to the Git top level, if already known.

    Raises:
        ConsentRequired: if the store is in a Git work tree git cannot read.
    """
    claude = bool(store.config.get("claude", "claude_md_on_stop"))
    agents = bool(store.config.get("claude", "agents_md_on_stop"))
    if not claude and not agents:
        return None
    return TrustRecord(name if name is not None else _store_name(store), claude,
                       store.config.get("claude", "claude_md_path"),
                       store.config.get("claude", "agents_md_path") if agents else None)


def _records(store: Store) -> list[tuple[str, TrustRecord | None]]:
    return [(raw, _decode(raw)) for raw, _ in consent.read_records(store)]


def decide(store: Store) -> tuple[Decision, TrustRecord | None]:
    """Whether the store's settings with effects outside ``.ctx/`` may apply.

    Returns:
        ``("own", None)`` outside any Git work tree; ``("consented", record)`` when this
        clone's Git configuration holds a record of exactly the current values;
        ``("needs-consent", record)`` otherwise (``record`` is what ``ctx trust`` would
        record; None when nothing is asked for).

    Raises:
        ConsentRequired: if the store is in a Git work tree whose configuration git
            cannot read (git missing, the repository refused).
    """
    if not in_git_work_tree(store.worktree):
        return "own", None
    want = requested(store)
    if want is None:
        return "needs-consent", None
    if any(record == want for _, record in _records(store)):
        return "consented", want
    return "needs-consent", want


def _check_git(store: Store) -> str:
    if not in_git_work_tree(store.worktree):
        raise InvalidInput(f"{store.worktree} is not in a Git work tree")
    return _store_name(store)


def grant(store: Store) -> tuple[TrustRecord | None, bool]:
    """Record consent to the store's current settings (replacing this store's older ones).

    The caller checks the values first (``claudemd.resolve_claude_md``): consent is never
    recorded for a path that leads out of the repository.

    Returns:
        The record (None when the config asks for nothing) and whether it was new.

    Raises:
        InvalidInput: if the store is not in a Git work tree (its config needs no consent).
        ConsentRequired: if git cannot read or write the clone's configuration.
    """
    name = _check_git(store)
    want = requested(store, name)
    if want is None:
        return None, False
    present = _records(store)
    if any(record == want for _, record in present):
        return want, False
    for raw, record in present:  # this store's stale records go; other stores' stay
        if record is not None and record.store == want.store:
            _unset(store, raw)
    consent.add_record(store, want.encode())
    return want, True


def _unset(store: Store, raw: str) -> None:
    consent.remove_record(store, raw)


def revoke(store: Store) -> list[TrustRecord]:
    """Remove every consent recorded for this store in this clone.

    Returns:
        The records removed.

    Raises:
        InvalidInput: if the store is not in a Git work tree.
        ConsentRequired: if git cannot read or write the clone's configuration.
    """
    name = _check_git(store)
    removed = []
    for raw, record in _records(store):
        if record is not None and record.store == name:
            _unset(store, raw)
            removed.append(record)
    return removed


def list_records(store: Store) -> list[tuple[TrustRecord, bool]]:
    """The consents recorded for this store in this clone.

    Each with whether it matches the current values of its config.toml (a stale one no longer
    applies).

    Raises:
        InvalidInput: if the store is not in a Git work tree.
        ConsentRequired: if git cannot read the clone's configuration.
    """
    name = _check_git(store)
    want = requested(store, name)
    return [(record, record == want) for _, record in _records(store)
            if record is not None and record.store == name]
