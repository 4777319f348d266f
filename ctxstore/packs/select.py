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
  when its first line says so in a word (``DOC_WORDS``), names a documentation file, or when
  no code file matched it.
- **A lead file, and glimpses of the rest** (``lead_file``, ``choose(lead=...)``). The pack
  leads with the best-ranked code file (in a code task: a file of a known language that is not
  documentation nor a type stub; in a documentation task: the best file): every chunk of it
  that holds the task's terms competes as above, while each other file enters first as a
  glimpse, its best chunk's first ``GLIMPSE_LINES`` lines (its signature: the file is named
  and located for the model at a tenth of the cost). When the ranking is confident (the next
  code file scores at most ``LEAD_MARGIN`` of the lead), the pack stops there, even short of
  its budget: the further text of files the ranking ranks clearly lower dilutes it. When
  scores are close, the other files' further chunks fill the room left, by the rules above.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from ctxstore.packs.items import PackItem

__all__ = ["SECOND_CHUNK_MARGIN", "DOC_SHARE", "DOC_WORDS", "LEAD_MARGIN", "GLIMPSE_LINES",
           "is_doc_path", "is_doc_task", "is_code_path", "lead_file", "glimpse", "choose",
           "fill"]

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
# The lead file (the best-ranked code file) is a file the task changed about 0.6 to 0.8 of the
# time on the code development set, the next one far less often; when the next code file
# scores at most this share of the lead's score, only glimpses of the others join the lead
# (docs/retrieval.md, "Packs: do they cover the task?": 0.7 and 0.8 kept less gold text on
# starlette and ripgrep, 0.95 less on werkzeug).
LEAD_MARGIN = 0.9
GLIMPSE_LINES = 2  # the lines of a glimpse: a definition's signature and its first line
_STUB_SUFFIXES = (".pyi",)  # type stubs describe the module beside them
DOC_SHARE = 0.1   # documentation takes at most this share of a code task's room
DOC_WORDS = frozenset({"doc", "docs", "documentation", "document", "documented", "documenting",
                       "readme", "changelog", "changelogs", "docstring", "docstrings",
                       "tutorial", "rst", "markdown"})
_DOC_STEMS = frozenset({"changes", "changelog", "history", "news", "release-notes",
                        "release_notes", "releasenotes"})
_DOC_DIRS = frozenset({"doc", "docs"})
_DOC_SUFFIXES = frozenset({".rst", ".md", ".markdown", ".adoc"})
# a word, not part of an identifier (``doc_cfg``) or of code in backticks
_WORD = re.compile(r"(?<![\w`])[a-z]+(?![\w`])")


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
        True when the task says it is about documentation (a word of ``DOC_WORDS``, whole,
        in its first line: a commit message or an issue whose body mentions the docs in
        passing is about its subject), names a documentation file, or no code file matched it.
    """
    subject = next((line for line in task.splitlines() if line.strip()), "")
    if any(w in DOC_WORDS for w in _WORD.findall(subject.lower())):
        return True
    if any(is_doc_path(p) for p in named):
        return True
    return all(is_doc_path(p) for p in matched)


def is_code_path(path: str) -> bool:
    """Whether a file is code: a language ctx extracts, not documentation, not a type stub.

    Args:
        path: A repository-relative path with ``/`` separators.

    Returns:
        True for code (``src/app.py``, ``crates/core/lib.rs``); False for ``README.md``,
        ``Cargo.toml``, ``app.pyi``.
    """
    from ctxstore.code.languages import extractor_for

    return not is_doc_path(path) and not path.lower().endswith(_STUB_SUFFIXES) \
        and extractor_for(path) is not None


def lead_file(ranked: Sequence[tuple[str, float]], doc_task: bool) -> tuple[str | None, bool]:
    """The file a pack leads with, and whether the ranking is confident in it.

    Args:
        ranked: (path, score) of the ranked files, best first.
        doc_task: Whether documentation is what the task is about (``is_doc_task``).

    Returns:
        The best-ranked code file (``is_code_path``; any file in a documentation task or when
        none is code), or None when nothing is ranked; and True when no other such file
        scores above ``LEAD_MARGIN`` times its score.
    """
    candidates = list(ranked) if doc_task else [r for r in ranked if is_code_path(r[0])]
    candidates = candidates or list(ranked)
    if not candidates:
        return None, False
    confident = len(candidates) < 2 or candidates[1][1] <= LEAD_MARGIN * candidates[0][1]
    return candidates[0][0], confident


def glimpse(item: PackItem, lines: int = GLIMPSE_LINES) -> PackItem:
    """A chunk item cut to its first ``lines`` lines (its line range and title say so).

    Items without lines (nodes, diagnostics) are returned as they are.
    """
    start, end = item.extra.get("start_line"), item.extra.get("end_line")
    kept = item.snippet.split("\n")[:lines]
    if not isinstance(start, int) or len(kept) == item.snippet.count("\n") + 1:
        return item
    title, extra = item.title, dict(item.extra)
    if isinstance(end, int) and end >= start + len(kept):
        extra["end_line"] = start + len(kept) - 1
        path = extra.get("path")
        title = title.replace(f"{path}:{start}-{end}", f"{path}:{start}-{extra['end_line']}")
    return PackItem(title, item.object_id, "\n".join(kept), item.score, item.kind, item.why,
                    extra, item.stale_mentions)


def choose(items: Sequence[PackItem], room: int, fmt: str, *, doc_room: int | None = None,
           lead: str | None = None, confident: bool = False) -> tuple[list[PackItem], int]:
    """The items a pack takes, in the order it takes them, and what they cost.

    Without ``lead``: ``fill``. With it: the lead file's items, the items without a file and
    a glimpse (``glimpse``) of each other file's best chunk are filled first; unless
    ``confident``, the other files' further chunks then fill the room left.

    Args:
        items: Scored items; code items carry ``extra["path"]``.
        room: Tokens for items.
        fmt: The pack's format.
        doc_room: A code task's room for documentation (None: no cap).
        lead: The file the pack leads with (``lead_file``), or None.
        confident: Whether the ranking is confident in the lead (``lead_file``).

    Returns:
        The chosen items and their cost.
    """
    if lead is None:
        return fill(items, room, fmt, doc_room=doc_room)
    firsts: dict[str, PackItem] = {}
    for item in sorted(items, key=lambda i: (-i.score, i.title)):
        path = item.extra.get("path")
        if path is not None and path != lead and str(path) not in firsts:
            firsts[str(path)] = item
    first_ids = {id(i) for i in firsts.values()}
    head = [i for i in items if i.extra.get("path") in (lead, None)] \
        + [glimpse(i) for i in firsts.values()]
    chosen, used = fill(head, room, fmt, doc_room=doc_room)
    if confident:
        return chosen, used
    rest = [i for i in items if i.extra.get("path") not in (lead, None) and id(i) not in first_ids]
    docs_left = None if doc_room is None else max(0, doc_room - sum(
        i.cost(fmt) for i in chosen if "start_line" in i.extra
        and is_doc_path(str(i.extra.get("path") or ""))))
    more, spent = fill(rest, room - used, fmt, doc_room=docs_left)
    return chosen + more, used + spent


def fill(items: Sequence[PackItem], room: int, fmt: str, *,
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
