"""A pack's content (spec 002 §12, step 3): the chunks of its files, and their diagnostics.

The chunks (``chunks`` table: one per top-level symbol, a module header, windows of text
files) of the ranked and expanded files, each scored by its file's relevance and the share
of the task's terms it holds; the latest diagnostics of stored commands in those files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.index.retrieval import chunk_texts, chunks_of, has_diagnostics
from ctxstore.packs.items import PackItem
from ctxstore.search.ranked import ChunkRow
from ctxstore.search.task import Query
from ctxstore.search.tokenize import held_terms

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.session import Session

__all__ = ["CANDIDATE_FACTOR", "chunk_items", "narrow_terms", "diagnostic_items",
           "past_run_items"]

CANDIDATE_FACTOR = 3   # chunks are read until they hold this many times the room
_FILE_BATCH = 8
_DIAGNOSTICS = 20      # latest diagnostics of the pack's files, at most


def chunk_items(conn: sqlite3.Connection, query: Query,
                 files: Mapping[str, tuple[float, dict[str, Any]]], versions: Mapping[str, str],
                 room: int) -> list[PackItem]:
    """Scored chunk items of the given files (file -> (relevance, why), best first).

    Files are read best first until their chunks hold ``CANDIDATE_FACTOR`` times ``room``
    tokens and their best chunks alone fill ``room`` (a pack takes each file's best chunk
    before a second one: ``select.choose``): what could never be chosen is not scored.
    """
    names = set(query.names)
    order = sorted(files, key=lambda p: (-files[p][0], p))
    items: list[PackItem] = []
    held_tokens = best_tokens = 0
    for start in range(0, len(order), _FILE_BATCH):
        batch = order[start:start + _FILE_BATCH]
        found = chunks_of(conn, [p for p in batch if files[p][1].get("matched_terms")])
        found.update(_bare_chunks(conn, [p for p in batch if not files[p][1].get("matched_terms")],
                                  names))
        for path in batch:
            chunks = found.get(path, [])
            relevance, why = files[path]
            own = set(why.get("matched_terms", ()))
            scored = [(_chunk_share(c, own, names), c) for c in chunks]
            best = max((s for s, _ in scored), default=0.0)
            best_chunk = None
            for share, chunk in scored:
                if share <= 0 and not (best <= 0 and chunk is chunks[0]):
                    continue  # nothing of the task here (a file reached by the graph: its head)
                items.append(_chunk_item(chunk, relevance * (0.25 + 0.75 * share), why,
                                         versions.get(path, "")))
                held_tokens += chunk.tokens
                if best_chunk is None and share == best:
                    best_chunk = chunk
            best_tokens += best_chunk.tokens if best_chunk is not None else 0
        if held_tokens >= CANDIDATE_FACTOR * room and best_tokens >= room:
            break
    return items


def _bare_chunks(conn: sqlite3.Connection, paths: Sequence[str], names: set[str]
                 ) -> dict[str, list[ChunkRow]]:
    """The chunks of files that matched no term (reached by the graph), as ``chunks_of`` gives.

    With no terms, a chunk counts only by a name the task gives (``_chunk_share``), and
    otherwise only its file's first chunk is taken: only those have their text read.
    """
    found = chunks_of(conn, paths, text=False)
    wanted = [c.rowid for chunks in found.values() for k, c in enumerate(chunks)
              if k == 0 or _chunk_share(c, set(), names) > 0]
    texts = chunk_texts(conn, wanted)
    return {path: [ChunkRow(c.rowid, c.path, c.qualname, c.kind, c.start_line, c.end_line,
                            c.tokens, texts[c.rowid]) if c.rowid in texts else c for c in chunks]
            for path, chunks in found.items()}


def _chunk_share(chunk: ChunkRow, terms: set[str], names: set[str]) -> float:
    """The share of its file's matched terms a chunk's lower-cased text contains.

    1 when it defines a symbol the task names. Substrings, for speed: ``narrow_terms`` is
    exact for the chunks chosen.
    """
    if names and chunk.qualname and \
            chunk.qualname.replace("::", ".").split(".")[-1].lower() in names:
        return 1.0
    if not terms:
        return 0.0
    text = chunk.text.lower()  # a term never spans the line between qualname and text
    name = (chunk.qualname or "").lower()
    return sum(1 for t in terms if t in text or t in name) / len(terms)


def narrow_terms(item: PackItem) -> None:
    """Narrow a chosen chunk's ``why.matched_terms`` to the terms it holds (the file's when none)."""
    terms = item.why.get("matched_terms")
    if terms:
        held = held_terms(f"{item.extra.get('qualname') or ''}\n{item.snippet}", terms)
        item.why = {**item.why, "matched_terms": held or terms}  # shared by the file's chunks


def _chunk_item(chunk: ChunkRow, score: float, why: dict[str, Any], object_id: str) -> PackItem:
    symbol = chunk.qualname is not None and chunk.kind not in ("module", "header", "window")
    return PackItem(_chunk_title(chunk), object_id, chunk.text, score,
                 "SymbolDefinition" if symbol else "FileContent", why,
                 {"path": chunk.path, "qualname": chunk.qualname, "start_line": chunk.start_line,
                  "end_line": chunk.end_line})


def _chunk_title(chunk: ChunkRow) -> str:
    """The item's title: what the snippet is, and where.

    A definition's header (a class whose methods are chunks of their own) and a file's
    module-level code (everything outside its definitions, spread over the whole file) say
    so, and a Markdown section is a section, not a symbol.
    """
    where = f"{chunk.path}:{chunk.start_line}-{chunk.end_line}"
    name = chunk.qualname or chunk.path
    if chunk.kind == "module":
        return f"Module-level code: {name} ({chunk.path}, outside its definitions)"
    if chunk.kind == "header":
        return f"Definition header: {name} ({where})"
    if chunk.kind == "heading":
        return f"Section: {name} ({where})"
    if chunk.qualname is None or chunk.kind == "window":
        return f"File: {chunk.path} ({where})"
    return f"Symbol: {name} ({where})"


def diagnostic_items(session: Session, files: Mapping[str, tuple[float, dict[str, Any]]]
                      ) -> list[PackItem]:
    """The latest diagnostics of stored commands in the pack's files (errors rank higher)."""
    if not has_diagnostics(session.index()):
        return []  # nothing to show: skip importing the command-run layer
    from ctxstore.code.runs import latest_diagnostics

    items = []
    for row in latest_diagnostics(session, list(files), limit=_DIAGNOSTICS):
        if row.path is None or row.path not in files:
            continue
        where = f"{row.path}:{row.line}" if row.line else row.path
        title = " ".join(f"Diagnostic: {row.severity} {row.code or ''} {where} ({row.command})"
                         .split())
        relevance = files[row.path][0] * (1.0 if row.severity == "error" else 0.5)
        items.append(PackItem(title, row.id, row.message, relevance, "DiagnosticOutput",
                           {"edge_path": [row.path, "Diagnostic", f"diagnostic:{row.id}"]},
                           {"path": row.path}))
    return items


_PAST_RUNS = 3          # failing runs a pack shows at most
_RUN_HISTORY = 20       # newest runs looked at
_RUN_LINES = 12         # diagnostics listed per run
_FAILURE_WORDS = re.compile(r"\b(?:fail\w*|error\w*|broke|broken|crash\w*|regress\w*|flak\w*|"
                            r"traceback|exception\w*)\b", re.IGNORECASE)


def past_run_items(session: Session, task: str, query: Query) -> list[PackItem]:
    """Failing runs of stored commands, each with what came after it and its diagnostics.

    A command's newest run replaces the last for ``ctx diagnostics``, but every run is
    kept (``code.runs.run_history``): a test run that failed before it passed is what "why
    did the tests fail at first" asks about. A failing run (or one with no exit status)
    enters when the task speaks of failure (``_FAILURE_WORDS``: fail, error, broken,
    crash, regression, flaky, traceback, exception), newest first at the best item's score
    less a tenth per older run, or else when it holds the task's terms (two, or the only
    one), scored by the share of them it holds as a node is. At most ``_PAST_RUNS``.
    """
    from ctxstore.index.retrieval import has_command_runs

    if not has_command_runs(session.index()):
        return []  # nothing stored: skip the command-run layer
    from ctxstore.code.runs import diagnostics_summary, run_history
    from ctxstore.index.build import command_run_history

    asked = _FAILURE_WORDS.search(task) is not None
    terms = list(query.weights)
    runs = run_history(session, limit=_RUN_HISTORY, failing_only=True)
    status = {(r[0], r[1]): _status_of(r) for r in command_run_history(session.index(),
                                                                       limit=_RUN_HISTORY)}
    items: list[PackItem] = []
    for run in runs:
        lines = [f"$ {' '.join(run.argv)}"] if run.argv else []
        for diag in run.diagnostics[:_RUN_LINES]:
            first = diag.spans[0] if diag.spans else None
            where = f"{first.path}:{first.start_line}" if first and first.start_line > 0 \
                else first.path if first else "-"
            message = (diag.message.splitlines() or [""])[0]
            lines.append(f"{diag.severity}{f'[{diag.code}]' if diag.code else ''} {where}: "
                         f"{message}")
        if len(run.diagnostics) > _RUN_LINES:
            lines.append(f"... and {len(run.diagnostics) - _RUN_LINES} more")
        snippet = "\n".join(lines) or "no diagnostics were parsed from its output"
        held = held_terms(f"{run.name}\n{run.tool}\n{snippet}", terms) if terms else []
        held = list(dict.fromkeys(held))
        if asked:
            score = max(0.0, 1.0 - 0.1 * len(items))
        elif held and len(held) >= min(2, len(terms)):
            score = min(1.0, len(held) / min(4, len(terms)))
        else:
            continue
        later = min(((at, st) for (name, at), st in status.items()
                     if name == run.name and at > run.run_at), default=None)
        exit_text = "no exit status" if run.exit_code is None else f"exit {run.exit_code}"
        title = (f"Command run: {run.name} {run.status} at {_utc(run.run_at)} ({exit_text}, "
                 f"{diagnostics_summary(run.diagnostics)})")
        if later is not None:
            title += f"; then {later[1]} at {_utc(later[0])}"
        why: dict[str, Any] = {"command_run": {
            "name": run.name, "status": run.status, "run_at": _utc(run.run_at),
            **({"then": later[1]} if later is not None else {})}}
        if held:
            why["matched_terms"] = held
        items.append(PackItem(title, run.snapshot.hex(), snippet, score, "DiagnosticOutput",
                              why, {}))
        if len(items) >= _PAST_RUNS:
            break
    return items


def _status_of(row: tuple[str, int, bytes]) -> str:
    """A history row's status, from its record alone (no snapshot read)."""
    from ctxstore.code.runs import run_status
    from ctxstore.model import codec

    exit_code = codec.decode(row[2]).get("exit_code")
    return run_status(exit_code if isinstance(exit_code, int) else None)


def _utc(ms: int) -> str:
    """``2026-11-29 12:05 UTC``."""
    import time

    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms / 1000))
