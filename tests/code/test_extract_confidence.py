"""``min_confidence`` in the built-in extractors: what is below it is counted, never built.

The ingest asks for ``[ingestion] min_confidence`` so that the relations it would drop are
not made at all (``Extraction.dropped``). Whatever the threshold, the extraction must be the
full one with those relations taken out, and the count must be theirs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxstore.code.languages import CONFIDENCE_RANK, extractor_for, registered

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "extract"


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir()))
@pytest.mark.parametrize("threshold", ["low", "medium", "high"])
def test_min_confidence_only_leaves_out_what_is_below_it(name: str, threshold: str) -> None:
    path = f"src/{name}"
    text = (FIXTURES / name).read_text()
    extractor = extractor_for(path)
    assert extractor is not None and getattr(extractor, "filters_confidence", False)
    full = extractor.extract(path, text)
    cut = extractor.extract(path, text, min_confidence=threshold)  # type: ignore[call-arg]
    rank = CONFIDENCE_RANK[threshold]
    kept = [r for r in full.relations if CONFIDENCE_RANK[r.evidence.confidence] >= rank]
    assert cut.relations == tuple(kept)
    assert cut.dropped == len(full.relations) - len(kept)
    assert cut.symbols == full.symbols and cut.complete == full.complete
    assert full.dropped == 0
    if threshold == "high":
        assert cut.dropped > 0  # every fixture has relations resolved by name only


@pytest.mark.parametrize(("path", "text"), [
    ("a.py", "def f():\n    undefined_call()\n    obj.method()\n"),
    ("a.rs", "fn f() { undefined_call(); obj.method(); }\n"),
    ("a.go", "package a\nfunc f() { undefinedCall(); obj.Method() }\n"),
    ("a.js", "function f() { undefinedCall(); obj.method(); }\n"),
])
def test_unresolved_calls_are_counted_not_built(path: str, text: str) -> None:
    extractor = extractor_for(path)
    assert extractor is not None
    full = extractor.extract(path, text)
    low = [r for r in full.relations if r.evidence.confidence == "low"]
    assert low  # the calls are there, unresolved
    cut = extractor.extract(path, text, min_confidence="medium")  # type: ignore[call-arg]
    assert cut.dropped == len(low)
    assert all(r.evidence.confidence != "low" for r in cut.relations)


def test_every_builtin_source_extractor_filters() -> None:
    # Markdown makes only `Defines` (high): it has nothing to leave out.
    assert {e.name for e in registered() if not getattr(e, "filters_confidence", False)} \
        == {"markdown"}
