"""Text and JSON renderings shared by the read commands, log and debug.

Stored text is untrusted (a cloned repository's nodes are anyone's text), so the read
commands print it through ``shown``: ``<ctx:`` tags escaped as hook output escapes them
(``&lt;ctx:``, never runnable when pasted or echoed to a model), and, when stdout is a
terminal, escape sequences (CSI, OSC, DCS, ...) and every other C0/C1 control but LF and
TAB removed, so a node cannot retitle, clear or rewrite the user's terminal. Markdown
items indent their content after every line break (``item_line``), so stored text
cannot start a heading line. ``--format json`` prints the exact text (JSON escapes it).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from ctxstore.claude.inject import LINE_BREAK, escape_tags, neutralise_breaks

if TYPE_CHECKING:
    from ctxstore.model import Commit, Tree, WorkCommit

__all__ = ["object_json", "commit_summary", "shown", "echo_stored", "item_line",
           "strip_terminal_controls", "stdout_is_terminal", "composed_text", "omitted_note",
           "tag_text", "tags_text"]

# Escape sequences (7- and 8-bit CSI; OSC, DCS, SOS, PM, APC up to their terminator or the
# line's end; any other ESC sequence), then every C0/C1 control but TAB and LF, and DEL.
_TERMINAL_CONTROL = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def stdout_is_terminal() -> bool:
    """True if standard output is a terminal (escape sequences would be obeyed there)."""
    return sys.stdout.isatty()


def strip_terminal_controls(text: str) -> str:
    """``text`` without escape sequences and control characters other than LF and TAB."""
    return _TERMINAL_CONTROL.sub("", text)


# A tag is one token of a one-line listing; the tag check keeps these out of every tag ctx
# writes, but an object another ctx wrote (a teammate's clone) may carry any text.
_TAG_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def tag_text(tag: str) -> str:
    """``tag`` as a listing prints it: line breaks and control characters as escapes."""
    def escape(m: re.Match[str]) -> str:
        code = ord(m.group())
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(m.group())
        return named or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")

    return _TAG_UNSAFE.sub(escape, tag)


def tags_text(tags: Iterable[str]) -> str:
    """Tags joined for one line of ``list`` or ``show`` (each through ``tag_text``)."""
    return ", ".join(tag_text(t) for t in tags)


def shown(text: str, *, terminal: bool | None = None) -> str:
    """Stored text as a read command prints it: tags escaped.

    On a terminal (``terminal`` None: stdout's) also without escape sequences and controls.
    """
    text = escape_tags(text)
    if terminal is None:
        terminal = stdout_is_terminal()
    return strip_terminal_controls(text) if terminal else text


def echo_stored(text: str, *, nl: bool = True) -> None:
    """``click.echo`` of a line that carries stored text, through ``shown``."""
    click.echo(shown(text), nl=nl)


def item_line(node_type: str, short_id: str, content: str) -> str:
    """A Markdown list item ``- [type:id] content`` with its content lines indented.

    After any line break (LF, CR, VT, FF, NEL, U+2028, U+2029) the content continues indented as the
    item's continuation.
    """
    return f"- [{node_type}:{short_id}] " + LINE_BREAK.sub("\n  ", content.strip())


def composed_text(text: str) -> str:
    """A composition (``ctx compose``, ``ctx view render``) as printed.

    The line breaks the renderer does not indent after are indented too (as in the hooks' frame).
    """
    return neutralise_breaks(text)


def omitted_note(skipped: int, budget: int) -> None:
    """Say on stderr how many nodes a composition's budget left out, if any.

    The text shows only the nodes it holds (``--format json`` counts the rest in
    ``meta.skipped``), so without this note a small budget drops memory unseen.

    Args:
        skipped: Nodes the query matched that the budget did not hold.
        budget: The composition's token budget.
    """
    if skipped:
        click.echo(f"ctx: note: {skipped} more node{'s' if skipped != 1 else ''} did not fit "
                   f"the budget of {budget} tokens (a larger --budget shows more)", err=True)


def object_json(obj: Any) -> dict[str, Any]:
    """A typed object as a JSON-ready map with its ``type`` and ``v``."""
    # The object model is imported where it is used: the hot reads (search, list) skip it.
    from ctxstore.model import ChangeBatch
    from ctxstore.model._schema import to_wire
    from ctxstore.model.codec import jsonable
    from ctxstore.model.knowledge import record_to_wire

    cls = type(obj)
    body = obj.to_wire() if isinstance(obj, ChangeBatch) else to_wire(obj, cls)
    if isinstance(obj, ChangeBatch):
        body["records"] = [record_to_wire(r) for r in obj.records]
    return {"type": cls.TYPE, "v": cls.V, **jsonable(body)}


def commit_summary(oid: bytes, obj: Commit | WorkCommit | Tree) -> dict[str, Any]:
    """One history entry for ``log`` / ``debug history``."""
    from ctxstore.model import Commit, WorkCommit

    if isinstance(obj, Commit):
        return {"id": oid.hex(), "type": "commit", "time": obj.timestamp_unix,
                "message": obj.message, "parents": [p.hex() for p in obj.parents],
                "change_batches": len(obj.change_batches),
                "narrative_refs": len(obj.narrative_refs), "session_id": obj.session_id,
                "aborted": obj.aborted_work is not None}
    assert isinstance(obj, WorkCommit)
    return {"id": oid.hex(), "type": "work_commit", "time": obj.created_at / 1000,
            "message": obj.message, "parents": [p.hex() for p in obj.parents],
            "base": obj.base.hex(), "session_id": obj.session_id, "step_kind": obj.step_kind,
            "change_batches": len(obj.change_batches)}
