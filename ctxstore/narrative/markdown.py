"""Narrative Markdown: templates, the ``ctx:`` markers, and parsing entries and sections.

The daily logs, ``decisions.md`` and task files are read as knowledge: each entry
(a level-2 section of a log or of decisions.md, a whole task file) is one node. ctx ties
the entries it writes to their node by an HTML comment on the heading line,
``<!-- ctx:id=ULID -->``, invisible when rendered. A heading that carries a marker always
starts an entry, even after an unclosed code fence, so one broken entry cannot swallow
the entries after it. This module only parses and renders text; ``narrative.entries``
writes entries, ``narrative.ingest`` reads hand edits back, ``narrative.snapshot`` stores
the files in commits.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ctxstore.ids import ULID_ALPHABET

__all__ = ["TEMPLATE_DIR", "read_template", "render_template", "role_of", "ENTRY_ROLES",
           "Section", "id_marker", "end_marker", "session_marker", "event_marker",
           "parse_entries", "conflict_line", "demote_headings", "content_hash", "task_number",
           "log_rel", "log_header", "task_rel"]

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
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CONFLICT_START = re.compile(r"<{7}(?:[ \t]|$)")
_CONFLICT_END = re.compile(r">{7}(?:[ \t]|$)")


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


def _log_date(ms: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))


def log_rel(ms: int) -> str:
    """The daily log of the UTC day of ``ms`` (milliseconds since the epoch)."""
    return f"log/{_log_date(ms)}.md"


def log_header(ms: int) -> str:
    """The opening text of a new daily log (the one ``log_rel(ms)`` names)."""
    return render_template("log.md", date=_log_date(ms))


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
    return re.sub(r"[ \t]+#+$", "", text).strip()  # closing ``##`` of an ATX heading


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
    body, _ = _body([_MARKER.sub("", line) for line in lines[start + 1:]])
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
