"""The derived index damaged on disk (RELIABILITY.md IX-02/IX-03, issue 11 item 8).

Corruption sweep: each kind of damage to ``.ctx/index/index.sqlite`` x every read
command, the write commands and the hooks. Each case either repairs the index (rebuilt
from the objects), says so once on stderr (CLI) or in ``systemMessage`` (hooks) and
gives the same answer as an undamaged copy of the same store, or fails with one clear
error line; never an internal error or a wrong answer. Plus containment of the index
files (symlinks refused with E020), a read-only index, and ``ctx debug verify --index``.
"""

from __future__ import annotations

import gc
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import adopt_index, run_ctx, store_digest

from ctxstore.cli.root import cli

NOTICE = "ctx: index was damaged ("
INDEX = Path("index") / "index.sqlite"


# -- the store every case starts from --------------------------------------------------------
def _run(root: Path, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["--ctx-dir", str(root), *args], input=input)


def _ok(root: Path, *args: str) -> str:
    r = _run(root, *args)
    assert r.exit_code == 0, (args, r.output, r.stderr)
    return r.stdout


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A project with committed and staged nodes, tags, edges and a saved view, its index
    built and closed (no WAL left)."""
    work = tmp_path_factory.mktemp("tpl") / "work"
    work.mkdir()
    root = work / ".ctx"
    from ctxstore.init import init_store

    init_store(root, git=False)
    ids: dict[str, str] = {}
    for name, kind, text, tags in (
            ("a", "fact", "The store uses SQLite in WAL mode", "tier:pinned"),
            ("b", "decision", "We rebuild the index from the objects", "tier:reference"),
            ("c", "observation", "Hooks run on every prompt", "tier:working")):
        out = json.loads(_ok(root, "--format", "json", "add", "--type", kind, text, "--tag", tags))
        ids[name] = out["id"]
    _ok(root, "link", ids["b"], ids["a"], "--type", "DEPENDS_ON")
    _ok(root, "view", "create", "facts", "--query", "type:fact OR type:decision", "--budget", "4000")
    _ok(root, "commit", "-m", "first")
    out = json.loads(_ok(root, "--format", "json", "add", "--type", "fact", "staged WAL note",
                         "--tag", "tier:working"))
    ids["d"] = out["id"]
    _ok(root, "list")  # the index is built
    gc.collect()  # in-process commands leave connections for the collector to close
    conn = sqlite3.connect(root / INDEX)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert not (root / "index" / "index.sqlite-wal").exists()
    return root, ids


def _copy(template: Path, dest: Path) -> Path:
    """A copy of the template store whose index stands for the copy's own (its clone rows rebound:
    an index that names another copy of the store is rebuilt, never trusted)."""
    work = dest / "work"
    shutil.copytree(template.parent, work, symlinks=True)
    root = work / ".ctx"
    adopt_index(root)
    return root


# -- kinds of damage -------------------------------------------------------------------------
def _sql(root: Path, *statements: str) -> None:
    conn = sqlite3.connect(root / INDEX, isolation_level=None)
    for s in statements:
        conn.execute(s)
    conn.close()


def _truncate(root: Path) -> None:
    path = root / INDEX
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 2)


def _truncate_header(root: Path) -> None:
    with (root / INDEX).open("r+b") as fh:
        fh.truncate(60)


def _garbage_header(root: Path) -> None:
    with (root / INDEX).open("r+b") as fh:
        fh.write(random.Random(1).randbytes(100))


def _garbage_pages(root: Path) -> None:
    # Every page but the first (the schema) overwritten: malformed b-tree pages.
    path = root / INDEX
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(4096)
        fh.write(random.Random(2).randbytes(size - 4096))


def _flipped_bytes(root: Path) -> None:
    # A few bytes flipped in the middle pages (a rogue write).
    path = root / INDEX
    data = bytearray(path.read_bytes())
    rnd = random.Random(3)
    for page in range(1, len(data) // 4096):
        for _ in range(8):
            data[page * 4096 + rnd.randrange(8, 4096)] ^= 0xFF
    path.write_bytes(bytes(data))


def _directory(root: Path) -> None:
    (root / INDEX).unlink()
    (root / INDEX).mkdir()


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": _truncate,
    "truncated-header": _truncate_header,
    "garbage-header": _garbage_header,
    "garbage-pages": _garbage_pages,
    "flipped-bytes": _flipped_bytes,
    "dropped-tags": lambda r: _sql(r, "DROP TABLE tags"),
    "dropped-nodes": lambda r: _sql(r, "DROP TABLE nodes"),
    "dropped-fts": lambda r: _sql(r, "DROP TABLE nodes_fts"),
    # A schema row whose name is not UTF-8 (a rogue write into the schema's page): SQLite's
    # error message quotes it, and Python fails decoding the message (UnicodeDecodeError).
    "schema-not-utf8": lambda r: _sql(r, "PRAGMA writable_schema = ON",
                                      "UPDATE sqlite_schema SET name = CAST(x'76b3657773' AS TEXT),"
                                      " sql = CAST(x'435245415445205441424c4520b3b3b328622900'"
                                      " AS TEXT) WHERE name = 'views'"),
    "meta-garbage": lambda r: _sql(r, "UPDATE meta SET value = 'garbage' WHERE key = 'synced'"),
    "meta-wrong-shape": lambda r: _sql(r, "UPDATE meta SET value = '{\"main\": 3}'"),
    "meta-missing": lambda r: _sql(r, "DELETE FROM meta"),
    "meta-generation-garbage": lambda r: _sql(
        r, "INSERT OR REPLACE INTO meta(key, value) VALUES ('code_generation', '1x')"),
    "meta-table-missing": lambda r: _sql(r, "DROP TABLE meta"),
    "user-version-99": lambda r: _sql(r, "PRAGMA user_version = 99"),
    "user-version-0": lambda r: _sql(r, "PRAGMA user_version = 0"),
    "wrong-columns": lambda r: _sql(r, "DROP TABLE views",
                                    "CREATE TABLE views (name TEXT PRIMARY KEY, query TEXT)"),
    "renamed-column": lambda r: _sql(r, "ALTER TABLE nodes RENAME COLUMN content TO body"),
    "extra-trigger": lambda r: _sql(r, "CREATE TRIGGER t AFTER INSERT ON nodes "
                                       "BEGIN SELECT raise(ABORT, 'no'); END"),
    "directory": _directory,
}


# -- the commands ----------------------------------------------------------------------------
READS: dict[str, Callable[[dict[str, str]], list[str]]] = {
    "list": lambda i: ["--format", "json", "list"],
    "show": lambda i: ["--format", "json", "show", i["b"]],
    "search": lambda i: ["--format", "json", "search", "WAL"],
    "query": lambda i: ["--format", "json", "query", "type:fact AND tag:tier:pinned"],
    "compose": lambda i: ["compose"],
    "status": lambda i: ["--format", "json", "status"],
    "edges": lambda i: ["--format", "json", "edges", i["b"]],
    "tags": lambda i: ["--format", "json", "tags"],
    "related": lambda i: ["--format", "json", "related", i["a"]],
    "trace": lambda i: ["--format", "json", "trace", i["b"]],
    "view-render": lambda i: ["view", "render", "facts"],
    "export": lambda i: ["export"],
}

# A write, then the read whose answer shows the write landed.
WRITES: dict[str, tuple[Callable[[dict[str, str]], list[str]], list[str]]] = {
    "add": (lambda i: ["add", "--type", "fact", "added after damage", "--tag", "x:y"],
            ["--format", "json", "tags"]),
    "tag": (lambda i: ["tag", i["c"], "x:z"], ["--format", "json", "tags"]),
    "link": (lambda i: ["link", i["c"], i["a"], "--type", "DEPENDS_ON"],
             ["--format", "json", "edges", "--direction", "in", "__A__"]),
}


_VOLATILE = {"index_bytes", "size_bytes", "seconds", "index_size", "index", "store"}
_TIMES = {"created_at", "updated_at", "created", "updated", "id", "work_commit"}


def _strip(value: object, keys: set[str]) -> object:
    if isinstance(value, dict):
        return {k: _strip(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip(v, keys) for v in value]
    return value


def _normalise(text: str, *, times: bool = False) -> str:
    """JSON output without what a rebuild legitimately changes (the index file's size;
    with ``times``, the clock and ids of a write made at another moment)."""
    try:
        doc = json.loads(text)
    except ValueError:  # Markdown: its header says when it was composed
        return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<time>", text)
    if isinstance(doc, dict):
        for key in _VOLATILE:
            doc.pop(key, None)
    return json.dumps(_strip(doc, _TIMES) if times else doc, sort_keys=True)


def _expect_repaired_or_clear_error(r, *, damage: str) -> bool:
    """True when the command repaired the index (one notice), False for a clear error."""
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    if r.exit_code != 0:
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctx: error[E0"), r.stderr
        return False
    assert r.stderr.count(NOTICE) == 1, (damage, r.stderr)
    return True


_oracle: dict[tuple[str, ...], str] = {}


def _oracle_answer(template: Path, tmp: Path, args: list[str], pre: list[str] | None = None) -> str:
    key = tuple((pre or []) + ["|"] + args)
    if key not in _oracle:
        root = _copy(template, tmp / "oracle")
        if pre:
            _ok(root, *pre)
        _oracle[key] = _normalise(_ok(root, *args), times=bool(pre))
        shutil.rmtree(tmp / "oracle")
    return _oracle[key]


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("command", sorted(READS))
def test_index_damage_read_command_repairs_and_answers_correctly(
        template: tuple[Path, dict[str, str]], tmp_path: Path, damage: str, command: str) -> None:
    tpl, ids = template
    args = READS[command](ids)
    want = _oracle_answer(tpl, tmp_path, args)
    root = _copy(tpl, tmp_path)
    before = store_digest(root)
    DAMAGE[damage](root)
    r = _run(root, *args)
    if _expect_repaired_or_clear_error(r, damage=damage):
        assert _normalise(r.stdout) == want, (damage, command)
        # Repaired for good: the next command says nothing and answers the same.
        again = _run(root, *args)
        assert (again.exit_code, again.stderr, _normalise(again.stdout)) == (0, "", want)
    assert store_digest(root) == before


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("command", sorted(WRITES))
def test_index_damage_write_command_repairs_and_lands(
        template: tuple[Path, dict[str, str]], tmp_path: Path, damage: str, command: str) -> None:
    tpl, ids = template
    write = WRITES[command][0](ids)
    check = [ids["a"] if a == "__A__" else a for a in WRITES[command][1]]
    want = _oracle_answer(tpl, tmp_path, check, pre=write)
    root = _copy(tpl, tmp_path)
    DAMAGE[damage](root)
    r = _run(root, *write)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    if r.exit_code != 0:
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("ctx: error[E0"), r.stderr
        return
    # `add` never reads the index: then the read after it repairs. Either way, once.
    got = _run(root, *check)
    assert got.exit_code == 0, got.output
    assert (r.stderr + got.stderr).count(NOTICE) == 1, (r.stderr, got.stderr)
    assert r.stderr.count("\n") + got.stderr.count("\n") == 1
    assert _normalise(got.stdout, times=True) == want, (damage, command)


# -- hooks -----------------------------------------------------------------------------------
def _hook(root: Path, event: str, payload: dict) -> dict:
    r = _run(root, "hook", event, input=json.dumps(payload))
    assert r.exit_code in (0, 1), (r.exit_code, r.output)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.stdout.count("\n") == 1, r.stdout
    out = json.loads(r.stdout)
    assert isinstance(out, dict)
    return out


def _transcript(path: Path, text: str) -> Path:
    lines = [{"uuid": "u1", "isSidechain": False, "type": "user",
              "message": {"role": "user", "content": "please remember"}},
             {"uuid": "u2", "isSidechain": False, "type": "assistant",
              "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": text}]}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _payload(root: Path, **extra: str) -> dict:
    return {"session_id": "s1", "cwd": str(root.parent), "hook_event_name": "x", **extra}


def _context(out: dict) -> str:
    return out.get("hookSpecificOutput", {}).get("additionalContext", "")


def _hook_answer(root: Path, event: str, tmp: Path) -> tuple[dict, str]:
    """The hook's output and what shows it worked (the injected text, or the new node)."""
    if event == "stop":
        tr = _transcript(tmp / "t.jsonl", 'Noted. <ctx:remember type="fact" tags="x:hook">'
                                          "remembered through damage</ctx:remember>")
        out = _hook(root, "stop", _payload(root, transcript_path=str(tr)))
        return out, _normalise(_ok(root, "--format", "json", "query", "tag:x:hook"), times=True)
    out = _hook(root, event, _payload(root))
    return out, _normalise(_context(out))  # the composed view says when it was composed


HOOKS = ("session-start", "prompt-submit", "stop")


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("event", HOOKS)
def test_index_damage_hook_repairs_and_keeps_its_work(
        template: tuple[Path, dict[str, str]], tmp_path: Path, damage: str, event: str) -> None:
    tpl, _ = template
    clean = _copy(tpl, tmp_path / "clean")
    want_out, want = _hook_answer(clean, event, tmp_path / "clean")
    root = _copy(tpl, tmp_path / "damaged")
    DAMAGE[damage](root)
    out, got = _hook_answer(root, event, tmp_path / "damaged")
    assert got == want, (damage, event)
    if event != "prompt-submit":  # session-start composes, stop writes: both open the index
        assert "index was damaged" in out.get("systemMessage", ""), out
        assert out.get("systemMessage", "").count("index was damaged") == 1
    assert "index was damaged" not in want_out.get("systemMessage", "")


# -- containment: the index files are never followed out of the store -----------------------
@pytest.mark.parametrize("name", ["index", "index/index.sqlite", "index/index.sqlite-wal",
                                  "index/index.sqlite-shm", "index/index.sqlite-journal"])
def test_index_symlinked_file_is_refused_and_foreign_file_untouched(
        template: tuple[Path, dict[str, str]], tmp_path: Path, name: str) -> None:
    tpl, ids = template
    root = _copy(tpl, tmp_path / "s")
    foreign_dir = tmp_path / "foreign"
    foreign_dir.mkdir()
    foreign = foreign_dir / "victim.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE mine (x)")
    conn.commit()
    conn.close()
    target = root / name
    if name == "index":
        shutil.rmtree(target)
        target.symlink_to(foreign_dir, target_is_directory=True)
    else:
        if target.exists():
            target.unlink()
        target.symlink_to(foreign)
    snapshot = {p.name: (p.read_bytes(), p.stat().st_mode) for p in foreign_dir.iterdir()}
    before = store_digest(root)
    for args in (["list"], ["search", "WAL"], ["tag", ids["a"], "x:y"], ["rebuild"],
                 ["rebuild", "--full"]):
        r = _run(root, *args)
        assert (r.exit_code, r.stdout) == (1, ""), (args, r.output)
        assert r.stderr.startswith("ctx: error[E020]: refusing ") and str(target) in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1
    assert {p.name: (p.read_bytes(), p.stat().st_mode) for p in foreign_dir.iterdir()} == snapshot
    assert store_digest(root) == before
    assert target.is_symlink()


def test_index_symlink_arriving_by_git_clone_is_refused(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git = ["git", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(origin)], check=True)
    assert run_ctx(["--ctx-dir", str(origin / ".ctx"), "init"], cwd=origin).returncode == 0 \
        or (origin / ".ctx" / "HEAD").exists()
    victim = tmp_path / "victim.sqlite"
    conn = sqlite3.connect(victim)
    conn.execute("CREATE TABLE mine (x)")
    conn.commit()
    conn.close()
    before = victim.read_bytes()
    shutil.rmtree(origin / ".ctx" / "index", ignore_errors=True)
    (origin / ".ctx" / "index").mkdir()
    (origin / ".ctx" / "index" / "index.sqlite").symlink_to(victim)
    subprocess.run([*git, "-C", str(origin), "add", "-f", "-A"], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-q", "-m", "hostile"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    assert (clone / ".ctx" / "index" / "index.sqlite").is_symlink()
    r = run_ctx(["list"], cwd=clone)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("ctx: error[E020]: refusing ") and "index.sqlite" in r.stderr
    out = json.loads(run_ctx(["hook", "session-start"], cwd=clone,
                             stdin=json.dumps({"session_id": "s", "cwd": str(clone)})).stdout)
    assert isinstance(out, dict)
    assert victim.read_bytes() == before
    assert not Path(str(victim) + "-wal").exists()
    names = [r[0] for r in sqlite3.connect(victim).execute("SELECT name FROM sqlite_master")]
    assert names == ["mine"]


def test_index_nonempty_directory_is_one_clear_error(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    tpl, _ = template
    root = _copy(tpl, tmp_path)
    _directory(root)
    (root / INDEX / "something").write_text("x")
    before = store_digest(root)
    r = _run(root, "list")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.startswith("ctx: error[E020]: refusing ") and "is a directory" in r.stderr
    assert store_digest(root) == before and (root / INDEX / "something").exists()


# -- a read-only checkout ----------------------------------------------------------------------
def _can_mount_read_only() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    script = "mount --bind /tmp /tmp && mount -o remount,ro,bind /tmp"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, check=False)
    return probe.returncode == 0


def _readonly_run(base: Path, root: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ctx on a read-only filesystem: ``base`` bind-mounted read-only in a private
    mount namespace as root, else made unwritable by permissions."""
    cmd = [sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(root), *args]
    if os.geteuid() == 0:
        script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
        cmd = ["unshare", "-m", "sh", "-c", script, "sh", str(base), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "HOME": str(base)})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.skipif(os.geteuid() == 0 and not _can_mount_read_only(),
                    reason="needs a private mount namespace to make a read-only filesystem")
@pytest.mark.parametrize("damage", ["none", "stale", "garbage-header", "meta-garbage", "missing",
                                    "no-index-dir"])
def test_index_read_only_checkout_still_answers(
        template: tuple[Path, dict[str, str]], tmp_path: Path, damage: str) -> None:
    tpl, _ = template
    base = tmp_path / "ro"
    root = _copy(tpl, base)
    if damage == "stale":  # the index is behind the pointers: catching up needs a write
        _ok(root, "add", "--type", "fact", "written before the checkout went read-only")
        gc.collect()
    want = _normalise(_ok(root, "--format", "json", "list"))
    if damage == "stale":
        shutil.rmtree(root / "index")
        shutil.copytree(tpl / "index", root / "index")
    elif damage == "missing":
        (root / INDEX).unlink()
    elif damage == "no-index-dir":
        shutil.rmtree(root / "index")
    elif damage != "none":
        DAMAGE[damage](root)
    holder = None
    if damage == "meta-garbage":
        # Another reader keeps the WAL's -shm file, so SQLite can open the file read-only
        # and see the damage; with no -shm left it cannot open it at all (a silent memory
        # index). Commands close their connections, so none is left behind to do this.
        holder = sqlite3.connect(root / INDEX)
        holder.execute("SELECT count(*) FROM meta").fetchone()
    index_before = {p.name: p.read_bytes() for p in (root / "index").glob("*")} \
        if (root / "index").is_dir() else None
    if os.geteuid() != 0:
        for path in [base, *base.rglob("*")]:
            os.chmod(path, 0o555 if path.is_dir() else 0o444)
    try:
        probe = _readonly_run(base, root, ["--format", "json", "list"])
        after = {p.name: p.read_bytes() for p in (root / "index").glob("*")} \
            if (root / "index").is_dir() else None
    finally:
        if holder is not None:
            holder.close()
        if os.geteuid() != 0:
            for path in [base, *base.rglob("*")]:
                os.chmod(path, 0o755 if path.is_dir() else 0o644)
    assert probe.returncode == 0, probe.stderr
    assert _normalise(probe.stdout) == want
    if damage in ("garbage-header", "meta-garbage"):
        assert probe.stderr.count(NOTICE) == 1 and "in memory" in probe.stderr, probe.stderr
    else:
        assert probe.stderr == ""
    assert after == index_before


# -- ctx debug verify --index -------------------------------------------------------------------
HAND_EDITS = {
    "node-content": "UPDATE nodes SET content = 'forged' WHERE id = (SELECT min(id) FROM nodes)",
    "extra-tag": "INSERT INTO tags(node_id, tag) SELECT min(id), 'forged:tag' FROM nodes",
    "missing-edge": "DELETE FROM edges",
    "view-query": "UPDATE views SET query = 'type:secret'",
    "applied-commit": "DELETE FROM applied WHERE kind = 'commit'",
    "fts-text": "UPDATE nodes_fts SET content = 'forged' WHERE rowid = (SELECT min(rowid) FROM nodes_fts)",
    "extra-node": "INSERT INTO nodes(id, type, content, status, created_at, updated_at, metadata, "
                  "tokens, version) VALUES ('01ZZZZZZZZZZZZZZZZZZZZZZZZ', 'fact', 'planted', 'active', "
                  "0, 0, '{}', 1, x'00')",
}


def test_index_verify_index_passes_on_a_healthy_index(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    tpl, _ = template
    root = _copy(tpl, tmp_path)
    r = _run(root, "debug", "verify", "--index")
    assert r.exit_code == 0, r.output
    assert r.stdout.rstrip().endswith(": ok")
    doc = json.loads(_ok(root, "--format", "json", "debug", "verify", "--index"))
    assert doc["ok"] and doc["problems"] == [] and doc["index"]["tables"] >= 8


@pytest.mark.parametrize("edit", sorted(HAND_EDITS))
def test_index_verify_index_finds_hand_edited_rows_and_rebuild_fixes_them(
        template: tuple[Path, dict[str, str]], tmp_path: Path, edit: str) -> None:
    tpl, _ = template
    root = _copy(tpl, tmp_path)
    _sql(root, HAND_EDITS[edit])
    before = store_digest(root)
    index_before = (root / INDEX).read_bytes()
    r = _run(root, "debug", "verify", "--index")
    assert r.exit_code == 3, r.output
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("error E007 index:")]
    assert lines, r.stdout
    assert (root / INDEX).read_bytes() == index_before and store_digest(root) == before
    assert _run(root, "rebuild").exit_code == 0
    again = _run(root, "debug", "verify", "--index")
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize("damage", ["garbage-header", "dropped-tags", "meta-garbage", "user-version-99"])
def test_index_verify_index_reports_damage_without_repairing(
        template: tuple[Path, dict[str, str]], tmp_path: Path, damage: str) -> None:
    tpl, _ = template
    root = _copy(tpl, tmp_path)
    DAMAGE[damage](root)
    index_before = (root / INDEX).read_bytes()
    r = _run(root, "debug", "verify", "--index")
    assert r.exit_code == 3, r.output
    assert any(ln.startswith("error E007 index:") for ln in r.stdout.splitlines()), r.stdout
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert (root / INDEX).read_bytes() == index_before


def test_index_library_reports_repair_once(template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """The repair is on the connection, and the session that opened it says it once."""
    from ctxstore.index import open_index
    from ctxstore.repo import open_store
    from ctxstore.session import Session

    tpl, _ = template
    root = _copy(tpl, tmp_path)
    _garbage_header(root)
    with Session(open_store(root)) as db:
        conn = db.index()
        assert conn.repaired is not None and conn.repaired.reason == "file is not a database"
        db.index()  # the same connection, caught up: no second repair
        repairs = db.take_repairs()
        assert len(repairs) == 1 and repairs[0].message().startswith("index was damaged (")
        assert db.take_repairs() == []
    conn2 = open_index(open_store(root))
    assert conn2.repaired is None
    conn2.close()
    with Session(open_store(root)) as db:  # a sound index: nothing to say
        db.index()
        assert db.take_repairs() == []


def _garbage_table(root: Path, table: str) -> None:
    conn = sqlite3.connect(root / INDEX)
    page = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?", (table,)).fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with (root / INDEX).open("r+b") as fh:
        fh.seek((page - 1) * size)
        fh.write(random.Random(4).randbytes(size))


def test_index_mid_command_corruption_is_one_clear_error_then_repaired(
        template: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Damage the open-time checks do not read (a large index skips quick_check): the
    query that meets it fails with one E007 line, and the next command rebuilds."""
    import ctxstore.index

    tpl, ids = template
    root = _copy(tpl, tmp_path)
    monkeypatch.setattr(ctxstore.index, "QUICK_CHECK_MAX_BYTES", 0)
    _garbage_table(root, "versions")
    before = store_digest(root)
    r = _run(root, "--format", "json", "show", ids["b"], "--history")
    assert (r.exit_code, r.stdout) == (1, ""), r.output
    assert r.stderr.startswith("ctx: error[E007]: index is corrupt: database disk image is malformed")
    assert r.stderr.count("\n") == 1 and r.stderr.endswith("(hint: run `ctx rebuild --full`)\n")
    assert (root / "index" / "index.sqlite-damaged").is_file()
    assert not (root / "index" / "code.sqlite-damaged").exists()  # the code index is sound
    r = _run(root, "--format", "json", "show", ids["b"], "--history")
    assert r.exit_code == 0 and r.stderr.count(NOTICE) == 1, r.stderr
    assert "database disk image is malformed" in r.stderr
    assert _normalise(r.stdout) == _normalise(_ok(tpl, "--format", "json", "show", ids["b"], "--history"))
    assert not (root / "index" / "index.sqlite-damaged").exists()
    assert store_digest(root) == before


def test_index_library_guard_raises_index_corrupt_while_reading_rows(
        template: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxstore.index
    from ctxstore.errors import IndexCorrupt
    from ctxstore.index import open_index
    from ctxstore.repo import open_store

    tpl, _ = template
    root = _copy(tpl, tmp_path)
    monkeypatch.setattr(ctxstore.index, "QUICK_CHECK_MAX_BYTES", 0)
    _garbage_table(root, "versions")
    conn = open_index(open_store(root))
    assert conn.repaired is None
    with pytest.raises(IndexCorrupt):
        list(conn.execute("SELECT * FROM versions"))
    with pytest.raises(IndexCorrupt):
        conn.execute("SELECT * FROM versions").fetchall()
    conn.close()
    conn = open_index(open_store(root))
    assert conn.repaired is not None and len(conn.execute("SELECT * FROM versions").fetchall()) > 0
    conn.close()
