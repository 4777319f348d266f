"""``ctx ui --export DIR``: the pages of ``ctx ui`` as files, their answers embedded.

The same HTML, CSS and JS as the server's, plus ``data.js`` (the table of embedded answers)
and ``data/N.js`` (one answer each, loaded by a script tag, so the pages open from disk with
no server). Embedded: the timeline, the graph at both levels, transcript-memory topics, the
page of every live node and of every endpoint the graphs and node pages link to (at most
``MAX_PAGES``), and a pack for each task given. Searching transcripts, focusing the graph
on an endpoint it does not draw and packing a new task need the server. The directory must
be new, empty, or an earlier export (it holds ``EXPORT_MARKER``); files are written through
``fsio.write_output``, never inside the store. Nothing is written to the store.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore import fsio
from ctxstore.errors import CtxError, InvalidInput
from ctxstore.records import dataclass
from ctxstore.ui import pages
from ctxstore.ui.server import asset_bytes

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["ExportResult", "export_pages", "request_key", "EXPORT_MARKER", "MAX_PAGES"]

EXPORT_MARKER = ".ctx-ui-export"
MAX_PAGES = 20_000  # node and endpoint pages embedded; the rest say they need the server
_TIMELINE_LIMIT = 100_000
_DATA_FILE = re.compile(r"[0-9]+\.js")


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote.

    Attributes:
        directory: The export's directory.
        files: How many files were written.
        node_pages: How many node and endpoint pages were embedded.
        packs: How many packs were embedded.
        left_out: Node and endpoint pages left out past ``MAX_PAGES``.
    """

    directory: Path
    files: int
    node_pages: int
    packs: int
    left_out: int


def request_key(name: str, params: dict[str, str]) -> str:
    """The key of an embedded answer: what ``app.js`` computes for the same request.

    Args:
        name: The API's name.
        params: Its parameters.

    Returns:
        ``JSON.stringify([name, [[key, value], ...]])`` with the parameters sorted by key.
    """
    return json.dumps([name, [[k, params[k]] for k in sorted(params)]], ensure_ascii=False,
                      separators=(",", ":"))


def _script(value: Any) -> bytes:
    # ASCII only, and no "<" (a script file is never parsed as HTML, but a copy pasted into a
    # page would be): the JSON stays a valid JavaScript expression.
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).replace("<", "\\u003c") \
        .encode("ascii")


def _check_directory(directory: Path) -> None:
    """A new or empty directory, or an earlier export; refused otherwise."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise InvalidInput(f"{directory} is not a directory")
    if any(directory.iterdir()) and not (directory / EXPORT_MARKER).is_file():
        raise InvalidInput(f"{directory} is not empty and holds no earlier export",
                           hint="name a new or empty directory")


def export_pages(db: Session, directory: Path, *, packs: Sequence[str] = (),
                 also: Sequence[Path] = ()) -> ExportResult:
    """Write the browser's pages with their answers embedded into ``directory``.

    Args:
        db: The open session.
        directory: Where to write (created when missing).
        packs: Tasks whose packs are embedded in the pack page.
        also: Other stores the files must stay out of (the user store ``~/.ctx``).

    Returns:
        What was written.

    Raises:
        InvalidInput: (E011) if ``directory`` is inside the store, is a file, or holds files
            of something other than an earlier export.
        CtxError: a damaged store or index.
        OSError: the directory or a file cannot be written.
    """
    directory = Path(os.path.abspath(directory))
    real = Path(os.path.realpath(directory))
    for root in (db.root, *also):
        inside = Path(os.path.realpath(root))
        if real == inside or inside in real.parents:
            raise InvalidInput(f"refusing to export into {directory}: it is inside the store "
                               f"{root}", hint="export outside the .ctx/ directory")
    _check_directory(directory)
    answers: dict[str, Any] = {}

    def embed(name: str, params: dict[str, str], asked: dict[str, str] | None = None) -> Any:
        """The answer to ``params``, embedded as the answer the page asks with ``asked``."""
        try:
            found = pages.answer(db, name, params)
        except CtxError as exc:
            found = {"error": {"code": exc.code, "message": exc.message, "hint": exc.hint}}
        answers[request_key(name, params if asked is None else asked)] = found
        return found

    timeline = embed("timeline", {"limit": str(_TIMELINE_LIMIT)}, {})
    refs: dict[str, None] = {}
    for entry in timeline.get("entries", ()):
        if entry["kind"] == "node":
            refs[entry["id"]] = None
    for level in ("files", "all"):
        graph = embed("graph", {"level": level})
        for node in graph.get("nodes", ()):
            refs[node["key"] if node["kind"] == "node" else node["id"]] = None
    embed("transcripts", {})
    for task in packs:
        embed("pack", {"task": task})
    done = 0
    queue = list(refs)
    while queue and done < MAX_PAGES:
        ref = queue.pop(0)
        page = embed("node", {"ref": ref})
        done += 1
        for edge in (*page.get("edges", ()), *page.get("mentioned_by", ())):  # its links
            other = edge["key"] if edge["kind"] == "node" else f"{edge['kind']}:{edge['key']}"
            if other not in refs:
                refs[other] = None
                queue.append(other)
    return _write(db, directory, answers, list(packs), done, len(queue), also)


def _write(db: Session, directory: Path, answers: dict[str, Any], packs: list[str], done: int,
           left_out: int, also: Sequence[Path]) -> ExportResult:
    fsio.ensure_dir(directory)
    fsio.ensure_dir(directory / "assets")
    fsio.ensure_dir(directory / "data")
    written = 0

    def put(rel: str, data: bytes) -> None:
        nonlocal written
        fsio.write_output(directory / rel, data, store=db.root, also=also)
        written += 1

    for old in (directory / "data").iterdir():  # an earlier export's answers
        if _DATA_FILE.fullmatch(old.name) and old.is_file() and not old.is_symlink():
            fsio.unlink(old)
    table: dict[str, str] = {}
    for number, (key, value) in enumerate(answers.items()):
        name = f"data/{number}.js"
        table[key] = name
        put(name, b"CTX_LOADED(" + _script(key) + b"," + _script(value) + b");\n")
    put("data.js", b"window.CTX_STATIC = {files:" + _script(table) + b",packs:" + _script(packs)
        + b"};\n")
    for name in pages.PAGES:
        put(name, asset_bytes(name))
    for name in pages.ASSETS:
        put(f"assets/{name}", asset_bytes(name))
    put(EXPORT_MARKER, b"ctx ui --export\n")
    return ExportResult(directory, written, done, len(packs), left_out)
