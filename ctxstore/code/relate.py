"""Edges between knowledge and code: ``ctx relate`` and the Mentions of narrative writes.

Endpoints are typed ``(kind, key)`` pairs (docs/code.md "Endpoints"): ``("file", path)``
with a repository-relative POSIX path, ``("module", name)`` and ``("item", qualname)``
with the language's qualified name (``pkg.mod.Class.method``, ``crate::net::Client``),
``("node", ULID)`` for a knowledge node. The edges are ordinary ``edge`` records; their
evidence (spec 002 §9.1) says who made them (``tool``), the span, the confidence, and
``blob``: the id of the file's content when the edge was made, which is how stale
memory is told (``code.stale``).

It must not run SQL (``index.code`` and ``index.read`` do) or print.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.code.walk import repo_path
from ctxstore.errors import AmbiguousPrefix, CtxError, InvalidInput, NodeNotFound
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord
from ctxstore.model.vocab import ALL_EDGE_LABELS
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.security.guard import guard

if TYPE_CHECKING:
    from ctxstore.index.code import SymbolHit
    from ctxstore.session import Session

__all__ = ["Endpoint", "resolve_endpoint", "symbol_matches", "normalize_label", "relate",
           "mention_records", "stage_mentions", "parse_span"]

_TASK = re.compile(r"task[_-]?(\d{1,6})", re.IGNORECASE)
_SEP = re.compile(r"\.|::")
_CONFIDENCES = ("high", "medium", "low")
# Candidates in free text: `backticked`, path-like (a/b.py) and qualified (a.b.C, a::b) words.
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_PATHLIKE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.\w{1,8})(?![\w/])")
_QUALIFIED = re.compile(r"(?<![\w.:])([A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)+)(?![\w(])")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A resolved endpoint and, for code, the blob of the file it lies in."""

    kind: str
    key: str
    path: str | None = None
    blob: str | None = None


def normalize_label(label: str) -> str:
    """Match a label of the one vocabulary (``mentions`` -> ``Mentions``, ``depends_on`` -> ``DEPENDS_ON``).

    Raises:
        InvalidInput: if it is none of ``vocab.ALL_EDGE_LABELS``.
    """
    text = label.strip().replace("-", "_")
    if text in ALL_EDGE_LABELS:
        return text
    for fold in (str.lower, lambda t: t.lower().replace("_", "")):
        found = [k for k in ALL_EDGE_LABELS if fold(k) == fold(text)]
        if len(found) == 1:
            return found[0]
    raise InvalidInput(f"unknown edge label {label!r}", hint="one of " + ", ".join(ALL_EDGE_LABELS))


def parse_span(text: str) -> tuple[int, int]:
    """``--span S:E`` -> (S, E), byte offsets with S <= E.

    Raises:
        InvalidInput: for anything else.
    """
    start, sep, end = text.partition(":")
    if not sep or not start.strip().isdigit() or not end.strip().isdigit() or int(start) > int(end):
        raise InvalidInput(f"--span wants START:END byte offsets (START <= END), got {text!r}")
    return int(start), int(end)


def _symbol_endpoint(conn: object, qualname: str, path: str, kind: str) -> Endpoint:
    from ctxstore.index.code import file_row

    row = file_row(conn, path)  # type: ignore[arg-type]
    return Endpoint("module" if kind == "module" else "item", qualname, path,
                    row.blob.hex() if row else None)


def _in_order(want: list[str], qualname: str) -> bool:
    """Whether ``want``'s segments appear in order in ``qualname``, ending it."""
    parts = _SEP.split(qualname)
    it = iter(parts)
    return parts[-1] == want[-1] and all(any(p == w for p in it) for w in want)


def symbol_matches(conn: object, text: str) -> list[SymbolHit]:
    """The indexed symbols a name given by a person or a model may stand for.

    The symbol whose qualified name is ``text``; else, loosely, those whose qualified name
    holds ``text``'s segments in order and ends with its last (``Client.connect`` for
    ``app.Client.connect``), the first segment (a crate or package name) optional when no
    candidate has it.

    Args:
        conn: A current index connection.
        text: A qualified or partly qualified name (``.`` or ``::`` between segments).

    Returns:
        The ``index.code`` symbol rows; more than one when the name is ambiguous.
    """
    from ctxstore.index.code import symbols_by

    exact = symbols_by(conn, qualname=text)  # type: ignore[arg-type]
    if exact:
        return list(exact)
    given = _SEP.split(text)
    named = symbols_by(conn, name=given[-1], limit=500)  # type: ignore[arg-type]
    return [h for h in named if _in_order(given, h.qualname)] \
        or [h for h in named if _in_order(given[1:] or given, h.qualname)]


def _find_symbol(conn: object, text: str) -> Endpoint | None:
    hits = symbol_matches(conn, text)
    if not hits:
        return None
    if len({h.qualname for h in hits}) > 1 or len(hits) > 1:
        shown = ", ".join(f"{h.qualname} ({h.path}:{h.start_line})" for h in hits[:8])
        raise InvalidInput(f"{text!r} names {len(hits)} symbols: {shown}",
                           hint="give the full qualified name or the file's path")
    return _symbol_endpoint(conn, hits[0].qualname, hits[0].path, hits[0].kind)


def resolve_endpoint(store: Store, conn: object, text: str, cwd: Path) -> Endpoint:
    """Resolve ``ctx relate``'s FROM or TO (docs/code.md "Endpoints").

    In order: ``task_NNNNNN`` (a task's number), a path (an indexed file or a file of the
    work tree), a qualified item name (exact, or its segments in order with the first
    one, a crate or package name, optional), a node id or unique prefix, a bare symbol
    name that is unique.

    Args:
        store: The store.
        conn: A current index connection.
        text: The endpoint as typed.
        cwd: The current directory (paths are relative to it).

    Returns:
        The endpoint.

    Raises:
        InvalidInput: if it names nothing, or several symbols (listed).
    """
    from ctxstore.index.code import file_row, task_node_ids
    from ctxstore.index.read import read_node

    text = text.strip()
    if not text:
        raise InvalidInput("an endpoint is empty")
    task = _TASK.fullmatch(text)
    if task:
        ids = task_node_ids(conn, task.group(1).zfill(6))  # type: ignore[arg-type]
        if len(ids) == 1:
            return Endpoint("node", ids[0])
    looks_like_path = "/" in text or (store.worktree / text).exists() or (cwd / text).exists()
    if looks_like_path:
        try:
            rel = repo_path(store, text, cwd)
        except InvalidInput:
            rel = None
        if rel:
            row = file_row(conn, rel)  # type: ignore[arg-type]
            if row is not None:
                return Endpoint("file", rel, rel, row.blob.hex())
            if (store.worktree / rel).is_file():
                return Endpoint("file", rel, rel, None)
    if _SEP.search(text):
        found = _find_symbol(conn, text)
        if found is not None:
            return found
    try:
        return Endpoint("node", read_node(conn, text).id)  # type: ignore[arg-type]
    except (NodeNotFound, AmbiguousPrefix, InvalidInput) as exc:
        node_error: CtxError = exc
    found = _find_symbol(conn, text) if not _SEP.search(text) else None
    if found is not None:
        return found
    raise InvalidInput(f"{text!r} is not an indexed file, a symbol or a node "
                       f"({node_error.message})",
                       hint="index the file first (ctx index PATH), or give a node id")


def _evidence(tool: str, confidence: str, blob: str | None, span: tuple[int, int] | None,
              text: str | None) -> dict[str, JsonValue]:
    ev: dict[str, JsonValue] = {"tool": tool, "confidence": confidence}
    if blob is not None:
        ev["blob"] = blob
    if span is not None:
        ev["span"] = [span[0], span[1]]
    if text:
        ev["text"] = text
    return ev


def relate(db: Session, from_text: str, label: str, to_text: str, *, cwd: Path,
           confidence: str = "high", evidence: str | None = None,
           span: tuple[int, int] | None = None) -> tuple[EdgeRecord, bool]:
    """``ctx relate FROM LABEL TO``: stage one edge made by a person.

    Args:
        db: The open session.
        from_text: The source endpoint as typed.
        label: A label of ``vocab.ALL_EDGE_LABELS`` (case-insensitive).
        to_text: The target endpoint as typed.
        cwd: The current directory (paths are relative to it).
        confidence: ``high``, ``medium`` or ``low``.
        evidence: Free text saying why.
        span: Byte offsets in the code endpoint's file.

    Returns:
        The edge, and whether it was staged (False: the same edge existed).

    Raises:
        InvalidInput: a bad label, confidence or endpoint.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    from ctxstore.index.read import edges_of
    from ctxstore.staging import stage_records

    store = db.store
    norm = normalize_label(label)
    if confidence not in _CONFIDENCES:
        raise InvalidInput(f"--confidence must be high, medium or low, got {confidence!r}")
    if evidence:
        guard(store, "explicit", evidence, what="--evidence")  # SecretRefused (E025)
    with store.lock():
        conn = db.index()
        src = resolve_endpoint(store, conn, from_text, cwd)
        dst = resolve_endpoint(store, conn, to_text, cwd)
        if (src.kind, src.key) == (dst.kind, dst.key):
            raise InvalidInput("an edge needs two different endpoints")
        exists = src.kind == "node" and any(
            e.to_kind == dst.kind and e.to_key == dst.key
            for e in edges_of(conn, src.key, "out", norm))
        blob = dst.blob if dst.kind != "node" else src.blob
        stamp = next_stamp()
        rec = EdgeRecord(from_ref=(src.kind, src.key), to_ref=(dst.kind, dst.key), label=norm,
                         weight=None, metadata={},
                         evidence=_evidence("human", confidence, blob, span, evidence),
                         created_at=stamp, updated_at=stamp, prev=None)
        if exists:
            return rec, False
        stage_records(store, [rec], message=f"relate {src.kind}:{src.key} {norm} "
                                             f"{dst.kind}:{dst.key}")
    return rec, True


def _candidates(text: str) -> list[str]:
    found = [m.group(1).strip() for m in _BACKTICK.finditer(text)]
    found += [m.group(1) for m in _PATHLIKE.finditer(text)]
    found += [m.group(1) for m in _QUALIFIED.finditer(text)]
    return list(dict.fromkeys(f for f in found if f))


def mention_records(conn: object, node_id: str, text: str) -> list[KnowledgeRecord]:
    """``Mentions`` edges from a node to the indexed files and symbols its text names.

    Names: paths of indexed files (``src/a.py``), qualified names of symbols (dotted or
    ``::``, backticked or not), and backticked bare names of at least 4 characters that
    name exactly one symbol. Evidence: ``tool = narrative``, the file's blob now.

    Args:
        conn: A current index connection.
        node_id: The node that mentions.
        text: Its text.

    Returns:
        The edge records (none when the text names nothing indexed).
    """
    from ctxstore.index.code import file_row, symbols_by

    out: dict[tuple[str, str], EdgeRecord] = {}
    backticked = {m.group(1).strip() for m in _BACKTICK.finditer(text)}
    for cand in _candidates(text):
        target: Endpoint | None = None
        row = file_row(conn, cand.lstrip("./"))  # type: ignore[arg-type]
        if row is not None:
            target = Endpoint("file", row.path, row.path, row.blob.hex())
        elif _SEP.search(cand):
            hits = symbols_by(conn, qualname=cand)  # type: ignore[arg-type]
            if len(hits) == 1:
                target = _symbol_endpoint(conn, hits[0].qualname, hits[0].path, hits[0].kind)
        elif cand in backticked and len(cand) >= 4 and cand.isidentifier():
            hits = symbols_by(conn, name=cand, limit=2)  # type: ignore[arg-type]
            if len(hits) == 1:
                target = _symbol_endpoint(conn, hits[0].qualname, hits[0].path, hits[0].kind)
        if target is None or (target.kind, target.key) in out:
            continue
        stamp = next_stamp()
        out[(target.kind, target.key)] = EdgeRecord(
            from_ref=("node", node_id), to_ref=(target.kind, target.key), label="Mentions",
            weight=None, metadata={}, evidence=_evidence("narrative", "medium", target.blob,
                                                         None, None),
            created_at=stamp, updated_at=stamp, prev=None)
    return list(out.values())


def stage_mentions(db: Session, node_id: str, texts: Iterable[str]) -> int:
    """Stage the ``Mentions`` edges of a narrative write (``narrative.entries``).

    The index is opened only when the text holds something that could name code.

    Args:
        db: The open session.
        node_id: The node written.
        texts: Its title and body.

    Returns:
        How many edges were staged.
    """
    store = db.store
    text = "\n".join(texts)
    if not _candidates(text) or not (store.root / "index").is_dir():
        return 0
    from ctxstore.staging import stage_records

    with store.lock():
        conn = db.index()
        records = mention_records(conn, node_id, text)
        if records:
            stage_records(store, records, message=f"mentions of {node_id}")
    return len(records)
