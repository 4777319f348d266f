"""`ctx install` adds the slash-command skills and, with --mcp, the `ctx mcp` server (issue 16)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import run_ctx

from ctxstore.claude.install import SKILL_MARKER, SKILL_NAMES

SKILLS = {"recall", "remember", "forget", "consolidate", "index-code", "pin", "memory-recall",
          "memory-stats", "memory-topics", "memory-backfill"}


def _project(tmp_path: Path) -> Path:
    work = tmp_path / "proj"
    work.mkdir()
    run_ctx(["--ctx-dir", str(work / ".ctx"), "init"], cwd=work)
    return work


def _ok(res) -> str:  # type: ignore[no-untyped-def]
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_install_skills_present_after_install_and_gone_after_uninstall(tmp_path: Path) -> None:
    work = _project(tmp_path)
    assert set(SKILL_NAMES) == SKILLS
    own = work / ".claude" / "skills" / "pin" / "SKILL.md"
    own.parent.mkdir(parents=True)
    own.write_text("---\ndescription: my own pin\n---\nmine\n")
    _ok(run_ctx(["install"], cwd=work))
    for name in SKILLS - {"pin"}:
        text = (work / ".claude" / "skills" / name / "SKILL.md").read_text()
        assert text.startswith("---\nname: " + name + "\n") and SKILL_MARKER in text
        assert "description:" in text
    assert own.read_text() == "---\ndescription: my own pin\n---\nmine\n"  # the user's own stays
    again = json.loads(_ok(run_ctx(["--format", "json", "install"], cwd=work)))
    assert again["changed"] is False  # idempotent
    _ok(run_ctx(["uninstall"], cwd=work))
    for name in SKILLS - {"pin"}:
        assert not (work / ".claude" / "skills" / name).exists()
    assert own.is_file()


def test_install_local_mode_ignores_the_skills_in_git(tmp_path: Path) -> None:
    work = _project(tmp_path)
    _ok(run_ctx(["install", "--project", "--local"], cwd=work))
    ignored = (work / ".claude" / ".gitignore").read_text()
    assert all(f"/skills/{name}/" in ignored for name in SKILLS)


def test_install_mcp_project_writes_mcp_json_and_uninstall_removes_only_ctx(tmp_path: Path) -> None:
    work = _project(tmp_path)
    other = {"type": "stdio", "command": "other-server", "args": []}
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": other}}))
    dry = _ok(run_ctx(["install", "--mcp", "--dry-run"], cwd=work))
    assert "would update" in dry and json.loads((work / ".mcp.json").read_text()) == \
        {"mcpServers": {"other": other}}
    _ok(run_ctx(["install", "--mcp"], cwd=work))
    doc = json.loads((work / ".mcp.json").read_text())
    assert doc["mcpServers"] == {"other": other,
                                 "ctx": {"type": "stdio", "command": "ctx", "args": ["mcp"], "env": {}}}
    _ok(run_ctx(["uninstall"], cwd=work))
    assert json.loads((work / ".mcp.json").read_text()) == {"mcpServers": {"other": other}}


def test_install_mcp_project_creates_and_removes_its_own_mcp_json(tmp_path: Path) -> None:
    work = _project(tmp_path)
    _ok(run_ctx(["install", "--mcp"], cwd=work))
    assert json.loads((work / ".mcp.json").read_text())["mcpServers"]["ctx"]["args"] == ["mcp"]
    _ok(run_ctx(["uninstall"], cwd=work))
    assert not (work / ".mcp.json").exists()


def test_install_mcp_refuses_a_broken_mcp_json_and_writes_nothing(tmp_path: Path) -> None:
    work = _project(tmp_path)
    (work / ".mcp.json").write_text("{not json")
    res = run_ctx(["install", "--mcp"], cwd=work)
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E011]:")
    assert not (work / ".claude").exists()
    assert (work / ".mcp.json").read_text() == "{not json"


def test_install_mcp_user_scope_writes_claude_json_by_absolute_path(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3}))
    _ok(run_ctx(["install", "--user", "--mcp"], cwd=tmp_path))
    doc = json.loads((home / ".claude.json").read_text())
    entry = doc["mcpServers"]["ctx"]
    assert doc["numStartups"] == 3 and entry["args"][-1] == "mcp" and os.path.isabs(entry["command"])
    assert (home / ".claude" / "skills" / "recall" / "SKILL.md").is_file()
    _ok(run_ctx(["uninstall", "--user"], cwd=tmp_path))
    assert json.loads((home / ".claude.json").read_text()) == {"numStartups": 3}
    assert not (home / ".claude" / "skills" / "recall").exists()


def test_install_mcp_user_scope_accepts_a_large_claude_json_but_not_a_large_mcp_json(
        tmp_path: Path) -> None:
    # A long-time user's ~/.claude.json holds every project's state: well over 4 MiB.
    home = Path(os.environ["HOME"])
    projects = {f"/work/p{i}": {"history": ["x" * 1000] * 5} for i in range(1200)}
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3, "projects": projects}))
    before = (home / ".claude.json").read_bytes()
    assert len(before) > 4 * 1024 * 1024
    _ok(run_ctx(["install", "--user", "--mcp"], cwd=tmp_path))
    doc = json.loads((home / ".claude.json").read_text())
    assert doc["mcpServers"]["ctx"]["args"][-1] == "mcp" and doc["projects"] == projects
    assert (home / ".claude.json.bak").read_bytes() == before
    _ok(run_ctx(["uninstall", "--user"], cwd=tmp_path))
    assert json.loads((home / ".claude.json").read_text()) == {"numStartups": 3,
                                                               "projects": projects}
    # A project's .mcp.json comes with the clone: it stays bounded by the usual limit.
    work = _project(tmp_path)
    big = json.dumps({"mcpServers": {}, "pad": "x" * (4 * 1024 * 1024)})
    (work / ".mcp.json").write_text(big)
    res = run_ctx(["install", "--mcp"], cwd=work)
    assert res.returncode == 1 and "is larger than 4 MiB; nothing was changed" in res.stderr
    assert (work / ".mcp.json").read_text() == big and not (work / ".claude").exists()


def test_install_plugin_declares_skills_and_the_mcp_server(tmp_path: Path) -> None:
    plugin = tmp_path / "plug"
    _ok(run_ctx(["install", "--plugin", str(plugin)], cwd=tmp_path))
    for name in SKILLS:
        assert SKILL_MARKER in (plugin / "skills" / name / "SKILL.md").read_text()
    assert json.loads((plugin / ".mcp.json").read_text())["mcpServers"]["ctx"] == \
        {"type": "stdio", "command": "ctx", "args": ["mcp"], "env": {}}
    _ok(run_ctx(["uninstall", "--plugin", str(plugin)], cwd=tmp_path))
    assert not plugin.exists()
