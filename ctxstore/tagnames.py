"""The grammar of a knowledge tag (``namespace:value``, or a bare word): ``validate_tag``.

One owner for what a tag may be, shared by every writer of tags (``knowledge.nodes``) and by
the current task (``knowledge.tasks``), whose name must make a valid ``task:NAME`` tag. A
base module, cheap to import: the hooks check a task name on every prompt without loading
the write path. (``<ctx:*>`` command tags are ``claude.tags``'s.)
"""

from __future__ import annotations

import re

from ctxstore.errors import InvalidInput

__all__ = ["MAX_TAG_CHARS", "validate_tag"]

MAX_TAG_CHARS = 200
"""The longest tag: every node carries its tags into every listing, view and hook."""
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(:[A-Za-z0-9_.\-/:]+)?")


def validate_tag(tag: str) -> str:
    """Check a tag (``namespace:value`` or a bare word).

    Args:
        tag: The tag as given (surrounding spaces are dropped).

    Returns:
        The tag without surrounding spaces.

    Raises:
        InvalidInput: for an empty or malformed tag.
    """
    tag = tag.strip()
    if len(tag) > MAX_TAG_CHARS:
        raise InvalidInput(f"a tag is at most {MAX_TAG_CHARS} characters (this one has {len(tag)})")
    if not _TAG.fullmatch(tag):
        raise InvalidInput(f"invalid tag {tag!r} (want namespace:value, e.g. project:ctx)")
    return tag
