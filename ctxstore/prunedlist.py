"""The lists of objects ``ctx gc`` pruned: ``.ctx/pruned/<BLAKE3 of the content>``.

Each list is a comment line, then one lowercase hex object id per line, sorted; a gc that
prunes writes one new list (atomically, before deleting anything) and never changes one, so
Git never merges them. Readers take the union of every list, bounded and never through a
link. What is pruned, and when a missing object counts as such, is ``ctxstore.pruned``'s.

It must not print.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import blake3

from ctxstore import fsio
from ctxstore.errors import CtxError
from ctxstore.records import dataclass

__all__ = ["PRUNED_DIR", "PRUNED_HEADER", "PrunedList", "read_pruned", "write_pruned", "list_name",
           "is_object_id"]

PRUNED_DIR = "pruned"
PRUNED_HEADER = ("# ctx gc pruned these objects: the code index an older ctx committed "
                 "(derived: `ctx index` rebuilds it). One id per line.\n")
MAX_LIST_BYTES = 64 << 20  # one list file: ~1 million ids
# Lists read at most: one `ctx gc` writes one, so a clone with more was planted. Each is read
# whole (up to MAX_LIST_BYTES), so without this a cloned folder could cost unbounded work.
MAX_LISTS = 1024
_NAME = re.compile(r"[0-9a-f]{64}")
_MARKERS = ("<<<<<<<", "=======", ">>>>>>>", "|||||||")


@dataclass
class PrunedList:
    """Every id the store's lists name, and what in them could not be read."""

    ids: frozenset[bytes]
    files: int = 0
    problems: tuple[tuple[str, str], ...] = ()  # (file, what is wrong)


def list_name(data: bytes) -> str:
    """The file name of a list: the BLAKE3 of its content, 64 hex digits."""
    return blake3.blake3(data).hexdigest()


def _parse(text: str) -> tuple[set[bytes], int]:
    """The ids of one list, and how many lines were neither an id nor a comment."""
    ids: set[bytes] = set()
    bad = 0
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith(_MARKERS):
            continue  # conflict markers of a hand merge: both sides are lists
        if _NAME.fullmatch(line):
            ids.add(bytes.fromhex(line))
        else:
            bad += 1
    return ids, bad


def read_pruned(root: Path) -> PrunedList:
    """Every list under ``.ctx/pruned/`` (read bounded; links and special files refused).

    A file that is not a list (a link, too large, not UTF-8, lines that are no ids) is named
    in ``problems`` and contributes what it validly holds, nothing when unreadable.
    """
    ids: set[bytes] = set()
    problems: list[tuple[str, str]] = []
    files = 0
    try:
        folder = fsio.open_dir(root, PRUNED_DIR)
    except FileNotFoundError:
        return PrunedList(frozenset())
    except (CtxError, OSError) as exc:
        return PrunedList(frozenset(), 0, ((PRUNED_DIR, _why(exc)),))
    with folder:
        names = sorted(e.name for e in os.scandir(folder.fileno()) if _NAME.fullmatch(e.name))
        if len(names) > MAX_LISTS:  # anything else is a temp file of an interrupted write
            problems.append((PRUNED_DIR, f"{len(names)} lists, more than {MAX_LISTS}: "
                                         f"only the first {MAX_LISTS} read"))
        for name in names[:MAX_LISTS]:
            where = f"{PRUNED_DIR}/{name}"
            try:
                data = folder.read(name, MAX_LIST_BYTES)
                if len(data) > MAX_LIST_BYTES:
                    raise ValueError(f"larger than {MAX_LIST_BYTES >> 20} MiB")
                found, bad = _parse(data.decode("utf-8"))
            except (CtxError, OSError, ValueError) as exc:
                problems.append((where, _why(exc)))
                continue
            files += 1
            ids |= found
            if bad:
                problems.append((where, f"{bad} lines are not object ids (ignored)"))
    return PrunedList(frozenset(ids), files, tuple(problems))


def _why(exc: BaseException) -> str:
    if isinstance(exc, CtxError):
        return exc.message
    if isinstance(exc, UnicodeDecodeError):
        return "is not UTF-8 text"
    if isinstance(exc, OSError):
        return f"cannot be read ({exc.strerror or exc})"
    return str(exc)


def write_pruned(root: Path, ids: Iterable[bytes]) -> str | None:
    """Durably write a new list of ``ids`` (those no list names yet); its path, or None.

    Written before the objects are deleted (temp file, fsync, rename, fsync of the folder),
    so an object gc deletes is always listed, whatever point a crash stops it at.
    """
    new = sorted(set(ids) - read_pruned(root).ids)
    if not new:
        return None
    data = (PRUNED_HEADER + "".join(f"{oid.hex()}\n" for oid in new)).encode("ascii")
    rel = f"{PRUNED_DIR}/{list_name(data)}"
    with fsio.open_dir(root) as store_dir:
        store_dir.replace_atomic(rel, data, mode=0o444)
    return rel


def is_object_id(text: str) -> bool:
    """Whether ``text`` is an object id as the lists write it (64 lowercase hex digits)."""
    return _NAME.fullmatch(text) is not None
