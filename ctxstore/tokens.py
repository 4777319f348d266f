"""Token estimation: characters / 4 (spec 000), here only (a text's estimate is its length's)."""

from __future__ import annotations

__all__ = ["estimate_tokens", "tokens_for_length"]


def estimate_tokens(text: str) -> int:
    """Estimate the model tokens of ``text`` (characters / 4, rounded up, at least 1 for non-empty text)."""
    return tokens_for_length(len(text))


def tokens_for_length(chars: int) -> int:
    """``estimate_tokens`` of any text of ``chars`` characters: the estimate is the length's.

    Lets a renderer that assembles text from pieces know the cost of the whole exactly from
    the lengths of the pieces, without building it (``packs.compose``).

    Args:
        chars: A text's length in characters.

    Returns:
        Its estimated tokens.
    """
    return (chars + 3) // 4
