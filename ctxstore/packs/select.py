"""Which of a pack's items are taken first (spec 002 §12, step 5): distinct files, docs in their place.

Sorting every chunk by score and filling the budget best first lets one long file take the
whole pack (its six best functions all outrank the next file's best), and lets a changelog or
a docs page that mentions every word of the task fill a code task's budget with prose. Two
rules decide the order the budget takes the items in (``choose``; docs/retrieval.md, "What
enters a pack"):

- **Distinct files first.** Each file's best chunk is taken in score order before any file's
  second chunk; a further chunk of a file already in the pack goes ahead of the next new
  file's best only when it scores at least ``SECOND_CHUNK_MARGIN`` times as high. Once every
  file had its turn, the rest follow by score. Items without a file (nodes, decisions) are
  files of their own: they compete on score alone. (Only the files within half the best
  file's score, ``pack.MIN_RELEVANCE``, offer chunks at all.)
- **Documentation in its place.** In a code task, the chunks of documentation files
  (``is_doc_path``: changelogs, release notes, ``docs/``, ``*.rst``, ``*.md``) keep their rank
  but together take at most ``DOC_SHARE`` of the room. A task is a documentation task (no cap)
  when it says so in its words (``DOC_WORDS``), names a documentation file, or when no code
  file matched it.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from ctxstore.packs.items import PackItem

__all__ = ["SECOND_CHUNK_MARGIN", "DOC_SHARE", "DOC_WORDS", "is_doc_path", "is_doc_task",
           "choose"]

# A second chunk of a file goes ahead of the next new file's best only at half as much again
# its score. A chunk's score is its file's relevance (the file's score over the best file's)
# times the share of the task's terms it holds. On the code development set, a file's chance
# of being one the task changed climbs steeply with its relevance: about 0.63 at 0.9-1.0 of the
# best, 0.38 at 0.8-0.9, 0.17 at 0.7-0.8, under 0.1 below (bench/retrieval.py, docs/retrieval.md).
# A file half as relevant again as the next is several times likelier to be the one, so its
# further text is the better use of the room; below that gap a new file is (and a pack with one
# more file holds a file the task changed more often). At 1.2 fewer packs held one; at 2 and 3
# the same packs did, with less of their text from those files.
SECOND_CHUNK_MARGIN = 1.5
DOC_SHARE = 0.1   # documentation takes at most this share of a code task's room
DOC_WORDS = frozenset({"doc", "docs", "documentation", "document", "documented", "documenting",
                       "readme", "changelog", "changelogs", "docstring", "docstrings",
                       "tutorial", "rst", "markdown"})
_DOC_STEMS = frozenset({"changes", "changelog", "history", "news", "release-notes",
                        "release_notes", "releasenotes"})
_DOC_DIRS = frozenset({"doc", "docs"})
_DOC_SUFFIXES = frozenset({".rst", ".md", ".markdown", ".adoc"})
_WORD = re.compile(r"[a-z]+")


def is_doc_path(path: str) -> bool:
    """Whether a repository-relative path is documentation rather than code.

    Changelogs and release notes (``CHANGES*``, ``CHANGELOG*``, ``HISTORY*``, ``NEWS*``,
    ``release-notes*``), anything under a ``docs/`` or ``doc/`` directory, and prose files
    (``.rst``, ``.md``, ``.markdown``, ``.adoc``).

    Args:
        path: A path with ``/`` separators.

    Returns:
        True for documentation.
    """
    p = PurePosixPath(path)
    name = p.name.lower()
    if name.split(".")[0] in _DOC_STEMS or p.suffix.lower() in _DOC_SUFFIXES:
        return True
    return any(part.lower() in _DOC_DIRS for part in p.parts[:-1])


def is_doc_task(task: str, matched: Iterable[str], named: Iterable[str]) -> bool:
    """Whether documentation may take any share of a pack's room.

    Args:
        task: The task as given.
        matched: The files that matched it, best first.
        named: The files whose names the task spells.

    Returns:
        True when the task speaks of documentation (a word of ``DOC_WORDS``), names a
        documentation file, or no code file matched it.
    """
    if any(w in DOC_WORDS for w in _WORD.findall(task.lower())):
        return True
    if any(is_doc_path(p) for p in named):
        return True
    return all(is_doc_path(p) for p in matched)


def choose(items: Sequence[PackItem], room: int, fmt: str, *,
           doc_room: int | None = None) -> tuple[list[PackItem], int]:
    """The items a pack takes, in the order it takes them, and what they cost.

    Each file's best chunk first, in score order; a further chunk of a file already taken
    goes ahead of the next new file's best only at ``SECOND_CHUNK_MARGIN`` times its score,
    and after every file had its turn. An item is taken when it still fits ``room`` (a file
    whose best chunk does not fit offers its next one as its first); with ``doc_room``, the
    chunks of documentation files together cost at most that many tokens. An item costs what
    ``render.item_cost`` charges it in the pack's format.

    Args:
        items: Scored items; code items carry ``extra["path"]``.
        room: Tokens for items.
        fmt: The pack's format.
        doc_room: A code task's room for documentation (None: no cap).

    Returns:
        The chosen items and their cost.
    """
    lists: list[list[PackItem]] = []
    group_of: dict[str, int] = {}
    for item in sorted(items, key=lambda i: (-i.score, i.title)):
        path = item.extra.get("path")
        if path is None:
            lists.append([item])
            continue
        g = group_of.setdefault(str(path), len(lists))
        if g == len(lists):
            lists.append([])
        lists[g].append(item)
    fresh = [(-chunks[0].score, chunks[0].title, g) for g, chunks in enumerate(lists)]
    heapq.heapify(fresh)      # the best item of each file none of whose items is taken yet
    again: list[tuple[float, str, int]] = []   # the next item of files already in the pack
    taken = [False] * len(lists)
    at = [0] * len(lists)
    chosen: list[PackItem] = []
    seen: set[tuple[str, str]] = set()
    used = docs = 0
    while fresh or again:
        if again and (not fresh or -again[0][0] >= SECOND_CHUNK_MARGIN * -fresh[0][0]):
            g = heapq.heappop(again)[2]
        else:
            g = heapq.heappop(fresh)[2]
        item = lists[g][at[g]]
        at[g] += 1
        key = (item.object_id, item.title)
        cost = item.cost(fmt)
        doc = doc_room is not None and "start_line" in item.extra \
            and is_doc_path(str(item.extra.get("path") or ""))
        if key not in seen and used + cost <= room and not (doc and docs + cost > (doc_room or 0)):
            chosen.append(item)
            seen.add(key)
            used += cost
            docs += cost if doc else 0
            taken[g] = True
        if at[g] < len(lists[g]):
            nxt = lists[g][at[g]]
            heapq.heappush(again if taken[g] else fresh, (-nxt.score, nxt.title, g))
    return chosen, used
