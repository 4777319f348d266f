"""Token estimation: characters / 4 (spec 000), in this one function."""

from __future__ import annotations

__all__ = ["estimate_tokens"]


def estimate_tokens(text: str) -> int:
    """Estimate the model tokens of ``text`` (characters / 4, rounded up, at least 1 for non-empty text)."""
    return (len(text) + 3) // 4
