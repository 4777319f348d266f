"""Architecture rules of the operations layer (issue 12, STYLE §2.2): no SQL in
``ctxstore/knowledge/`` (reads go through ``index/`` and ``query/``), ``sqlite3`` only for
types, every public def documented, and an import of the package that loads nothing it
does not need. The SQL check is shown to fail on a planted violation."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

KNOWLEDGE = Path(__file__).resolve().parents[2] / "ctxstore" / "knowledge"
SQL_CALLS = {"execute", "executemany", "executescript"}
# Statements as this code base writes them (upper-case keywords), anywhere in a string.
SQL_TEXT = re.compile(r"\b(SELECT\s.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|"
                      r"DELETE\s+FROM|CREATE\s+(TABLE|INDEX|VIEW)|DROP\s+TABLE|PRAGMA)\b", re.S)


def sql_violations(tree: ast.Module) -> list[str]:
    """Where a module runs or spells out SQL, or imports sqlite3 for more than types."""
    found = []
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in SQL_CALLS:
            found.append(f"line {node.lineno}: .{node.func.attr}()")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and SQL_TEXT.search(node.value):
            found.append(f"line {node.lineno}: SQL text {node.value[:30]!r}")
        if isinstance(node, ast.Import) and any(a.name == "sqlite3" for a in node.names) \
                and id(node) not in type_only:
            found.append(f"line {node.lineno}: import sqlite3")
    return found


MODULES = sorted(KNOWLEDGE.rglob("*.py"))  # the nodes/ and exchange/ packages too


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(KNOWLEDGE).as_posix())
def test_knowledge_modules_run_no_sql(path: Path) -> None:
    assert sql_violations(ast.parse(path.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("planted", [
    "def f(conn):\n    return conn.execute('SELECT 1').fetchone()\n",
    "QUERY = 'SELECT id FROM nodes WHERE ' + 'id = ?'\n",
    "def f(conn):\n    sql = 'DELETE FROM tags'\n    return run(conn, sql)\n",
    "import sqlite3\n",
])
def test_knowledge_sql_check_fails_on_a_planted_violation(planted: str) -> None:
    assert sql_violations(ast.parse(planted))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(KNOWLEDGE).as_posix())
def test_knowledge_public_functions_have_google_docstrings(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{path.name} has no module docstring"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            doc = ast.get_docstring(node) or ""
            if node.args.args or node.args.kwonlyargs:
                assert "Args:" in doc, f"{path.name}: {node.name} has no Args"
            if node.returns is not None and ast.unparse(node.returns) != "None":
                assert "Returns:" in doc or "Yields:" in doc, \
                    f"{path.name}: {node.name} has no Returns"


def test_importing_knowledge_nodes_loads_neither_the_index_nor_the_other_modules() -> None:
    # every name it re-exports used, so each of its modules is loaded
    code = ("import sys, ctxstore.knowledge.nodes as n; [getattr(n, a) for a in n.__all__]; "
            "print(sorted(m for m in sys.modules if m.startswith(('ctxstore.knowledge', "
            "'ctxstore.index', 'ctxstore.query', 'sqlite3'))))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(res.stdout)  # noqa: S307 - the list this test's own child printed
    # the package and its own modules (checks, records, read, write, changes), nothing else
    assert loaded[:2] == ["ctxstore.knowledge", "ctxstore.knowledge.nodes"]
    assert [m for m in loaded[2:] if not m.startswith("ctxstore.knowledge.nodes.")] == []
    assert "ctxstore.knowledge.nodes.write" in loaded  # the log is real
