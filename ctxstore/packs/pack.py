"""Prompt packs (spec 002 §12): any task text in, the most relevant few thousand tokens out.

A ``request.PackRequest`` in, a typed ``items.Pack`` out (``make_pack``). The pipeline, each
step in its own module and reading only SQLite or, on a large index, Tantivy (no networkx,
no NumPy):

1. **Seeds** (``seed``). The task is parsed (``search.task.parse_query``); every indexed
   file is ranked by the method of ``search.rank`` over the index (``rank_files``: BM25 over
   the ``file_terms`` postings of the task's terms, the path field, definitions named in the
   task, the test prior, one import hop; source files and prose ranked as separate corpora;
   on a large index, Tantivy scores the two fields). The
   best files (within ``SEED_SHARE`` of the top, at most ``MAX_SEEDS``) and the symbols the
   task names are the seeds.
2. **Graph expansion** (``expand``). The files in an import cycle with a seed (``file_sccs``,
   kept by ``ctx index``: ``graph.cycles``), then breadth-first over ``Imports``
   edges (both directions) from the seed files, up to ``depth`` hops and ``MAX_EXPANDED``
   files; each expanded file keeps the edge path that reached it.
3. **Content** (``content``). The chunks (``chunks`` table: one per top-level symbol, a module header,
   windows of text files) of the ranked and expanded files, each scored by its file's
   relevance and the share of the task's terms it holds.
4. **Narrative** (``narrative``). With ``include_narrative``: nodes and narrative entries relevant to the task
   (``search.search``; decisions as ``Decision``), the nodes of the active task (started, not
   ended), the recently updated tasks and the log of the last
   ``[retrieval] narrative_days`` days (``recent_narrative``), and stale-memory flags of the
   chosen nodes (``code.stale``). Always: the latest diagnostics of stored commands in the
   pack's files (``code.runs``).
5. **Budget** (``budget``). ``reserved_for_response`` tokens are set aside; items are taken best first
   while they fit; the pack's ``used`` never exceeds ``total - reserved_for_response``. For
   the text and markdown renderings (``render``), ``used`` counts what they print: the
   echoed task, each item's printed lines, the narrative section.

Every item carries ``why``: the task terms it matched, the names it defines, or the edge
path from a seed. ``ranked_files`` lists every file that matched, best first.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ctxstore.index.retrieval import file_versions
from ctxstore.packs.budget import budget_note, reserve_for, rooms, smallest_budget
from ctxstore.packs.content import chunk_items, diagnostic_items, narrow_terms, past_run_items
from ctxstore.packs.expand import components, expand
from ctxstore.packs.items import (
    CHUNK_KINDS,
    GraphContext,
    Pack,
    PackItem,
    PackResult,
    TokenBudget,
)
from ctxstore.packs.narrative import narrative_items, node_items, scale_node_items, stale_flags
from ctxstore.packs.render import narrative_cost
from ctxstore.packs.request import PackRequest
from ctxstore.packs.seed import hit_why, rank_files_lazily
from ctxstore.packs.select import DOC_SHARE, choose, is_doc_task, lead_file
from ctxstore.refs import read_head
from ctxstore.search.rank import Params
from ctxstore.search.tantivy_index import open_served, serves_packs
from ctxstore.search.task import parse_query
from ctxstore.tagtext import escape_tags

if TYPE_CHECKING:
    from pathlib import Path

    from ctxstore.session import Session

__all__ = ["CHUNK_KINDS", "MAX_SEEDS", "MAX_EXPANDED", "SEED_SHARE", "MAX_FILES", "MIN_RELEVANCE",
           "RANKED_FILES",
           "make_pack", "build_pack", "build_pack_result", "PackRequest", "PackResult", "Pack",
           "pack_notes", "budget_note", "reserve_for"]

MAX_SEEDS = 5          # seed files at most
SEED_SHARE = 0.5       # a seed scores at least this share of the best file
MAX_EXPANDED = 50      # spec 002 §12.3 max_expanded_nodes
MAX_FILES = 40         # files ranked for their chunks
MIN_RELEVANCE = SEED_SHARE  # files whose chunks are candidates: at least this share of the best
RANKED_FILES = 1000    # at most this many paths in ``ranked_files``


def make_pack(session: Session, request: PackRequest, *, user: Session | None = None
              ) -> PackResult:
    """Build the prompt pack a request asks for (spec 002 §12.4 plus ``why`` and ``ranked_files``).

    Args:
        session: An open session (its index is read, brought up to date).
        request: The task and the pack's settings.
        user: The user store's session (``--global``): its relevant nodes join the narrative
            items, their ``why`` saying ``"store": "user"``.

    Returns:
        The pack, and the smallest budget that holds an item when it held none.

    Raises:
        IndexCorrupt: (E007) if the index cannot answer.
    """
    enabled = gc.isenabled()
    gc.disable()  # tens of thousands of acyclic tuples: ~3% of a pack's CPU went to the collector
    try:
        return _make_pack(session, request, user)
    finally:
        if enabled:
            gc.enable()


def build_pack_result(session: Session, task: str, *, user: Session | None = None,
                      **settings: Any) -> PackResult:
    """``make_pack`` of ``PackRequest(task, **settings)``.

    Args:
        session: An open session.
        task: Any text.
        user: The user store's session, or None.
        **settings: The other fields of ``PackRequest``.

    Returns:
        The pack and ``smallest_budget``.
    """
    return make_pack(session, PackRequest(task, **settings), user=user)


def build_pack(session: Session, task: str, *, user: Session | None = None,
               **settings: Any) -> dict[str, Any]:
    """The pack of ``PackRequest(task, **settings)`` as its JSON map (``Pack.to_json``).

    Args:
        session: An open session.
        task: Any text.
        user: The user store's session, or None.
        **settings: The other fields of ``PackRequest``.

    Returns:
        The pack as a JSON-ready map.
    """
    return build_pack_result(session, task, user=user, **settings).pack.to_json()


def _make_pack(session: Session, request: PackRequest, user: Session | None) -> PackResult:
    """``make_pack`` with the collector paused by the caller."""
    from ctxstore.clock import now_ms as clock_ms

    task, fmt, graph = request.task, request.fmt, request.graph
    config = session.config
    s = request.settings(config)
    depth = s.depth
    conn = session.index()
    query = parse_query(task)
    shown_task = escape_tags(task)  # echoed to the model: searched as given, printed inert
    params = Params() if graph else Params(graph_weight=0.0)
    # files and memory alike, where packs are served by Tantivy (``[index] fulltext``)
    served = open_served(session.root, conn, config) if serves_packs(config) else None
    ranking = rank_files_lazily(conn, query, params, limit=RANKED_FILES, matched_only=True,
                                explain=MAX_FILES, served=served)
    hits = ranking.hits
    top = hits[0].score if hits else 1.0
    seeds = [h.path for h in hits[:MAX_SEEDS] if h.score >= SEED_SHARE * top]
    expanded: dict[str, list[str]] = {}
    scc_used = False
    if graph and depth > 0 and seeds:
        scc_used, expanded = components(conn, seeds)
        for path, route in expand(conn, seeds, depth, MAX_EXPANDED).items():
            expanded.setdefault(path, route)
    # Matched terms say which chunks of a file to read and whether the graph's reason
    # replaces the file's own: those of the files whose chunks may be read (``near``) and
    # of those the graph reaches are read, not those of every ranked file.
    ranking.explain([h for h in hits[:MAX_FILES]
                     if h.score / top >= MIN_RELEVANCE or h.path in expanded])
    files: dict[str, tuple[float, dict[str, Any]]] = {
        h.path: (h.score / top, hit_why(h)) for h in hits[:MAX_FILES]}
    for path, route in expanded.items():  # half the seed's relevance per hop
        relevance = files[route[0]][0] * 0.5 ** ((len(route) - 1) // 2)
        if path not in files:
            files[path] = (relevance, {"edge_path": route})
        elif files[path][0] < relevance and not files[path][1].get("matched_terms"):
            files[path] = (relevance, {**files[path][1], "edge_path": route})  # by the
            # graph alone: the ranking's own graph term scored it below its expansion
    versions = {p: v.hex() for p, v in file_versions(conn, list(files)).items()}
    given = request.reserve

    def reserve_of(budget: int) -> int:
        return min(max(reserve_for(budget, s.max_response_tokens) if given is None else given, 0),
                   budget)

    total = s.total
    reserve = reserve_of(total)
    # A prompt rendering echoes the task first: its header is charged before anything else.
    room = rooms(shown_task, fmt, total, reserve, "")[2]  # before the recent log is known
    # a file scoring under half the best (the seeds' rule) is gold about one time in a
    # hundred on the code development set: its text would only dilute the pack
    near = {p: v for p, v in files.items() if v[0] >= MIN_RELEVANCE}
    items: list[PackItem] = chunk_items(conn, query, near, versions, room) \
        + diagnostic_items(session, files) + past_run_items(session, task, query)
    log = ""
    if s.include_narrative:
        now_ms = clock_ms() if request.now_ms is None else request.now_ms
        found, log = narrative_items(session, task, s.narrative_days, now_ms, request.active_task,
                                     served)
        if user is not None:  # the global layer: the user store's relevant nodes join
            found += node_items(user, task, user=True)
        scale_node_items(found, task)
        items += found
    log = escape_tags(log)
    echoed, recent, room = rooms(shown_task, fmt, total, reserve, log)
    doc_task = is_doc_task(task, [h.path for h in hits], [h.path for h in hits if h.named])
    doc_room = None if doc_task else int(room * DOC_SHARE)
    lead, confident = lead_file([(h.path, h.score) for h in hits[:MAX_FILES]], doc_task)
    chosen, used = choose(items, room, fmt, doc_room=doc_room, lead=lead, confident=confident)
    smallest = None
    if items and not chosen:  # found, but none fits: the budget that holds the cheapest
        need = min(item.cost(fmt) for item in items)
        smallest = smallest_budget(
            need, total + 1, lambda b: rooms(shown_task, fmt, b, reserve_of(b), log)[2])
    for item in chosen:
        if "path" in item.extra:
            narrow_terms(item)
    if s.include_narrative:
        stale = stale_flags(session, [i.object_id for i in chosen if "node_type" in i.extra])
        for item in chosen:
            item.stale_mentions = stale.get(item.object_id)
    head = read_head(session.root)  # the pointer file: no store handle, no object model
    return PackResult(Pack(
        task=shown_task,
        head_commit=head.heads[0].hex() if head.heads else "",
        retrieved=chosen,
        graph_context=GraphContext(
            [f"file:{p}" for p in seeds]
            + list(dict.fromkeys(f"symbol:{n}" for h in hits[:MAX_FILES] for n in h.defines)),
            [f"file:{p}" for p in expanded], depth if graph else 0, scc_used),
        recent_narrative=recent,
        token_budget=TokenBudget(total, echoed + used + narrative_cost(recent, fmt), reserve),
        ranked_files=[h.path for h in hits[:RANKED_FILES]]), smallest)


def pack_notes(session: Session, pack: Mapping[str, Any], *,
               smallest_budget: int | None = None) -> list[str]:
    """What a user should know about a pack that the pack itself does not say.

    A budget too small to hold any of the items found (``PackResult.smallest_budget``), no
    code indexed (the pack holds memory only), and code items whose file on disk is no
    longer the indexed version (changed since ``ctx index``: their line numbers and snippets
    may be out of date). A file whose size and modification time are those ``ctx index``
    recorded is the version it read, as ``ctx index`` itself judges; only the other files of
    the pack's own items are read, and only when their size matches the index
    (``fsio.read_regular``: no link, no FIFO, bounded).

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
    changed = [path for path, blob, size, stat in file_blobs(conn, paths)
               if _changed(session.root.parent, path, blob, size, stat)]
    if not changed:
        return notes
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return [*notes, f"{shown} changed or removed since `ctx index`: line numbers and snippets "
            "may be out of date; run `ctx index`"]


def _changed(tree: Path, path: str, blob: bytes, size: int, stat: tuple[int, int] | None
             ) -> bool:
    """Whether the work tree's ``path`` is no longer the indexed blob (or is gone).

    ``stat``: ``ctx index``'s stat cache of it; a file that still has that size and
    modification time is not read (nor hashed).
    """
    import os

    from ctxstore import fsio
    from ctxstore.errors import CtxError

    try:
        # A path out of the tree, through a linked directory, or to a link or special file
        # (a hostile index): nothing of ours to compare with, and nothing read.
        fsio.check_under(tree, tree / path)
        st = os.stat(tree / path)
        if st.st_size != size:
            return True
        if stat == (st.st_size, st.st_mtime_ns):
            return False
        data = fsio.read_regular(tree / path, size)
    except FileNotFoundError:
        return True
    except (OSError, CtxError):
        return False  # unreadable, a link, a FIFO: not ours to judge
    from ctxstore.objects import KIND_BLOB, object_id_of

    return object_id_of(KIND_BLOB, data) != blob
