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

    from ctxstore.index.runs import RunRow
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
_RUN_HISTORY = 20       # commands' failing runs the search returns at most
_RUN_LINES = 12         # diagnostics listed per run
_FAILURE_WORDS = re.compile(r"\b(?:fail\w*|error\w*|broke|broken|crash\w*|regress\w*|flak\w*|"
                            r"traceback|exception\w*)\b", re.IGNORECASE)


def past_run_items(session: Session, task: str, query: Query) -> list[PackItem]:
    """Failing runs of stored commands, each with what came after it and its diagnostics.

    A command's newest run replaces the last for ``ctx diagnostics``, but every run is
    kept and searchable (``index.runs``): a test run that failed before it passed is what
    "why did the tests fail at first" asks about. The runs are found by the one search
    (``search.search.failing_runs``: ``runs_fts``, each command's best run that did not
    pass). When the task speaks of failure (``_FAILURE_WORDS``: fail, error, broken, crash,
    regression, flaky, traceback, exception) they enter in the search's order at the best
    item's score less a tenth each, and when the search finds none, the newest failing runs
    do; otherwise a run enters when it holds the task's terms (two, or the only one), scored
    by the share of them it holds as a node is. At most ``_PAST_RUNS``.
    """
    from ctxstore.index.retrieval import has_command_runs

    if not has_command_runs(session.index()):
        return []  # nothing stored: skip the command-run layer
    from ctxstore.search.search import failing_runs

    asked = _FAILURE_WORDS.search(task) is not None
    terms = list(query.weights)
    found = [(h.run.row, h.run.then, h.matched) for h in failing_runs(session, task,
                                                                     limit=_RUN_HISTORY)
             if h.run is not None]
    if asked and not found:
        found = _newest_failing(session)
    items: list[PackItem] = []
    for row, then, matched in found:
        if asked:
            score = max(0.0, 1.0 - 0.1 * len(items))
        elif terms and len(matched) >= min(2, len(terms)):
            score = min(1.0, len(matched) / min(4, len(terms)))
        else:
            continue
        items.append(_run_item(row, then, matched, score))
        if len(items) >= _PAST_RUNS:
            break
    return items


def _newest_failing(session: Session) -> list[tuple[RunRow, tuple[str, int] | None,
                                                    tuple[str, ...]]]:
    """The newest runs that did not pass (a failure asked about in words no run holds)."""
    from ctxstore.index.runs import newest_failing_runs, status_after

    conn = session.index()
    return [(row, status_after(conn, row.name, row.run_at, row.status), ())
            for row in newest_failing_runs(conn, limit=_PAST_RUNS)]


def _run_item(row: RunRow, then: tuple[str, int] | None, matched: Sequence[str],
              score: float) -> PackItem:
    """A past run as a pack item: its command line and first diagnostics, and what followed."""
    from ctxstore.knowledge.recall import run_detail, run_head, utc_minute

    snippet = "\n".join(run_detail(row, _RUN_LINES)) or "no diagnostics were parsed from its output"
    why: dict[str, Any] = {"command_run": {
        "name": row.name, "status": row.status, "run_at": utc_minute(row.run_at),
        **({"then": then[0]} if then is not None else {})}}
    if matched:
        why["matched_terms"] = list(dict.fromkeys(matched))
    title = f"Command run: {run_head(row, None)}"
    if then is not None:
        title += f"; then {then[0]} at {utc_minute(then[1])}"
    return PackItem(title, row.snapshot.hex(), snippet, score, "DiagnosticOutput", why, {})
