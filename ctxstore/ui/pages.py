"""The page table of ``ctx ui``: API name -> one use case, its answer rendered as JSON.

Every answer is a JSON-ready map; a ``CtxError`` becomes ``{"error": {...}}`` in the server.
The parameters are the query string's (text): each page parses its own and refuses bad ones
with ``InvalidInput`` (E011). Nothing here writes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ctxstore.browse.graph import MAX_LIMIT, read_graph
from ctxstore.browse.node import NodePage, read_node_page
from ctxstore.browse.pack import explore_pack
from ctxstore.browse.timeline import read_timeline
from ctxstore.browse.transcripts import read_transcripts, search_transcripts_read_only
from ctxstore.errors import InvalidInput
from ctxstore.knowledge.tasks import current_task
from ctxstore.packs.request import PackRequest

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["PAGES", "PAGE_VIEWS", "PAGE_TEMPLATE", "ASSETS", "API", "answer", "to_json", "Params"]

Params = Mapping[str, str]
# The HTML pages, one per view (the same files in the server and in an export): each is the
# one template (``assets/page.html``) filled with its view (``data-page``, which app.js
# renders) and its title.
PAGE_VIEWS = {"index.html": ("timeline", "Timeline"), "node.html": ("node", "Node"),
              "graph.html": ("graph", "Graph"), "pack.html": ("pack", "Pack explorer"),
              "memory.html": ("memory", "Transcripts")}
PAGES = tuple(PAGE_VIEWS)
PAGE_TEMPLATE = "page.html"
# The assets beside them (assets/ in the package).
ASSETS = ("app.js", "graph.js", "style.css")


def to_json(value: object) -> Any:
    """A use case's record (frozen dataclasses, tuples, dicts) as JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def _int(params: Params, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = params.get(name, "").strip()
    if not raw:
        return default
    if not raw.lstrip("-").isdigit() or len(raw) > 12:
        raise InvalidInput(f"{name} must be a whole number, not {raw!r}")
    value = int(raw)
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low} and {high}, not {value}")
    return value


def _flag(params: Params, name: str) -> bool | None:
    raw = params.get(name, "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise InvalidInput(f"{name} must be 1 or 0, not {raw!r}")


def _text(params: Params, name: str) -> str | None:
    raw = params.get(name)
    return raw if raw is not None and raw.strip() else None


def timeline_page(db: Session, params: Params) -> Any:
    """``timeline?limit=N``: ``browse.timeline.read_timeline``."""
    limit = _int(params, "limit", 500, 1, 100_000)
    assert limit is not None
    return {"store": str(db.root), **to_json(read_timeline(db, limit=limit))}


def node_page(db: Session, params: Params) -> Any:
    """``node?ref=ID|kind:key``: ``browse.node.read_node_page``."""
    ref = _text(params, "ref")
    if ref is None:
        raise InvalidInput("name a node: node?ref=ID or kind:key")
    page = read_node_page(db, ref.strip())
    return {"page": "node" if isinstance(page, NodePage) else "endpoint", **to_json(page)}


def graph_page(db: Session, params: Params) -> Any:
    """``graph?level=files|all&limit=N&focus=REF``: ``browse.graph.read_graph``."""
    limit = _int(params, "limit", 600, 1, MAX_LIMIT)
    assert limit is not None
    return to_json(read_graph(db, level=params.get("level", "files") or "files", limit=limit,
                              focus=_text(params, "focus")))


def pack_page(db: Session, params: Params) -> Any:
    """``pack?task=T&budget=N&depth=N&narrative=1&graph=1``: ``browse.pack.explore_pack``."""
    graph = _flag(params, "graph")
    view = explore_pack(db, PackRequest(
        params.get("task", ""), budget=_int(params, "budget", None, 1, 100_000_000),
        depth=_int(params, "depth", None, 0, 16), include_narrative=_flag(params, "narrative"),
        graph=True if graph is None else graph, fmt="json",
        active_task=current_task(db)))
    return {"pack": view.pack.to_json(), "costs": list(view.costs), "notes": list(view.notes)}


def transcripts_page(db: Session, params: Params) -> Any:
    """``transcripts?session=ID``: ``browse.transcripts.read_transcripts``."""
    return to_json(read_transcripts(db, session=_text(params, "session")))


def search_page(db: Session, params: Params) -> Any:
    """``search?q=T&since=&until=&intent=&session=&limit=N``: transcript-memory search."""
    limit = _int(params, "limit", 20, 1, 200)
    assert limit is not None
    return to_json(search_transcripts_read_only(
        db, params.get("q", ""), now_ms=int(time.time() * 1000), since=_text(params, "since"),
        until=_text(params, "until"), intent=_text(params, "intent"),
        session=_text(params, "session"), limit=limit))


API: dict[str, Callable[[Session, Params], Any]] = {
    "timeline": timeline_page,
    "node": node_page,
    "graph": graph_page,
    "pack": pack_page,
    "transcripts": transcripts_page,
    "search": search_page,
}


def answer(db: Session, name: str, params: Params) -> Any:
    """The JSON answer of API ``name``.

    Args:
        db: The open session.
        name: A key of ``API``.
        params: The query parameters.

    Returns:
        The JSON-ready answer.

    Raises:
        InvalidInput: (E011) for an unknown name or a bad parameter.
        CtxError: whatever the use case raises.
    """
    page = API.get(name)
    if page is None:
        raise InvalidInput(f"no page {name!r}")
    return page(db, params)
