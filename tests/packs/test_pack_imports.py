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
