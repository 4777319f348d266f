"""Ideas, entities and relations from transcript text, by rules (spec 004 §3.2–3.4).

No model and no I/O: everything here is a pure function of its arguments, accepts any
string and never raises, so the Stop hook can call it on every turn. The text is split into
sentences (code fences are skipped); a sentence becomes an idea when it carries an intent
cue ("we decided", "the fix is", a question mark, "TODO", ...), with a confidence taken
from the cue's strength and lowered by hedges ("maybe", "I think"). Entities are paths with
a known extension (file), ``Module.symbol`` / ``a::b`` / backticked identifiers (symbol), a
curated list of technologies, capitalised names after a speaker cue (person) and repository
names ``owner/name`` (project). Relations between a new idea and earlier ones follow shared
entities and topic terms plus cue words ("instead", "also", ...).

Every ``start``/``end`` indexes into the text given: ``text[start:end]`` is the idea or the
entity as found.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

# The tokens of ``search.task``, from their home: the Stop hook then skips the query cleaner.
from ctxstore.search.tokenize import STOP_WORDS, tokenize

__all__ = ["Idea", "Entity", "INTENTS", "ENTITY_KINDS", "RELATIONS", "extract_ideas",
           "extract_entities", "relate", "is_low_value"]

INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")
ENTITY_KINDS = ("file", "symbol", "technology", "project", "person")
RELATIONS = ("supersedes", "builds_on", "contradicts", "answers", "relates_to")

MAX_IDEA_CHARS = 600
"""An idea longer than this is cut (its ``end`` moves back with it)."""


class Idea(NamedTuple):
    """One sentence that carries an intent.

    Attributes:
        intent: One of ``INTENTS``.
        text: The sentence, ``source[start:end]``.
        confidence: 0..1, from the cue's strength (firm vs tentative wording).
        start: Offset of the sentence in the source text.
        end: Offset just past it.
    """

    intent: str
    text: str
    confidence: float
    start: int
    end: int


class Entity(NamedTuple):
    """A named thing mentioned in the text.

    Attributes:
        kind: One of ``ENTITY_KINDS``.
        name: The canonical name (a technology's usual spelling, a person without ``@``).
        start: Offset of the mention in the source text.
        end: Offset just past it.
    """

    kind: str
    name: str
    start: int
    end: int


# --- scanning ------------------------------------------------------------------------------
#
# Speed (the hook runs this on every turn; goal >= 20 MB/s): Python's regex engine tries a
# big alternation at every position, so nothing here does that. A text's distinct words come
# from one C-level split; each cue and technology is grouped under its first word, and a
# group's regex (which starts with that literal word, so the engine jumps between its
# occurrences) runs only when the word occurs. Word boundaries are checked by hand.

_WORD_EDGE = ".,;:!?()[]{}<>\"'`*_~|"


def _words(lowered: str) -> set[str]:
    """The distinct whitespace-separated words of ``lowered``, outer punctuation stripped."""
    return {w.strip(_WORD_EDGE) for w in set(lowered.split())}


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _bounded(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` starts and ends on word boundaries."""
    if start > 0 and _is_word_char(text[start - 1]) and _is_word_char(text[start]):
        return False
    return not (end < len(text) and _is_word_char(text[end]) and _is_word_char(text[end - 1]))


def _lowered(text: str) -> str:
    """``text.lower()`` when it keeps every offset (it can grow on a few scripts)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class _Grouped:
    """Phrases grouped by first word; ``scan`` yields (phrase index, start, end).

    Each phrase is ``(first, rest)``: a literal first word (lowercase) and a regex for the
    rest. A group's regex starts with its literal, which the engine searches for quickly.
    """

    def __init__(self, phrases: Sequence[tuple[str, str]]) -> None:
        # Only the groups are made here; a group's regex is built and compiled on its first use,
        # so the import stays cheap for the hook (compiling every group took ~25 ms).
        self.phrases = phrases
        self.groups: dict[str, list[int]] = {}
        for i, (first, _) in enumerate(phrases):
            self.groups.setdefault(first, []).append(i)
        self.compiled: dict[str, re.Pattern[str]] = {}
        self.firsts = frozenset(self.groups)

    def _group(self, first: str) -> re.Pattern[str]:
        """The compiled regex of the group that starts with ``first`` (compiled once)."""
        pattern = self.compiled.get(first)
        if pattern is None:
            rests = sorted(self.groups[first], key=lambda i: -len(self.phrases[i][1]))
            pattern = self.compiled[first] = re.compile(
                re.escape(first) + "(?:" + "|".join(f"(?P<p{i}>{self.phrases[i][1]})" for i in rests) + ")")
        return pattern

    def scan(self, text: str, words: set[str] | None = None) -> list[tuple[int, int, int]]:
        """Matches in ``text``; ``words`` (its distinct words) gates whole-word groups."""
        present = (self.firsts.intersection(words) if words is not None
                   else [first for first in self.firsts if first in text])
        hits: list[tuple[int, int, int]] = []
        for first in present:
            for m in self._group(first).finditer(text):
                if _bounded(text, m.start(), m.end()):
                    hits.append((int((m.lastgroup or "p0")[1:]), m.start(), m.end()))
        return hits


def _split_phrase(phrase: str) -> tuple[str, str]:
    """A cue regex split into its literal first word and the rest."""
    m = re.match(r"[a-z]+", phrase)
    first = m.group(0) if m else phrase
    if phrase[len(first):len(first) + 1] in ("?", "*", "{"):
        first = first[:-1]  # "hangs?": the quantifier belongs to the last letter
    return first, phrase[len(first):]


def _split_name(name: str) -> tuple[str, str]:
    """A technology's name split into its first word and the (escaped) rest."""
    low = name.lower()
    first = low.split(" ", 1)[0]
    return first, re.escape(low[len(first):])


# --- sentences ---------------------------------------------------------------------------

# Pattern texts (flags inline) that most turns never need are compiled on first use, through
# ``re``'s cache, instead of at import: ``_FENCE`` here, ``_QUESTION_START``, ``_NAME_RUN``,
# ``_BACKTICK``, ``_COLONS``, ``_CALL``, ``_HANDLE`` and ``_PROJECT_CUE`` below, ``_ACK``, ``_NOISE``
# and ``_FILLER`` at the end (together ~1.5 ms of every Stop hook).
_FENCE = r"(?s)```.*?(?:```|\Z)"
_LEAD = re.compile(r"[\s\-*+>#]*")
_HAS_LETTER = re.compile(r"[A-Za-z]")
_WINDOW = 1000


def _fences(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(_FENCE, text)] if "```" in text else []


def _sentence_at(text: str, pos: int, fences: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The span of the sentence around ``pos`` (stripped), or None inside a code fence.

    A sentence ends at a line break or at ``.``/``!``/``?`` followed by whitespace; a
    sentence longer than the window is cut at the window.
    """
    lo, hi = 0, len(text)
    i = bisect.bisect_right(fences, (pos, len(text) + 1)) - 1
    if i >= 0:
        if pos < fences[i][1]:
            return None
        lo = fences[i][1]
    if i + 1 < len(fences):
        hi = fences[i + 1][0]
    lo = max(lo, pos - _WINDOW)
    hi = min(hi, pos + _WINDOW)
    start = max(text.rfind("\n", lo, pos) + 1, lo,
                *(text.rfind(p, lo, pos) + 1 for p in (". ", "! ", "? ", ".\t")))
    end = min([hi, *(i for i in (text.find("\n", pos, hi),) if i >= 0),
               *(i + 1 for i in (text.find(p, pos, hi) for p in (". ", "! ", "? ", ".\t")) if i >= 0)])
    start = _LEAD.match(text, start, end).end()  # type: ignore[union-attr]
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end - start >= 3 else None


# --- intent cues ---------------------------------------------------------------------------

# (intent, strength, phrases). Strength is the confidence of a firm, unhedged use of the cue.
# Phrases are regexes over lowercased text that start with a literal word.
_CUES: list[tuple[str, float, tuple[str, ...]]] = [
    ("decision", 0.9, ("we decided", "we've decided", "we have decided", "decision:", "decided to",
                       "we're going (?:with|to use)", "we are going (?:with|to use)", "let's go with",
                       "lets go with", "we'll (?:go with|use|stick with|switch to|keep)",
                       "we will (?:go with|use|stick with|switch to|keep)", "agreed (?:to|on)",
                       "switch(?:ed|ing)? to", "we're switching", "settled on",
                       # "we switched the session cache from SQLite to Redis"
                       r"switched (?:[\w.-]+ ){1,5}?from [\w.-]+ to ",
                       r"migrated (?:[\w.-]+ ){1,5}?from [\w.-]+ to ",
                       r"moved (?:[\w.-]+ ){1,5}?from [\w.-]+ to ",
                       "final (?:choice|answer) is")),
    ("decision", 0.7, ("let's (?:use|keep|switch|stick|drop|move|make|do|not)",
                       "lets (?:use|keep|switch|stick|drop|move|make)",
                       "i'll (?:use|go with|switch to|keep)", "i will (?:use|go with|switch to|keep)",
                       "we should (?:use|go with|keep|switch)", "going forward", "from now on",
                       "instead of", "no longer", "chose", "choose", "opt(?:ed)? for", "picked",
                       "prefer")),
    ("conclusion", 0.85, ("turns out", "turned out", "so the answer is",
                          "the (?:key |main )?(?:insight|takeaway|lesson|conclusion) is",
                          "in conclusion", "confirmed", "the root cause (?:is|was)", "that's why",
                          "that is why", "this means", "which means", "it appears that",
                          "we learned")),
    ("conclusion", 0.6, ("so (?:the|it|we|this)", "therefore", "thus", "clearly", "in short",
                         "bottom line", "works now", "measured")),
    ("problem", 0.85, ("the (?:problem|issue|bug) (?:is|was)", "traceback", "exception",
                       "fail(?:s|ed|ing|ure)?", "broken", "crash(?:es|ed)?", "error(?:s)?",
                       "doesn't work", "isn't working", "regression", "flaky", "hangs?", "hung",
                       "times? out", "timed out", "leak(?:s|ing)?", "wrong", "slow", "deadlock",
                       "corrupt(?:ed|s)?")),
    ("solution", 0.85, ("the fix (?:is|was)", "fixed (?:by|it|this|the)", "fix by", "solved (?:by|it)",
                        "resolved (?:by|it)", "the solution (?:is|was)", "workaround",
                        "to fix (?:this|it)", "patched", "the trick is")),
    ("solution", 0.65, ("fixed", "fixes", "resolved", "added a", "now (?:passes|works)",
                        "by (?:adding|removing|setting|using|changing|switching)")),
    ("todo", 0.9, ("todo", "fixme", "to-do:", "need to", "needs to", "we should later", "remember to",
                   "don't forget", "follow[- ]up", "next step", "later we",
                   "we'll (?:need|have) to", "we will (?:need|have) to", "still (?:need|have) to")),
    ("todo", 0.6, ("should (?:add|write|fix|update|remove|check|look)", "eventually",
                   "at some point")),
    ("context", 0.55, ("for context", "background:", "note that", "fyi", "currently", "we use",
                       "we're using", "we are using", "the project uses", "runs on", "is owned by",
                       "owns", "is responsible for", "by design", "deadline", "constraint",
                       "requirement", "must", "always", "never")),
]
_CUE_OF: list[tuple[str, float]] = []
for _intent, _strength, _phrases in _CUES:
    _CUE_OF.extend((_intent, _strength) for _ in _phrases)
_CUE_SCAN = _Grouped([_split_phrase(p) for _, _, phrases in _CUES for p in phrases])
_QUESTION_START = (r"(?i)(?:how|why|what|which|where|when|who|should|can|could|would|is|are|do|"
                   r"does|did|will)\b")
_HEDGE = re.compile(r"\b(?:maybe|perhaps|might|probably|possibly|not sure|i think|i guess|could|"
                    r"seems?|likely|unclear)\b", re.IGNORECASE)
# On a tie of strength, the more specific intent wins.
_PRIORITY = {"decision": 6, "solution": 5, "todo": 4, "conclusion": 3, "problem": 2, "question": 1,
             "context": 0}


def extract_ideas(text: str, role: str) -> list[Idea]:
    """The sentences of ``text`` that carry an intent, in order.

    Args:
        text: One turn's text (a prompt or an assistant text block).
        role: ``"user"`` or ``"assistant"``; an assistant's question is often rhetorical
            and an assistant's problem report is often a tool echo, so both weigh less.

    Returns:
        The ideas, at most one per sentence; empty for text without cues. Never raises.
    """
    if not isinstance(text, str) or not text:
        return []
    low = _lowered(text)
    fences = _fences(text)
    best: dict[tuple[int, int], tuple[float, int, str]] = {}
    for index, start, _ in _CUE_SCAN.scan(low):
        span = _sentence_at(text, start, fences)
        if span is not None:
            intent, strength = _CUE_OF[index]
            _keep_best(best, span, intent, strength)
    pos = text.find("?")
    while pos >= 0:
        if pos + 1 == len(text) or text[pos + 1].isspace():
            span = _sentence_at(text, pos, fences)
            if span is not None and span[1] == pos + 1:
                strength = 0.9 if re.compile(_QUESTION_START).match(text, span[0]) else 0.7
                _keep_best(best, span, "question", strength if role == "user" else strength - 0.25)
        pos = text.find("?", pos + 1)
    ideas: list[Idea] = []
    for (start, end), (strength, _, intent) in sorted(best.items()):
        if not _HAS_LETTER.search(text, start, end):
            continue
        end = min(end, start + MAX_IDEA_CHARS)
        sentence = text[start:end]
        if role != "user" and intent == "problem":
            strength -= 0.1
        if intent != "question" and _HEDGE.search(sentence):
            strength -= 0.25
        ideas.append(Idea(intent, sentence, round(min(1.0, max(0.05, strength)), 2), start, end))
    return ideas


def _keep_best(best: dict[tuple[int, int], tuple[float, int, str]], span: tuple[int, int],
               intent: str, strength: float) -> None:
    key = (strength, _PRIORITY[intent], intent)
    if span not in best or key > best[span]:
        best[span] = key


# --- entities ----------------------------------------------------------------------------

_EXTENSIONS = frozenset(
    "py pyi rs go js jsx ts tsx mjs cjs java kt kts scala rb php c h cc cpp hpp cxx cs swift m mm "
    "lua pl sh bash zsh fish ps1 sql md rst txt toml yaml yml json jsonl ini cfg conf env lock xml "
    "html htm css scss sass less vue svelte proto graphql tf hcl gradle ex exs erl hs ml clj dart "
    "r jl zig nim ipynb csv log sqlite db".split())
_BARE_FILES = frozenset({"dockerfile", "makefile", "justfile", "procfile", "gemfile", "cargo.lock",
                         ".gitignore", ".env"})
_DOT_WORD = re.compile(r"\.([A-Za-z_]\w*)")
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.@/~-")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_NAME_CHARS = _IDENT_CHARS | {"-"}
_WORD_CHARS = _IDENT_CHARS - {"."}
_NAME_RUN = r"(?a)[\w.-]{0,100}"
_BACKTICK = r"`([A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*)(?:\(\))?`"
_COLONS = r"::[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*"
_CALL = r"\(\)"
_DOMAINS = frozenset({"com", "org", "net", "io", "dev", "ai", "co", "uk", "de", "edu", "gov"})
_TECHNOLOGIES = (
    "Python", "Rust", "Go", "Golang", "JavaScript", "TypeScript", "Java", "Kotlin", "Scala", "Ruby",
    "PHP", "C++", "C#", "Swift", "Haskell", "Elixir", "Erlang", "Lua", "Bash", "Zig",
    "Django", "Flask", "FastAPI", "Starlette", "React", "Vue", "Svelte", "Angular", "Next.js",
    "Node.js", "Node", "Deno", "Bun", "Express", "Rails", "Spring", "Axum", "Tokio", "Actix",
    "SQLite", "PostgreSQL", "Postgres", "MySQL", "MariaDB", "MongoDB", "Redis", "Memcached",
    "Cassandra", "DynamoDB", "Elasticsearch", "OpenSearch", "ClickHouse", "DuckDB", "Kafka",
    "RabbitMQ", "NATS", "Celery", "Docker", "Kubernetes", "Helm", "Terraform", "Ansible", "Nginx",
    "Git", "GitHub", "GitLab", "GitHub Actions", "Jenkins", "CircleCI", "pytest", "Hypothesis",
    "mypy", "ruff", "black", "flake8", "pylint", "tox", "nox", "uv", "pip", "Poetry", "Cargo",
    "npm", "yarn", "pnpm", "webpack", "Vite", "esbuild", "Jest", "Vitest", "Playwright",
    "Selenium", "NumPy", "pandas", "Polars", "PyTorch", "TensorFlow", "scikit-learn", "SQLAlchemy",
    "Alembic", "Pydantic", "click", "Typer", "asyncio", "Trio", "gRPC", "GraphQL", "REST",
    "OpenAPI", "protobuf", "JSON", "YAML", "TOML", "S3", "AWS", "GCP", "Azure", "Lambda",
    "Cloudflare", "Vercel", "Heroku", "Sentry", "Prometheus", "Grafana", "OpenTelemetry",
    "Datadog", "FTS5", "tantivy", "Lucene", "BM25", "networkx", "tree-sitter", "MCP", "OAuth",
    "JWT", "TLS", "WebSocket", "HTTP/2", "Linux", "macOS", "Windows", "WSL", "systemd", "cron",
    "LRU", "Claude Code", "Claude", "OpenAI", "ESP32", "LoRa",
)
_TECH_CANON = {t.lower(): t for t in _TECHNOLOGIES}
# Short or common-word names only count when written with their usual capitals.
_TECH_CASED = frozenset({"Go", "Node", "Bun", "Express", "Spring", "Rails", "Git", "Swift", "Lua",
                         "black", "click", "uv", "pip", "Cargo", "REST", "Lambda", "Helm",
                         "Vue", "React", "Claude", "Trio", "NATS", "cron", "Java"})
_TECH_SCAN = _Grouped([_split_name(t) for t in _TECHNOLOGIES])
_CAPITALISED = re.compile(r"[A-Z][a-z]{2,}")
_PERSON_BEFORE = re.compile(
    r"(?:\b(?:ask|asked|asking|tell|told|ping|pinged|cc|per|thanks|thank you|according to|"
    r"talked to|talk to|spoke to|spoke with|check with|checked with|assigned to|owned by|"
    r"reviewed by|from|with|and) )$", re.IGNORECASE)
_PERSON_AFTER = re.compile(
    r" (?:said|says|suggested|suggests|mentioned|thinks|thought|wants|wanted|asked|reported|"
    r"proposed|noted|pointed out|agreed|prefers|preferred|recommended|owns|wrote|reviewed|"
    r"approved|found|confirmed|is out|will|from the)\b")
_HANDLE = r"@([A-Za-z][\w-]{1,38})\b(?!\.\w)"
_NOT_PERSON = frozenset(
    "The This That These Those There Then When What Which Where Why How Who And But Also Yes "
    "Now Let Please Okay Thanks Sure Maybe Perhaps Note Next First Second Finally Today "
    "Tomorrow Yesterday Monday Tuesday Wednesday Thursday Friday Saturday Sunday January "
    "February March April May June July August September October November December It Its "
    "We Our You Your They Their She He His Her Here Done Good Great Fixed Added Updated "
    "Error Warning None True False Some All Any Each Every Both One Two Three After Before "
    "Since Until With From Ask Tell User Assistant Claude Step Run Use See Check Make".split())
_PROJECT_CUE = r"(?i)\b(?:repo|repository|project|fork|upstream|package|library)\s*:?\s*$"
_HOSTS = frozenset({"github.com", "gitlab.com", "codeberg.org"})
_COMMON_DIRS = frozenset("src lib libs test tests docs doc bin usr etc home tmp var opt bench "
                         "benches examples scripts app apps pkg cmd internal build dist target "
                         "node_modules vendor include assets static public config data and or "
                         "i read yes on in input client before true".split())


def extract_entities(text: str) -> list[Entity]:
    """Files, symbols, technologies, people and projects mentioned in ``text``.

    Args:
        text: Any text.

    Returns:
        Entities in order of position; a span belongs to at most one entity (files first,
        then projects, symbols, technologies, people). Never raises.
    """
    if not isinstance(text, str) or not text:
        return []
    found: list[Entity] = []
    starts: list[int] = []  # the taken spans, sorted and disjoint
    ends: list[int] = []

    def add(kind: str, name: str, start: int, end: int) -> None:
        i = bisect.bisect_right(starts, start)
        if end <= start or (i and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            return
        starts.insert(i, start)
        ends.insert(i, end)
        found.append(Entity(kind, name, start, end))

    low = _lowered(text)
    words = _words(low)
    _files(text, words, add)
    if "/" in text:
        _projects(text, add)
    _symbols(text, add)
    for index, start, end in _TECH_SCAN.scan(low, words):
        canon = _TECHNOLOGIES[index]
        if (canon not in _TECH_CASED or text[start:end] == canon) and _tech_edges(text, start, end):
            add("technology", canon, start, end)
    for m in _CAPITALISED.finditer(text):
        _person(text, m, add)
    if "@" in text:
        for m in re.finditer(_HANDLE, text):
            if m.start() == 0 or not _is_word_char(text[m.start() - 1]):
                add("person", m.group(1), m.start(1), m.end(1))
    found.sort(key=lambda e: e.start)
    return found


def _person(text: str, m: re.Match[str], add: Callable[[str, str, int, int], None]) -> None:
    """A capitalised name that a speaker cue comes before ("ask Carol") or after ("Alice said")."""
    start = m.start()
    if start and _is_word_char(text[start - 1]):
        return
    name = m.group(0)
    if name in _NOT_PERSON or name.lower() in _TECH_CANON:
        return
    end = m.end()
    if end < len(text) and _is_word_char(text[end]):
        return
    if _PERSON_AFTER.match(text, end) or _PERSON_BEFORE.search(text, max(0, start - 20), start):
        add("person", name, start, end)


def _back(text: str, pos: int, chars: frozenset[str], limit: int) -> int:
    """The start of the run of ``chars`` that ends at ``pos`` (at most ``limit`` long)."""
    start = pos
    floor = max(0, pos - limit)
    while start > floor and text[start - 1] in chars:
        start -= 1
    return start


def _files(text: str, words: set[str], add: Callable[[str, str, int, int], None]) -> None:
    for m in _DOT_WORD.finditer(text):
        end = m.end()
        if m.group(1).lower() not in _EXTENSIONS or (end < len(text) and text[end] in "/-("):
            continue
        start = _back(text, m.start(), _PATH_CHARS, 300)
        if start == m.start() and not text[m.start() - 1:m.start()].isalnum():
            continue
        add("file", text[start:end], start, end)
    for name in _BARE_FILES.intersection(words):
        pos = text.lower().find(name)
        if pos >= 0 and _bounded(text, pos, pos + len(name)):
            add("file", text[pos:pos + len(name)], pos, pos + len(name))


def _projects(text: str, add: Callable[[str, str, int, int], None]) -> None:
    pos = text.find("/")
    while pos >= 0:
        start = _back(text, pos, _NAME_CHARS, 39)
        end = re.compile(_NAME_RUN).match(text, pos + 1).end()  # type: ignore[union-attr]
        while end > pos + 1 and text[end - 1] == ".":
            end -= 1
        owner, name = text[start:pos], text[pos + 1:end]
        if owner.lower() in _HOSTS:
            pos = text.find("/", pos + 1)
            continue
        if owner and name and _is_project(text, owner, name, start, end):
            add("project", f"{owner}/{name}", start, end)
        pos = text.find("/", max(end, pos + 1))


def _is_project(text: str, owner: str, name: str, start: int, end: int) -> bool:
    hosted = any(text.endswith(h + "/", 0, start) for h in _HOSTS)
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    if (before in "/@~" and not hosted) or after == "/" or not owner[0].isalnum() or not name[0].isalnum():
        return False
    if hosted:
        return True
    if owner.lower() in _COMMON_DIRS or name.lower() in _COMMON_DIRS or owner.isdigit() or name.isdigit():
        return False
    if re.compile(_PROJECT_CUE).search(text, max(0, start - 30), start):
        return True
    return any(c in owner + name for c in "-_.") or name.lower() in _TECH_CANON


def _symbols(text: str, add: Callable[[str, str, int, int], None]) -> None:
    if "`" in text:
        for m in re.finditer(_BACKTICK, text):
            add("symbol", m.group(1), m.start(1), m.end(1))
    if "::" in text:
        for m in re.finditer(_COLONS, text):
            start = _back(text, m.start(), _WORD_CHARS, 100)
            if start < m.start() and text[start:start + 1] not in ":/":
                add("symbol", text[start:m.end()], start, m.end())
    for m in _DOT_WORD.finditer(text):
        start = _back(text, m.start(), _IDENT_CHARS, 100)
        end = m.end()
        if start == m.start() or (start and text[start - 1] in "/\\@:"):
            continue
        name = text[start:end]
        parts = name.split(".")
        if any(not p or not (p[0].isalpha() or p[0] == "_") for p in parts) or parts[-1].lower() in _DOMAINS:
            continue
        call = text.startswith("()", end)
        if end < len(text) and text[end] in "/@-" or parts[-1].lower() in _EXTENSIONS:
            continue
        if call or parts[0][0].isupper() or "_" in name or len(parts) >= 3:
            add("symbol", name, start, end)
    if "()" in text:
        for m in re.finditer(_CALL, text):
            start = _back(text, m.start(), _WORD_CHARS, 100)
            ident = text[start:m.start()]
            if ident and not ident[0].isdigit() and ("_" in ident or not ident.islower()):
                add("symbol", ident, start, m.start())


def _tech_edges(text: str, start: int, end: int) -> bool:
    """A technology's mention is not part of a path, a version or a longer name."""
    if start and text[start - 1] in ".+#/-@":
        return False
    if end < len(text) and (text[end] in "+#-/" or (text[end] == "." and text[end + 1:end + 2].isalnum())):
        return False
    return True


# --- relations -----------------------------------------------------------------------------

_CHANGE = re.compile(r"\binstead\b|\bswitch(?:ed|ing)? (?:to|from|over|back)\b|\bno longer\b|"
                     r"\b(?:switch|migrat|mov|chang)(?:e|ed|ing)? (?:[\w.-]+ ){1,5}?from \S+ to\b|"
                     r"\breplac(?:e|ed|ing)\b|\brather than\b|\bchanged? (?:our|my) mind\b|"
                     r"\bgo(?:ing)? back to\b|\bmov(?:e|ed|ing) (?:away from|off|to)\b|\bdrop(?:ped)?\b|"
                     r"\bscratch that\b|\brevert(?:ed)?\b|\bnot .{1,30} anymore\b|\bactually\b",
                     re.IGNORECASE)
_CONTRA = re.compile(r"\bthat'?s (?:not|wrong|incorrect)\b|\bnot true\b|\bincorrect\b|\bisn'?t\b|"
                     r"\bwasn'?t\b|\bdoesn'?t\b|\bdidn'?t\b|\bnot the\b|\bon the contrary\b|"
                     r"\bbut actually\b|\bin fact\b|\bdisagree\b|\bnope\b|\bnot\b", re.IGNORECASE)
_BUILD = re.compile(r"\balso\b|\badditionally\b|\bin addition\b|\bon top of\b|\bbuilding on\b|"
                    r"\bfurthermore\b|\bmoreover\b|\bextend(?:s|ed|ing)?\b|\bas well\b|\bnext\b|"
                    r"\bthen\b|\bplus\b|\bfollow(?:ing)? up\b", re.IGNORECASE)
_MAX_RELATES = 3


@lru_cache(maxsize=4096)
def _features(text: str) -> tuple[frozenset[tuple[str, str]], frozenset[str]]:
    """An idea's entity keys (kind, lowered name) and its topic terms."""
    entities = frozenset((e.kind, e.name.lower()) for e in extract_entities(text))
    terms = frozenset(t for t in tokenize(text) if len(t) > 2 and t not in STOP_WORDS)
    return entities, terms


def relate(new: Idea, earlier: Sequence[Idea]) -> list[tuple[str, int, float]]:
    """Relations from ``new`` to the ideas said before it.

    Rules, the first that applies wins for each earlier idea: **supersedes** (both
    decisions on the same entities or topic terms, and the new one changes the choice: a
    cue like "instead" or "switch to", or a different technology for the same topic);
    **answers** (a solution, conclusion or decision after a question or problem sharing
    terms); **contradicts** (a negation of an earlier non-decision sharing most terms);
    **builds_on** (an additive cue, or the same intent, on shared terms); **relates_to**
    (a shared entity; only the closest few).

    Args:
        new: The new idea.
        earlier: Earlier ideas, oldest first.

    Returns:
        ``(label, index into earlier, confidence)``, strongest first. Never raises.
    """
    try:
        return _relate(new, earlier)
    except Exception:  # noqa: BLE001 - extraction must never break indexing
        return []


def _relate(new: Idea, earlier: Sequence[Idea]) -> list[tuple[str, int, float]]:
    ents, terms = _features(new.text)
    change = bool(_CHANGE.search(new.text))
    contra = bool(_CONTRA.search(new.text))
    build = bool(_BUILD.search(new.text))
    out: list[tuple[str, int, float]] = []
    relates: list[tuple[str, int, float]] = []
    for i, old in enumerate(earlier):
        o_ents, o_terms = _features(old.text)
        shared_ents = ents & o_ents
        shared_terms = terms & o_terms
        union = len(terms | o_terms) or 1
        overlap = len(shared_terms) / union
        topical = bool(shared_ents) or len(shared_terms) >= 2
        if not topical:
            continue
        label = _label(new, old, shared_ents, overlap, ents, o_ents, change, contra, build)
        if label is None:
            if shared_ents:
                relates.append(("relates_to", i, round(min(0.6, 0.3 + 0.1 * len(shared_ents)), 2)))
            continue
        out.append((label[0], i, round(label[1], 2)))
    relates.sort(key=lambda r: (-r[2], -r[1]))
    out.extend(relates[:_MAX_RELATES])
    out.sort(key=lambda r: -r[2])
    return out


def _label(new: Idea, old: Idea, shared_ents: frozenset[tuple[str, str]], overlap: float,
           ents: frozenset[tuple[str, str]], o_ents: frozenset[tuple[str, str]], change: bool,
           contra: bool, build: bool) -> tuple[str, float] | None:
    if new.intent == "decision" and old.intent == "decision":
        new_tech = {n for k, n in ents if k == "technology"}
        old_tech = {n for k, n in o_ents if k == "technology"}
        if change:
            return "supersedes", 0.6 + min(0.3, overlap)
        if new_tech and old_tech and new_tech != old_tech:
            return "supersedes", 0.5 + min(0.2, overlap)
    if new.intent in ("solution", "conclusion", "decision") and old.intent in ("question", "problem"):
        return "answers", 0.5 + min(0.4, overlap + 0.1 * len(shared_ents))
    if contra and old.intent not in ("question", "decision") and overlap >= 0.3:
        return "contradicts", 0.4 + min(0.3, overlap)
    if build or new.intent == old.intent:
        return "builds_on", 0.35 + min(0.35, overlap)
    return None


# --- low value -----------------------------------------------------------------------------
#
# Compiled on first use (see ``_FENCE``): most turns are too long for ``_ACK`` and ``_FILLER``,
# and start with no ``_NOISE`` prefix.

_ACK = (
    r"(?i)(?:ok(?:ay)?|k|kk|thanks?(?: you)?(?: so much)?|thx|ty|cool|nice|great|perfect|awesome|good|"
    r"sounds good|looks good(?: to me)?|lgtm|yes|yep|yeah|yup|no|nope|sure|go ahead|go on|continue|"
    r"proceed|do it|done|got it|makes sense|right|correct|exactly|agreed|fine|alright|all right|"
    r"great thanks|ok thanks|okay thanks|thanks a lot|nice work|good job|well done|hi|hello|hey|"
    r"y|n|\+1|👍|ship it|carry on|keep going|next)"
    r"(?:[\s,]+(?:thanks|thank you|please|then|!))*[\s.!?…:)]*")
_NOISE = (r"(?is)\s*(?:\[Request interrupted by user[^\]]*\]|<system-reminder>.*</system-reminder>|"
          r"<local-command-std(?:out|err)>.*|<command-(?:name|message|args)>.*|"
          r"Caveat: The messages below were generated by the user.*|No response requested\.?|"
          r"\(no content\)|Tool ran without output)\s*")
_NOISE_STARTS = frozenset({"[r", "<s", "<l", "<c", "ca", "no", "(n", "to"})
"""The casefolded first two characters of any text ``_NOISE`` matches (``ſ`` folds to ``s``)."""
_FILLER = (r"(?i)\s*(?:now )?(?:let me|i'll|i will|let's|checking|looking at|running|reading)\b"
           r"[^.!?\n]{0,70}[.:!…]?\s*")


def is_low_value(text: str, role: str) -> bool:
    """Whether a turn is noise not worth indexing.

    Acknowledgements ("ok", "thanks", "sounds good"), harness noise (interruptions,
    system reminders, local-command echoes), text without any letter, and an assistant's
    short narration of its next step ("Let me check the tests.").

    Args:
        text: The turn's text.
        role: ``"user"`` or ``"assistant"``.

    Returns:
        True when the turn should be skipped. Never raises.
    """
    if not isinstance(text, str):
        return True
    stripped = text.strip()
    if len(stripped) < 2 or not _HAS_LETTER.search(stripped):
        return True
    if len(stripped) <= 60 and re.fullmatch(_ACK, stripped):
        return True
    if stripped[:2].casefold() in _NOISE_STARTS and re.fullmatch(_NOISE, stripped):
        return True
    return role == "assistant" and len(stripped) <= 90 and bool(re.fullmatch(_FILLER, stripped))
