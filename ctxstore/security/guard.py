"""The secret policy applied to one write: what every write path calls before it writes.

``guard`` takes the text a write path is about to store and the path's channel
(``secrets.CHANNELS``) and returns the text to write (itself, or its redaction) or raises
``SecretRefused`` (E025) naming the rule and the line. The policy is the store's
(``consent.policy_for``: config.toml's ``[security]``, weakenings only with ``ctx trust``).
Callers guard everything a write will store *before* the first byte is written (Markdown,
staging objects), so a refused write leaves the store as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ctxstore.security.secrets import Policy, guard_text, policy_from_config

if TYPE_CHECKING:
    from ctxstore.repo import Store

__all__ = ["guard", "guard_fields", "guard_metadata", "policy"]


def policy(store: Store) -> Policy:
    """The policy in force for ``store`` (see ``consent.policy_for``)."""
    wanted = policy_from_config(store.config)
    if not wanted.weakenings():
        return wanted  # nothing needs consent: no git process, not even its import
    # Imported here: consent runs git; the hooks' write path (a <ctx:remember>) never needs
    # it with the default policy.
    from ctxstore.security.consent import policy_for

    return policy_for(store)


def guard(store: Store, channel: str, text: str, *, what: str = "content",
          path: str | None = None, allow_secret: bool = False,
          policy_: Policy | None = None) -> str:
    """The text to write on ``channel``: ``text``, or its redaction.

    Args:
        store: The store written to (its policy).
        channel: One of ``secrets.CHANNELS``.
        text: What is about to be written.
        what: What it is, for the error (``the note``, ``node 01J… content``).
        path: The file whose content ``text`` is (file rules), if any.
        allow_secret: The user's ``--allow-secret`` (explicit writes only).
        policy_: The policy, when the caller already has it.

    Returns:
        The text to write.

    Raises:
        SecretRefused: (E025) when the channel refuses and ``text`` holds a secret.
    """
    return guard_text(policy_ or policy(store), channel, text, what=what, path=path,
                      allow_secret=allow_secret)


def guard_fields(store: Store, channel: str, fields: Iterable[tuple[str, str | None]], *,
                 allow_secret: bool = False) -> list[str | None]:
    """``guard`` each ``(what, text)`` of one write (None passes through), in order.

    Raises:
        SecretRefused: (E025) for the first field holding a secret, when the channel refuses.
    """
    pol = policy(store)
    return [None if text is None else guard_text(pol, channel, text, what=what,
                                                 allow_secret=allow_secret)
            for what, text in fields]


def guard_metadata(store: Store, channel: str, metadata: Mapping[str, Any] | None, *,
                   what: str = "metadata", allow_secret: bool = False) -> dict[str, Any]:
    """Metadata with every string value guarded (nested lists and maps included).

    Raises:
        SecretRefused: (E025) when the channel refuses and a value holds a secret.
    """
    pol = policy(store)

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, str):
            return guard_text(pol, channel, value, what=where, allow_secret=allow_secret)
        if isinstance(value, list):
            return [walk(v, where) for v in value]
        if isinstance(value, dict):
            return {k: walk(v, f"{where} {k!r}") for k, v in value.items()}
        return value

    return {k: walk(v, f"{what} {k!r}") for k, v in (metadata or {}).items()}
