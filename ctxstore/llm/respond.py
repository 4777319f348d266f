"""Response processing (spec 002 §14.3): what an LLM answer mentions, and keeping it.

Owns reading an answer for the repository paths and symbols it names (``find_mentions``),
and ``ctx llm --commit`` (``commit_response``): the summary appended to today's log as an
``observation`` node tagged ``source:llm`` (``narrative.entries.add_note``), then one
change batch that stores the whole answer as a blob and adds ``Mentions`` edges from that
node to each file (``file`` endpoint) and symbol (``item`` endpoint) it names. Both steps
run under one store lock; each is atomic, and a crash between them leaves the note
without its edges (the log and node agree). It never follows a path out of the work tree
and never writes outside ``.ctx/``.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Origin, provenance_metadata
from ctxstore.llm.prompt import Pack
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord
from ctxstore.narrative.entries import add_note
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.records import dataclass
from ctxstore.security.guard import guard, policy
from ctxstore.staging import stage_records

if TYPE_CHECKING:
    from ctxstore.index import IndexConnection
    from ctxstore.session import Session

__all__ = ["LLM_TAG", "MAX_MENTIONS", "Committed", "Mention", "commit_response", "find_mentions",
           "resolve_mentions", "summary_line"]

LLM_TAG = "source:llm"
MAX_MENTIONS = 64
# Distinct path-like tokens looked up in the work tree (each costs a resolve and a stat): an
# answer of megabytes of made-up paths must not stat every one of them.
MAX_PATH_LOOKUPS = 1024
_SUMMARY_CHARS = 300
# A relative path with at least one dot-suffixed name: src/app.py, README.md, a/b/c.rs:12.
_PATH = re.compile(r"(?<![\w/.\-])((?:[\w.\-]+/)*[\w\-]+(?:\.[\w\-]+)*\.[A-Za-z0-9]{1,10})"
                   r"(?::\d+)?(?![\w/])")
_SKIP_DIRS = (".git", ".ctx")


@dataclass(frozen=True, slots=True)
class Mention:
    """A path or symbol an answer names.

    Attributes:
        kind: ``file`` or ``item`` (the edge endpoint kind).
        key: The repository path or the qualified name.
    """

    kind: str
    key: str


def _is_repo_file(worktree: Path, rel: str) -> bool:
    """Whether ``rel`` is a regular file inside ``worktree`` (no link out, not .git/.ctx)."""
    if rel.startswith("/") or ".." in Path(rel).parts or Path(rel).parts[0] in _SKIP_DIRS:
        return False
    path = worktree / rel
    try:
        real = path.resolve(strict=True)
        real.relative_to(worktree.resolve())
        return stat.S_ISREG(os.stat(real).st_mode)
    except (OSError, ValueError, RuntimeError):
        return False


def _symbol_named(text: str, symbol: str) -> bool:
    """Whether ``text`` names ``symbol``: its qualified name, or its last part in backticks."""
    if re.search(r"(?<![\w.:])" + re.escape(symbol) + r"(?!\w|\.\w|::)", text):
        return True
    last = re.split(r"::|\.", symbol)[-1]
    return len(last) >= 3 and re.search(r"`" + re.escape(last) + r"(?:\(\))?`", text) is not None


def find_mentions(text: str, pack: Pack, worktree: Path | None) -> list[Mention]:
    """The repository files and symbols ``text`` names, in order of first appearance.

    A path counts when the pack holds it or it is a regular file of the work tree; a symbol
    counts when the pack names it (an item, a seed or an expanded node). At most
    ``MAX_MENTIONS``: the scan for paths stops once that many files are found (a later one
    could not be among the first), and at most ``MAX_PATH_LOOKUPS`` distinct paths the pack
    does not hold are looked up in the work tree.

    Args:
        text: The answer.
        pack: The pack the prompt came from.
        worktree: The repository the store belongs to, or None (pack paths only).

    Returns:
        The mentions, without duplicates.
    """
    pack_paths = {item.path for item in pack.items if item.path} | set(pack.paths)
    found: dict[Mention, int] = {}
    looked: set[str] = set()
    files = 0
    for match in _PATH.finditer(text):
        if files >= MAX_MENTIONS:
            break  # mentions are kept in order of appearance: no later file can make the cut
        rel = match.group(1).removeprefix("./")
        mention = Mention("file", rel)
        if mention in found:
            continue
        if rel not in pack_paths:
            if worktree is None or rel in looked or len(looked) >= MAX_PATH_LOOKUPS:
                continue
            looked.add(rel)
            if not _is_repo_file(worktree, rel):
                continue
        found[mention] = match.start()
        files += 1
    symbols = {item.symbol for item in pack.items if item.symbol} | set(pack.symbols)
    for symbol in sorted(symbols):
        if symbol in pack_paths:
            continue
        if _symbol_named(text, symbol):
            found.setdefault(Mention("item", symbol), text.find(symbol.split(".")[-1]))
    ordered = sorted(found, key=lambda m: (found[m], m.kind, m.key))
    return ordered[:MAX_MENTIONS]


def _indexed(conn: IndexConnection, name: str) -> Mention | None:
    """The indexed symbol ``name`` stands for, or None when there is none or several.

    Matched as ``ctx relate`` matches a name (``code.relate.symbol_matches``); an edge to a
    guess would mislead. A module is a ``module`` endpoint, as ``ctx relate`` makes it.
    """
    from ctxstore.code.relate import symbol_matches

    hits = symbol_matches(conn, name)
    if len({h.qualname for h in hits}) != 1:
        return None
    return Mention("module" if hits[0].kind == "module" else "item", hits[0].qualname)


def resolve_mentions(db: Session, mentions: list[Mention]) -> list[Mention]:
    """``mentions`` with each symbol under the key the code index knows it by.

    A pack names symbols as its seeds do (``symbol:run_simple``); an edge needs the indexed
    qualified name (``werkzeug.serving.run_simple``), as ``ctx add note`` finds it for a
    backticked name. A symbol the index does not know, or knows more than once, is dropped;
    without an index every symbol is. Files are kept as they are.

    Args:
        db: The open session.
        mentions: What the answer names (``find_mentions``).

    Returns:
        The mentions, in order, without duplicates.

    Raises:
        IndexCorrupt, UnsafePath: if the index cannot be opened.
    """
    store = db.store
    if not any(m.kind == "item" for m in mentions):
        return mentions
    if not (store.root / "index").is_dir():  # no index, so no code to name (as ctx add note)
        return [m for m in mentions if m.kind != "item"]

    out: list[Mention] = []
    conn = db.index()
    for m in mentions:
        found = _indexed(conn, m.key) if m.kind == "item" else m
        if found is not None:
            out.append(found)
    return list(dict.fromkeys(out))


def _printable(text: str) -> str:
    """``text`` as valid UTF-8 without control characters (a server may send anything)."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    return "".join(c if c >= " " or c in "\n\t" else " " for c in text)


def summary_line(text: str) -> str:
    """The answer's first line of text (Markdown marks removed), at most 300 characters."""
    for line in _printable(text).splitlines():
        clean = line.strip().lstrip("#>*-• ").strip().strip("*_").strip()
        if clean and not clean.startswith("```"):
            return clean if len(clean) <= _SUMMARY_CHARS else clean[:_SUMMARY_CHARS - 1] + "…"
    return "(empty answer)"


@dataclass(frozen=True, slots=True)
class Committed:
    """What ``commit_response`` wrote.

    Attributes:
        node_id: The ``observation`` node of the answer.
        log: The narrative log file it was appended to (``log/2026-01-20.md``).
        response_blob: The hex id of the answer's blob.
        mentions: The ``Mentions`` edges added, in order.
    """

    node_id: str
    log: str
    response_blob: str
    mentions: tuple[Mention, ...]


def commit_response(db: Session, *, text: str, pack: Pack, model: str, server: str,
                    mentions: list[Mention]) -> Committed:
    """Keep an answer: log entry and node, then its blob and ``Mentions`` edges (§14.3 2-6).

    Args:
        db: The open session.
        text: The whole answer.
        pack: The pack the prompt came from (its task goes into the entry).
        model: The model that answered.
        server: The server URL.
        mentions: What the answer names (``find_mentions``).

    Returns:
        What was written.

    Raises:
        InvalidInput: if the narrative log cannot be appended to (a symlink, not UTF-8).
        LockConflict, StagingConflict, StorageIOError: if it cannot be written (the
            store is as it was, or holds the note without its edges).
    """
    store = db.store
    # Keys come from the answer and the pack: one a record cannot hold is left out.
    mentions = [m for m in mentions if m.key.strip() and m.key == _printable(m.key)]
    # Automatic capture: a secret in the answer (or in the task it answered) is redacted
    # before the log entry, the node or the blob is written (docs/security.md).
    pol = policy(store)
    text = guard(store, "llm", text, what="the answer", policy_=pol)
    pack_task = guard(store, "llm", pack.task, what="the task", policy_=pol)
    data = text.encode("utf-8", "replace")
    blob = object_id_of(KIND_BLOB, data).hex()
    task = " ".join(_printable(pack_task).split())
    task = task if len(task) <= 200 else task[:199] + "…"
    model = " ".join(_printable(model).split())[:100] or "unknown model"
    note = f"LLM ({model}): {summary_line(text)}\n\nTask: {task}"
    meta = {"llm_model": model, "llm_server": server, "llm_response_blob": blob,
            "llm_response_chars": len(text), "llm_task": task,
            "llm_mentions": [f"{m.kind}:{m.key}" for m in mentions],
            META_PROVENANCE: provenance_metadata(
                store, Origin("llm", files=tuple(m.key for m in mentions if m.kind == "file")))}
    with store.lock():  # one writer from the log entry to the last edge
        # The [security] llm channel was applied above; the note is not refused again.
        entry = add_note(db, note, tags=[LLM_TAG], metadata=meta, allow_secret=True)
        node_id = entry.node.id
        records: list[KnowledgeRecord] = []
        for m in mentions:
            stamp = next_stamp()
            records.append(EdgeRecord(
                from_ref=("node", node_id), to_ref=(m.kind, m.key), label="Mentions", weight=None,
                metadata={}, evidence={"tool": "ctx llm", "model": model, "response": blob},
                created_at=stamp, updated_at=stamp, prev=None))
        stage_records(store, records, message=f"llm response {node_id}", blobs=[data])
    return Committed(node_id, entry.path, blob, tuple(mentions))
