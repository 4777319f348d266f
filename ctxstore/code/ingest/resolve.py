"""Stage "resolve": a file's extraction made a ``file_version``, its endpoints resolved.

Resolution is done at ingest time against every indexed file plus the files of the run
(docs/code.md "Endpoints"): an ``Imports`` of a module of an indexed file is
``("file", path)``, of a name inside one ``("item", name)``, anything else imported
``("module", name)``; other labels name an item, or a module when the name is one. An
import left unresolved is not revisited when a later run adds the file it names: re-index
the importer to resolve it. The run's gates (``Budget``, ``[ingestion]``) drop relations
below ``min_confidence`` and, for ``ctx add file``, over ``max_edges_per_step``.

Pure: no I/O, no store, no SQL.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, cast

from ctxstore.code.languages import CONFIDENCE_RANK, Confidence, Extraction, Relation
from ctxstore.ids import ObjectId
from ctxstore.model.code import CodeRelation, CodeSymbol, FileVersion
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.config import Config

__all__ = ["Budget", "Extracted", "NO_SEMANTICS", "budget_of", "endpoint_of_symbol",
           "resolve_target", "module_map", "build_version", "line_count", "ModuleLookup",
           "names_needed"]

# The note of a version stored without its symbols (`ctx add file` without --extract-semantics):
# a later run that extracts semantics reads the file again even though its bytes are the same.
NO_SEMANTICS = "symbols not extracted (ctx add file without --extract-semantics)"
_SEPARATOR = re.compile(r"\.|::")


@dataclass
class Budget:
    """The gates of one run (``[ingestion]``)."""

    max_files: int | None
    max_bytes: int | None
    max_edges: int | None
    max_file_bytes: int
    min_rank: int
    min_confidence: Confidence
    bytes_used: int = 0
    edges_used: int = 0


def budget_of(config: Config, bulk: bool) -> Budget:
    """The gates of a run: ``ctx index`` (``bulk``) or ``ctx add file``."""
    min_conf = cast("Confidence", str(config.get("ingestion", "min_confidence")))  # validated
    return Budget(
        max_files=None if bulk else int(config.get("ingestion", "max_files_per_step")),
        max_bytes=int(config.get("ingestion", "max_index_bytes" if bulk else "max_bytes_per_step")),
        max_edges=None if bulk else int(config.get("ingestion", "max_edges_per_step")),
        max_file_bytes=int(config.get("ingestion", "max_file_bytes")),
        min_rank=CONFIDENCE_RANK.get(min_conf, 1), min_confidence=min_conf)


@dataclass
class Extracted:
    """A changed file, read and extracted (``extraction`` None: no extractor, or no semantics)."""

    path: str
    data: bytes
    blob: ObjectId
    text: str
    language: str | None
    extraction: Extraction | None


def endpoint_of_symbol(qualname: str, modules: set[str]) -> tuple[str, str]:
    """The endpoint of a symbol of a file: ``("module", q)`` for a module, else ``("item", q)``."""
    return ("module", qualname) if qualname in modules else ("item", qualname)


def _prefixes(target: str) -> Iterable[str]:
    """``a.b.c`` -> ``a.b.c``, ``a.b``, ``a`` (``::`` separators alike), longest first."""
    yield target
    cuts = [m.start() for m in _SEPARATOR.finditer(target)]
    for cut in reversed(cuts):
        if cut:
            yield target[:cut]


def _nearest(paths: list[str], importer: str) -> str:
    """The path sharing the longest directory prefix with the importer (crate-scoped names)."""
    def shared(p: str) -> int:
        return len(os.path.commonprefix([PurePosixPath(p).parts, PurePosixPath(importer).parts]))
    return sorted(paths, key=lambda p: (-shared(p), p))[0]


def resolve_target(rel: Relation, importer: str, modules: Mapping[str, list[str]],
                   own: set[str]) -> tuple[str, str]:
    """The endpoint a relation's target names (see the module docstring).

    Args:
        rel: The relation as extracted.
        importer: The path of the file it comes from.
        modules: Module name -> paths of the files defining it (``module_map``).
        own: The file's own symbols' qualified names.

    Returns:
        ``(kind, key)``.
    """
    target = rel.target
    if target in own:
        return "item", target
    for prefix in _prefixes(target):
        paths = modules.get(prefix)
        if paths:
            if prefix == target:
                return ("file", _nearest(paths, importer)) if rel.label == "Imports" \
                    else ("module", target)
            return "item", target
    return ("module", target) if rel.label == "Imports" else ("item", target)


class ModuleLookup(Mapping[str, list[str]]):
    """``module_map`` of every indexed file plus the run's, asked only for the names needed.

    A run of a few files resolves a few hundred names: ``need`` fetches the files of those
    modules (``fetch``: the index's ``module_paths`` and the run's own files) instead of
    naming every indexed file. Lookups of names never asked for find nothing.
    """

    def __init__(self, fetch: Callable[[set[str]], dict[str, list[str]]]) -> None:
        self._fetch = fetch
        self._known: dict[str, list[str]] = {}
        self._asked: set[str] = set()

    def need(self, names: Iterable[str]) -> None:
        """Fetch the files of the modules of ``names`` not asked for yet."""
        new = set(names) - self._asked
        if new:
            self._known.update(self._fetch(new))
            self._asked |= new

    def __getitem__(self, name: str) -> list[str]:
        return self._known[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


def names_needed(ext: Extraction) -> set[str]:
    """Every module name resolving ``ext``'s relations may look up (``resolve_target``)."""
    return {name for rel in ext.relations for name in _prefixes(rel.target)}


def module_map(paths: Iterable[str], memo: dict[str, str]) -> dict[str, list[str]]:
    """Module name -> the files defining it; ``memo`` (path -> name or "") is filled in."""
    from ctxstore.code.languages import module_name

    out: dict[str, list[str]] = {}
    for path in paths:
        name = memo.get(path)
        if name is None:
            name = memo[path] = module_name(path) or ""
        if name:
            out.setdefault(name, []).append(path)
    return out


def line_count(text: str) -> int:
    """Lines of a text, a last line without a newline included."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _relations(path: str, ext: Extraction, modules: Mapping[str, list[str]], budget: Budget,
               counts: dict[str, int]) -> tuple[CodeRelation, ...]:
    symbol_modules = {s.qualname for s in ext.symbols if s.kind == "module"}
    own = {s.qualname for s in ext.symbols}
    out: list[CodeRelation] = []
    counts["low"] += ext.dropped  # counted by the extractor, never built
    for sym in ext.symbols:  # the file node holds its outermost symbols
        if sym.parent is None:
            kind, key = endpoint_of_symbol(sym.qualname, symbol_modules)
            out.append(CodeRelation("Contains", "file", path, kind, key, sym.qualname, "ingest",
                                    "high", sym.span.start_byte, sym.span.end_byte,
                                    sym.span.start_line, sym.span.end_line, ()))
    for rel in ext.relations:
        if CONFIDENCE_RANK.get(rel.evidence.confidence, 0) < budget.min_rank:
            counts["low"] += 1
            continue
        from_kind, from_key = endpoint_of_symbol(rel.source, symbol_modules)
        to_kind, to_key = resolve_target(rel, path, modules, own)
        span = rel.evidence.span
        out.append(CodeRelation(rel.label, from_kind, from_key, to_kind, to_key, rel.target,
                                rel.evidence.tool, rel.evidence.confidence, span.start_byte,
                                span.end_byte, span.start_line, span.end_line, tuple(rel.detail)))
    if budget.max_edges is not None:
        room = max(budget.max_edges - budget.edges_used, 0)
        if len(out) > room:
            counts["budget"] += len(out) - room
            out = sorted(out, key=lambda r: -CONFIDENCE_RANK.get(r.confidence, 0))[:room]
        budget.edges_used += len(out)
    return tuple(out)


def build_version(item: Extracted, modules: Mapping[str, list[str]], budget: Budget,
                  counts: dict[str, int]) -> tuple[FileVersion, int, int]:
    """The version of a changed file, with its symbol and relation counts.

    ``counts`` gathers the relations the gates dropped (``low``, ``budget``).
    """
    ext = item.extraction
    symbols: tuple[CodeSymbol, ...] = ()
    relations: tuple[CodeRelation, ...] = ()
    note = None
    if ext is not None:
        symbols = tuple(CodeSymbol(s.qualname, s.name, s.kind, s.parent, s.visibility, s.signature,
                                   s.span.start_byte, s.span.end_byte, s.span.start_line,
                                   s.span.end_line, tuple(s.detail)) for s in ext.symbols)
        relations = _relations(item.path, ext, modules, budget, counts)
        if not ext.complete:
            note = ext.note or "extraction incomplete (a syntax error or a construct the parser skips)"
    elif item.language is not None:
        note = NO_SEMANTICS
    fv = FileVersion.make(path=item.path, blob_id=item.blob, language=item.language,
                          byte_count=len(item.data), line_count=line_count(item.text),
                          complete=ext is None or ext.complete, note=note, symbols=symbols,
                          relations=relations)
    return fv, len(symbols), len(relations)
