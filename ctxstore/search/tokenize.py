"""The one tokeniser: the terms of any text, for every index and every query.

A text's *words* are runs of letters, digits and ``_``, letters and digits being the characters
FTS5's ``unicode61`` tokenizer reads as such (SQLite's own Unicode tables, ``unicode61``).
Each word gives its *terms*, in order: the whole word folded as ``unicode61`` folds it (lower
case, Latin diacritics removed: ``Café`` gives ``cafe``; ``ß``, kana and Hangul stay as they
are), then, for an identifier of several parts, each camelCase or snake_case part
(``get_pager_file`` gives ``get_pager_file get pager file``, ``HTTPServer`` gives
``httpserver http server``, ``__init__`` gives ``init``).

Every index holds these terms and every query is made of them, so the same text gives the
same terms everywhere:

- FTS5 tables (``nodes_fts``, ``chunks_fts``, transcript memory's ``turns_fts``) store a
  document as its terms joined by spaces (``index_text``: the words' whole terms in order,
  then the identifiers' parts), under FTS5's ``ascii`` tokenizer with ``_`` a token
  character: it keeps each term as it is. Tantivy indexes the same text with its
  whitespace tokenizer. A phrase typed in a query is its words' whole terms (``phrase``).
- The pack's postings (``file_terms``) hold the *significant* terms (``tokenize``): two
  characters or more, not a number, not a stop word.
- Queries: free-text search (``search.search``), the query language's words and phrases
  (``query.executor``), a pack's task (``search.task``) and transcript-memory search take
  their terms from here. Which of them a query keeps is its own policy: ranked search drops
  stop words (unless nothing else is left), file ranking keeps the significant terms.

The code index and knowledge search do not stem: stemming was measured to hurt on code
(docs/retrieval.md). Prose is stemmed: transcript memory (its ``turns_fts`` and its queries) uses
``PROSE``, the same terms with each plain word reduced to its Snowball English stem
(``retries``, ``retried`` and ``retry`` all give ``retri``), so a question finds the turn that
says it with another inflection. An ``Analyzer`` takes the stemmer (``stem``), applied to every
term of one plain word (a whole identifier with ``_`` is kept as written); whether a term is
significant is judged before it is stemmed (``does`` stays a stop word though its stem is
``doe``). An index built with other terms is rebuilt (its schema version says so).

Also which paths are tests, benchmarks or examples (the ranking's test prior, which
``index.retrieval``'s ``corpus_cache`` keeps). Pure Python: the hook path tokenises every
prompt.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import PurePosixPath

from ctxstore.search.unicode61 import fold, separator_ranges

__all__ = ["STOP_WORDS", "PROSE_STOP_WORDS", "Analyzer", "ANALYZER", "PROSE", "PROSE_QUERY",
           "english_stem", "words",
           "terms", "index_text", "phrase", "is_significant", "tokenize", "term_set", "held_terms",
           "path_tokens", "term_counts", "is_test_path", "cached_is_test_path", "fold"]

STOP_WORDS = frozenset("""a an and are as at be but by for from has have if in into is it its
no not of on or so such that the their then there these this to was were will
with we you i me my our your he she they them do does did can could should would
been being than too very just also only any all some each which who what when
where why how""".split())
"""Words too common to rank by: not significant (``is_significant``). The file ranking's list,
chosen with it on the development set (a longer list, ``PROSE_STOP_WORDS``, cost werkzeug and
ripgrep 0.01-0.02 MRR: ``get`` and ``set`` name code)."""

PROSE_STOP_WORDS = STOP_WORDS | frozenset("""about above after again am because before below
between both doing done down during few further get had having her here hers him his itself
let more most nor now off once other ours out over own same through those under until up
while whom yours""".split())
"""``STOP_WORDS`` and the other words of a question or a sentence that say nothing about what
it asks for: ranked search of typed text (``search.search``) drops them."""

_WORD = re.compile(r"[A-Za-z0-9_]+")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SEPARATORS: list[re.Pattern[str]] = []  # compiled on the first text that is not ASCII
_STARTS: list[int] = []  # the non-ASCII separator ranges, read on first use
_ENDS: list[int] = []
_TEST_DIRS = frozenset({"tests", "test", "testing", "benches", "bench", "benchmarks", "examples",
                        "example", "__tests__"})


def _separators() -> re.Pattern[str]:
    """Runs of separators: ASCII but letters, digits and ``_``; ``unicode61``'s others."""
    if not _SEPARATORS:
        spans = "".join(f"{re.escape(chr(first))}-{re.escape(chr(last))}"
                        for first, last in separator_ranges())
        _SEPARATORS.append(re.compile(f"[\\x00-/:-@\\[-^`{{-\\x7f{spans}]+"))
    return _SEPARATORS[0]


def words(text: str) -> list[str]:
    """The words of ``text`` as written (case kept): runs of letters, digits and ``_``.

    Args:
        text: Any text.

    Returns:
        The words in order.
    """
    if text.isascii():
        return _WORD.findall(text)
    return [w for w in _separators().split(text) if w]


def _camel_pieces(piece: str) -> list[str]:
    """The camelCase parts of one ``_``-free piece of a word (digit runs apart)."""
    if piece.isascii():
        return _CAMEL.findall(piece)
    # Each character by its class, then the ASCII rule over the classes: upper, digit, and
    # everything else (lower case, letters without case, combining marks) as lower case.
    shape = "".join("A" if c.isupper() else "0" if c.isdecimal() else "a" for c in piece)
    return [piece[m.start():m.end()] for m in _CAMEL.finditer(shape)]


def _fold_word(word: str) -> str:
    """The whole word folded, ``_`` kept inside and stripped at the ends."""
    if word.isascii():
        return word.lower().strip("_")
    return "_".join(fold(piece) for piece in word.split("_")).strip("_")


def is_significant(term: str) -> bool:
    """Whether a term counts for ranking: two characters or more, not a number, not a stop word.

    Args:
        term: A term (``terms`` output).

    Returns:
        True for a significant term.
    """
    return len(term) > 1 and not term.isdigit() and term not in STOP_WORDS


class Analyzer:
    """Text to terms, the same way for every index and every query.

    Args:
        stem: None (the default: no stemming), or a function from a folded word to its stem,
            applied to every term of a plain word and to every part of an identifier (a whole
            identifier with ``_`` is kept as written). Terms are cached per distinct word.
        stop_words: The words that are not significant (``tokenize`` leaves them out; the
            full text keeps every term): ``STOP_WORDS`` unless given.
    """

    def __init__(self, stem: Callable[[str], str] | None = None,
                 stop_words: frozenset[str] = STOP_WORDS) -> None:
        self.stem = stem
        self.stop_words = stop_words
        self.split = lru_cache(maxsize=1 << 16)(self._split)

    def _significant(self, term: str) -> bool:
        return len(term) > 1 and not term.isdigit() and term not in self.stop_words

    def _split(self, word: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Every term of one word, and its significant terms, in order (see the module)."""
        parts: list[str] = []
        for piece in word.split("_"):
            if piece:
                parts.extend(_camel_pieces(piece))
        whole = _fold_word(word)
        if len(parts) <= 1:
            found: tuple[str, ...] = (whole,)
        else:
            folded = (p.lower() if p.isascii() else fold(p) for p in parts)
            found = (whole, *dict.fromkeys(p for p in folded if p != whole))
        found = tuple(t for t in found if t)
        stem = self.stem
        if stem is None:
            return found, tuple(t for t in found if self._significant(t))
        # Significance is the word's, judged before stemming (``does`` -> ``doe``).
        stems = tuple(t if "_" in t else stem(t) or t for t in found)
        return (tuple(dict.fromkeys(stems)),
                tuple(dict.fromkeys(s for t, s in zip(found, stems, strict=True)
                                    if self._significant(t))))

    def terms(self, text: str) -> list[str]:
        """Every term of ``text``, in order: what a full-text index stores of it.

        Args:
            text: Any text.

        Returns:
            The terms (``Get_Pager`` gives ``get_pager, get, pager``).
        """
        split = self.split
        return [t for word in words(text) for t in split(word)[0]]

    def index_text(self, text: str) -> str:
        """``text`` as a full-text engine indexes it: its terms, space-separated.

        The words' whole terms come first, in order, then the parts of each identifier of
        several parts: a phrase of words (``phrase``) finds its words adjacent as written,
        and an identifier's parts are adjacent to each other (``get_pager_file`` holds the
        phrase ``pager file``).

        Args:
            text: Any text.

        Returns:
            The terms (empty for a text without a word).
        """
        split = self.split
        found = [split(word)[0] for word in words(text)]
        wholes = [t[0] for t in found if t]
        parts = [p for t in found if len(t) > 1 for p in t[1:]]
        return " ".join(wholes + parts)

    def phrase(self, text: str) -> str:
        """The whole terms of ``text``'s words, space-separated: a phrase as an engine takes it.

        A word typed in a query (``get_pager``, ``STRAßE``) is its whole term, and a quoted
        ``"read config"`` the terms of its words in order: what ``index_text`` holds
        adjacent.

        Args:
            text: A word or words as typed.

        Returns:
            The phrase (empty when ``text`` has no word).
        """
        split = self.split
        return " ".join(found[0] for found in (split(word)[0] for word in words(text)) if found)

    def tokenize(self, text: str) -> list[str]:
        """The significant terms of ``text``, in order (``is_significant``): ranking's tokens.

        Args:
            text: Any text: code, prose, a commit message.

        Returns:
            The terms (``get_pager_file`` gives ``get_pager_file, get, pager, file``).
        """
        split = self.split
        return [t for word in words(text) for t in split(word)[1]]

    def term_counts(self, text: str) -> Counter[str]:
        """How often each significant term of ``text`` occurs (counted per distinct word).

        Args:
            text: Any text.

        Returns:
            Term -> occurrences.
        """
        out: Counter[str] = Counter()
        split = self.split
        for word, n in Counter(words(text)).items():
            for term in split(word)[1]:
                out[term] += n
        return out

    def held_terms(self, text: str, terms: Iterable[str]) -> list[str]:
        """The ``terms`` that ``terms(text)`` holds, in their order, duplicates kept.

        Only the words in which a term occurs as a substring are split: a chunk of code costs
        what its few candidate words cost, not a pass over every word. (The few words with
        non-ASCII characters are split whole.)

        Args:
            text: Any text.
            terms: Terms (``terms`` output).

        Returns:
            The terms the text holds.
        """
        split = self.split
        if self.stem is not None:  # a stem need not be a substring of its word
            held = {t for word in set(words(text)) for t in split(word)[0]}
            return [t for t in terms if t in held]
        plain = text.isascii()
        wide: set[str] = set() if plain else {
            t for word in set(words(text)) if not word.isascii() for t in split(word)[0]}
        lowered = text.translate(_ASCII_LOWER)  # ASCII only: positions stay those of ``text``
        out: list[str] = []
        for term in terms:
            if term in wide:
                out.append(term)
                continue
            if not term or not _WORD_CHARS.issuperset(term):
                continue  # a character no ASCII word has, and no other word holds it
            at = lowered.find(term)
            while at >= 0:
                start = at
                while start and text[start - 1] in _WORD_CHARS:
                    start -= 1
                word = _WORD.match(text, start)
                assert word is not None  # text[at] is a word character
                end = word.end()
                if plain or not (start and _wide_letter(text[start - 1])
                                 or end < len(text) and _wide_letter(text[end])):
                    if term in split(word.group())[0]:
                        out.append(term)
                        break
                # else: part of a word with non-ASCII letters, whose terms are in ``wide``
                at = lowered.find(term, end)  # the rest of this word splits the same
        return out


def _wide_letter(char: str) -> bool:
    """Whether a character is a non-ASCII letter or digit (not a separator of ``unicode61``)."""
    if char.isascii():
        return False
    if not _STARTS:
        _STARTS.extend(first for first, _ in separator_ranges())
        _ENDS.extend(last for _, last in separator_ranges())
    at = bisect_right(_STARTS, ord(char)) - 1
    return at < 0 or ord(char) > _ENDS[at]


ANALYZER = Analyzer()
"""The analyzer of the code index, knowledge search and packs (no stemming)."""

_STEMMERS: list[Callable[[str], str]] = []  # PyStemmer's English stemmer, made on first use


def english_stem(word: str) -> str:
    """The Snowball English stem of a folded word (``retries`` -> ``retri``).

    PyStemmer (the Snowball project's C stemmers) is imported on the first word, not with
    this module: the hooks tokenise without it until memory is searched.

    Args:
        word: A lower-case word.

    Returns:
        Its stem.
    """
    if not _STEMMERS:
        import Stemmer

        _STEMMERS.append(Stemmer.Stemmer("english", 0).stemWord)
    return _STEMMERS[0](word)


PROSE = Analyzer(stem=english_stem)
"""The analyzer of transcript memory: ``ANALYZER``'s terms, each plain word stemmed."""

PROSE_QUERY = Analyzer(stem=english_stem, stop_words=PROSE_STOP_WORDS)
"""``PROSE`` for a question asked of memory: the same terms, the words of a question that say
nothing of its subject (``PROSE_STOP_WORDS``: "about", "after", "more", ...) not significant."""


def terms(text: str) -> list[str]:
    """Every term of ``text`` in order (``ANALYZER.terms``): what a full-text index stores.

    Args:
        text: Any text.

    Returns:
        The terms.
    """
    return ANALYZER.terms(text)


def index_text(text: str) -> str:
    """``text`` as a full-text engine indexes it: its terms joined by single spaces.

    Args:
        text: Any text.

    Returns:
        The terms, space-separated (empty for a text without a word).
    """
    return ANALYZER.index_text(text)


def phrase(text: str) -> str:
    """The whole terms of ``text``'s words as one phrase (``ANALYZER.phrase``).

    Args:
        text: A word or words as typed.

    Returns:
        The phrase (empty when ``text`` has no word).
    """
    return ANALYZER.phrase(text)


def tokenize(text: str) -> list[str]:
    """The significant terms of ``text`` in order (``ANALYZER.tokenize``): ranking's tokens.

    Args:
        text: Any text: code, prose, a commit message.

    Returns:
        The tokens (``get_pager_file`` gives ``get_pager_file, get, pager, file``).
    """
    return ANALYZER.tokenize(text)


def term_set(text: str) -> set[str]:
    """The distinct significant terms of ``text`` (computed per distinct word).

    Args:
        text: Any text.

    Returns:
        The terms.
    """
    split = ANALYZER.split
    return set().union(*(split(w)[1] for w in set(words(text))))


def held_terms(text: str, terms: Iterable[str]) -> list[str]:
    """The ``terms`` that ``text`` holds, in their order (``ANALYZER.held_terms``).

    Args:
        text: Any text.
        terms: Terms.

    Returns:
        The terms the text holds, duplicates kept.
    """
    return ANALYZER.held_terms(text, terms)


def term_counts(text: str) -> Counter[str]:
    """How often each significant term of ``text`` occurs (``ANALYZER.term_counts``).

    Args:
        text: Any text.

    Returns:
        Term -> occurrences.
    """
    return ANALYZER.term_counts(text)


def path_tokens(path: str) -> list[str]:
    """Tokens of a path's directories and file stem (the extension left out).

    Plural stems also give their singular (``exceptions`` gives ``exception``).

    Args:
        path: A repository-relative POSIX path.

    Returns:
        The tokens, e.g. ``crates/ignore/src/default_types.rs`` gives
        ``crates, ignore, src, default_types, default, types, type``.
    """
    pure = PurePosixPath(path)
    tokens = tokenize(" ".join([*pure.parts[:-1], pure.stem]))
    return tokens + [t[:-1] for t in tokens if len(t) > 3 and t.endswith("s") and not t.endswith("ss")]


def is_test_path(path: str) -> bool:
    """Whether a path is a test, benchmark or example file by common conventions.

    Args:
        path: A repository-relative POSIX path.

    Returns:
        True under ``tests/``, ``test/``, ``testing/``, ``benches/``, ``examples/``, or
        named ``test_*``, ``*_test.*``, ``*.test.*``, ``*.spec.*``, ``conftest.py``,
        ``tests.rs``.
    """
    folder, _, name = path.rpartition("/")
    return _test_folder(folder) or _test_name(name)


def cached_is_test_path() -> Callable[[str], bool]:
    """``is_test_path`` that judges each folder once (ranking asks for thousands of files)."""
    folders: dict[str, bool] = {}

    def check(path: str) -> bool:
        folder, _, name = path.rpartition("/")
        under = folders.get(folder)
        if under is None:
            under = folders[folder] = _test_folder(folder)
        return under or _test_name(name)
    return check


def _test_folder(folder: str) -> bool:
    return bool(folder) and any(part in _TEST_DIRS for part in folder.lower().split("/"))


def _test_name(name: str) -> bool:
    name = name.lower()
    stem = name.split(".", 1)[0]
    return (stem.startswith("test_") or stem.endswith("_test") or stem == "tests"
            or ".test." in name or ".spec." in name or name == "conftest.py")
