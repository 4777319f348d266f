"""The install package's shape: rooms sized to one job, no import cycle among them."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ctxstore" / "claude" / "install"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_install_modules_are_small_and_import_only_siblings_never_the_package() -> None:
    modules = {p.stem: p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert {"plan", "settings", "plugin", "skills"} <= set(modules)
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        assert len(path.read_text().splitlines()) <= 600, path
        imported = _imports(path)
        # Through the package a sibling would import __init__, which imports every module.
        assert "ctxstore.claude.install" not in imported, name
        assert "ctxstore.claude.skillset" not in imported, name
        edges[name] = {m.rsplit(".", 1)[1] for m in imported
                       if m.startswith("ctxstore.claude.install.")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges.get(start, set()) - seen:
            if nxt == goal or reaches(nxt, goal, seen | {nxt}):
                return True
        return False

    assert [name for name in edges if reaches(name, name, set())] == []
    assert edges["plan"] == set()  # the machinery knows no content
