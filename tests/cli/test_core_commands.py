"""The storage-core commands end to end through the CLI (CliRunner and subprocess)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import invoke, no_git_provenance, object_files, run_ctx, stage_file, store_digest

from ctxstore.repo import Store, open_store

HEX64 = re.compile(r"^[0-9a-f]{64}$")
ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def _error_case(runner, store: Store, args: list[str], code: str, exit_code: int = 1,
                input: str | None = None) -> str:
    before = store_digest(store.root)
    r = invoke(runner, store, *args, input=input)
    assert (r.exit_code, r.stdout, store_digest(store.root)) == (exit_code, "", before), r.output
    assert r.stderr.startswith(f"ctx: error[{code}]: "), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    return r.stderr


def test_init_creates_layout_and_initial_commit(tmp_path: Path, runner) -> None:
    ctx_dir = tmp_path / ".ctx"
    r = runner.invoke(__import__("ctxstore.cli", fromlist=["cli"]).cli,
                      ["--ctx-dir", str(ctx_dir), "init", "--no-git"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"Initialized ctx store in {ctx_dir.resolve()}"
    assert lines[1].startswith("initial commit ") and HEX64.match(lines[1].split()[-1])
    assert (ctx_dir / "HEAD").read_text() == "ref: refs/main\n"
    main = (ctx_dir / "refs" / "main").read_text()
    assert HEX64.match(main.strip()) and main.endswith("\n")
    assert stage_file(ctx_dir).read_text() == main
    for sub in ("objects", "narrative/log", "narrative/tasks", "index", "DERIVED", "local"):
        assert (ctx_dir / sub).is_dir()
    config = (ctx_dir / "config.toml").read_text()
    assert "[storage]\ncompression_level = 3" in config and 'ctx_version = "1.0.0"' in config
    assert "index/" in (ctx_dir / ".gitignore").read_text()
    attrs = (ctx_dir / ".gitattributes").read_text()
    assert "objects/** binary" in attrs and "narrative/log/** merge=union" in attrs
    assert "refs/** -text merge=union" in attrs
    assert (ctx_dir / "narrative" / "README.md").read_text().startswith("# ")


def test_init_twice_is_e013_and_force_keeps_history(store: Store, runner) -> None:
    _error_case(runner, store, ["init"], "E013")
    head = store.read_head().single
    (store.root / "config.toml").write_text("[storage]\ncompression_level = 9\n")
    r = invoke(runner, store, "init", "--force", "--no-git")
    assert r.exit_code == 0 and r.stdout.startswith("Reinitialized ctx store")
    assert open_store(store.root).read_head().single == head
    assert "compression_level = 3" in (store.root / "config.toml").read_text()


def test_init_in_git_repo_registers_driver_and_stages(git_repo: Path) -> None:
    r = run_ctx(["init"], cwd=git_repo)
    assert r.returncode == 0, r.stderr
    assert "git add .ctx" in r.stdout
    import subprocess

    driver = subprocess.run(["git", "config", "--get", "merge.ctx-ref.driver"], cwd=git_repo,
                            capture_output=True, text=True).stdout.strip()
    assert driver.endswith("merge-ref %O %A %B")
    attrs = (git_repo / ".git" / "info" / "attributes").read_text()
    assert "/.ctx/refs/** merge=ctx-ref" in attrs and "/.ctx/STAGE merge=ctx-ref" in attrs
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=git_repo,
                            capture_output=True, text=True).stdout.split()
    assert ".ctx/HEAD" in staged and ".ctx/refs/main" in staged
    assert ".ctx/STAGE" not in staged  # per clone: .ctx/local/STAGE
    assert not any(p.startswith((".ctx/index", ".ctx/LOCK", ".ctx/local")) for p in staged)
    # running init again with --force is idempotent for Git's files
    again = run_ctx(["init", "--force"], cwd=git_repo)
    assert again.returncode == 0
    assert (git_repo / ".git" / "info" / "attributes").read_text() == attrs


def test_init_no_git_touches_no_git_files(git_repo: Path) -> None:
    r = run_ctx(["init", "--no-git"], cwd=git_repo)
    assert r.returncode == 0
    assert not (git_repo / ".git" / "info" / "attributes").exists() or \
        "ctx" not in (git_repo / ".git" / "info" / "attributes").read_text()


def test_add_prints_ulid_and_stages(store: Store, runner) -> None:
    r = invoke(runner, store, "add", "--type", "fact", "--tag", "project:demo", "--meta",
               "source=test", "SQLite uses WAL")
    assert r.exit_code == 0 and ULID.match(r.stdout.strip()), r.output
    r2 = invoke(runner, store, "--format", "json", "add", "--type", "observation", "--stdin",
                input="from stdin\n")
    doc = json.loads(r2.stdout)
    assert doc["version"] == 1 and doc["type"] == "observation" and ULID.match(doc["id"])
    state = json.loads(invoke(runner, store, "debug", "state", "--format", "json").stdout)
    recs = {rec["record"]["id"]: rec["record"] for rec in state["records"]}
    assert recs[r.stdout.strip()]["tags"] == ["project:demo"]
    assert recs[r.stdout.strip()]["metadata"] == {"source": "test", "provenance": no_git_provenance()}
    assert recs[doc["id"]]["content"] == "from stdin\n"


@pytest.mark.parametrize("args,code", [
    (["add", "--type", "nonsense", "x"], "E011"),
    (["add", "--type", "fact", "   "], "E011"),
    (["add", "--type", "fact", "--tag", "bad tag!", "x"], "E011"),
    (["add", "--type", "fact", "--meta", "novalue", "x"], "E011"),
    (["add", "--type", "fact"], "E011"),
    (["commit"], "E011"),
    (["commit", "-m", "  "], "E011"),
    (["stage", "abort"], "E018"),
    (["stage", "start", " "], "E011"),
    (["debug", "cat", "zz"], "E011"),
    (["debug", "cat", "abcd" * 16], "E001"),
])
def test_bad_input_is_one_line_error_and_store_unchanged(store: Store, runner, args, code) -> None:
    _error_case(runner, store, args, code)


def test_usage_errors_exit_2(store: Store, runner) -> None:
    r = invoke(runner, store, "add", "--type")
    assert r.exit_code == 2
    r = invoke(runner, store, "no-such-command")
    assert r.exit_code == 2


def test_missing_store_is_e012(tmp_path: Path) -> None:
    r = run_ctx(["--ctx-dir", str(tmp_path / "nowhere"), "log"], cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("ctx: error[E012]: ")
    assert str(tmp_path / "nowhere") in r.stderr


def test_commit_log_and_stage_status(store: Store, runner) -> None:
    a = invoke(runner, store, "add", "--type", "fact", "one").stdout.strip()
    status = invoke(runner, store, "stage", "status").stdout
    assert "staged:  1 work commits, 1 records" in status
    log = invoke(runner, store, "log").stdout
    assert log.startswith("staged: 1 work commit, 1 record")
    r = invoke(runner, store, "commit", "-m", "first fact")
    assert r.exit_code == 0
    m = re.match(r"committed ([0-9a-f]{64}): 1 records from 1 work commits, 1 narrative files$",
                 r.stdout.strip())
    assert m, r.stdout
    assert open_store(store.root).read_head().single.hex() == m.group(1)
    doc = json.loads(invoke(runner, store, "log", "--format", "json").stdout)
    assert doc["staged"] is None
    assert [c["message"] for c in doc["commits"]] == ["first fact", "Initialize ctx store"]
    assert doc["commits"][0]["parents"] == [doc["commits"][1]["id"]]
    assert invoke(runner, store, "log", "-n", "1").stdout.count("commit ") == 1
    assert invoke(runner, store, "commit", "-m", "again").stdout == "nothing to commit\n"
    st = json.loads(invoke(runner, store, "stage", "status", "--format", "json").stdout)
    assert st["stage"] == [] and st["records"] == 0
    assert a in invoke(runner, store, "debug", "state").stdout


def test_commit_amend_keeps_parent(store: Store, runner) -> None:
    invoke(runner, store, "add", "--type", "fact", "one")
    invoke(runner, store, "commit", "-m", "first")
    invoke(runner, store, "add", "--type", "fact", "two")
    r = invoke(runner, store, "commit", "--amend", "-m", "first and second")
    assert r.stdout.startswith("amended ")
    doc = json.loads(invoke(runner, store, "log", "--format", "json").stdout)
    assert [c["message"] for c in doc["commits"]] == ["first and second", "Initialize ctx store"]


def test_stage_session_lifecycle(store: Store, runner) -> None:
    r = invoke(runner, store, "stage", "start", "Fix timeout handling")
    assert re.match(r"Session ID: [0-9a-f-]{36}$", r.stdout.strip())
    _error_case(runner, store, ["stage", "start", "other"], "E008")
    invoke(runner, store, "add", "--type", "decision", "use backoff")
    st = json.loads(invoke(runner, store, "stage", "status", "--format", "json").stdout)
    assert st["task"] == "Fix timeout handling" and st["work_commits"] == 2 and st["records"] == 1
    assert st["steps"] == {"session_start": 1, "change": 1}
    flushed = invoke(runner, store, "stage", "flush").stdout
    assert flushed == f"STAGE {st['stage'][0]} is durable\n"
    assert invoke(runner, store, "stage", "recover").stdout.startswith("STAGE is intact (2 work commits)")
    r = invoke(runner, store, "stage", "compact", "--message", "Completed timeout fix")
    assert r.stdout.startswith("compacted 2 work commits (1 records) into ")
    assert invoke(runner, store, "stage", "status").stdout.endswith("STAGE:   nothing staged\n")
    assert invoke(runner, store, "stage", "recover").stdout == "no staging session: nothing to recover\n"


def test_stage_abort_records_reason(store: Store, runner) -> None:
    invoke(runner, store, "stage", "start", "Try something")
    node = invoke(runner, store, "add", "--type", "hypothesis", "maybe").stdout.strip()
    r = invoke(runner, store, "stage", "abort", "--yes", "--reason", "Changed approach")
    assert r.stdout.startswith("aborted session ")
    assert node not in invoke(runner, store, "debug", "state").stdout
    log = invoke(runner, store, "log", "-n", "1").stdout
    assert "Abort session" in log and "Reason: Changed approach" in log and "aborted session" in log


def test_gc_dry_run_then_delete(store: Store, runner) -> None:
    invoke(runner, store, "add", "--type", "fact", "x")
    invoke(runner, store, "commit", "-m", "c")
    dry = json.loads(invoke(runner, store, "gc", "--dry-run", "--keep-days", "0", "--format", "json").stdout)
    assert dry["dry_run"] and dry["deleted"] >= 2  # the work commit and its batch
    digest = store_digest(store.root)
    assert digest == store_digest(store.root)
    for oid in dry["deleted_ids"]:
        # Folded steps never reached the committed area: only this clone's staging area.
        assert object_files(store.root, oid) == [store.root / "local/work/objects" / oid[:2] / oid]
    r = invoke(runner, store, "gc", "--keep-days", "0")
    assert f"deleted {dry['deleted']} (" in r.stdout
    for oid in dry["deleted_ids"]:
        assert object_files(store.root, oid) == []
    assert invoke(runner, store, "debug", "verify").exit_code == 0
    assert "x" in invoke(runner, store, "debug", "state").stdout


def test_gc_default_grace_keeps_recent(store: Store, runner) -> None:
    invoke(runner, store, "add", "--type", "fact", "x")
    invoke(runner, store, "commit", "-m", "c")
    doc = json.loads(invoke(runner, store, "gc", "--format", "json").stdout)
    assert doc["deleted"] == 0 and doc["kept_recent"] >= 2


def test_debug_cat_refs_history_verify(store: Store, runner) -> None:
    invoke(runner, store, "add", "--type", "fact", "hello world")
    head = open_store(store.root).read_head().single.hex()
    doc = json.loads(invoke(runner, store, "debug", "cat", head[:8]).stdout)
    assert doc["object"]["type"] == "commit" and doc["object"]["message"] == "Initialize ctx store"
    tree = doc["object"]["root_tree"]
    assert json.loads(invoke(runner, store, "debug", "cat", tree).stdout)["object"] == \
        {"type": "tree", "v": 1, "entries": []}
    refs_out = invoke(runner, store, "debug", "refs").stdout.splitlines()
    assert refs_out[0] == "HEAD         -> refs/main"
    assert refs_out[1] == f"refs/main    {head}"
    assert refs_out[2].startswith("STAGE        ")
    hist = json.loads(invoke(runner, store, "debug", "history", "--format", "json").stdout)
    assert [e["type"] for e in hist["entries"]] == ["work_commit", "commit"]
    assert invoke(runner, store, "debug", "history", "--limit", "1").stdout.count("\n") == 1
    v = invoke(runner, store, "debug", "verify")
    assert v.exit_code == 0 and v.stdout.endswith("0 problems: ok\n")


def test_debug_cat_blob_prints_raw_bytes(store: Store, runner) -> None:
    big = "row\n" * 2000
    invoke(runner, store, "add", "--type", "source", "--stdin", input=big)
    state = json.loads(invoke(runner, store, "debug", "state", "--format", "json").stdout)
    blob = state["records"][0]["record"]["content_blob"]
    r = invoke(runner, store, "debug", "cat", blob)
    assert r.stdout == big


def test_installed_console_script_runs(tmp_path: Path) -> None:
    import shutil
    import subprocess

    exe = shutil.which("ctx")
    assert exe, "the ctx console script is installed"
    r = subprocess.run([exe, "--ctx-dir", str(tmp_path / ".ctx"), "init", "--no-git"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("Initialized ctx store")
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert r.stdout.startswith("ctx, version ")


def test_ctx_dir_env_and_worktree_path(store: Store, tmp_path: Path) -> None:
    r = run_ctx(["stage", "status"], env={"CTX_DIR": str(store.root)}, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("HEAD:")
    r = run_ctx(["--ctx-dir", str(store.root.parent), "stage", "status"], cwd=tmp_path)
    assert r.returncode == 0
    r = run_ctx(["stage", "status"], cwd=store.root.parent / "")
    assert r.returncode == 0


def test_internal_errors_are_one_line(store: Store, runner, monkeypatch) -> None:
    import ctxstore.staging

    def boom(*a, **k):
        raise RuntimeError("unexpected")

    monkeypatch.setattr(ctxstore.staging, "session_status", boom)
    r = invoke(runner, store, "stage", "status")
    assert r.exit_code == 1
    assert r.stderr == "ctx: internal error: RuntimeError (rerun with --debug)\n"
    r = invoke(runner, store, "--debug", "stage", "status")
    assert "Traceback" in r.stderr and "RuntimeError: unexpected" in r.stderr


def test_bad_config_is_e015(store: Store, runner) -> None:
    (store.root / "config.toml").write_text("[storage]\ncompression_level = 'high'\n")
    r = invoke(runner, store, "log")
    assert r.exit_code == 1 and r.stderr.startswith("ctx: error[E015]: ")
    (store.root / "config.toml").write_text("[repo]\nctx_version = \"9.0.0\"\n")
    r = invoke(runner, store, "log")
    assert r.stderr.startswith("ctx: error[E014]: store was written by ctx 9.0.0")
