"""Provenance: where a knowledge node came from (spec 003 Phase 4, "provenance tracking").

Owns the ``provenance`` entry of a node's metadata: the kind of source that wrote it, the
agent session, the Git branch and commit of the work tree when it was written, and the
files in play (repo-relative). It is canonical (committed with the node, reviewed in pull
requests), so it stays small and says nothing of the machine: no absolute path, no user or
host name, at most ``MAX_FILES`` files. Every write path builds it here (``provenance_for``)
and ``knowledge.nodes.add_node`` stores it after the secret policy, as every other text.

Readers (``ctx show``, packs, recall, the memory browser) go through ``read_provenance``,
which accepts what an older or a newer ctx wrote and anything a hand-edited import holds:
a node without it, or with a value of the wrong shape, simply has none.

This module must not run SQL, print or read the environment.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.git import head_position
from ctxstore.records import dataclass
from ctxstore.security.guard import guard_metadata

if TYPE_CHECKING:
    from ctxstore.model.codec import JsonValue
    from ctxstore.repo import Store

__all__ = ["META_PROVENANCE", "MAX_FILES", "SOURCES", "Origin", "Provenance", "provenance_for",
           "provenance_metadata", "read_provenance", "provenance_json", "relative_files",
           "mentioned_files", "describe"]

META_PROVENANCE = "provenance"
MAX_FILES = 5
# The kinds of source, as a person would name them.
SOURCES = frozenset({
    "conversation",   # an agent's <ctx:remember> (or <ctx:summarize>) in a Claude Code reply
    "explicit",       # ctx add, ctx add note|task|decision|source
    "mcp",            # the MCP server's remember tool
    "import",         # ctx import
    "consolidation",  # ctx consolidate: a merged memory
    "promotion",      # ctx memory promote: an idea of transcript memory
    "narrative",      # a Markdown entry a person wrote, picked up by ctx commit
    "llm",            # ctx llm --commit: an answer kept
})
# Paths the node's text names: a/b.py, ./src/x.rs, README.md (one dot-extension at least).
_PATH = re.compile(r"(?<![\w/.-])((?:\./)?[\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,10})(?![\w/-])")
_MAX_LOOKUPS = 32  # paths looked up in the work tree per write: bounded whatever the text


@dataclass(frozen=True, slots=True)
class Origin:
    """What the front end knows of a write: its kind of source, session and files touched.

    Attributes:
        source: One of ``SOURCES``.
        session: The agent session (Claude Code's session id), or None.
        files: Files the session touched, repo-relative (``relative_files`` makes them so).
    """

    source: str
    session: str | None = None
    files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Provenance:
    """A node's provenance as read back.

    Attributes:
        source: The kind of source (one of ``SOURCES`` for what this ctx writes).
        session: The agent session, or None.
        branch: The Git branch checked out then; None in a detached ``HEAD`` or outside Git.
        commit: The work tree's ``HEAD`` commit then; None outside Git.
        files: Repo-relative files in play.
    """

    source: str
    session: str | None
    branch: str | None
    commit: str | None
    files: tuple[str, ...]

    def as_json(self) -> dict[str, JsonValue]:
        """The JSON form, as stored in metadata and shown by ``--format json``."""
        return {"source": self.source, "session": self.session, "branch": self.branch,
                "commit": self.commit, "files": list(self.files)}

    @property
    def git_state(self) -> str:
        """``branch``, ``detached`` (a commit and no branch) or ``none`` (outside Git)."""
        if self.commit is None:
            return "none"
        return "branch" if self.branch else "detached"


def _repo_file(worktree: Path, rel: str) -> bool:
    """Whether ``rel`` names a regular file inside the work tree (never following out of it)."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or parts[0] == ".git":
        return False
    try:
        info = os.lstat(worktree / rel)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(info.st_mode)


def relative_files(worktree: Path, paths: Iterable[str], limit: int = MAX_FILES) -> tuple[str, ...]:
    """The paths that name files of the work tree, repo-relative, in order, at most ``limit``.

    An absolute path (a tool call's ``file_path``) counts when it lies in the work tree; a
    relative one is taken from the work tree's root. Anything else (outside the repository,
    ``..``, not a regular file) is left out: provenance never names a path off the repository.

    Args:
        worktree: The repository's root.
        paths: The candidate paths.
        limit: The most kept.

    Returns:
        The repo-relative paths (``/``-separated), without duplicates.
    """
    root = worktree.resolve()
    out: list[str] = []
    looked = 0
    for raw in paths:
        if len(out) >= limit or looked >= _MAX_LOOKUPS:
            break
        if not raw or "\x00" in raw:
            continue
        path = Path(raw)
        if path.is_absolute():
            try:
                rel = path.relative_to(root).as_posix()
            except ValueError:
                continue
        else:
            rel = raw.removeprefix("./")
        if rel in out:
            continue
        looked += 1
        if _repo_file(root, rel):
            out.append(rel)
    return tuple(out)


def mentioned_files(worktree: Path, text: str, limit: int = MAX_FILES) -> tuple[str, ...]:
    """The files of the work tree ``text`` names, in order of first mention.

    Args:
        worktree: The repository's root.
        text: The node's text.
        limit: The most kept.

    Returns:
        Repo-relative paths of regular files (``relative_files``).
    """
    return relative_files(worktree, (m.group(1) for m in _PATH.finditer(text)), limit)


def provenance_for(worktree: Path | None, origin: Origin, text: str = "", *,
                   position: tuple[str | None, str | None] | None = None) -> dict[str, JsonValue]:
    """The ``provenance`` metadata of a node written now.

    Args:
        worktree: The repository the store belongs to (Git is asked there), or None.
        origin: What the front end knows (source, session, files touched).
        text: The node's text: the files it names are in play too (first).
        position: ``git.head_position`` when the caller asked Git already (one question
            for many nodes); asked here when None.

    Returns:
        ``{"source", "session", "branch", "commit", "files"}`` (None where unknown).
    """
    if position is None:
        position = head_position(worktree) if worktree is not None else (None, None)
    branch, commit = position
    files: tuple[str, ...] = ()
    if worktree is not None:
        named = mentioned_files(worktree, text) if text else ()
        files = (named + tuple(f for f in origin.files if f not in named))[:MAX_FILES]
    return Provenance(origin.source, origin.session or None, branch, commit, files).as_json()


def provenance_metadata(store: Store, origin: Origin, text: str = "", *,
                        position: tuple[str | None, str | None] | None = None) -> JsonValue:
    """``provenance_for`` the store's work tree, through the secret policy.

    It is gathered automatically (a branch name, file names), so a secret in it is redacted
    as captured text is (channel ``transcripts``), never a reason to refuse the write.

    Args:
        store: The store written to (its work tree and secret policy).
        origin: What the front end knows.
        text: The node's text (the files it names).
        position: Git's answer when the caller has it (see ``provenance_for``).

    Returns:
        The value of the ``provenance`` metadata key.

    Raises:
        SecretRefused: never with the default policy (``transcripts`` redacts).
    """
    value = provenance_for(store.worktree, origin, text, position=position)
    return guard_metadata(store, "transcripts", {META_PROVENANCE: value})[META_PROVENANCE]


def read_provenance(metadata: Mapping[str, object] | None) -> Provenance | None:
    """The provenance a node's metadata records.

    Args:
        metadata: The node's metadata.

    Returns:
        The provenance, or None when there is none or it is not of its shape.
    """
    value = (metadata or {}).get(META_PROVENANCE)
    if not isinstance(value, Mapping) or not isinstance(value.get("source"), str):
        return None

    def text(key: str) -> str | None:
        item = value.get(key)
        return item if isinstance(item, str) and item else None

    files = value.get("files")
    kept = tuple(f for f in files if isinstance(f, str))[:MAX_FILES] \
        if isinstance(files, list) else ()
    return Provenance(str(value["source"]), text("session"), text("branch"), text("commit"), kept)


def provenance_json(metadata: Mapping[str, object] | None) -> dict[str, JsonValue] | None:
    """What ``--format json`` shows of a node's provenance; None when it records none.

    Args:
        metadata: The node's metadata.

    Returns:
        Its fields and ``git``: ``branch``, ``detached`` or ``none`` (outside Git).
    """
    prov = read_provenance(metadata)
    return None if prov is None else {**prov.as_json(), "git": prov.git_state}


def describe(prov: Provenance, *, short: bool = False) -> str:
    """One line for people: ``conversation, session 4d5611e5, branch main at 1a2b3c4d, files a.py``.

    Args:
        prov: The provenance.
        short: Leave out the session and the files (a pack's ``from:`` line).

    Returns:
        The line.
    """
    parts = [prov.source]
    if prov.session and not short:
        parts.append(f"session {prov.session[:8]}")
    if prov.git_state == "branch":
        parts.append(f"branch {prov.branch} at {(prov.commit or '')[:8]}")
    elif prov.git_state == "detached":
        parts.append(f"detached HEAD at {(prov.commit or '')[:8]}")
    else:
        parts.append("no Git commit")
    if prov.files and not short:
        parts.append("files " + ", ".join(prov.files))
    return ", ".join(parts)
