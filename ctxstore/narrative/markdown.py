"""Narrative Markdown: templates, the ``ctx:`` markers, and parsing entries and sections.

The daily logs, ``decisions.md`` and task files are read as knowledge: each entry
(a level-2 section of a log or of decisions.md, a whole task file) is one node. ctx ties
the entries it writes to their node by an HTML comment on the heading line,
``<!-- ctx:id=ULID -->``, invisible when rendered. A heading that carries a marker always
starts an entry, even after an unclosed code fence, so one broken entry cannot swallow
the entries after it. New logs, task files and decisions.md carry the metadata block of spec 002 §8.6 below
their title (``metadata_block``; an HTML comment holding created, updated, tags and
mentions); it is never part of an entry's content, and a file without one is read as
before. This module only parses and renders text; ``narrative.entries``
writes entries, ``narrative.ingest`` reads hand edits back, ``narrative.snapshot`` stores
the files in commits.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from pathlib import Path

from ctxstore.ids import ULID_ALPHABET
from ctxstore.records import dataclass

__all__ = ["TEMPLATE_DIR", "read_template", "render_template", "role_of", "ENTRY_ROLES",
           "Section", "id_marker", "end_marker", "session_marker", "event_marker",
           "parse_entries", "conflict_line", "demote_headings", "content_hash", "task_number",
           "log_rel", "log_header", "task_rel", "without_entry", "step_event_key",
           "is_step_event_of", "without_metadata"]

TEMPLATE_DIR = Path(__file__).resolve().parent.parent.parent / "narrative_templates"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def read_template(name: str) -> str:
    """Return the text of a narrative template shipped with the package."""
    for base in (TEMPLATE_DIR, Path(__file__).resolve().parent.parent / "narrative_templates"):
        path = base / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"narrative template {name} is not installed")


def render_template(name: str, **values: str) -> str:
    """A template with each ``{key}`` replaced by its value; other braces are left alone.

    One pass over the template, so a value holding ``{text}`` or ``{end}`` stays as
    written. A line holding only a key whose value is empty is left out (an entry
    without a body has no blank line for it).
    """
    empty = {"{" + key + "}" for key, value in values.items() if not value}
    lines = [line for line in read_template(name).rstrip("\n").split("\n")
             if line.strip() not in empty]
    text = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), "\n".join(lines))
    return text.rstrip() + "\n"


def role_of(rel: str) -> str:
    """The document role of a narrative path (spec 002 §8.3)."""
    if rel == "README.md":
        return "overview"
    if rel == "decisions.md":
        return "decision"
    if rel.startswith("log/"):
        return "log"
    if rel.startswith("tasks/"):
        return "task"
    if rel.startswith("work/"):
        return "work"
    return "doc"



# -- entries: parsing the Markdown that holds knowledge ----------------------------------------

ENTRY_ROLES = ("log", "decision", "task")
_MARKER = re.compile(r"<!--\s*ctx:id=([0-9A-HJKMNP-TV-Z]{26})\s*-->")
# A record ctx keeps in the log that is not a node: a session summary or an event.
_SESSION = re.compile(r"<!--\s*ctx:(?:session|event)=([0-9A-Za-z-]{1,64})\s*-->")
_END = re.compile(r"<!--\s*ctx:end=([0-9A-Za-z-]{1,64})\s*-->")
# Group 2 keeps the heading's trailing blanks (every use strips them): a lazy ``(.*?)`` before
# ``[ \t]*$`` was quadratic in a line with long runs of blanks inside it.
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CONFLICT_START = re.compile(r"<{7}(?:[ \t]|$)")
_CONFLICT_END = re.compile(r">{7}(?:[ \t]|$)")
_EVENT_KEY = re.compile(r"[0-9A-Za-z-]{1,64}")  # what _SESSION reads as a key
_KIND = re.compile(r"[a-z]+(?:-[a-z]+)*")


def id_marker(node_id: str) -> str:
    """The marker that ties a heading to its node."""
    return f"<!-- ctx:id={node_id} -->"


def end_marker(key: str) -> str:
    """The line that closes an entry ctx wrote (``key``: its node or session id).

    With a unique first line (the marked heading) and a unique last line, Git's union
    merge cannot take the common tail of two appended entries for one shared tail.
    """
    return f"<!-- ctx:end={key} -->"


def session_marker(session_id: str) -> str:
    """The marker of a session-summary entry (not a node: ctx's own record of a session)."""
    return f"<!-- ctx:session={session_id} -->"


def event_marker(key: str) -> str:
    """The marker of an event entry of the log (``task-created-ULID``).

    Read like a session summary, a record of what happened and not a node.
    """
    return f"<!-- ctx:event={key} -->"


def step_event_key(kind: str, session_id: str, unique: str) -> str | None:
    """The key of a step's event entry: ``KIND-SESSION-UNIQUE`` (``file-read-6f1c…-9XK2…``).

    The staging session's id in the key lets ``ctx stage abort`` find the events the
    aborted session wrote (``is_step_event_of``).

    Args:
        kind: The event's kind, lower-case letters and hyphens (``command-run``).
        session_id: The staging session the step belongs to.
        unique: Characters that tell this event from the session's others.

    Returns:
        The key, or None if it would not fit a marker (64 letters, digits and hyphens).
    """
    key = f"{kind}-{session_id}-{unique}"
    return key if _EVENT_KEY.fullmatch(key) else None


def is_step_event_of(key: str, session_id: str) -> bool:
    """Whether ``key`` is the key ``step_event_key`` gives an event of ``session_id``."""
    kind, sep, unique = key.partition(f"-{session_id}-")
    return bool(session_id and sep) and _KIND.fullmatch(kind) is not None and unique.isalnum()


def _log_date(ms: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))


def log_rel(ms: int) -> str:
    """The daily log of the UTC day of ``ms`` (milliseconds since the epoch)."""
    return f"log/{_log_date(ms)}.md"


def log_header(ms: int) -> str:
    """The opening text of a new daily log (the one ``log_rel(ms)`` names), with its metadata block."""
    return with_metadata(render_template("log.md", date=_log_date(ms)), metadata_block(ms))


# -- the metadata block of spec 002 §8.6 ---------------------------------------------------------

_META_OPEN = re.compile(r"[ \t]*<!--[ \t]*metadata:[ \t]*$")
_META_FIELD = re.compile(r"[ \t]*(created|updated|tags|mentions)[ \t]*:(.*)$")  # value: strip it


@dataclass(frozen=True)
class NarrativeMeta:
    """The metadata block of a narrative file (spec 002 §8.6).

    Attributes:
        created: When the file was created (ISO-8601 UTC, as written), or "".
        updated: When ctx last changed it (the latest of the ``updated:`` lines: a union
            merge may keep one from each branch), or "".
        tags: Its tags.
        mentions: The paths and symbols it mentions.
    """

    created: str
    updated: str
    tags: tuple[str, ...]
    mentions: tuple[str, ...]


def iso_time(ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` for ``ms`` milliseconds since the epoch (UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _list(items: Sequence[str]) -> str:
    return "[" + ", ".join(" ".join(str(i).replace(",", " ").replace("]", " ").split())
                           for i in items) + "]"


def metadata_block(created_ms: int, updated_ms: int | None = None, *, tags: Sequence[str] = (),
                   mentions: Sequence[str] = ()) -> str:
    """The metadata block a new narrative file carries below its title (spec 002 §8.6).

    Args:
        created_ms: When the file is created (milliseconds since the epoch).
        updated_ms: When it was last changed; ``created_ms`` when None.
        tags: Its tags (sorted as written).
        mentions: Paths and symbols it mentions.

    Returns:
        The HTML comment, ending with a newline (invisible when rendered).
    """
    return (f"<!-- metadata:\ncreated: {iso_time(created_ms)}\n"
            f"updated: {iso_time(created_ms if updated_ms is None else updated_ms)}\n"
            f"tags: {_list(sorted(tags))}\nmentions: {_list(mentions)}\n-->\n")


def with_metadata(text: str, block: str) -> str:
    """``text`` (a new file starting with its title line) with ``block`` below the title."""
    title, _, rest = text.partition("\n")
    rest = rest.lstrip("\n")
    return title + "\n\n" + block + ("\n" + rest if rest else "")


def _meta_span(lines: list[str]) -> tuple[int, int] | None:
    """The first metadata block's first and last line index, or None.

    The block opens with a line ``<!-- metadata:`` and ends with the first line holding ``-->``.
    """
    for i, line in enumerate(lines):
        if _META_OPEN.match(line):
            for j in range(i + 1, min(len(lines), i + 64)):
                if "-->" in lines[j]:
                    return i, j
            return None
    return None


def _parse_list(value: str) -> tuple[str, ...]:
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    return tuple(item.strip() for item in value.split(",") if item.strip())


def parse_metadata(text: str) -> NarrativeMeta | None:
    """The first metadata block of a narrative file, or None when it has none.

    Tolerant: unknown lines are skipped, a field given twice keeps the first ``created``
    and the latest ``updated``.

    Args:
        text: The file's text.

    Returns:
        The metadata, or None.
    """
    lines = text.splitlines()
    span = _meta_span(lines)
    if span is None:
        return None
    created, updated = "", ""
    tags: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()
    for line in lines[span[0] + 1:span[1] + 1]:
        m = _META_FIELD.match(line.split("-->", 1)[0])
        if m is None:
            continue
        name, value = m.group(1), m.group(2).strip(" \t")
        if name == "created" and not created:
            created = value
        elif name == "updated":
            updated = max(updated, value)
        elif name == "tags":
            tags = _parse_list(value)
        elif name == "mentions":
            mentions = _parse_list(value)
    return NarrativeMeta(created, updated, tags, mentions)


def without_metadata(text: str) -> str:
    """``text`` without its first metadata block (and the blank lines after it).

    Args:
        text: A narrative file's text.

    Returns:
        The text; unchanged if it has no block.
    """
    lines = text.split("\n")
    span = _meta_span(lines)
    if span is None:
        return text
    rest = lines[span[1] + 1:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    return "\n".join(lines[:span[0]] + rest)


def touch_metadata(text: str, updated_ms: int) -> str:
    """``text`` with its metadata block's ``updated:`` set to ``updated_ms``.

    Several ``updated:`` lines (a union merge) become one. A file without a block is returned
    unchanged: ctx never adds one to a file a person wrote.

    Args:
        text: The file's text.
        updated_ms: The time of the change (milliseconds since the epoch).

    Returns:
        The new text.
    """
    lines = text.split("\n")
    span = _meta_span(lines)
    if span is None:
        return text
    out = lines[:span[0] + 1]
    placed = False
    for line in lines[span[0] + 1:span[1] + 1]:
        m = _META_FIELD.match(line)
        if m is not None and m.group(1) == "updated":
            if not placed:
                out.append(f"updated: {iso_time(updated_ms)}")
                placed = True
            continue
        out.append(line)
    return "\n".join(out + lines[span[1] + 1:])


def task_rel(node_id: str) -> str:
    """A task file's path: the full node id, so tasks made on two branches never collide."""
    return f"tasks/task_{node_id}.md"


def task_number(node_id: str) -> str:
    """The short task number people use: six digits from the random part of the ULID.

    Derived from the id alone, so it is the same in every clone and after any merge.
    """
    value = 0
    for ch in node_id[-8:]:
        value = value * 32 + ULID_ALPHABET.index(ch)
    return f"{value % 1_000_000:06d}"


def content_hash(content: str) -> str:
    """The hash ctx records of the text an entry had when it last became a node version."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Section:
    """One knowledge entry of a narrative file."""

    path: str             # narrative-relative path
    role: str             # "log", "decision" or "task"
    line: int             # 1-based line of its heading (or first line)
    title: str            # heading text without ``#`` and markers
    body: str             # the lines after the heading, blank lines at both ends removed
    marker: str | None    # the node id of its ``ctx:id`` marker
    session: str | None   # the key of a record entry (session summary, event): not a node
    tangled: bool = False  # a merge interleaved it with another entry (see parse_entries)

    @property
    def content(self) -> str:
        """The node content: a log entry's text, or a decision's or task's title and text."""
        if self.role == "log":
            return self.body or self.title
        return self.title + ("\n\n" + self.body if self.body else "")

    @property
    def key(self) -> str:
        """Finds an unmarked entry again after an edit: its file and heading (a task: its file)."""
        if self.role == "task":
            return content_hash(self.path)
        return content_hash(f"{self.path}\n{self.title}")


def conflict_line(text: str) -> int | None:
    """The line (1-based) of the first unresolved Git conflict, or None.

    A conflict is a ``<<<<<<<`` line later closed by a ``>>>>>>>`` line.
    """
    start = None
    for no, line in enumerate(text.splitlines(), 1):
        if _CONFLICT_START.match(line) and start is None:
            start = no
        elif _CONFLICT_END.match(line) and start is not None:
            return start
    return None


def _strip_markers(line: str) -> str:
    return _END.sub("", _SESSION.sub("", _MARKER.sub("", line)))


def _body(lines: list[str]) -> tuple[str, set[str]]:
    """The body text without end markers, and the keys of the end markers it held."""
    ends: set[str] = set()
    kept: list[str] = []
    for line in lines:
        found = _END.findall(line)
        if found:
            ends.update(found)
            line = _END.sub("", line)
            if not line.strip():
                continue
        kept.append(line)
    return _trim(kept), ends


def _heading(line: str, in_fence: bool) -> tuple[int, str] | None:
    """(level, raw text) if ``line`` starts an entry-level heading here."""
    m = _HEADING.match(line)
    if m is None or (in_fence and not (_MARKER.search(line) or _SESSION.search(line))):
        return None
    return len(m.group(1)), m.group(2) or ""


def _title(raw: str) -> str:
    text = _strip_markers(raw).strip()
    bare = text.rstrip("#")  # a closing ``##`` of an ATX heading, after a blank
    return (bare.rstrip(" \t") if bare != text and bare[-1:] in (" ", "\t") else text).strip()


def _trim(lines: list[str]) -> str:
    return "\n".join(lines).strip("\n").rstrip()


def parse_entries(rel: str, text: str) -> list[Section]:
    """The knowledge entries of a narrative file (``ENTRY_ROLES`` only).

    Logs and decisions.md: every level-2 heading starts an entry that runs to the next
    heading of level 1 or 2; text before the first one is the file's preamble. A task
    file is one entry: its first heading is the title, the rest the body.

    An entry ctx wrote ends with its end marker. If a union merge interleaved two entries
    (possible when they share several identical lines), an entry holds another entry's
    end marker, or lacks its own while the file has it elsewhere: it is ``tangled``.
    """
    role = role_of(rel)
    lines = text.splitlines()
    if role == "task":
        return _task_entry(rel, lines)
    entries: list[Section] = []
    all_ends = set(_END.findall(text))
    current: tuple[int, str, list[str]] | None = None
    fence: str | None = None

    def close() -> None:
        if current is None:
            return
        no, raw, body = current
        title = _title(raw)
        marker = _MARKER.search(raw) or _SESSION.search(raw)
        own = marker.group(1) if marker else None
        body_text, ends = _body(body)
        tangled = bool(ends - {own}) or (own is not None and own in all_ends and own not in ends)
        entries.append(Section(rel, role, no, title, body_text,
                               own if marker and marker.re is _MARKER else None,
                               own if marker and marker.re is _SESSION else None, tangled))

    for no, line in enumerate(lines, 1):
        head = _heading(line, fence is not None)
        if head is not None and head[0] <= 2:
            close()
            fence = None
            current = (no, head[1], []) if head[0] == 2 else None
            continue
        fence = _track_fence(line, fence)
        if current is not None:
            current[2].append(line)
    close()
    return entries


def _track_fence(line: str, fence: str | None) -> str | None:
    m = _FENCE.match(line)
    if m is None:
        return fence
    mark = m.group(1)
    if fence is None:
        return mark
    return None if mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip()[len(mark):] \
        else fence


def _task_entry(rel: str, lines: list[str]) -> list[Section]:
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None:
        return []
    first = lines[start]
    marker = _MARKER.search(first) or next(
        (m for m in map(_MARKER.search, lines) if m is not None), None)
    head = _HEADING.match(first)
    title = _title(head.group(2) or "") if head else _title(first)
    rest = lines[start + 1:]
    lead = next((i for i, line in enumerate(rest) if line.strip()), None)
    span = _meta_span(rest) if lead is not None and _META_OPEN.match(rest[lead]) else None
    if span is not None and span[0] == lead:  # the metadata block below the title is no content
        rest = rest[span[1] + 1:]
    body, _ = _body([_MARKER.sub("", line) for line in rest])
    return [Section(rel, "task", start + 1, title, body,
                    marker.group(1) if marker else None, None)]


def demote_headings(text: str, min_level: int) -> str:
    """Nest the headings of ``text`` below an entry heading.

    Every ATX heading outside code fences gets at least ``min_level`` ``#``, so text given to ``ctx
    add`` cannot split its own entry (e.g. ``## Context`` in a decision's body becomes ``###
    Context``).
    """
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _HEADING.match(line) if fence is None else None
        if m is not None and len(m.group(1)) < min_level:
            indent = line[:len(line) - len(line.lstrip(" "))]
            line = indent + "#" * min_level + line.lstrip(" ")[len(m.group(1)):]
        fence = _track_fence(line, fence)
        out.append(line)
    return "\n".join(out)


def without_entry(text: str, key: str) -> str | None:
    """``text`` without the entry whose heading carries ctx's marker for ``key``, or None.

    ``key`` is a node id (``ctx:id``) or an event or session key (``ctx:event``, ``ctx:session``).
    The entry runs from its heading to the next heading of level 1 or 2 (as ``parse_entries``
    reads it); the blank line that separated it from the text before goes with it.

    Args:
        text: A log's or decisions.md's text.
        key: The marker's key.

    Returns:
        The new text, or None if no heading carries that marker.
    """
    lines = text.splitlines()
    start = end = None
    fence: str | None = None
    for no, line in enumerate(lines):
        head = _heading(line, fence is not None)
        if head is not None and head[0] <= 2:
            if start is not None:
                end = no
                break
            fence = None
            found = _MARKER.search(line) or _SESSION.search(line)
            if head[0] == 2 and found is not None and found.group(1) == key:
                start = no
            continue
        fence = _track_fence(line, fence)
    if start is None:
        return None
    end = len(lines) if end is None else end
    while start > 0 and not lines[start - 1].strip():
        start -= 1  # the blank lines before it: the entry after keeps its own
    kept = lines[:start] + ([""] if start and end < len(lines) else []) + lines[end:]
    return "\n".join(kept).rstrip("\n") + "\n"
