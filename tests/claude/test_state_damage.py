"""A damaged ``.ctx/local/state.sqlite`` is moved aside and replaced, once, with a notice
(issue 11 item 9; RELIABILITY.md §2.5 and §2.9): the corruption sweep of the hook state.

Each kind of damage x each hook: valid JSON, exit 0, the damage moved aside (a link is
moved, never followed), a fresh state, the Stop's commands run, and a notice said once
(at the hook itself, or, for pre-compact and session-end whose messages Claude Code
discards, at the next prompt).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import run_ctx

from ctxstore.claude.state import STATE_FILE, open_state
from ctxstore.cli import cli
from ctxstore.errors import UnsafePath
from ctxstore.repo import Store

TABLES = {"schema_version", "pending", "executed", "queue", "kv", "access", "claims"}
HOOKS = ("session-start", "prompt-submit", "stop", "pre-compact", "session-end")
DAMAGES = ("garbage", "truncated", "empty directory", "directory with files", "fifo",
           "symlink to a database", "dangling symlink", "wal symlink", "dropped table",
           "newer schema without tables", "local is a file")
STOP_TEXT = ('<ctx:remember type="fact" tags="tier:reference">kept through the damage</ctx:remember>'
             ' <ctx:recall query="kept"/>')


def hook(store: Store, event: str, *, session: str = "s1", args: tuple[str, ...] = ()) -> dict:
    payload = json.dumps({"session_id": session, "cwd": str(store.worktree), "prompt": "hi",
                          "source": "startup", "reason": "other", "trigger": "auto"})
    res = CliRunner().invoke(cli, ["--ctx-dir", str(store.root), "hook", event, *args], input=payload)
    assert res.exit_code == 0, (res.exit_code, res.output)
    assert res.stdout.endswith("\n") and res.stdout.count("\n") == 1, res.stdout
    assert "Traceback" not in res.output and "internal error" not in res.stderr, res.stderr
    out = json.loads(res.stdout)
    assert isinstance(out, dict) and out.get("decision") != "block"
    return out


def stop(store: Store, text: str = STOP_TEXT, session: str = "s1") -> dict:
    return hook(store, "stop", session=session, args=("--response", text))


def node_count(store: Store, content: str) -> int:
    from ctxstore.index import open_index
    from ctxstore.repo import open_store

    conn = open_index(open_store(store.root))
    try:
        return conn.execute("SELECT count(*) FROM nodes WHERE content = ?", (content,)).fetchone()[0]
    finally:
        conn.close()


def outside_tree(path: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def sql(path: Path, statement: str, rows: list[tuple] | None = None) -> None:
    """Run one statement and fold the WAL back into the file (so damage to the file counts)."""
    conn = sqlite3.connect(path)
    try:
        if rows is None:
            conn.execute(statement)
        else:
            conn.executemany(statement, rows)
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def damage(store: Store, kind: str, outside: Path) -> None:
    """Put damage of ``kind`` in place of the state (which a stop created)."""
    local = store.root / "local"
    path = local / STATE_FILE
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if kind == "garbage":
        path.write_bytes(os.urandom(8192))
    elif kind == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[:len(data) // 2])
    elif kind in ("empty directory", "directory with files"):
        path.unlink()
        path.mkdir()
        if kind == "directory with files":
            (path / "x").write_text("x")
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "symlink to a database":
        victim = outside / "victim.sqlite"
        sqlite3.connect(victim).execute("CREATE TABLE mine (x)").connection.commit()
        path.unlink()
        path.symlink_to(victim)
    elif kind == "dangling symlink":
        path.unlink()
        path.symlink_to(outside / "created-through-the-link.sqlite")
    elif kind == "wal symlink":
        Path(f"{path}-wal").symlink_to(outside / "wal-target")
    elif kind == "dropped table":
        sql(path, "DROP TABLE pending")
    elif kind == "newer schema without tables":
        path.unlink()
        sql(path, "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
        sql(path, "INSERT INTO schema_version VALUES (99, 'future')")
    elif kind == "local is a file":
        shutil.rmtree(local)  # state, this clone's STAGE and staging objects (none staged here)
        local.write_text("not a folder")
    else:  # pragma: no cover
        raise AssertionError(kind)


def assert_repaired(store: Store, kind: str) -> None:
    local = store.root / "local"
    path = local / STATE_FILE
    assert local.is_dir() and not local.is_symlink()
    assert path.is_file() and not path.is_symlink(), kind
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        assert not side.is_symlink() and (not side.exists() or side.is_file())
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert TABLES <= tables
    aside = list(store.root.glob("local.damaged-*")) if kind == "local is a file" \
        else list(local.glob("*.damaged-*"))
    assert aside, (kind, sorted(p.name for p in local.iterdir()))


@pytest.mark.parametrize("event", HOOKS)
@pytest.mark.parametrize("kind", DAMAGES)
def test_state_damage_is_moved_aside_and_every_hook_carries_on(
        store: Store, tmp_path: Path, kind: str, event: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    stop(store, '<ctx:remember type="fact">before the damage</ctx:remember> <ctx:recall query="x"/>')
    damage(store, kind, outside)
    canary = outside_tree(outside)

    out = stop(store) if event == "stop" else hook(store, event)
    assert_repaired(store, kind)
    assert outside_tree(outside) == canary  # nothing written, created or deleted out there
    assert sorted(p.name for p in outside.iterdir()) == sorted(Path(p).name for p in canary)
    visible = event in ("session-start", "prompt-submit", "stop")
    if visible:
        assert "damaged" in out.get("systemMessage", "") or "was a" in out.get("systemMessage", ""), out
        notice = out["systemMessage"]
    else:
        assert out == {}  # Claude Code discards these messages: the next prompt says it
        notice = hook(store, "prompt-submit").get("systemMessage", "")
        assert "damaged" in notice or "hook state folder" in notice, notice
    assert "moved aside" in notice

    # The state works again: a Stop's commands run, once, and its recall is delivered.
    if event != "stop":
        stop(store)
    assert node_count(store, "kept through the damage") == 1
    stop(store)  # the same turn again (no prompt in between, docs/hooks.md): nothing runs twice
    assert node_count(store, "kept through the damage") == 1
    after = hook(store, "prompt-submit")
    assert "damaged" not in after.get("systemMessage", "")  # the notice is said once
    assert "kept through the damage" in after["hookSpecificOutput"]["additionalContext"]


def test_state_damage_found_part_way_is_repaired_and_the_turn_runs(store: Store) -> None:
    """Damage SQLite finds only when a page is read (not when the file is opened)."""
    stop(store, "<ctx:status/>")
    path = store.root / "local" / STATE_FILE
    sql(path, "INSERT INTO executed VALUES (?, 's', 0)",
        [(f"key-{i:06d}-" + "x" * 60,) for i in range(3000)])
    data = bytearray(path.read_bytes())
    page = 4096
    for start in range(2 * page, len(data), page):  # scramble every page but the schema
        data[start + 8:start + 200] = os.urandom(192)
    path.write_bytes(bytes(data))
    out = stop(store)
    assert "damaged" in out.get("systemMessage", ""), out
    assert_repaired(store, "garbage")
    assert node_count(store, "kept through the damage") == 1


def test_state_damage_local_symlink_is_refused_with_a_clear_message(store: Store, tmp_path: Path) -> None:
    stop(store, '<ctx:remember type="fact" tags="tier:pinned">pinned before</ctx:remember>')
    outside = tmp_path / "elsewhere"
    (store.root / "local").rename(outside)
    (store.root / "local").symlink_to(outside)
    canary = outside_tree(outside)
    for event in HOOKS:
        out = stop(store) if event == "stop" else hook(store, event)
        if event in ("session-start", "stop"):
            assert "refusing" in out["systemMessage"] and "local" in out["systemMessage"], out
    assert outside_tree(outside) == canary
    assert (store.root / "local").is_symlink()
    with pytest.raises(UnsafePath):
        open_state(store.root, create=True)


def test_state_damage_concurrent_hooks_repair_it_once(store: Store) -> None:
    stop(store, "<ctx:status/>")
    (store.root / "local" / STATE_FILE).write_bytes(b"\x00garbage" * 1000)
    payload = json.dumps({"session_id": "s1", "cwd": str(store.worktree)})
    results: list[dict] = []
    barrier = threading.Barrier(3)

    def one() -> None:
        barrier.wait()
        res = run_ctx(["hook", "stop", "--response", STOP_TEXT], stdin=payload)
        assert res.returncode == 0, res.stderr
        results.append(json.loads(res.stdout))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3
    assert_repaired(store, "garbage")
    assert len(list((store.root / "local").glob(f"{STATE_FILE}.damaged-*"))) == 1
    assert sum("damaged" in r.get("systemMessage", "") for r in results) == 1
    assert node_count(store, "kept through the damage") == 1


def test_state_damage_through_the_installed_cli(store: Store, tmp_path: Path) -> None:
    stop(store, "<ctx:status/>")
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = store.root / "local" / STATE_FILE
    path.unlink()
    path.symlink_to(victim)
    payload = json.dumps({"session_id": "s1", "cwd": str(store.worktree)})
    res = run_ctx(["hook", "stop", "--response", STOP_TEXT], stdin=payload)
    assert res.returncode == 0 and res.stdout.count("\n") == 1
    assert "moved aside" in json.loads(res.stdout)["systemMessage"]
    assert victim.read_bytes() == b"precious"
    assert node_count(store, "kept through the damage") == 1
