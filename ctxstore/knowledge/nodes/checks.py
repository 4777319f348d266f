"""What a node write checks first: its type, its content's size and where it is kept, its tier.

Content above ``INLINE_CONTENT_BYTES`` is stored as a blob (``split_content``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxstore.errors import InvalidInput
from ctxstore.ids import ObjectId
from ctxstore.model.vocab import NODE_TYPES, TIER_TAG_PREFIX
from ctxstore.objects import KIND_BLOB, object_id_of

__all__ = ["INLINE_CONTENT_BYTES", "validate_type", "split_content", "check_content_limit",
           "with_tier"]

INLINE_CONTENT_BYTES = 4096


# -- checks ---------------------------------------------------------------------------------------

def validate_type(node_type: str) -> str:
    """Check a node type.

    Args:
        node_type: The type name.

    Returns:
        ``node_type`` unchanged.

    Raises:
        InvalidInput: if it is not one of ``NODE_TYPES``.
    """
    if node_type not in NODE_TYPES:
        raise InvalidInput(f"unknown node type {node_type!r}",
                           hint="one of " + ", ".join(NODE_TYPES))
    return node_type


def split_content(content: str) -> tuple[str | None, ObjectId | None, list[bytes]]:
    """Decide where content is kept: inline, or in a blob above ``INLINE_CONTENT_BYTES``.

    Args:
        content: The node's text.

    Returns:
        ``(inline text, blob id, blobs to store)``: the text and no blob, or no text,
        the blob's id and its bytes.

    Raises:
        InvalidInput: for empty content or text that is not valid Unicode.
    """
    if not content.strip():
        raise InvalidInput("node content is empty")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("node content is not valid Unicode text") from None
    if len(data) > INLINE_CONTENT_BYTES:
        return None, object_id_of(KIND_BLOB, data), [data]
    return content, None, []


def check_content_limit(content: str, limit: int) -> None:
    """Refuse content longer than ``limit`` characters (agent writes, RELIABILITY PI-12).

    Args:
        content: The text to be written.
        limit: The largest number of characters allowed.

    Raises:
        InvalidInput: if ``content`` is longer than ``limit``.
    """
    if len(content) > limit:
        raise InvalidInput(f"content of {len(content)} characters is over the limit of {limit}")


def with_tier(tags: Iterable[str], tier: str) -> tuple[str, ...]:
    """A node's tags with every ``tier:`` tag replaced by ``tier:<tier>``.

    Args:
        tags: The node's current tags.
        tier: The tier to move it to (``off-context``, ``reference``, ...).

    Returns:
        The new tags, sorted.
    """
    kept = {t for t in tags if not t.startswith(TIER_TAG_PREFIX)}
    return tuple(sorted(kept | {TIER_TAG_PREFIX + tier}))
