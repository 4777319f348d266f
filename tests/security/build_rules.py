"""Build ``rules.json`` (what the scanner loads) from the vendored rule sets.

``gitleaks.toml`` is gitleaks' published default configuration, copied verbatim (MIT,
``gitleaks-LICENSE.txt``); ``ctx-rules.toml`` holds ctx's own rules in the same format.
The scanner reads JSON because parsing the TOML costs ~20 ms, more than a hook can spare.
Run ``python tests/security/build_rules.py`` after replacing either file;
``tests/security/test_scanner.py`` fails while ``rules.json`` is out of date.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["SOURCES", "build_rules", "main"]

HERE = Path(__file__).resolve().parent.parent.parent / "ctxstore" / "security"
SOURCES = ("gitleaks.toml", "ctx-rules.toml")


def _allowlist(raw: dict[str, Any]) -> dict[str, Any]:
    return {"condition": raw.get("condition", "OR").upper(),
            "target": raw.get("regexTarget", "secret"),
            "regexes": list(raw.get("regexes", [])),
            "stopwords": [w.lower() for w in raw.get("stopwords", [])],
            "paths": list(raw.get("paths", []))}


def build_rules(root: Path = HERE) -> dict[str, Any]:
    """The rule document: the global allowlist and every rule, gitleaks' first.

    Returns:
        ``{"version": 1, "sources": [...], "allowlist": {...}, "rules": [...]}``.
    """
    rules: list[dict[str, Any]] = []
    allow: dict[str, Any] = {"regexes": [], "stopwords": [], "paths": []}
    for name in SOURCES:
        data = tomllib.loads((root / name).read_text("utf-8"))
        glob = data.get("allowlist")
        if glob:
            allow["regexes"] += glob.get("regexes", [])
            allow["stopwords"] += [w.lower() for w in glob.get("stopwords", [])]
            allow["paths"] += glob.get("paths", [])
        for rule in data.get("rules", []):
            rules.append({"id": rule["id"], "regex": rule.get("regex"),
                          "secret_group": rule.get("secretGroup", 0),
                          "entropy": float(rule.get("entropy", 0.0)),
                          "keywords": [k.lower() for k in rule.get("keywords", [])],
                          "path": rule.get("path"),
                          "allowlists": [_allowlist(a) for a in rule.get("allowlists", [])]})
    by_id = {r["id"]: r for r in rules}
    for name in SOURCES:  # allowlists a later file adds to an earlier file's rule
        for ext in tomllib.loads((root / name).read_text("utf-8")).get("extend", []):
            by_id[ext["rule"]]["allowlists"] += [_allowlist(a) for a in ext.get("allowlists", [])]
    return {"version": 1, "sources": list(SOURCES), "allowlist": allow, "rules": rules}


def main() -> None:
    """Write ``ctxstore/security/rules.json``."""
    text = json.dumps(build_rules(), indent=0, sort_keys=True, ensure_ascii=True) + "\n"
    (HERE / "rules.json").write_text(text, "utf-8")


if __name__ == "__main__":
    main()
