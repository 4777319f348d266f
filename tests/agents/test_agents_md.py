"""`ctx agents-md`: the ranked memory section in AGENTS.md, under CLAUDE.md's rules."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx, session_of

from ctxstore.claude.claudemd import AGENTS_BEGIN, BEGIN, END, refresh
from ctxstore.claude.trust import ConsentRequired
from ctxstore.repo import open_store


def section(text: str, begin: str) -> list[str]:
    return text[text.index(begin):text.index(END) + len(END)].splitlines()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    assert run_ctx(["init"], cwd=root).returncode == 0
    for kind, text in (("decision", "Use SQLite for the index"), ("fact", "The API is REST"),
                       ("task", "Port the parser")):
        res = run_ctx(["add", "--type", kind, text], cwd=root)
        assert res.returncode == 0, res.stderr
    return root


def test_agents_md_gets_the_same_section_as_claude_md_and_keeps_the_rest(project: Path) -> None:
    agents = project / "AGENTS.md"
    head, tail = "# Agents\n\nRun `make test` before a commit.\n\n", "\n## Style\nTabs.\n"
    agents.write_text(head + AGENTS_BEGIN + "\nstale\n" + END + tail)
    res = run_ctx(["agents-md"], cwd=project)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"updated: {agents}"
    text = agents.read_text()
    assert text.startswith(head) and text.endswith(tail)  # outside the markers, byte for byte
    assert run_ctx(["claude-md"], cwd=project).returncode == 0
    body = section(text, AGENTS_BEGIN)
    assert body[1:] == section((project / "CLAUDE.md").read_text(), BEGIN)[1:]
    assert any("Use SQLite for the index" in line for line in body)
    before = agents.stat().st_mtime_ns
    res = run_ctx(["--format", "json", "agents-md"], cwd=project)
    assert json.loads(res.stdout)["changed"] is False and agents.stat().st_mtime_ns == before


def test_agents_md_path_setting_is_followed_and_confined(project: Path) -> None:
    config = project / ".ctx" / "config.toml"
    text = config.read_text()
    config.write_text(text.replace('agents_md_path = "AGENTS.md"', 'agents_md_path = "docs/AGENTS.md"'))
    assert run_ctx(["agents-md"], cwd=project).returncode == 0
    assert AGENTS_BEGIN in (project / "docs" / "AGENTS.md").read_text()
    for bad in ("../AGENTS.md", ".git/AGENTS.md", "/tmp/AGENTS.md", "AGENTS.txt"):
        config.write_text(text.replace('agents_md_path = "AGENTS.md"', f"agents_md_path = {json.dumps(bad)}"))
        res = run_ctx(["agents-md"], cwd=project)
        assert res.returncode != 0 and res.stderr.startswith("ctx: error[E015]: "), (bad, res.stderr)
        assert "agents_md_path" in res.stderr


def test_a_linked_agents_md_is_refused_and_left_in_place(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("mine\n")
    (project / "AGENTS.md").symlink_to(target)
    res = run_ctx(["agents-md"], cwd=project)
    assert res.returncode != 0 and res.stderr.startswith("ctx: error[E020]: ")
    assert target.read_text() == "mine\n" and (project / "AGENTS.md").is_symlink()


def _set(config: Path, **values: str) -> None:
    text = config.read_text()
    for key, value in values.items():
        lines = [f"{key} = {value}" if line.startswith(f"{key} = ") else line
                 for line in text.splitlines()]
        text = "\n".join(lines) + "\n"
    config.write_text(text)


def test_agents_md_on_stop_in_a_clone_needs_consent_to_exactly_those_values(git_repo: Path) -> None:
    assert run_ctx(["init"], cwd=git_repo).returncode == 0
    config = git_repo / ".ctx" / "config.toml"
    _set(config, agents_md_on_stop="true")
    store = open_store(git_repo / ".ctx")
    with pytest.raises(ConsentRequired) as info:
        refresh(session_of(store))
    assert "agents_md_on_stop" in info.value.message and "AGENTS.md" in info.value.message
    assert not (git_repo / "AGENTS.md").exists()
    res = run_ctx(["trust"], cwd=git_repo)
    assert res.returncode == 0 and 'agents_md_path = "AGENTS.md"' in res.stdout, res.stdout
    assert refresh(session_of(store)) is True
    assert AGENTS_BEGIN in (git_repo / "AGENTS.md").read_text()
    assert not (git_repo / "CLAUDE.md").exists()  # claude_md_on_stop is still false

    # A pull that moves the file: the consent no longer applies.
    _set(config, agents_md_path='"NOTES.md"')
    store = open_store(git_repo / ".ctx")
    with pytest.raises(ConsentRequired):
        refresh(session_of(store))
    assert not (git_repo / "NOTES.md").exists()
    listed = json.loads(run_ctx(["--format", "json", "trust", "--list"], cwd=git_repo).stdout)
    assert [(r["agents_md_path"], r["current"]) for r in listed["records"]] == [("AGENTS.md", False)]


def test_trust_refuses_an_agents_md_path_that_leads_out(git_repo: Path) -> None:
    assert run_ctx(["init"], cwd=git_repo).returncode == 0
    _set(git_repo / ".ctx" / "config.toml", agents_md_on_stop="true", agents_md_path='"../x.md"')
    res = run_ctx(["trust"], cwd=git_repo)
    assert res.returncode != 0 and "E015" in res.stderr
    got = subprocess.run(["git", "config", "--local", "--get-all", "ctx.trusted"], cwd=git_repo,
                         capture_output=True, text=True)
    assert got.stdout == ""


def test_a_consent_recorded_before_agents_md_existed_still_applies(git_repo: Path) -> None:
    assert run_ctx(["init"], cwd=git_repo).returncode == 0
    _set(git_repo / ".ctx" / "config.toml", claude_md_on_stop="true")
    old_record = '{"claude_md_on_stop":true,"claude_md_path":"CLAUDE.md","store":".ctx"}'
    subprocess.run(["git", "config", "--local", "--add", "ctx.trusted", old_record], cwd=git_repo,
                   check=True)
    assert refresh(session_of(open_store(git_repo / ".ctx"))) is True
    assert BEGIN in (git_repo / "CLAUDE.md").read_text()
    assert not (git_repo / "AGENTS.md").exists()
