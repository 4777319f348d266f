"""Source nodes: a text file ingested as a ``source`` node (spec 000 "Import/Export").

Owns ``ingest_file``: read a file the user names (bounded, ``knowledge._files``), check
that it is UTF-8 text, and store it as one ``source`` node whose metadata records where
it came from and its SHA-256. It must not run SQL or print, and it does not ingest code
(code intelligence has its own ingest).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.code.walk import repo_path
from ctxstore.errors import InvalidInput
from ctxstore.knowledge._files import read_regular_file
from ctxstore.knowledge.nodes import AddedNode, add_node, validate_tag
from ctxstore.security.guard import guard_fields

if TYPE_CHECKING:
    from ctxstore.model.codec import JsonValue
    from ctxstore.repo import Store
    from ctxstore.session import Session

__all__ = ["MAX_INGEST_BYTES", "ingest_file"]

MAX_INGEST_BYTES = 16 << 20


def ingest_file(db: Session, path: Path, *, tags: Sequence[str] = (),
                allow_secret: bool = False) -> AddedNode:
    """Store a UTF-8 text file as a ``source`` node.

    The node's content is the file's text; its metadata records ``path``, ``bytes`` and
    ``sha256`` of the file. The node is committed and shared, so ``path`` never holds this
    machine's layout: it is relative to the work tree for a file inside it, else only the
    file's name (``outside_worktree`` is then true). Symlinks are followed: the path the user gave
    is read, whatever it names, as long as it is a regular file.

    Args:
        db: The open session.
        path: The file to read (at most ``MAX_INGEST_BYTES``).
        tags: Tags for the new node.
        allow_secret: The user's ``--allow-secret``: store a file that holds a secret.

    Returns:
        The node written.

    Raises:
        InvalidInput: if the file is missing, a directory, not a regular file,
            unreadable, too large, binary (contains NUL bytes), not UTF-8, or empty;
            or a tag is invalid.
        SecretRefused: (E025) if the file holds a secret (its rule and line are named).
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    clean_tags = [validate_tag(t) for t in tags]
    data = read_regular_file(path, MAX_INGEST_BYTES, "file")
    if b"\0" in data:
        raise InvalidInput(f"{path} is a binary file (it contains NUL bytes)",
                           hint="ingest text files only")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text (invalid byte at offset {exc.start})",
                           hint="ingest text files only") from None
    if not text.strip():
        raise InvalidInput(f"{path} is empty")
    # Explicit: the user named the file. Its lines are numbered as in the file.
    guard_fields(db.store, "explicit", [(str(path), text), *[("tag", t) for t in clean_tags]],
                 allow_secret=allow_secret)
    shown, outside = _recorded_path(db.store, path)
    metadata: dict[str, JsonValue] = {"path": shown, "bytes": len(data),
                                      "sha256": hashlib.sha256(data).hexdigest()}
    if outside:
        metadata["outside_worktree"] = True
    return add_node(db, "source", text, tags=clean_tags, metadata=dict(metadata), channel=None)


def _recorded_path(store: Store, path: Path) -> tuple[str, bool]:
    """``(path relative to the work tree, False)``, or ``(the file's name, True)`` outside it."""
    try:
        return repo_path(store, str(path), Path.cwd()), False
    except InvalidInput:  # outside the work tree (or inside .ctx/)
        return path.name, True
