"""A text cell of the index that is not UTF-8 is damage, found and repaired (issue 34 item 10).

SQLite stores any bytes in a TEXT cell and ``PRAGMA quick_check`` passes, so the damage is
not seen on open; Python's ``sqlite3`` fails while fetching the row. Before, ``ctx list``
gave ``internal error: OperationalError`` on every run and session start printed ``{}``
with no message. Now the read that meets it is one E007 line (or the hooks'
``systemMessage``), the damage marker is left, and the next command rebuilds the index
(docs/reliability.md, "Damaged derived index").
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.index import DAMAGE_MARKER
from ctxstore.init import init_store

CELLS = {
    "content": "UPDATE nodes SET content = CAST(x'ff41ff' AS TEXT)",
    "type": "UPDATE nodes SET type = CAST(x'c3' AS TEXT)",
    "tag": "UPDATE tags SET tag = CAST(x'80' AS TEXT)",
}


def _store(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    init_store(work / ".ctx", git=False)
    ctx = work / ".ctx"
    res = run_ctx(["--ctx-dir", str(ctx), "add", "--type", "fact", "--tag", "tier:pinned",
                   "the zebra service runs on port 8080"])
    assert res.returncode == 0, res.stderr
    assert "zebra" in run_ctx(["--ctx-dir", str(ctx), "list"]).stdout  # the index is built
    return ctx


def _damage(ctx: Path, sql: str) -> None:
    with sqlite3.connect(ctx / "index" / "index.sqlite") as conn:
        assert conn.execute(sql).rowcount >= 1
    conn.close()


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("command", [["list"], ["search", "zebra"], ["query", "type:fact"],
                                     ["tags"]])
def test_non_utf8_cell_is_e007_then_rebuilt(tmp_path: Path, cell: str, command: list[str]) -> None:
    ctx = _store(tmp_path)
    _damage(ctx, CELLS[cell])
    first = run_ctx(["--ctx-dir", str(ctx), *command], timeout=30)
    if first.returncode == 0:  # this command never read the damaged cell
        assert "internal error" not in first.stderr
        return
    assert first.returncode == 1 and first.stdout == "", first.stderr
    assert first.stderr.startswith("ctx: error[E007]: index is corrupt:"), first.stderr
    assert "next command rebuilds it" in first.stderr
    assert (ctx / "index" / DAMAGE_MARKER).exists()
    again = run_ctx(["--ctx-dir", str(ctx), *command], timeout=30)
    assert again.returncode == 0, again.stderr
    assert "index was damaged" in again.stderr and "rebuilt from the store" in again.stderr
    assert "zebra" in again.stdout or command == ["tags"]
    assert not (ctx / "index" / DAMAGE_MARKER).exists()
    assert run_ctx(["--ctx-dir", str(ctx), *command]).stderr == ""  # repaired once


def test_non_utf8_cell_at_session_start_is_named_then_rebuilt(tmp_path: Path) -> None:
    ctx = _store(tmp_path)
    _damage(ctx, CELLS["content"])
    payload = json.dumps({"session_id": "s1", "cwd": str(ctx.parent), "source": "startup"})
    res = run_ctx(["hook", "session-start"], stdin=payload, env={"CTX_DIR": str(ctx)}, timeout=30)
    assert res.returncode == 0 and "internal error" not in res.stderr, res.stderr
    out = json.loads(res.stdout)
    assert "index is corrupt" in out["systemMessage"], out  # before: {} and no message
    payload = json.dumps({"session_id": "s2", "cwd": str(ctx.parent), "source": "startup"})
    res = run_ctx(["hook", "session-start"], stdin=payload, env={"CTX_DIR": str(ctx)}, timeout=30)
    out = json.loads(res.stdout)
    assert "zebra service" in out["hookSpecificOutput"]["additionalContext"]
    assert "rebuilt from the store" in out["systemMessage"]


JSON_CELLS = {
    "node metadata": "UPDATE nodes SET metadata = '{\"a\": '",
    "edge metadata": "UPDATE edges SET metadata = 'not json'",
}


@pytest.mark.parametrize("cell", list(JSON_CELLS))
def test_json_cell_that_is_not_json_is_e007_then_rebuilt(tmp_path: Path, cell: str) -> None:
    # A cell ctx writes as JSON holding something else (a damaged or hand-edited index):
    # before, `internal error: JSONDecodeError` on every run; now E007, then one rebuild.
    ctx = _store(tmp_path)
    res = run_ctx(["--ctx-dir", str(ctx), "add", "--type", "fact", "--meta", "owner=ops",
                   "the zebra dashboard lives behind the VPN"])
    assert res.returncode == 0, res.stderr
    ids = [line.split()[0] for line in run_ctx(["--ctx-dir", str(ctx), "list"]).stdout.splitlines()
           if "zebra" in line]
    assert run_ctx(["--ctx-dir", str(ctx), "link", ids[0], ids[1], "--type", "RELATES_TO"]).returncode == 0
    command = ["show", ids[0]] if cell == "node metadata" else ["edges", ids[0]]
    assert run_ctx(["--ctx-dir", str(ctx), *command]).returncode == 0
    _damage(ctx, JSON_CELLS[cell])
    first = run_ctx(["--ctx-dir", str(ctx), *command], timeout=30)
    assert first.returncode == 1 and first.stdout == "", first.stderr
    assert first.stderr.startswith(f"ctx: error[E007]: index is corrupt: a {cell} cell holds no "
                                   "JSON"), first.stderr
    assert len(first.stderr.splitlines()) <= 2  # the error and its hint
    assert (ctx / "index" / DAMAGE_MARKER).exists()
    again = run_ctx(["--ctx-dir", str(ctx), *command], timeout=30)
    assert again.returncode == 0, again.stderr
    assert "rebuilt from the store" in again.stderr
    assert ("owner=ops" if cell == "node metadata" else ids[1]) in again.stdout
    assert not (ctx / "index" / DAMAGE_MARKER).exists()
