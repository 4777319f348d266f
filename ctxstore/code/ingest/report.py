"""What an ingestion run reports (``ctx index``, ``ctx add file``), and how it names paths.

It must not print or run SQL.
"""

from __future__ import annotations

import os
from dataclasses import field
from typing import Any

from ctxstore.records import dataclass

__all__ = ["FileNote", "IngestReport", "utf8_path", "shown_path"]


@dataclass(frozen=True, slots=True)
class FileNote:
    """Why a file was skipped or stored incomplete."""

    path: str
    note: str


@dataclass
class IngestReport:
    """What a run did (``--format json`` prints ``to_json()``).

    Attributes:
        scanned: Candidate files.
        unchanged: Files the stat cache and the index showed unchanged (not read).
        read: Files read.
        deduplicated: Files read whose content was the one indexed (gate 1: nothing stored).
        written: Paths given a new ``file_version``.
        removed: Paths gone from the work tree (``file_removed`` records).
        notes: Per-file notes (binary, not UTF-8, too large, symlink out of the tree,
            incomplete extraction).
        dropped: One line per gate that dropped something.
        symbols: Symbols in the versions written.
        relations: Relations in the versions written.
        work_commit: The work commit of the run (hex), None when nothing changed.
        sensitive: Sensitive files not read (``.env``, keys, keystores, credential files:
            ``[security] index_sensitive_files``).
        redacted: Files whose secrets were redacted before they were stored.
        listing: How the candidates were listed: ``"git status"`` (only what Git says
            changed since the last run over the whole tree is looked at), ``"git"`` (Git's
            list of every file), ``"walk"`` (not a Git work tree) or ``"paths"`` (as given).
    """

    scanned: int = 0
    unchanged: int = 0
    read: int = 0
    deduplicated: int = 0
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[FileNote] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    symbols: int = 0
    relations: int = 0
    work_commit: str | None = None
    sensitive: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    listing: str = "paths"

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready map."""
        return {"scanned": self.scanned, "unchanged": self.unchanged, "read": self.read,
                "deduplicated": self.deduplicated, "written": self.written,
                "removed": self.removed,
                "notes": [{"path": shown_path(n.path), "note": n.note} for n in self.notes],
                "dropped": self.dropped, "symbols": self.symbols, "relations": self.relations,
                "work_commit": self.work_commit, "sensitive": self.sensitive,
                "redacted": self.redacted, "listing": self.listing}


def utf8_path(path: str) -> bool:
    """Whether a path (from Git or the walk, undecodable bytes kept as surrogates) is UTF-8."""
    try:
        path.encode()
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: str) -> str:
    """A path as UTF-8 text: the bytes of a name that is not UTF-8 written as ``\\xNN``."""
    return path if utf8_path(path) else os.fsencode(path).decode("utf-8", "backslashreplace")
