"""A committed config.toml never raises a resource limit (issue 34 items 1 and 14).

``.ctx/config.toml`` comes with the clone. Before this fix it could set ``[storage]
max_object_bytes`` to 16 GiB (a 3 GiB decompression bomb was then decoded) or ``[ingestion]
max_file_bytes`` / ``max_index_bytes`` to 16 GiB / 1 TiB (``ctx index`` read and staged a
300 MB file). The rule (docs/reliability.md, "Resource limits"): in a Git work tree a limit
above its committed ceiling (``config.LIMITS``) applies only with this clone's consent
(``ctx trust``); a store outside Git is the user's own and applies as written; nothing
passes the top of a setting's range.

A hostile config is planted for every limit; the installed CLI, the hooks and a child with
an address-space limit show what it costs.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.config import DEFAULTS, LIMITS, hard_ceiling
from ctxstore.init import init_store
from ctxstore.objects import KIND_BLOB
from ctxstore.repo import open_store
from tests.test_hostile_bombs import limited, zero_frame

pytestmark = pytest.mark.git
GIB = 1 << 30


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


def _set(config: Path, values: dict[tuple[str, str], object]) -> None:
    """Set keys of config.toml (each ``key = value`` line of its table is replaced)."""
    text = config.read_text()
    for (section, key), value in values.items():
        literal = repr(value) if not isinstance(value, str) else json.dumps(value)
        table = re.search(rf"(?ms)^\[{section}\]\n.*?(?=^\[|\Z)", text)
        assert table is not None, section
        body = re.sub(rf"(?m)^{key} = .*$", f"{key} = {literal}", table.group())
        if body == table.group():
            body = table.group().rstrip("\n") + f"\n{key} = {literal}\n\n"
        text = text[:table.start()] + body + text[table.end():]
    config.write_text(text)


def _repo(tmp_path: Path, values: dict[tuple[str, str], object], *, git_repo: bool = True) -> Path:
    """A work tree (a Git repository unless ``git_repo`` is False) whose store sets ``values``."""
    work = tmp_path / "repo"
    work.mkdir()
    if git_repo:
        git(work, "init", "-q", "-b", "main")
    init_store(work / ".ctx", git=git_repo)
    _set(work / ".ctx" / "config.toml", values)
    return work / ".ctx"


def _hostile(key: tuple[str, str]) -> float:
    """The most any config may ask for: the hard ceiling, as the setting's type."""
    return type(DEFAULTS[key[0]][key[1]])(hard_ceiling(*key))


@pytest.mark.parametrize("key", sorted(LIMITS), ids=lambda k: f"{k[0]}.{k[1]}")
def test_committed_config_raises_no_limit_without_consent(tmp_path: Path, key: tuple[str, str]) -> None:
    value = _hostile(key)
    assert value > LIMITS[key]
    ctx = _repo(tmp_path, {key: value})
    config = open_store(ctx).config
    assert config.get(*key) == LIMITS[key], key  # kept at the committed ceiling
    assert config.clamped == {key: value}
    res = run_ctx(["--ctx-dir", str(ctx), "list"], cwd=ctx.parent)
    assert res.returncode == 0, res.stderr
    warning = res.stderr.strip()
    assert warning.startswith("ctx: warning: ") and f"[{key[0]}] {key[1]} = {value}" in warning
    assert "ctx trust" in warning and len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize("key", sorted(LIMITS), ids=lambda k: f"{k[0]}.{k[1]}")
def test_own_config_raises_limits_up_to_the_hard_ceiling(tmp_path: Path, key: tuple[str, str]) -> None:
    ctx = _repo(tmp_path, {key: _hostile(key)}, git_repo=False)
    assert open_store(ctx).config.get(*key) == _hostile(key)
    over = _hostile(key) * 2 if isinstance(_hostile(key), int) else _hostile(key) + 1
    _set(ctx / "config.toml", {key: over})
    res = run_ctx(["--ctx-dir", str(ctx), "list"])
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E015]:"), res.stderr
    assert f"[{key[0]}] {key[1]}" in res.stderr


def test_lowering_a_limit_needs_no_consent(tmp_path: Path) -> None:
    ctx = _repo(tmp_path, {("ingestion", "max_file_bytes"): 1000,
                           ("storage", "compression_level"): 19})
    config = open_store(ctx).config
    assert config.get("ingestion", "max_file_bytes") == 1000
    assert config.get("storage", "compression_level") == 19 and not config.clamped
    assert run_ctx(["--ctx-dir", str(ctx), "list"]).stderr == ""


def test_trust_allows_raised_limits_until_they_change(tmp_path: Path) -> None:
    key = ("ingestion", "max_file_bytes")
    ctx = _repo(tmp_path, {key: 8 << 20})
    work = ctx.parent
    assert open_store(ctx).config.get(*key) == 2 << 20
    res = run_ctx(["trust"], cwd=work)
    assert res.returncode == 0, res.stderr
    assert "trusted: " in res.stdout and "[ingestion] max_file_bytes = 8388608" in res.stdout
    assert "[ctx]\n\ttrusted = " in (work / ".git" / "config").read_text()
    assert open_store(ctx).config.get(*key) == 8 << 20
    assert run_ctx(["list"], cwd=work).stderr == ""  # consented: no warning
    listed = json.loads(run_ctx(["trust", "--list", "--format", "json"], cwd=work).stdout)
    assert listed["limits"] == [{"values": {"ingestion.max_file_bytes": 8 << 20}, "current": True}]
    _set(ctx / "config.toml", {key: 16 << 20})  # a pull raises it further: the consent is stale
    assert open_store(ctx).config.get(*key) == 2 << 20
    listed = json.loads(run_ctx(["trust", "--list", "--format", "json"], cwd=work).stdout)
    assert listed["limits"][0]["current"] is False
    assert run_ctx(["trust"], cwd=work).returncode == 0
    assert open_store(ctx).config.get(*key) == 16 << 20
    res = run_ctx(["trust", "--revoke"], cwd=work)
    assert res.returncode == 0 and res.stdout.startswith("revoked: 1 consent(s)")
    assert open_store(ctx).config.get(*key) == 2 << 20


def test_a_forged_record_in_a_committed_bare_repository_grants_nothing(tmp_path: Path) -> None:
    # A clone can commit a directory shaped like a bare repository whose ``config`` holds a
    # record: git run in it would read that file as the clone's own configuration.
    from ctxstore.limits import limits_record

    key = ("storage", "max_object_bytes")
    work = tmp_path / "clone"
    work.mkdir()
    git(work, "init", "-q")
    sub = work / "sub"
    for folder in ("objects/xx", "refs/heads"):
        (sub / folder).mkdir(parents=True)
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    (sub / "objects" / "xx" / "keep").write_text("")
    (sub / "refs" / "heads" / "keep").write_text("")
    init_store(sub / ".ctx", git=False)
    _set(sub / ".ctx" / "config.toml", {key: 16 * GIB})
    for name in (".ctx", "sub/.ctx"):
        record = limits_record(name, {key: 16 * GIB})
        with (sub / "config").open("a") as fh:
            fh.write("[ctx]\n\ttrusted = " + json.dumps(record) + "\n")
    planted = subprocess.run(["git", "config", "--local", "--get-all", "ctx.trusted"], cwd=sub,
                             capture_output=True, text=True, check=False)
    assert limits_record(".ctx", {key: 16 * GIB}) in planted.stdout  # what unguarded git reads
    assert open_store(sub / ".ctx").config.get(*key) == GIB


def test_committed_max_object_bytes_does_not_let_a_bomb_through(tmp_path: Path) -> None:
    # The reported case: the committed config allows 16 GiB objects and a blob's file is
    # replaced by 100 KiB declaring 3 GiB. Before: 3 GiB allocated (MemoryError under the
    # limit). Now the cap stays 1 GiB and what the frame declares is refused undecoded.
    ctx = _repo(tmp_path, {("storage", "max_object_bytes"): 16 * GIB})
    for args in (["add", "note", "a note"], ["commit", "-m", "one"]):
        assert run_ctx(["--ctx-dir", str(ctx), *args]).returncode == 0
    store = open_store(ctx)
    blob = next(oid for oid in store.objects.iter_ids() if store.objects.read(oid).kind == KIND_BLOB)
    for path in store.objects.paths_for(blob):
        path.chmod(0o644)
        path.write_bytes(zero_frame(KIND_BLOB, 3 * GIB))
    res = limited(["--ctx-dir", str(ctx), "debug", "cat", blob.hex()], timeout=15)
    assert res.returncode == 3, res.stderr
    assert f"ctx: error[E003]: object {blob.hex()} is corrupt: declares" in res.stderr
    assert f"over the {GIB + 14}-byte limit" in res.stderr


def test_committed_max_file_bytes_does_not_make_index_read_a_huge_file(tmp_path: Path) -> None:
    # Item 14: max_file_bytes = 16 GiB and max_index_bytes = 1 TiB from the clone, and a 1 GiB
    # (sparse) source file: skipped at the committed ceiling, never read (under the limit).
    ctx = _repo(tmp_path, {("ingestion", "max_file_bytes"): 16 * GIB,
                           ("ingestion", "max_index_bytes"): 1 << 40})
    work = ctx.parent
    (work / "small.py").write_text("def small():\n    return 1\n")
    with (work / "huge.py").open("wb") as fh:
        fh.truncate(GIB)
    res = limited(["--ctx-dir", str(ctx), "--format", "json", "index"], timeout=30, env={})
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["written"] == ["small.py"]
    assert {"path": "huge.py", "note": f"{GIB} bytes, over [ingestion] max_file_bytes = "
                                       "2097152: skipped"} in report["notes"]
    assert "[ingestion] max_file_bytes = 17179869184 (using 2097152)" in res.stderr


def test_hooks_keep_the_committed_ceiling_too(tmp_path: Path) -> None:
    # The Stop hook reads [claude] max_commands_per_turn itself: 10,000 from the clone is 50.
    ctx = _repo(tmp_path, {("claude", "max_commands_per_turn"): 10_000})
    reply = " ".join(f"<ctx:remember>fact number {i}</ctx:remember>" for i in range(60))
    res = run_ctx(["hook", "stop", "--response", reply], env={"CTX_DIR": str(ctx)},
                  stdin=json.dumps({"session_id": "s", "cwd": str(ctx.parent)}))
    assert res.returncode == 0, res.stderr
    assert "10 command(s) over the limit of 50" in json.loads(res.stdout)["systemMessage"]
