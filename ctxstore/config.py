"""config.toml: the schema of spec 002 A.3, its defaults, loading and validation.

Missing keys take their defaults; a known key with a value of the wrong type or out of
range is an error that names it; unknown keys are listed in ``Config.unknown`` (the CLI
warns once per command) and otherwise ignored, so a newer ctx's settings do not break an
older one. Nothing in the configuration can name code to run.

Keys of spec A.3 for features not built yet (``RESERVED``: the index backend and Tantivy)
are accepted and
checked in a file, but do nothing and are not written into a new config.toml: a key that is
written there must have an effect (docs/format.md lists each).

config.toml is committed, so its values come from whoever can push to the repository.
Settings with effects outside ``.ctx/`` (``[claude] claude_md_on_stop`` and
``claude_md_path``: the Stop hook writing CLAUDE.md) are loaded here like any other,
but apply only with the user's consent in that clone (``ctxstore.claude.trust``,
``ctx trust``), and the path is confined to the repository where it is used
(``claudemd.resolve_claude_md``). ``[llm] server_url`` (``ctx llm``) applies from a
cloned repository only when it is a loopback address (``ctxstore.llm.client.resolve_server``);
any future command- or network-valued setting must take the same care (RELIABILITY.md CF-01).

Resource limits (``LIMITS``: what bounds memory, time or output) follow one rule
(docs/reliability.md, "Resource limits"): a committed config.toml may lower them, but above
its committed ceiling a value applies only from the user's own configuration (a store
outside any Git work tree) or with this clone's consent (``ctx trust``); without either it
is clamped to the ceiling (``clamp_limits``, decided by ``ctxstore.limits``). The upper
bound of each range is the hard ceiling that no configuration passes.
``[security]`` settings that let secrets through need the same consent
(``ctxstore.security.consent.policy_for``).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore.errors import ConfigInvalid, UnsupportedStoreVersion

__all__ = ["CTX_VERSION", "DEFAULTS", "LIMITS", "RESERVED", "Config", "clamp_limits", "hard_ceiling",
           "load_config", "raised_limits", "render_default_config"]

CTX_VERSION = "1.0.0"
MAX_CONFIG_BYTES = 1 << 20

DEFAULTS: dict[str, dict[str, Any]] = {
    "repo": {"id": "", "ctx_version": CTX_VERSION},
    "storage": {"compression_level": 3, "shard_prefix_bytes": 1, "max_object_bytes": 1 << 30},
    # Which engine serves full-text search of a large index (docs/index.md "Which engine
    # serves which text"): "auto" (Tantivy from search.tantivy_index.TANTIVY_MIN_CHUNKS file
    # chunks on), "fts5" or "tantivy". Hooks always search with FTS5.
    "index": {"backend": "sqlite", "enable_tantivy": False, "fulltext": "auto"},
    # Code ingestion gates (spec 002 §16.4, ctxstore.code.ingest; docs/code.md "Gates").
    "ingestion": {
        "ignore_globs": ["target/**", ".git/**", "node_modules/**"],
        "max_files_per_step": 10,
        "max_bytes_per_step": 1048576,
        "max_edges_per_step": 100,
        "max_log_lines": 500,
        "max_file_bytes": 2097152,
        "max_index_bytes": 268435456,
        "min_confidence": "medium",
        # Build outputs (target/, node_modules/, dist/, build/, virtualenvs) at any depth
        # (code.walk.BUILD_OUTPUT_GLOBS) are not indexed unless this is true.
        "index_build_outputs": False,
    },
    # The token budget of `ctx compose` and views without one (CTX_DEFAULT_BUDGET wins); spec A.3
    # says 16000, ctx has always composed 50,000 by default and keeps doing so.
    "retrieval": {"default_budget": 50000, "default_depth": 2, "include_narrative": True,
                  "recall_global": True,  # recall reads ~/.ctx too (issue 16)
                  # Hook context (packs.session): recent untiered memory at session start, and
                  # memory relevant to each prompt on prompt-submit (docs/retrieval.md).
                  "narrative_days": 7, "prompt_context": True, "prompt_threshold": 0.5,
                  "prompt_budget": 500,
                  # "on": `ctx search` and MCP search also find knowledge nodes by meaning
                  # (search.node_vectors; needs the ctxstore[embed] extra).
                  "vectors": "off"},
    # `ctx llm` (ctxstore.llm, docs/llm.md). A remote server_url in a cloned repository's
    # config is refused (only loopback, or a store outside Git, or the user's own settings).
    "llm": {"server_url": "http://127.0.0.1:8080", "model": "default", "max_response_tokens": 2048,
            "protocol": "auto", "temperature": 0.2, "timeout_seconds": 120.0,
            "max_reply_bytes": 4 << 20},
    "lock": {"timeout_seconds": 10.0},
    "gc": {"keep_days": 7},
    # Claude Code integration (issue 5): the stop hook may refresh the CLAUDE.md section.
    # The same section in AGENTS.md (other agents): `ctx agents-md`, or on Stop.
    "claude": {"claude_md_on_stop": False, "claude_md_path": "CLAUDE.md", "claude_md_lines": 80,
               "agents_md_on_stop": False, "agents_md_path": "AGENTS.md",
               "max_commands_per_turn": 50, "max_remember_chars": 200_000},
    # Automatic compaction (spec 002 §15.2, ctxstore.history.triggers); 0 turns a limit off.
    "staging": {"compact_token_threshold": 50000, "compact_after_minutes": 240.0,
                "compact_on_task_end": True, "compact_on_task_switch": True},
    # Memory lifecycle (spec 003, ctxstore.lifecycle.policy), run at session end and `ctx lifecycle`.
    "lifecycle": {"archive_confidence_threshold": 0.3, "archive_grace_days": 14.0,
                  "prune_after_days": 30.0, "on_session_end": True,
                  # Consolidation is due (proposals left for /consolidate) every N new memories
                  # or while more than M are active (spec 003); 0 turns a trigger off.
                  "consolidation_trigger_count": 10, "consolidation_trigger_active": 80,
                  # RELATES_TO edges to similar memories on write (knowledge.autolink).
                  "autolink": True},
    # Transcript memory (ctxstore.memory, docs/memory.md "Privacy"): whether the hooks index
    # sessions at all, and how much tool output a turn keeps; "vectors" = "on" adds vector
    # search fused with BM25 (ctxstore.memory.vectors; needs the ctxstore[embed] extra).
    "memory": {"enabled": True, "index_tool_output": True, "max_tool_output_chars": 8000,
               "vectors": "off"},
    # The secret policy of each write path (ctxstore.security, docs/security.md): explicit
    # writes refused, automatic capture redacted. What lets a secret through (allow, disabled
    # rules, allowed values, sensitive files indexed) applies in a clone only after `ctx trust`.
    "security": {"explicit": "refuse", "remember": "refuse", "commands": "redact",
                 "files": "redact", "transcripts": "redact", "llm": "redact",
                 "narrative": "redact", "summaries": "redact", "disabled_rules": [],
                 "allow_values": [], "index_sensitive_files": False},
}

# Accepted and validated in a file, but nothing uses them yet: left out of a new config.toml.
RESERVED: frozenset[tuple[str, str]] = frozenset({
    ("storage", "shard_prefix_bytes"),  # fixed at 1 (the only value accepted)
    ("index", "backend"), ("index", "enable_tantivy"),
})

_RANGES: dict[tuple[str, str], tuple[float, float]] = {
    ("storage", "compression_level"): (1, 22),
    ("storage", "shard_prefix_bytes"): (1, 1),
    ("storage", "max_object_bytes"): (1024, 1 << 34),
    ("lock", "timeout_seconds"): (0, 3600),
    ("gc", "keep_days"): (0, 36500),
    ("retrieval", "default_budget"): (1, 10_000_000),
    ("retrieval", "default_depth"): (0, 16),
    ("retrieval", "narrative_days"): (0, 3650),
    ("retrieval", "prompt_threshold"): (0, 1),
    ("retrieval", "prompt_budget"): (0, 8_000),
    ("ingestion", "max_files_per_step"): (1, 1_000_000),
    ("ingestion", "max_bytes_per_step"): (1, 1 << 34),
    ("ingestion", "max_edges_per_step"): (1, 100_000_000),
    ("ingestion", "max_log_lines"): (1, 100_000_000),
    ("ingestion", "max_file_bytes"): (1, 1 << 34),
    ("ingestion", "max_index_bytes"): (1, 1 << 40),
    ("llm", "max_response_tokens"): (1, 1_000_000),
    ("llm", "temperature"): (0, 5),
    ("llm", "timeout_seconds"): (0.1, 86_400),
    ("llm", "max_reply_bytes"): (1024, 1 << 30),
    ("claude", "claude_md_lines"): (5, 10_000),
    ("claude", "max_commands_per_turn"): (1, 10_000),
    ("claude", "max_remember_chars"): (1, 10_000_000),
    ("staging", "compact_token_threshold"): (0, 1 << 40),
    ("staging", "compact_after_minutes"): (0, 525_600),
    ("lifecycle", "archive_confidence_threshold"): (0, 1),
    ("lifecycle", "archive_grace_days"): (0, 36500),
    ("lifecycle", "prune_after_days"): (0, 36500),
    ("lifecycle", "consolidation_trigger_count"): (0, 1_000_000),
    ("lifecycle", "consolidation_trigger_active"): (0, 1_000_000),
    ("memory", "max_tool_output_chars"): (0, 1_000_000),
}

# The resource limits and the most a committed config.toml may set for each without consent:
# the default (a clone never raises a limit), but for the zstd level, where a repository may
# choose any level short of the "ultra" ones (20-22 need a 128 MiB window to read back).
LIMITS: dict[tuple[str, str], float] = {
    key: DEFAULTS[key[0]][key[1]] for key in (
        ("storage", "max_object_bytes"), ("lock", "timeout_seconds"),
        ("retrieval", "default_budget"), ("retrieval", "default_depth"),
        ("retrieval", "prompt_budget"),
        ("ingestion", "max_files_per_step"), ("ingestion", "max_bytes_per_step"),
        ("ingestion", "max_edges_per_step"), ("ingestion", "max_log_lines"),
        ("ingestion", "max_file_bytes"), ("ingestion", "max_index_bytes"),
        ("llm", "max_response_tokens"), ("llm", "timeout_seconds"), ("llm", "max_reply_bytes"),
        ("claude", "claude_md_lines"), ("claude", "max_commands_per_turn"),
        ("claude", "max_remember_chars"), ("memory", "max_tool_output_chars"))
} | {("storage", "compression_level"): 19}

# String settings with a fixed set of values.
_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("ingestion", "min_confidence"): ("high", "medium", "low"),
    **{("security", channel): ("refuse", "redact", "allow")
       for channel in ("explicit", "remember", "commands", "files", "transcripts", "llm",
                       "narrative", "summaries")},
    ("index", "fulltext"): ("auto", "fts5", "tantivy"),
    ("memory", "vectors"): ("off", "on"),
    ("retrieval", "vectors"): ("off", "on"),
}


class Config:
    """Validated settings of one store (``values[section][key]``), the defaults to start with.

    A plain class: the hooks load it on every Stop, and ``dataclasses`` alone costs ~3 ms.

    Attributes:
        values: ``values[section][key]``, every known key.
        unknown: Keys (``[section] key``) and tables (``[section]``) of the file this ctx does
            not know.
        clamped: Resource limits kept at their committed ceiling (``clamp_limits``), each
            with the value the file asked for.
    """

    __slots__ = ("values", "unknown", "clamped")

    def __init__(self) -> None:
        self.values: dict[str, dict[str, Any]] = copy.deepcopy(DEFAULTS)
        self.unknown: list[str] = []
        # Limits set aside by ``clamp_limits``: (section, key) -> the value the file asked for.
        self.clamped: dict[tuple[str, str], Any] = {}

    def get(self, section: str, key: str) -> Any:
        """Return a setting (its default when the file does not set it)."""
        return self.values[section][key]


def raised_limits(config: Config) -> dict[tuple[str, str], Any]:
    """The resource limits the file sets above their committed ceiling (``LIMITS``), as asked.

    Those already clamped count with the value the file asked for.
    """
    raised = {key: config.values[key[0]][key[1]] for key, ceiling in LIMITS.items()
              if config.values[key[0]][key[1]] > ceiling}
    return {**raised, **config.clamped}


def clamp_limits(config: Config) -> dict[tuple[str, str], Any]:
    """Set every limit above its committed ceiling back to the ceiling.

    Returns:
        What was set aside: (section, key) -> the value the file asked for (also kept in
        ``config.clamped``, for the warning and for ``ctx trust``).
    """
    for key, ceiling in LIMITS.items():
        section, name = key
        if config.values[section][name] > ceiling:
            config.clamped[key] = config.values[section][name]
            config.values[section][name] = type(DEFAULTS[section][name])(ceiling)
    return dict(config.clamped)


def hard_ceiling(section: str, key: str) -> float:
    """The largest value any configuration may give a setting (the top of its range)."""
    return _RANGES[(section, key)][1]


def _check(section: str, key: str, value: Any, default: Any, path: Path) -> Any:
    expected = type(default)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not expected:
        raise ConfigInvalid(
            f"{path}: [{section}] {key} must be {expected.__name__}, got {type(value).__name__}")
    if expected is list and not all(isinstance(v, str) for v in value):
        raise ConfigInvalid(f"{path}: [{section}] {key} must be a list of strings")
    choices = _CHOICES.get((section, key))
    if choices and value not in choices:
        raise ConfigInvalid(f"{path}: [{section}] {key} = {value!r} is not one of "
                            f"{', '.join(choices)}")
    bounds = _RANGES.get((section, key))
    if bounds and not bounds[0] <= value <= bounds[1]:
        raise ConfigInvalid(f"{path}: [{section}] {key} = {value} is outside {bounds[0]}..{bounds[1]}")
    return value


# The form ``ctx init`` writes, read without importing ``tomllib`` (every command reads the
# configuration; the import costs ~2 ms): one-level ``[table]`` headers, bare keys, and values
# that are basic strings without escapes, decimal integers and floats, booleans, and one-line
# arrays of such strings, with comments. Anything else, or a key or table given twice, goes
# to ``tomllib``, so the result is always tomllib's (tests/storage/test_config_simple_toml.py).
_BARE = r"[A-Za-z0-9_-]+"
_STRING = r'"[^"\\\x00-\x08\x0a-\x1f\x7f]*"'
_SCALAR = rf"{_STRING}|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?|true|false"
_ARRAY = rf"\[[ \t]*(?:{_STRING}[ \t]*,[ \t]*)*(?:{_STRING}[ \t]*)?\]"
# The blanks after a table or a value belong to it: with ``(...)?[ \t]*`` after ``[ \t]*`` a
# line of blanks could be split between the two runs in every way (quadratic in a long line).
_SIMPLE_LINE = re.compile(
    rf"[ \t]*(?:(?:\[[ \t]*(?P<table>{_BARE})[ \t]*\]|(?P<key>{_BARE})[ \t]*=[ \t]*"
    rf"(?P<value>{_SCALAR}|{_ARRAY}))[ \t]*)?(?:#[^\x00-\x08\x0a-\x1f\x7f]*)?")
_ARRAY_ITEM = re.compile(_STRING)


def _simple_toml(text: str) -> dict[str, Any] | None:
    """``text`` parsed when it keeps to the simple form above, else None (use ``tomllib``)."""
    root: dict[str, Any] = {}
    table = root
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.endswith("\r") and i < len(lines) - 1:  # CRLF; a lone CR is tomllib's to refuse
            line = line[:-1]
        m = _SIMPLE_LINE.fullmatch(line)
        if m is None:
            return None
        name, key, value = m.group("table", "key", "value")
        if name is not None:
            if name in root:
                return None
            table = root[name] = {}
        elif key is not None:
            if key in table:
                return None
            table[key] = _simple_value(value)
    return root


def _simple_value(text: str) -> Any:
    if text[0] == '"':
        return text[1:-1]
    if text[0] == "[":
        return [item[1:-1] for item in _ARRAY_ITEM.findall(text)]
    if text in ("true", "false"):
        return text == "true"
    return float(text) if "." in text else int(text)


def load_config(path: Path) -> Config:
    """Read and validate ``config.toml``; a missing file gives the defaults.

    Raises:
        ConfigInvalid: if the file is not valid TOML, too large, or a known key has a
            bad value.
        UnsafePath: (E020) if it is a symbolic link or not a regular file.
        UnsupportedStoreVersion: if the store was written by a newer major version.
    """
    config = Config()
    try:
        raw = fsio.read_regular(path, MAX_CONFIG_BYTES)  # never a FIFO, never unbounded
    except FileNotFoundError:
        return config
    except OSError as exc:
        raise ConfigInvalid(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigInvalid(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigInvalid(f"{path}: not valid TOML ({exc})") from None
    data = _simple_toml(text)
    if data is None:
        import tomllib  # the full parser (~2 ms to import) for anything beyond the simple form

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigInvalid(f"{path}: not valid TOML ({exc})") from None
        except RecursionError:  # tomllib recurses once per level of nested arrays and tables
            raise ConfigInvalid(f"{path}: not valid TOML (nested too deeply)") from None
    for section, table in data.items():
        if section not in DEFAULTS:
            config.unknown.append(f"[{section}]")
        elif isinstance(table, dict):
            config.unknown.extend(f"[{section}] {key}" for key in table
                                  if key not in DEFAULTS[section])
    for section, defaults in DEFAULTS.items():
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ConfigInvalid(f"{path}: [{section}] must be a table")
        for key, default in defaults.items():
            if key in table:
                config.values[section][key] = _check(section, key, table[key], default, path)
    version = config.get("repo", "ctx_version")
    major = version.split(".", 1)[0]
    if not major.isdigit():
        raise ConfigInvalid(f"{path}: [repo] ctx_version {version!r} is not a version")
    if int(major) > int(CTX_VERSION.split(".", 1)[0]):
        raise UnsupportedStoreVersion(
            f"store was written by ctx {version}, this is {CTX_VERSION}", hint="upgrade ctxstore")
    return config


def render_default_config(repo_id: str) -> str:
    """Return the text of a new config.toml with every default spelled out.

    Reserved keys (``RESERVED``) are left out, and a table left empty by that too.

    Args:
        repo_id: The ``[repo] id`` of the new store.

    Returns:
        The TOML text.
    """
    def lit(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(value, list):
            return "[" + ", ".join(lit(v) for v in value) + "]"
        return repr(value)

    values = copy.deepcopy(DEFAULTS)
    values["repo"]["id"] = repo_id
    lines = ["# ctx store configuration (spec 002 A.3). Missing keys take these defaults.", ""]
    for section, table in values.items():
        keys = [key for key in table if (section, key) not in RESERVED]
        if not keys:
            continue
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {lit(table[key])}" for key in keys)
        lines.append("")
    return "\n".join(lines)
