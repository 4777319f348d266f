"""config.toml: the schema of spec 002 A.3, its defaults, loading and validation.

Missing keys take their defaults; a known key with a value of the wrong type or out of
range is an error that names it; unknown keys are ignored so a newer ctx's settings do
not break an older one. Nothing in the configuration can name code to run.

config.toml is committed, so its values come from whoever can push to the repository.
Settings with effects outside ``.ctx/`` (``[claude] claude_md_on_stop`` and
``claude_md_path``: the Stop hook writing CLAUDE.md) are loaded here like any other,
but apply only with the user's consent in that clone (``ctxstore.claude.trust``,
``ctx trust``), and the path is confined to the repository where it is used
(``claudemd.resolve_claude_md``). ``[llm] server_url`` is not used yet; the LLM client
that reads it, and any future command- or network-valued setting, must take the same
consent rule (RELIABILITY.md CF-01).
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxstore import fsio
from ctxstore.errors import ConfigInvalid, UnsupportedStoreVersion

__all__ = ["CTX_VERSION", "DEFAULTS", "Config", "load_config", "render_default_config"]

CTX_VERSION = "1.0.0"
MAX_CONFIG_BYTES = 1 << 20

DEFAULTS: dict[str, dict[str, Any]] = {
    "repo": {"id": "", "ctx_version": CTX_VERSION},
    "storage": {"compression_level": 3, "shard_prefix_bytes": 1, "max_object_bytes": 1 << 30},
    "index": {"backend": "sqlite", "enable_tantivy": False},
    "ingestion": {
        "ignore_globs": ["target/**", ".git/**", "node_modules/**"],
        "max_files_per_step": 10,
        "max_bytes_per_step": 1048576,
    },
    "retrieval": {"default_budget": 16000, "default_depth": 2, "include_narrative": True},
    "llm": {"server_url": "http://127.0.0.1:8080", "model": "default", "max_response_tokens": 2048},
    "lock": {"timeout_seconds": 10.0},
    "gc": {"keep_days": 7},
    # Claude Code integration (issue 5): the stop hook may refresh the CLAUDE.md section.
    "claude": {"claude_md_on_stop": False, "claude_md_path": "CLAUDE.md", "claude_md_lines": 80},
}

_RANGES: dict[tuple[str, str], tuple[float, float]] = {
    ("storage", "compression_level"): (1, 22),
    ("storage", "shard_prefix_bytes"): (1, 1),
    ("storage", "max_object_bytes"): (1024, 1 << 34),
    ("lock", "timeout_seconds"): (0, 3600),
    ("gc", "keep_days"): (0, 36500),
    ("retrieval", "default_budget"): (1, 10_000_000),
    ("retrieval", "default_depth"): (0, 16),
    ("ingestion", "max_files_per_step"): (1, 1_000_000),
    ("ingestion", "max_bytes_per_step"): (1, 1 << 34),
    ("llm", "max_response_tokens"): (1, 1_000_000),
    ("claude", "claude_md_lines"): (5, 10_000),
}


@dataclass
class Config:
    """Validated settings of one store (``values[section][key]``)."""

    values: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))

    def get(self, section: str, key: str) -> Any:
        """Return a setting (its default when the file does not set it)."""
        return self.values[section][key]


def _check(section: str, key: str, value: Any, default: Any, path: Path) -> Any:
    expected = type(default)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not expected:
        raise ConfigInvalid(
            f"{path}: [{section}] {key} must be {expected.__name__}, got {type(value).__name__}")
    if expected is list and not all(isinstance(v, str) for v in value):
        raise ConfigInvalid(f"{path}: [{section}] {key} must be a list of strings")
    bounds = _RANGES.get((section, key))
    if bounds and not bounds[0] <= value <= bounds[1]:
        raise ConfigInvalid(f"{path}: [{section}] {key} = {value} is outside {bounds[0]}..{bounds[1]}")
    return value


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
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigInvalid(f"{path}: not valid TOML ({exc})") from None
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
    """Return the text of a new config.toml with every default spelled out."""
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
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {lit(value)}" for key, value in table.items())
        lines.append("")
    return "\n".join(lines)
