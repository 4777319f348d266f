"""`ctx doctor`: one line per check, each failing one with its fix; exit 0 only when all pass."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.claude.notice import first_notice


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return root


def doctor(cwd: Path, *args: str) -> tuple[int, dict]:
    res = run_ctx(["--format", "json", "doctor", *args], cwd=cwd)
    assert res.stderr == "", res.stderr
    return res.returncode, json.loads(res.stdout)


def failing(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["checks"] if not c["ok"]}


@pytest.mark.git
def test_doctor_passes_on_a_complete_setup_and_prints_one_line_per_check(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    assert run_ctx(["init"], cwd=root).returncode == 0
    assert run_ctx(["install"], cwd=root).returncode == 0
    code, doc = doctor(root)
    assert code == 0 and doc["ok"] is True, doc
    names = [c["name"] for c in doc["checks"]]
    assert names[0] == "hooks" and {"store", "merge driver", "index", "mcp server",
                                    "skill and plugin versions"} <= set(names)
    text = run_ctx(["doctor"], cwd=root)
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert len(lines) == len(doc["checks"]) + 1 and lines[-1] == "all checks passed"
    assert all(line.startswith("ok    ") for line in lines[:-1])


@pytest.mark.git
def test_doctor_names_each_broken_piece_with_its_fix(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    code, doc = doctor(root)  # nothing set up: no hooks, no store
    bad = failing(doc)
    assert code == 1 and doc["ok"] is False
    assert "ctx install" in bad["hooks"]["fix"]
    assert "ctx init" in bad["store"]["fix"]
    text = run_ctx(["doctor"], cwd=root)
    assert text.returncode == 1
    fail_lines = [line for line in text.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fail_lines) == 2 and all("-> fix: " in line for line in fail_lines)
    assert text.stdout.splitlines()[-1] == f"2 of {len(doc['checks'])} checks failed"

    # A store and hooks, but the merge driver of this clone is gone and the hooks' ctx moved.
    assert run_ctx(["init"], cwd=root).returncode == 0
    assert run_ctx(["install", "--local"], cwd=root).returncode == 0
    subprocess.run(["git", "config", "--local", "--unset", "merge.ctx-ref.driver"], cwd=root,
                   check=True)
    local = root / ".claude" / "settings.local.json"
    local.write_text(local.read_text().replace('"/', '"/moved/venv/'))
    code, doc = doctor(root)
    bad = failing(doc)
    assert code == 1 and set(bad) == {"merge driver", "ctx for .claude/settings.local.json"}
    assert "ctx init" in bad["merge driver"]["fix"]
    assert "does not exist" in bad["ctx for .claude/settings.local.json"]["detail"]
    assert run_ctx(["init"], cwd=root).returncode == 0
    assert run_ctx(["install", "--local"], cwd=root).returncode == 0
    assert doctor(root)[0] == 0


@pytest.mark.git
def test_doctor_names_a_bad_config_value_with_its_fix_not_a_rebuild(tmp_path: Path) -> None:
    """A teammate commits a bad config.toml value: doctor names the config, not the index.

    `ctx rebuild` stops with the same E015, so it cannot be the fix; nor for a pointer that
    names a missing object.
    """
    root = _repo(tmp_path)
    assert run_ctx(["init"], cwd=root).returncode == 0
    assert run_ctx(["install"], cwd=root).returncode == 0
    config = root / ".ctx" / "config.toml"
    good = config.read_text()
    config.write_text(good.replace("default_budget = 50000", 'default_budget = "lots"'))
    code, doc = doctor(root)
    bad = failing(doc)
    assert code == 1 and set(bad) == {"config"}, bad
    assert "[retrieval] default_budget" in bad["config"]["detail"]
    assert "config.toml" in bad["config"]["fix"] and "rebuild" not in bad["config"]["fix"]
    assert "index" not in {c["name"] for c in doc["checks"]}  # it cannot open without one
    config.write_text(good)
    code, doc = doctor(root)
    assert code == 0, failing(doc)
    # A pointer naming an object this clone lacks: the pointer is the problem, not the index.
    (root / ".ctx" / "refs" / "main").write_text("cd" * 32 + "\n")
    code, doc = doctor(root)
    bad = failing(doc)
    assert code == 1 and set(bad) == {"index"}, bad
    assert "referenced by refs/main" in bad["index"]["detail"]
    assert "git log -p -- .ctx/refs/main" in bad["index"]["fix"], bad


@pytest.mark.git
def test_doctor_reports_a_store_below_the_root_and_stale_skills_and_plugins(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    sub = root / "pkg"
    sub.mkdir()
    assert run_ctx(["init", "--here"] if "--here" in run_ctx(["init", "--help"]).stdout else ["init"],
                   cwd=sub).returncode == 0
    if (sub / ".ctx").is_dir():  # a store Claude Code, started at the root, would not find
        code, doc = doctor(sub)
        assert code == 1 and "store" in failing(doc)
    home = Path(os.environ["HOME"])
    plugins = home / ".claude" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "installed_plugins.json").write_text(json.dumps(
        {"version": 2, "plugins": {"ctx@ctx": [{"scope": "user", "version": "0.0.1",
                                                "installPath": str(tmp_path / "x")}]}}))
    code, doc = doctor(root)
    check = failing(doc)["skill and plugin versions"]
    assert "plugin ctx@ctx is 0.0.1" in check["detail"] and "/plugin update" in check["detail"]


@pytest.mark.git
def test_doctor_reads_a_linked_user_settings_and_never_a_committed_fifo(tmp_path: Path) -> None:
    """``~/.claude/settings.json`` may be a link into dotfiles (install writes through it); a
    project's ``.claude`` comes from a clone: a FIFO there is refused, not read (no hang)."""
    from ctxstore.claude.doctor import Setup, run_checks
    from ctxstore.claude.install import ctx_hooks

    root = _repo(tmp_path)
    claude = tmp_path / "home" / ".claude"
    claude.mkdir(parents=True)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text(json.dumps({"hooks": ctx_hooks([str(tmp_path / "ctx")])}))
    (claude / "settings.json").symlink_to(dotfiles / "settings.json")
    skill = root / ".claude" / "skills" / "ctx"
    skill.mkdir(parents=True)
    os.mkfifo(skill / "SKILL.md")
    checks = {c.name: c for c in run_checks(Setup(cwd=root, home=tmp_path / "home",
                                                  claude_config=claude, path="", version="x"))}
    assert checks["hooks"].ok and "~/.claude/settings.json" in checks["hooks"].detail
    assert checks["skill and plugin versions"].ok


def test_doctor_has_help_with_an_example() -> None:
    res = run_ctx(["doctor", "--help"])
    assert res.returncode == 0 and "Example" in res.stdout and "ctx doctor --format json" in res.stdout


def test_first_notice_is_true_once_per_key_and_survives_processes(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "ctx" / "notices"
    assert first_notice("a", folder) is True
    assert first_notice("a", folder) is False
    assert first_notice("b", folder) is True
    assert first_notice("", folder) is True and first_notice("", folder) is True
    # A folder on the way that is a link is not trusted: it says it again rather than never.
    evil = tmp_path / "evil" / "ctx"
    evil.mkdir(parents=True)
    (evil / "notices").symlink_to(tmp_path)
    assert first_notice("c", evil / "notices") is True and first_notice("c", evil / "notices")


@pytest.mark.slow
def test_doctor_checks_that_ctx_mcp_starts_and_answers_tools_list(tmp_path: Path) -> None:
    """Every agent but Claude Code's hooks reaches ctx through `ctx mcp`: doctor starts it."""
    import sys

    from ctxstore.claude.doctor import Setup, run_checks

    root = tmp_path / "proj"
    root.mkdir()
    assert run_ctx(["--ctx-dir", str(root / ".ctx"), "init"], cwd=root).returncode == 0
    code, doc = doctor(root)
    check = {c["name"]: c for c in doc["checks"]}["mcp server"]
    assert check["ok"] and check["detail"] == "ctx mcp answers tools/list (12 tools)", check
    # An installation whose MCP SDK is missing: the server says so and ends; doctor names it.
    broken = (sys.executable, "-c", "import sys; sys.modules['mcp'] = None; "
              "from ctxstore.cli import main; main()")
    checks = {c.name: c for c in run_checks(Setup(
        cwd=root, home=tmp_path / "home", claude_config=tmp_path / "home" / ".claude",
        path=os.environ["PATH"], version="x", ctx_command=broken))}
    mcp = checks["mcp server"]
    assert not mcp.ok and mcp.detail.startswith("ctx mcp does not answer: the server closed its "
                                                "output without answering; it said: ctx: error"
                                                "[E011]: ctx mcp needs the MCP SDK"), mcp.detail
    assert mcp.fix.startswith("reinstall ctx (pipx reinstall ctxstore)")
    assert not (tmp_path / "home" / ".ctx").exists()  # the probe ran on the project store only
