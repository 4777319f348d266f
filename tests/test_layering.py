"""Architecture rules (STYLE §2.2), enforced on the source with an AST scan."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ctxstore"

# Left to right: a module may import only modules of its own layer or to its left.
LAYERS = [
    {"errors", "fsio", "ids", "clock"},
    {"objects", "model", "config", "tokens"},
    {"refs"},
    {"repo", "replay", "staging", "narrative", "verify", "gitglue", "layout"},
    {"index", "query", "graph", "code"},
    {"nodes", "edges", "views", "notes", "knowledge"},
    {"pack", "exchange", "lifecycle", "gc", "llm", "stats"},
    {"claude"},
    {"cli"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}
WRITE_CALLS = {("os", "replace"), ("os", "rename"), ("os", "fsync"), ("os", "unlink"),
               ("os", "remove"), ("os", "rmdir"), ("os", "mkdir"), ("os", "link")}
LAZY_ONLY = {"networkx", "tantivy"}


def _modules() -> list[tuple[str, Path, ast.Module]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        top = rel.parts[0].removesuffix(".py")
        if top == "__init__" or top == "__main__":
            continue
        out.append((top, path, ast.parse(path.read_text(), str(path))))
    return out


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        if node.module == "ctxstore":
            return [f"ctxstore.{a.name}" for a in node.names]
        return [node.module]
    return []


@pytest.mark.parametrize("top,path,tree", _modules(), ids=lambda v: getattr(v, "name", str(v)))
def test_layering_imports_go_left_only(top: str, path: Path, tree: ast.Module) -> None:
    assert top.lstrip("_") in RANK or top.startswith("_"), f"{top} has no layer"
    mine = RANK.get(top.lstrip("_"), 0)
    for node in ast.walk(tree):
        for name in _imported(node):
            if not name.startswith("ctxstore."):
                continue
            target = name.split(".")[1].lstrip("_")
            assert target in RANK, f"{path}: unknown module {name}"
            assert RANK[target] <= mine, f"{path.name} imports {name} (a layer to its right)"


@pytest.mark.parametrize("top,path,tree", _modules(), ids=lambda v: getattr(v, "name", str(v)))
def test_layering_only_fsio_writes_files(top: str, path: Path, tree: ast.Module) -> None:
    if top == "fsio":
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name):
            pair = (node.func.value.id, node.func.attr)
            assert pair not in WRITE_CALLS, f"{path.name}:{node.lineno} calls {'.'.join(pair)}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("write_text", "write_bytes"):
            pytest.fail(f"{path.name}:{node.lineno} writes a file outside fsio")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
            modes += [k.value.value for k in node.keywords
                      if k.arg == "mode" and isinstance(k.value, ast.Constant)]
            assert all(set(str(m)) <= set("rbt") for m in modes), \
                f"{path.name}:{node.lineno} opens a file for writing outside fsio"


@pytest.mark.parametrize("top,path,tree", _modules(), ids=lambda v: getattr(v, "name", str(v)))
def test_layering_heavy_modules_imported_lazily(top: str, path: Path, tree: ast.Module) -> None:
    for node in tree.body:  # module level only
        for name in _imported(node):
            assert name.split(".")[0] not in LAZY_ONLY, f"{path.name} imports {name} at module level"


@pytest.mark.parametrize("top,path,tree", _modules(), ids=lambda v: getattr(v, "name", str(v)))
def test_layering_library_does_not_touch_environment_or_terminal(top: str, path: Path,
                                                                  tree: ast.Module) -> None:
    if top == "cli":
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            pair = (node.value.id, node.attr)
            assert pair not in {("os", "environ"), ("sys", "argv"), ("sys", "stdin"),
                                ("sys", "stdout"), ("sys", "exit")}, f"{path.name}:{node.lineno}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("print", "input"), f"{path.name}:{node.lineno}"


def test_layering_every_library_module_declares_all() -> None:
    for top, path, tree in _modules():
        if top == "cli" or path.name.startswith("_"):
            continue
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}
        assert "__all__" in names, f"{path} has no __all__"


def test_layering_cli_startup_does_not_import_heavy_modules(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "ctxstore.cli", "--help"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in res.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & {"networkx", "tantivy", "zstandard", "sqlite3"}, imported & LAZY_ONLY
