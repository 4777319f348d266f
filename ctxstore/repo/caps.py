"""How large a commit, a staging step or a change batch may be, read or written.

A file declaring more than its kind's cap is refused from what it declares, before it is
decoded (a decompression bomb planted in a clone); a write refuses to make more.
"""

from __future__ import annotations

from ctxstore.model import ChangeBatch, Commit, WorkCommit
from ctxstore.model.commit import CommitV2

__all__ = ["MAX_BATCH_BYTES", "MAX_COMMIT_BYTES", "typed_cap"]

# A commit or a staging step holds ids and a message: every command and hook reads the head
# commit, so a file claiming more (a decompression bomb planted in a clone) is refused from
# what it declares, before it is decoded. 16 MiB is half a million ids; a write refuses more.
MAX_COMMIT_BYTES = 16 << 20
# A change batch holds the knowledge records of one operation, or of one fold of staged
# work: a write splits its records over as many batches as it needs (``put_records``), so a
# read refuses a batch that declares more than any write makes.
MAX_BATCH_BYTES = 64 << 20
_TYPED_CAPS: dict[type, int] = {Commit: MAX_COMMIT_BYTES, CommitV2: MAX_COMMIT_BYTES,
                                WorkCommit: MAX_COMMIT_BYTES,
                                ChangeBatch: MAX_BATCH_BYTES}


def typed_cap(expect: type | tuple[type, ...] | None) -> int | None:
    """The largest payload an object of the kind(s) ``expect`` may have (None: the store's cap)."""
    if expect is None:
        return None
    caps = [_TYPED_CAPS.get(kind) for kind in (expect if isinstance(expect, tuple) else (expect,))]
    return None if None in caps else max(c for c in caps if c is not None)
