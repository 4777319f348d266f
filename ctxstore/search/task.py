"""A free-text task as ranking reads it: the query cleaner, weighted terms, code names, files.

Everything here is pure and accepts any string: retrieval must never reject text a person
typed (DESIGN §8). The terms are ``search.tokenize``'s significant terms (``tokenize``), the
ones the index's ``file_terms`` (and its ``corpus_cache``) hold, so a task and the files it is
ranked against agree. They follow the development set's baseline so the measured gains come
from the method, not from a different tokenizer: an identifier gives its whole folded form
plus its camelCase and snake_case parts; one-character tokens, pure numbers and stop words
are dropped. No stemming: it was measured to hurt on code (docs/retrieval.md).
"""

from __future__ import annotations

import re

from ctxstore.search.tokenize import STOP_WORDS, fold, tokenize, words

__all__ = ["clean_query", "Query", "parse_query"]


# Commit-message noise: trailers, "Merge pull request #N from owner/branch", (#123),
# URLs, commit hashes, bare issue numbers.
# ``^[ \t]*``, never ``^\s*`` with re.M (from every line start of a run of blank lines it scans
# the rest of the run); a scheme of at most 32 characters (else every start inside a long run of
# letters and dashes scans to its end). Both were quadratic in a pasted prompt.
_TRAILER = re.compile(r"^[ \t]*(signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|"
                      r"reported-by|suggested-by|helped-by|cc|change-id|closes|fixes|refs?|"
                      r"resolves|see)\b.*$", re.IGNORECASE | re.MULTILINE)
_MERGE = re.compile(r"^[ \t]*merge (pull request|branch)\b.*$", re.IGNORECASE | re.MULTILINE)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]{0,31}://\S+", re.IGNORECASE)
_NOISE = re.compile(r"\(#\d+\)|#\d+\b|\b[0-9a-f]{12,40}\b")
# A file named in the text (``websockets.py``, ``src/lib/glob.rs``): its path, the extension
# one of ``_FILE_EXTENSIONS`` (so ``e.g.`` or ``v1.2`` is no file). A pattern text, compiled
# on first use.
_MENTION = r"(?<![\w./-])((?:[\w.-]+/)*[\w-][\w.-]*)\.([A-Za-z0-9]{1,5})(?![\w/])"
_FILE_EXTENSIONS = frozenset("""py pyi rs js jsx mjs cjs ts tsx go java kt rb php cs c h cc cpp
hpp swift scala lua sh sql md rst txt toml json yaml yml cfg ini html css scss vue""".split())
_MAX_MENTIONS = 8
# Code-like spans: backticked text, dotted or ::-paths, calls, snake_case, CamelCase.
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_CODE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*")


def clean_query(text: str) -> tuple[str, str]:
    """Strip commit-message noise; split the result into subject and body.

    Removes "Merge pull request/branch" lines, trailers (Signed-off-by, Closes, ...), URLs,
    ``(#123)`` and ``#123`` references and commit hashes. The subject is the first line left.

    Args:
        text: Any text.

    Returns:
        ``(subject, body)``; either may be empty.
    """
    for pattern in (_MERGE, _TRAILER, _URL, _NOISE):
        text = pattern.sub(" ", text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "", ""
    return lines[0], "\n".join(lines[1:])


class Query:
    """A cleaned query: weighted terms, and the code-like names it mentions.

    Attributes:
        weights: Token -> weight (subject tokens count more than body tokens).
        names: Lower-cased code-like names (``Client``, ``get_host``, ``a.b`` gives
            ``a.b`` and ``b``) that a definition may match.
        raw_terms: The distinct tokens, in order, for explanations.
        spelled: The code-like names as written (``Client``), for an exact-name lookup.
        files: Files the text names (``websockets.py``, ``src/glob.rs``), as written: a
            repository path ending with one of them is the file meant.
    """

    __slots__ = ("weights", "names", "raw_terms", "spelled", "files")

    def __init__(self, weights: dict[str, float], spelled: frozenset[str] = frozenset(),
                 files: frozenset[str] = frozenset()) -> None:
        self.weights = weights
        self.spelled = spelled
        self.files = files
        self.names = frozenset(n.lower().strip("_") or n.lower() for n in spelled)
        self.raw_terms = tuple(weights)


def _code_names(text: str) -> set[str]:
    """Names in ``text`` that look like code (not plain English words)."""
    names: set[str] = set()
    spans = _BACKTICK.findall(text)
    for span in spans:
        for word in _CODE_WORD.findall(span):
            names.update(_name_forms(word))
    for word in _CODE_WORD.findall(_BACKTICK.sub(" ", text)):
        bare = word.replace("::", ".").split(".")[-1]
        looks_code = ("." in word or "::" in word or "_" in bare.strip("_")
                      or bare.startswith("_") or re.search(r"[a-z][A-Z]|[A-Z][a-z]+[A-Z]", bare))
        if looks_code:
            names.update(_name_forms(word))
    return {n for n in names if len(n) > 2 and n.lower() not in STOP_WORDS}


def _name_forms(word: str) -> list[str]:
    """The bare name of ``a.b.C`` or ``a::b::C`` (``C``) and its owner (``b``), as written.

    ``Store.__init__`` names a method every class has: its owner ``Store`` is the name that
    points at one file.
    """
    parts = [p for p in word.replace("::", ".").split(".") if p]
    return parts[-2:]


def _pairs(text: str) -> list[str]:
    """Adjacent word pairs as the identifiers they could be.

    ``request log`` gives ``request_log``, ``log_request``, ``requestlog``, ``logrequest``.
    """
    out: list[str] = []
    for line in text.splitlines():
        # (a word with ``_`` is never paired: left unfolded, it keeps its ``_``)
        found = [w.lower() if w.isascii() or "_" in w else fold(w) for w in words(line)
                 if not w.isdigit()]
        for a, b in zip(found, found[1:], strict=False):
            if len(a) > 1 and len(b) > 1 and "_" not in a + b:
                out.extend((f"{a}_{b}", f"{b}_{a}", f"{a}{b}", f"{b}{a}"))
    return out


def parse_query(text: str, *, subject_weight: float = 1.0, pair_weight: float = 2.0) -> Query:
    """Clean a free-text task or commit message into weighted terms and code names.

    Args:
        text: Any text (never rejected).
        subject_weight: Weight of the subject line's tokens; body tokens weigh 1.
        pair_weight: Weight of adjacent word pairs joined as identifiers.

    Returns:
        The query; empty weights when nothing searchable is left.
    """
    subject, body = clean_query(text)
    files: set[str] = set()
    subject, body = _file_mentions(subject, files), _file_mentions(body, files)
    weights: dict[str, float] = {}
    for token in tokenize(body):
        weights[token] = weights.get(token, 0.0) + 1.0
    for token in tokenize(subject):
        weights[token] = max(weights.get(token, 0.0), 0.0) + subject_weight
    if pair_weight:
        for token in _pairs(f"{subject}\n{body}"):
            weights.setdefault(token, pair_weight)

    # Sub-linear weight for terms repeated across a long body.
    weights = {t: (w if w <= subject_weight else subject_weight + (w - subject_weight) ** 0.5)
               for t, w in weights.items()}
    return Query(weights, frozenset(_code_names(f"{subject}\n{body}")), frozenset(files))


def _file_mentions(text: str, into: set[str]) -> str:
    """``text`` with each file name's extension left out (``websockets.py`` -> ``websockets``).

    The names go to ``into`` (at most ``_MAX_MENTIONS``). The extension is no word of the task:
    ``py`` would match ``py.typed``, and ``websockets.py`` would look like a dotted code name.
    """
    def strip(m: re.Match[str]) -> str:
        ext = m.group(2).lower()
        if ext not in _FILE_EXTENSIONS or (len(ext) == 1 and "." in m.group(1)):
            return m.group()  # ``a.b.c`` is a dotted name, not a C file
        if len(into) < _MAX_MENTIONS:
            into.add(m.group().removeprefix("./"))
        return m.group(1)

    return re.sub(_MENTION, strip, text) if "." in text else text
