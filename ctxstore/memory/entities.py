"""Entities named in transcript text, by rules (spec 004 §3.3).

Files, symbols, technologies, projects and people: paths with a known extension (file),
``Module.symbol`` / ``a::b`` / backticked identifiers (symbol), a curated list of technologies,
capitalised names after a speaker cue (person) and repository names ``owner/name`` (project).
Pure functions of their arguments: any string is accepted, nothing raises, so the Stop hook
runs this on every turn. Every ``start``/``end`` indexes into the text given.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import NamedTuple

from ctxstore.memory.scan import Grouped, bounded, is_word_char, lowered, split_name, words_of

__all__ = ["Entity", "ENTITY_KINDS", "extract_entities"]

ENTITY_KINDS = ("file", "symbol", "technology", "project", "person")


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
_TECH_SCAN = Grouped([split_name(t) for t in _TECHNOLOGIES])
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

    low = lowered(text)
    words = words_of(low)
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
            if m.start() == 0 or not is_word_char(text[m.start() - 1]):
                add("person", m.group(1), m.start(1), m.end(1))
    found.sort(key=lambda e: e.start)
    return found


def _person(text: str, m: re.Match[str], add: Callable[[str, str, int, int], None]) -> None:
    """A capitalised name that a speaker cue comes before ("ask Carol") or after ("Alice said")."""
    start = m.start()
    if start and is_word_char(text[start - 1]):
        return
    name = m.group(0)
    if name in _NOT_PERSON or name.lower() in _TECH_CANON:
        return
    end = m.end()
    if end < len(text) and is_word_char(text[end]):
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
        if pos >= 0 and bounded(text, pos, pos + len(name)):
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
