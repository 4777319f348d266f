"""Prompt packs (spec 002 §12): any task text in, the most relevant few thousand tokens out.

Pipeline (``build_pack``), each step reading only SQLite (no networkx, no NumPy):

1. **Seeds.** The task is parsed (``text.parse_query``); every indexed file is ranked by the
   method of ``rank`` over the index (``rank_files``: BM25 over the ``file_terms`` postings
   of the task's terms, the path field, definitions named in the task, the test prior, one
   import hop; source files and prose ranked as separate corpora). The
   best files (within ``SEED_SHARE`` of the top, at most ``MAX_SEEDS``) and the symbols the
   task names are the seeds.
2. **Graph expansion.** The files in an import cycle with a seed (its strongly connected
   component, ``file_sccs`` kept by ``ctx index``: ``graph.cycles``), then breadth-first over ``Imports``
   edges (both directions) from the seed files, up to ``depth`` hops and ``MAX_EXPANDED``
   files; each expanded file keeps the edge path that reached it.
3. **Content.** The chunks (``chunks`` table: one per top-level symbol, a module header,
   windows of text files) of the ranked and expanded files, each scored by its file's
   relevance and the share of the task's terms it holds.
4. **Narrative.** With ``include_narrative``: nodes and narrative entries relevant to the task
   (``knowledge.search``; decisions as ``Decision``), the nodes of the active task (started, not
   ended), the recently updated tasks and the log of the last
   ``[retrieval] narrative_days`` days (``recent_narrative``), and stale-memory flags of the
   chosen nodes (``code.stale``). Always: the latest diagnostics of stored commands in the
   pack's files (``code.runs``).
5. **Budget.** ``reserved_for_response`` tokens are set aside; items are taken best first
   while they fit; the pack's ``used`` never exceeds ``total - reserved_for_response``. For
   the text and markdown renderings (``render``), ``used`` counts what they print: the
   echoed task, each item's printed lines, the narrative section.

Every item carries ``why``: the task terms it matched, the names it defines, or the edge
path from a seed. ``ranked_files`` lists every file that matched, best first.
"""

from __future__ import annotations

import bisect
import gc
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.index.fulltext.ranked import ChunkRow
from ctxstore.index.retrieval import (
    BODY,
    PACK_APART,
    PATH,
    FileCorpus,
    chunk_texts,
    chunks_of,
    document_counts,
    file_corpus,
    file_versions,
    has_code,
    has_diagnostics,
    import_edges,
    postings,
    symbols_with_names,
)
from ctxstore.packs.rank import Corpus, FieldStats, Hit, Params, defined_names
from ctxstore.packs.render import (
    ITEM_OVERHEAD,
    PROMPT_FORMATS,
    header_cost,
    item_cost,
    narrative_cost,
)
from ctxstore.packs.text import Query, held_terms, parse_query
from ctxstore.records import dataclass
from ctxstore.refs import read_head
from ctxstore.tagtext import escape_tags, escape_tree
from ctxstore.tokens import estimate_tokens

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from ctxstore.index.read import NodeRow
    from ctxstore.session import Session

__all__ = ["CHUNK_KINDS", "reserve_for", "has_search_terms", "rank_files", "build_pack",
           "build_pack_result", "PackResult", "pack_notes", "budget_note",
           "MAX_SEEDS", "MAX_EXPANDED", "SEED_SHARE", "MAX_FILES", "RANKED_FILES"]

CHUNK_KINDS = ("FileContent", "NarrativeExcerpt", "Decision", "DiagnosticOutput",
               "SymbolDefinition")
MAX_SEEDS = 5          # seed files at most
SEED_SHARE = 0.5       # a seed scores at least this share of the best file
MAX_EXPANDED = 50      # spec 002 §12.3 max_expanded_nodes
MAX_FILES = 40         # files whose chunks are candidates
RANKED_FILES = 1000    # at most this many paths in ``ranked_files``
CANDIDATE_FACTOR = 3   # chunks are read until they hold this many times the room
_FILE_BATCH = 8
_NARRATIVE_SHARE = 0.2  # the recent log takes at most this share of the room
_NODE_HITS = 20
# At most this many nodes of the active task join a pack's narrative items.
_ACTIVE_TASK_NODES = 5
PROSE_LANGUAGES = PACK_APART  # indexed languages ranked apart from source (index.retrieval)
MIN_TERMS = 8              # terms whose body postings are always read (the rarest)
MAX_POSTINGS = 10_000      # more terms only while their postings stay under this (bench/pack.py --caps)
_DIAGNOSTICS = 20          # latest diagnostics of the pack's files, at most
_SMALLEST_STEPS = 1_000    # search steps for the smallest budget that holds an item


def reserve_for(budget: int, max_response_tokens: int) -> int:
    """Tokens set aside for the model's answer: its limit, at most a quarter of the budget.

    Args:
        budget: The pack's total budget.
        max_response_tokens: ``[llm] max_response_tokens``.

    Returns:
        The reserve.
    """
    return max(0, min(max_response_tokens, budget // 4))


def has_search_terms(task: str) -> bool:
    """Whether the task holds a word to search for (not only punctuation, stop words, numbers).

    A task without one still gives a valid pack: no ranked files or matched memory, only
    the recent tasks and log when the narrative is included.

    Args:
        task: Any text.

    Returns:
        True when the cleaned query (``text.parse_query``) has a term.
    """
    return bool(parse_query(task).weights)


def _lookups(conn: sqlite3.Connection, query: Query, field: int) -> list[str]:
    """The query's terms worth reading postings of one field for, within a cost cap.

    Terms are taken rarest first while the postings they cost (their document counts) stay
    under ``MAX_POSTINGS``, at least ``MIN_TERMS`` of them: a long text of common words costs
    what a few rare ones do, and no loop runs over every file of a common word.
    """
    counts = document_counts(conn, list(query.weights), field)
    chosen: list[str] = []
    spent = 0
    for term in sorted(counts, key=lambda t: (counts[t], t)):
        if len(chosen) >= MIN_TERMS and spent + counts[term] > MAX_POSTINGS:
            break
        chosen.append(term)
        spent += counts[term]
    return chosen


def rank_files(conn: sqlite3.Connection, query: Query, params: Params | None = None,
               *, limit: int | None = None, matched_only: bool = False,
               explain: int | None = None) -> list[Hit]:
    """Rank the indexed files for a query with ``rank.Corpus`` over the index.

    Body and path statistics come from ``file_terms`` (the same tokens as the in-process
    ranker, ``index.terms``), definitions from the ``symbols`` name index, the graph from
    ``code_edges``. Source files and the others (prose, configuration, files of no known
    language) are ranked as two corpora, each with its own statistics, and merged by score:
    a repository's documentation does not change how its code ranks (docs/retrieval.md).

    Args:
        conn: A current index connection.
        query: The parsed task.
        params: Ranking weights (defaults: the tuned ones).
        limit: At most this many hits (None: every file).
        matched_only: Leave out the files that score 0.
        explain: Only the first this many hits list their matched terms (None: all).

    Returns:
        Hits, best first; empty when the index has no code tables.
    """
    if not has_code(conn):
        return []
    files = file_corpus(conn, PROSE_LANGUAGES)
    p = params or Params()
    found = {field: postings(conn, _lookups(conn, query, field), field) for field in (BODY, PATH)}
    spellings = {*query.spelled, *(s.strip("_") for s in query.spelled if s.strip("_"))}
    definitions = [(file, name.lower()) for file, qualname, name, kind
                   in symbols_with_names(conn, sorted(spellings))
                   if defined_names([(qualname, name, kind)])]
    # source files, then the others (prose, configuration, no known language)
    groups = ((0, files.split), (files.split, len(files.ids)))
    hits = [hit for (lo, hi), postings_of in zip(groups, _split_postings(found, files), strict=True)
            if hi > lo
            for hit in _rank_group(conn, files, lo, hi, postings_of, definitions, query, p,
                                   limit, matched_only, explain)]
    hits.sort(key=lambda h: (-h.score, h.path))
    return hits if limit is None else hits[:limit]


_Postings = dict[int, dict[str, list[tuple[int, int]]]]  # field -> term -> (document, tf)


def _split_postings(found: Mapping[int, Mapping[str, Sequence[tuple[int, int]]]],
                    files: FileCorpus) -> tuple[_Postings, _Postings]:
    """The postings of the two groups of ``files`` (source files, the others).

    Each is numbered by its own group's documents; one pass over every posting.
    """
    where = dict(zip(files.ids, range(len(files.ids)), strict=True))
    cut = files.split
    out: tuple[_Postings, _Postings] = ({field: {} for field in found},
                                        {field: {} for field in found})
    for field, terms in found.items():
        for term, rows in terms.items():
            first: list[tuple[int, int]] = []
            second: list[tuple[int, int]] = []
            for file, tf in rows:
                at = where.get(file)
                if at is None:
                    continue
                if at < cut:
                    first.append((at, tf))
                else:
                    second.append((at - cut, tf))
            out[0][field][term] = first
            out[1][field][term] = second
    return out


def _rank_group(conn: sqlite3.Connection, files: FileCorpus, lo: int, hi: int, fields: _Postings,
                definitions: Sequence[tuple[str, str]], query: Query, params: Params,
                limit: int | None, matched_only: bool, explain: int | None) -> list[Hit]:
    """Rank one group of files (``files[lo:hi]``, ``fields`` their postings) as a corpus."""
    paths = files.paths[lo:hi]
    index = dict(zip(paths, range(len(paths)), strict=True))
    definers: dict[str, list[int]] = {}
    for path, name in definitions:
        holders = definers.setdefault(name, [])
        if path in index and index[path] not in holders:
            holders.append(index[path])

    def expand(sources: Sequence[int]) -> list[tuple[int, int, str]]:
        chosen = {paths[i] for i in sources}
        out: list[tuple[int, int, str]] = []
        for importer, imported in import_edges(conn, sorted(chosen)):
            a, b = index.get(importer), index.get(imported)
            if a is None or b is None:
                continue
            if imported in chosen:
                out.append((b, a, "ImportedBy"))
            if importer in chosen:
                out.append((a, b, "Imports"))
        return out

    tests = files.tests[bisect.bisect_left(files.tests, lo):bisect.bisect_left(files.tests, hi)]
    corpus = Corpus(paths, FieldStats(files.body[lo:hi], fields[BODY], params.body_b),
                    FieldStats(files.path_terms[lo:hi], fields[PATH], params.path_b),
                    definers, expand if params.graph_weight else None, params,
                    [i - lo for i in tests])
    return corpus.rank(query, limit, matched_only=matched_only, explain=explain)


@dataclass(slots=True)
class _Item:
    """A candidate for the pack."""

    title: str
    object_id: str
    snippet: str
    score: float
    kind: str
    why: dict[str, Any]
    extra: dict[str, Any]

    def cost(self, fmt: str) -> int:
        if fmt not in PROMPT_FORMATS:  # ``item_cost`` reads only the escaped title and snippet
            return (estimate_tokens(escape_tags(self.title))
                    + estimate_tokens(escape_tags(self.snippet)) + ITEM_OVERHEAD)
        return item_cost(self.to_json(), fmt)

    def to_json(self) -> dict[str, Any]:
        # File names, code and node content are anyone's text: their <ctx:...> tags are
        # escaped here, where the cost is counted, so what is charged is what is printed.
        return {"title": escape_tags(self.title), "object_id": self.object_id,
                "snippet": escape_tags(self.snippet), "relevance_score": round(self.score, 4),
                "chunk_kind": self.kind, **escape_tree(self.extra), "why": escape_tree(self.why)}


def _hit_why(hit: Hit) -> dict[str, Any]:
    """``why`` of a ranked file: its matched terms, defined names, or the edge that raised it."""
    why: dict[str, Any] = {"matched_terms": list(hit.terms)} if hit.terms else {}
    if hit.defines:
        why["defines"] = list(hit.defines)
    if hit.named:
        why["named"] = list(hit.named)
    if hit.via is not None:
        why["edge_path"] = [hit.via[0], hit.via[1], hit.path]
    return why


def _components(conn: sqlite3.Connection, seeds: Sequence[str]
                ) -> tuple[bool, dict[str, list[str]]]:
    """Files in an import cycle with a seed (its strongly connected component).

    Read from the code index's ``file_sccs`` (``graph.cycles``, kept by ``ctx index``): only
    the rows of the seeds' components. Returns whether the components were current (computed
    at the code index's generation) and file -> ``[seed, "SameComponent", file]``.
    """
    from ctxstore.index.retrieval import file_components, file_sccs_current

    found = {member: [seed, "SameComponent", member]
             for member, seed in file_components(conn, seeds).items() if member not in seeds}
    return file_sccs_current(conn), found


def _expand(conn: sqlite3.Connection, seeds: Sequence[str], depth: int, limit: int
            ) -> dict[str, list[str]]:
    """Breadth-first over import edges from the seeds: file -> edge path from its seed."""
    reached: dict[str, list[str]] = {s: [s] for s in seeds}
    frontier = list(seeds)
    for _ in range(depth):
        if not frontier or len(reached) >= limit + len(seeds):
            break
        step: list[str] = []
        current = set(frontier)
        for importer, imported in import_edges(conn, frontier):
            for here, there, label in ((imported, importer, "ImportedBy"),
                                       (importer, imported, "Imports")):
                if here in current and there not in reached \
                        and len(reached) < limit + len(seeds):
                    reached[there] = [*reached[here], label, there]
                    step.append(there)
        frontier = step
    return {f: p for f, p in reached.items() if f not in seeds}


def _chunk_items(conn: sqlite3.Connection, query: Query,
                 files: Mapping[str, tuple[float, dict[str, Any]]], versions: Mapping[str, str],
                 room: int) -> list[_Item]:
    """Scored chunk items of the given files (file -> (relevance, why), best first).

    Files are read best first until their chunks hold ``CANDIDATE_FACTOR`` times ``room``
    tokens: what could never be chosen is not scored.
    """
    names = set(query.names)
    order = sorted(files, key=lambda p: (-files[p][0], p))
    items: list[_Item] = []
    held_tokens = 0
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
            for share, chunk in scored:
                if share <= 0 and not (best <= 0 and chunk is chunks[0]):
                    continue  # nothing of the task here (a file reached by the graph: its head)
                items.append(_chunk_item(chunk, relevance * (0.25 + 0.75 * share), why,
                                         versions.get(path, "")))
                held_tokens += chunk.tokens
        if held_tokens >= CANDIDATE_FACTOR * room:
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

    1 when it defines a symbol the task names. Substrings, for speed: ``_held_terms`` is
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


def _held_terms(item: _Item) -> None:
    """Narrow a chosen chunk's ``why.matched_terms`` to the terms it holds (the file's when none)."""
    terms = item.why.get("matched_terms")
    if terms:
        held = held_terms(f"{item.extra.get('qualname') or ''}\n{item.snippet}", terms)
        item.why = {**item.why, "matched_terms": held or terms}  # shared by the file's chunks


def _chunk_item(chunk: ChunkRow, score: float, why: dict[str, Any], object_id: str) -> _Item:
    symbol = chunk.qualname is not None and chunk.kind not in ("module", "header", "window")
    return _Item(_chunk_title(chunk), object_id, chunk.text, score,
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


def _node_items(conn: sqlite3.Connection, task: str, *, user: bool) -> list[_Item]:
    """The nodes (and narrative entries) of one store that ranked search finds for the task."""
    from ctxstore.knowledge.search import search

    items: list[_Item] = []
    for hit in search(conn, task, kinds=("node", "narrative"), limit=_NODE_HITS):
        node = hit.node
        if node is None or not hit.matched:
            continue
        kind = "Decision" if node.type == "decision" else "NarrativeExcerpt"
        why: dict[str, Any] = {"matched_terms": list(hit.matched)}
        title = f"{node.type.capitalize()}: {_first_line(node.content)}"
        if user:  # the global layer (spec 003): labelled by store
            why["store"] = "user"
            title += " (user store ~/.ctx)"
        items.append(_Item(title, node.id, node.content, hit.score, kind, why,
                           {"node_type": node.type}))
    return items


def _narrative(conn: sqlite3.Connection, task: str, days: int, now_ms: int,
               active_task: str | None = None) -> tuple[list[_Item], str]:
    """The project's node and narrative items relevant to the task, the active and recent tasks, the log.

    The active task is the one started (``<ctx:task action="start">``) and not ended: its
    nodes (``task:NAME``) carry ``why.active_task``. A task node merely added (``ctx add
    task``) and updated in the last ``days`` days is a recent task (``why.recent_task``).
    """
    from ctxstore.index.read import recent_nodes

    items = _node_items(conn, task, user=False)
    log: list[str] = []
    matched = {item.object_id: item for item in items}

    def task_item(title: str, node: NodeRow, flag: str) -> None:
        # A node the search found too is one item, not two that spend the budget twice: the
        # task's title, both reasons, and the search's score (raised to the task's floor later).
        hit = matched.get(node.id)
        if hit is None:
            matched[node.id] = _Item(title, node.id, node.content, 0.0, "NarrativeExcerpt",
                                     {flag: True}, {"node_type": node.type})
            items.append(matched[node.id])
        else:
            if "active_task" not in hit.why:  # an active task's title says the most
                hit.title = title
            hit.why[flag] = True

    if active_task:
        for node in _task_nodes(conn, active_task):
            task_item(f"Active task {active_task}: {_first_line(node.content)}", node,
                      "active_task")
    if days > 0:
        after = now_ms - days * 86_400_000
        for node in recent_nodes(conn, ("task",), after_ms=after, limit=3):
            task_item(f"Task: {_first_line(node.content)}", node, "recent_task")
        for node in recent_nodes(conn, ("observation", "decision"), after_ms=after,
                                 by="created", limit=50):
            stamp = time.strftime("%Y-%m-%d", time.gmtime(node.created_at / 1000))
            log.append(f"- {stamp} [{node.type}] {_first_line(node.content)}")
    return items, "\n".join(log)


def _task_nodes(conn: sqlite3.Connection, name: str) -> list[NodeRow]:
    """The nodes of the started task ``name`` (tagged ``task:NAME``), last updated first, at most 5.

    None for a name that makes no task tag (a state written by hand).
    """
    from ctxstore.errors import CtxError
    from ctxstore.knowledge.tasks import task_tag
    from ctxstore.query.executor import run_query

    try:
        found = run_query(conn, f'tag:"{task_tag(name)}"', now=time.time())
    except CtxError:
        return []
    return sorted(found, key=lambda n: (-n.updated_at, n.id))[:_ACTIVE_TASK_NODES]


def _first_line(text: str, width: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[:width - 3] + "..."


def _stale_flags(session: Session, node_ids: Sequence[str]) -> dict[str, list[dict[str, object]]]:
    """Stale mentions of the chosen nodes (files they mention changed since), by node id."""
    from ctxstore.code.stale import stale_mentions

    found = stale_mentions(session, list(node_ids)) if node_ids else {}
    return {node: [m.to_json() for m in mentions] for node, mentions in found.items()}


def _diagnostic_items(session: Session, files: Mapping[str, tuple[float, dict[str, Any]]]
                      ) -> list[_Item]:
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
        items.append(_Item(title, row.id, row.message, relevance, "DiagnosticOutput",
                           {"edge_path": [row.path, "Diagnostic", f"diagnostic:{row.id}"]},
                           {"path": row.path}))
    return items


def _fill(items: list[_Item], room: int, fmt: str) -> tuple[list[_Item], int]:
    """Best first, each item taken when it still fits; returns the chosen and their cost.

    An item costs what ``render.item_cost`` charges it in the pack's format.
    """
    chosen: list[_Item] = []
    used = 0
    seen: set[tuple[str, str]] = set()
    for item in sorted(items, key=lambda i: (-i.score, i.title)):
        if room - used < ITEM_OVERHEAD:  # no item costs less: nothing more fits
            break
        key = (item.object_id, item.title)
        if key in seen:
            continue
        cost = item.cost(fmt)
        if used + cost <= room:
            chosen.append(item)
            used += cost
            seen.add(key)
    return chosen, used


def _rooms(task: str, fmt: str, total: int, reserve: int, log: str) -> tuple[int, str, int]:
    """What a budget spends before items: (header tokens, recent narrative kept, room left).

    The response reserve comes first, then the header (``render.header_cost``), then the
    whole entries of the recent log that fit ``_NARRATIVE_SHARE`` of the room.
    """
    echoed = header_cost(task, fmt, total=total, reserved=reserve)
    room = total - reserve - echoed
    recent = _whole_entries(log, min(int((total - reserve) * _NARRATIVE_SHARE), room), fmt) \
        if log else ""
    return echoed, recent, room - narrative_cost(recent, fmt)


def _smallest_budget(need: int, start: int, room_of: Callable[[int], int]) -> int | None:
    """The smallest budget from ``start`` on whose room for items is at least ``need``.

    A budget one token larger has at most one token more room (the reserve, the header and
    the narrative only grow with it), so the search may skip ahead by what is missing and
    never pass the answer. None after ``_SMALLEST_STEPS`` steps (it has always been found
    within a few).
    """
    budget = start
    for _ in range(_SMALLEST_STEPS):
        room = room_of(budget)
        if room >= need:
            return budget
        budget += max(1, need - room)
    return None


def _whole_entries(log: str, tokens: int, fmt: str) -> str:
    """The first entries (lines) of the recent log that cost at most ``tokens`` together.

    Whole entries only: an entry that does not fit is left out, never cut (a half date
    reads as a wrong one). The cost is ``render.narrative_cost`` in the pack's format.
    """
    kept = ""
    for entry in log.split("\n"):
        more = f"{kept}\n{entry}" if kept else entry
        if narrative_cost(more, fmt) > tokens:
            break
        kept = more
    return kept


def pack_notes(session: Session, pack: Mapping[str, Any], *,
               smallest_budget: int | None = None) -> list[str]:
    """What a user should know about a pack that the pack itself does not say.

    A budget too small to hold any of the items found (``PackResult.smallest_budget``), no
    code indexed (the pack holds memory only), and code items whose file on disk is no
    longer the indexed version (changed since ``ctx index``: their line numbers and snippets
    may be out of date). Only the files of the pack's own items are read, and only when
    their size matches the index (``fsio.read_regular``: no link, no FIFO, bounded).

    Args:
        session: The session the pack was built in.
        pack: ``build_pack``'s result.
        smallest_budget: ``PackResult.smallest_budget`` (None: the budget is not the matter).

    Returns:
        One-line notes, possibly none.
    """
    from ctxstore.index.retrieval import file_blobs, has_files

    notes = [budget_note(pack, smallest_budget)] if smallest_budget is not None else []
    conn = session.index()
    if not has_files(conn):
        return [*notes, "no code is indexed here, so the pack holds memory only; run `ctx index`"]
    paths = sorted({str(item["path"]) for item in pack.get("retrieved", ())
                    if item.get("start_line") and item.get("path")})
    changed = [path for path, blob, size in file_blobs(conn, paths)
               if _changed(session.root.parent, path, blob, size)]
    if not changed:
        return notes
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return [*notes, f"{shown} changed or removed since `ctx index`: line numbers and snippets "
            "may be out of date; run `ctx index`"]


def budget_note(pack: Mapping[str, Any], smallest_budget: int, *,
                argument: str = "--budget") -> str:
    """The note of a pack whose budget holds none of the items found.

    One wording for every front end; only the way to ask for the larger budget differs
    (``ctx pack --budget 412``, the MCP ``pack`` tool's ``budget: 412``).

    Args:
        pack: The pack (its ``token_budget.total`` is the budget it was built within).
        smallest_budget: ``PackResult.smallest_budget``: the smallest budget that holds an item.
        argument: How the caller passes a budget, shown before the number (``--budget``,
            ``budget:``).

    Returns:
        One line, e.g. ``the budget of 20 tokens is too small to hold any item found; the
        smallest that holds one is 412 (--budget 412)``.
    """
    total = pack.get("token_budget", {}).get("total")
    return (f"the budget of {total} token{'' if total == 1 else 's'} is too small to hold any "
            f"item found; the smallest that holds one is {smallest_budget} "
            f"({argument} {smallest_budget})")


def _changed(tree: Path, path: str, blob: bytes, size: int) -> bool:
    """Whether the work tree's ``path`` is no longer the indexed blob (or is gone)."""
    import os

    from ctxstore import fsio
    from ctxstore.errors import CtxError
    from ctxstore.objects import KIND_BLOB, object_id_of

    try:
        # A path out of the tree, through a linked directory, or to a link or special file
        # (a hostile index): nothing of ours to compare with, and nothing read.
        fsio.check_under(tree, tree / path)
        if os.stat(tree / path).st_size != size:
            return True
        data = fsio.read_regular(tree / path, size)
    except FileNotFoundError:
        return True
    except (OSError, CtxError):
        return False  # unreadable, a link, a FIFO: not ours to judge
    return object_id_of(KIND_BLOB, data) != blob


@dataclass(frozen=True, slots=True)
class PackResult:
    """A prompt pack and what a user should know of its budget that the pack does not say.

    Attributes:
        pack: The pack (``build_pack``'s result).
        smallest_budget: When items were found but the budget held none of them: the
            smallest budget that holds one (its room, after the response reserve, the
            header and the recent narrative, fits the cheapest item); else None.
    """

    pack: dict[str, Any]
    smallest_budget: int | None


def build_pack(session: Session, task: str, *, budget: int | None = None,
               depth: int | None = None, include_narrative: bool | None = None,
               graph: bool = True, reserve: int | None = None,
               now_ms: int | None = None, user: Session | None = None,
               fmt: str = "json", active_task: str | None = None) -> dict[str, Any]:
    """Build the prompt pack of a task (spec 002 §12.4 plus ``why`` and ``ranked_files``).

    ``build_pack_result(...).pack``: see there for the arguments.

    Returns:
        The pack as a JSON-ready map.

    Raises:
        IndexCorrupt: (E007) if the index cannot answer.
    """
    return build_pack_result(session, task, budget=budget, depth=depth,
                             include_narrative=include_narrative, graph=graph, reserve=reserve,
                             now_ms=now_ms, user=user, fmt=fmt, active_task=active_task).pack


def build_pack_result(session: Session, task: str, *, budget: int | None = None,
                      depth: int | None = None, include_narrative: bool | None = None,
                      graph: bool = True, reserve: int | None = None,
                      now_ms: int | None = None, user: Session | None = None,
                      fmt: str = "json", active_task: str | None = None) -> PackResult:
    """Build the prompt pack of a task, with the smallest budget that holds an item if it held none.

    The pack is spec 002 §12.4 plus ``why`` and ``ranked_files``.

    Settings left None come from ``[retrieval]`` (``default_budget``, ``default_depth``,
    ``include_narrative``, ``narrative_days``) and ``[llm] max_response_tokens``.

    Args:
        session: An open session (its index is read, brought up to date).
        task: Any text.
        budget: Total tokens: items, recent narrative and the response reserve.
        depth: Graph expansion depth (0: none).
        include_narrative: Add nodes, decisions, tasks and the recent log.
        graph: Expand over the import graph and let it raise file scores.
        reserve: Tokens kept for the response (None: ``reserve_for``).
        now_ms: The time "recent" is measured from (None: now).
        user: The user store's session (``--global``): its relevant nodes join the
            narrative items, their ``why`` saying ``"store": "user"``.
        fmt: The rendering the pack is for (``render.FORMATS``): in ``text`` and
            ``markdown`` the budget holds for the printed text (the echoed task, each
            item's lines, the narrative section), in ``json`` and ``yaml`` for the items'
            titles and snippets plus 8 tokens each and the recent narrative.
        active_task: The task started with ``<ctx:task action="start">`` and not ended (the
            hooks' current task), or None: its nodes join the narrative items with
            ``why.active_task`` (with ``include_narrative``).

    Returns:
        The pack as a JSON-ready map, and ``smallest_budget``.

    Raises:
        IndexCorrupt: (E007) if the index cannot answer.
    """
    enabled = gc.isenabled()
    gc.disable()  # tens of thousands of acyclic tuples: ~3% of a pack's CPU went to the collector
    try:
        return _build_pack(session, task, budget=budget, depth=depth,
                           include_narrative=include_narrative, graph=graph, reserve=reserve,
                           now_ms=now_ms, user=user, fmt=fmt, active_task=active_task)
    finally:
        if enabled:
            gc.enable()


def _build_pack(session: Session, task: str, *, budget: int | None, depth: int | None,
                include_narrative: bool | None, graph: bool, reserve: int | None,
                now_ms: int | None, user: Session | None, fmt: str, active_task: str | None) -> PackResult:
    """``build_pack_result`` with the collector paused by the caller."""
    from ctxstore.clock import now_ms as clock_ms

    config = session.config
    total = max(int(config.get("retrieval", "default_budget") if budget is None else budget), 0)
    depth = int(config.get("retrieval", "default_depth") if depth is None else depth)
    if include_narrative is None:
        include_narrative = bool(config.get("retrieval", "include_narrative"))
    conn = session.index()
    query = parse_query(task)
    shown_task = escape_tags(task)  # echoed to the model: searched as given, printed inert
    params = Params() if graph else Params(graph_weight=0.0)
    # only the files whose chunks are read need their terms (each group's first MAX_FILES)
    hits = rank_files(conn, query, params, limit=RANKED_FILES, matched_only=True,
                      explain=MAX_FILES)
    top = hits[0].score if hits else 1.0
    seeds = [h.path for h in hits[:MAX_SEEDS] if h.score >= SEED_SHARE * top]
    files: dict[str, tuple[float, dict[str, Any]]] = {
        h.path: (h.score / top, _hit_why(h)) for h in hits[:MAX_FILES]}
    expanded: dict[str, list[str]] = {}
    scc_used = False
    if graph and depth > 0 and seeds:
        scc_used, expanded = _components(conn, seeds)
        for path, route in _expand(conn, seeds, depth, MAX_EXPANDED).items():
            expanded.setdefault(path, route)
        for path, route in expanded.items():
            if path not in files:  # half the seed's relevance per hop
                files[path] = (files[route[0]][0] * 0.5 ** ((len(route) - 1) // 2),
                               {"edge_path": route})
    versions = {p: v.hex() for p, v in file_versions(conn, list(files)).items()}
    max_response = int(config.get("llm", "max_response_tokens"))
    given = reserve

    def reserve_of(budget: int) -> int:
        return min(max(reserve_for(budget, max_response) if given is None else given, 0), budget)

    reserve = reserve_of(total)
    # A prompt rendering echoes the task first: its header is charged before anything else.
    room = _rooms(shown_task, fmt, total, reserve, "")[2]  # before the recent log is known
    items = _chunk_items(conn, query, files, versions, room) + _diagnostic_items(session, files)
    log = ""
    if include_narrative:
        node_items, log = _narrative(conn, task, int(config.get("retrieval", "narrative_days")),
                                     clock_ms() if now_ms is None else now_ms, active_task)
        if user is not None:  # the global layer: the user store's relevant nodes join
            node_items += _node_items(user.index(), task, user=True)
        scale = max((i.score for i in node_items), default=1.0) or 1.0
        from ctxstore.knowledge.search import FULL_MATCH, search_terms

        full = min(FULL_MATCH, len(search_terms(task).terms)) or 1
        for item in node_items:
            # Node scores are on their own scale: the best node ~ a top file, when it holds
            # the task's words; one that holds one word of several counts that share (a
            # decision naming "python" must not head a pack about renaming an extractor).
            held = len(item.why.get("matched_terms", ()))
            item.score = item.score / scale * min(1.0, held / full) if item.score else 0.5
            if "active_task" in item.why or "recent_task" in item.why:
                item.score = max(item.score, 0.5)  # a task's node found by search too
        items += node_items
    log = escape_tags(log)
    echoed, recent, room = _rooms(shown_task, fmt, total, reserve, log)
    chosen, used = _fill(items, room, fmt)
    smallest = None
    if items and not chosen:  # found, but none fits: the budget that holds the cheapest
        need = min(item.cost(fmt) for item in items)
        smallest = _smallest_budget(
            need, total + 1, lambda b: _rooms(shown_task, fmt, b, reserve_of(b), log)[2])
    for item in chosen:
        if "path" in item.extra:
            _held_terms(item)
    stale = _stale_flags(session, [i.object_id for i in chosen if "node_type" in i.extra]) \
        if include_narrative else {}
    retrieved = []
    for item in chosen:
        doc = item.to_json()
        if item.object_id in stale:
            doc["stale_mentions"] = stale[item.object_id]
        retrieved.append(doc)
    head = read_head(session.root)  # the pointer file: no store handle, no object model
    # escape_tree: the parts not charged to the budget (paths, symbol names, stale mentions)
    # are made inert too; what was escaped above is left as it is (the escape is idempotent).
    return PackResult(escape_tree({
        "task": shown_task,
        "head_commit": head.heads[0].hex() if head.heads else "",
        "retrieved": retrieved,
        "graph_context": {
            "seed_nodes": [f"file:{s}" for s in seeds]
            + list(dict.fromkeys(f"symbol:{n}" for h in hits[:MAX_FILES] for n in h.defines)),
            "expanded_nodes": [f"file:{p}" for p in expanded],
            "expansion_depth": depth if graph else 0,
            "scc_dag_used": scc_used,
        },
        "recent_narrative": recent,
        "token_budget": {"total": total, "used": echoed + used + narrative_cost(recent, fmt),
                         "reserved_for_response": reserve},
        "ranked_files": [h.path for h in hits[:RANKED_FILES]],
    }), smallest)
