"""What a ``ctx pack`` process loads: only what its items need (issue 30, pack p50 at scale)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import run_ctx

# The knowledge package's write operations and what they stand on (the object model, the
# repository, staging, the secret policy): ~20 ms of imports that a pack of code alone
# never uses. A pack with memory items loads the provenance reader when it shows one.
_WRITE_SIDE = {"ctxstore.knowledge.nodes", "ctxstore.staging", "ctxstore.repo",
               "ctxstore.model", "ctxstore.security"}


def _pack_imports(root: Path, task: str, fmt: str = "json") -> tuple[set[str], str]:
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "ctxstore.cli", "pack",
                          task, "--format", fmt], capture_output=True, text=True, cwd=root)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    return {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}, \
        res.stdout


def test_a_pack_of_code_alone_loads_no_write_side(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def parse_header(value):\n    return value\n")
    (tmp_path / "b.py").write_text("import a\n\n\ndef send_cookie():\n    return a.parse_header(1)\n")
    assert run_ctx(["init"], cwd=tmp_path).returncode == 0
    assert run_ctx(["index"], cwd=tmp_path).returncode == 0
    imported, out = _pack_imports(tmp_path, "fix parse_header for the cookie")
    assert "a.py" in out and "ctxstore.packs.pack" in imported  # a real pack, a real log
    assert not imported & _WRITE_SIDE, sorted(imported & _WRITE_SIDE)


def test_a_pack_with_a_decision_still_says_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def parse_header(value):\n    return value\n")
    assert run_ctx(["init"], cwd=tmp_path).returncode == 0
    assert run_ctx(["index"], cwd=tmp_path).returncode == 0
    assert run_ctx(["add", "--type", "decision", "parse_header keeps the raw cookie header"],
                   cwd=tmp_path).returncode == 0
    imported, out = _pack_imports(tmp_path, "parse_header cookie header", "text")
    assert "parse_header keeps the raw cookie header" in out
    assert "from: explicit" in out and "ctxstore.knowledge.nodes.provenance" in imported


def test_a_pack_showing_memory_loads_the_provenance_reader_not_the_writes(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def parse_header(value):\n    return value\n")
    assert run_ctx(["init"], cwd=tmp_path).returncode == 0
    assert run_ctx(["index"], cwd=tmp_path).returncode == 0
    assert run_ctx(["add", "--type", "decision", "parse_header keeps the raw cookie header"],
                   cwd=tmp_path).returncode == 0
    _pack_imports(tmp_path, "parse_header")  # the index catches up with the add (it reads it)
    imported, out = _pack_imports(tmp_path, "parse_header cookie header")
    assert "parse_header keeps the raw cookie header" in out
    assert "ctxstore.knowledge.nodes.provenance" in imported  # the log is real
    # reading a node's provenance is no reason to load the code that writes nodes
    writes = {"ctxstore.knowledge.nodes.write", "ctxstore.knowledge.nodes.changes",
              "ctxstore.knowledge.nodes.records", "ctxstore.staging", "ctxstore.repo",
              "ctxstore.model"}
    assert not imported & writes, sorted(imported & writes)


def test_the_nodes_package_still_gives_every_name_it_exports() -> None:
    import ctxstore.knowledge.nodes as nodes
    from ctxstore.knowledge.nodes.write import add_node

    assert nodes.add_node is add_node
    assert all(getattr(nodes, name) is not None for name in nodes.__all__)
    try:
        nodes.no_such_name  # noqa: B018 - the attribute access is what is tested
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
