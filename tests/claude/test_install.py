"""`ctx install` / `ctx uninstall` / `ctx install --plugin` on real settings files."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import patch_fsio, run_ctx, store_digest

from ctxstore.claude.install import (
    HOOK_EVENTS,
    SKILL_MARKER,
    SKILL_NAMES,
    is_ctx_hook,
    plugin_hook_command,
    portable_hook_command,
    resolve_ctx_command,
)
from ctxstore.cli import cli
from ctxstore.init import init_store

# A settings.json as users have them: formatted by hand, other settings, other hooks.
ORIGINAL = b"""{
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}]
    }
}
"""
SLUGS = {event: sub for event, (sub, _) in HOOK_EVENTS.items()}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a store and a hand-written .claude/settings.json; cwd is its root."""
    root = tmp_path / "proj"
    root.mkdir()
    init_store(root / ".ctx", git=False)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_bytes(ORIGINAL)
    monkeypatch.chdir(root)
    return root


def ctx(*args: str):
    return CliRunner().invoke(cli, list(args))


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".ctx" not in p.relative_to(root).parts}


def ctx_handlers(settings: dict) -> dict[str, list[dict]]:
    return {event: [h for g in groups for h in g["hooks"] if is_ctx_hook(h.get("command"))]
            for event, groups in settings.get("hooks", {}).items()}


def test_install_merges_hooks_keeps_everything_else_and_backs_up(project: Path) -> None:
    res = ctx("install")
    assert res.exit_code == 0, res.output
    settings_path = project / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_bytes())
    assert settings["model"] == "opus"
    assert settings["permissions"] == {"allow": ["Bash(npm test)"]}
    assert settings["hooks"]["PreToolUse"] == json.loads(ORIGINAL)["hooks"]["PreToolUse"]
    assert settings["hooks"]["Stop"][0] == json.loads(ORIGINAL)["hooks"]["Stop"][0]
    ours = ctx_handlers(settings)
    for event, sub in SLUGS.items():
        assert len(ours[event]) == 1, event
        # The committed file runs the portable command (it finds ctx on each machine).
        assert ours[event][0]["command"] == portable_hook_command(sub)
        assert ours[event][0]["type"] == "command" and ours[event][0]["timeout"] > 0
    assert (project / ".claude" / "settings.json.bak").read_bytes() == ORIGINAL
    skill = (project / ".claude" / "skills" / "ctx" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: ctx\n")


def test_install_twice_changes_nothing(project: Path) -> None:
    assert ctx("install").exit_code == 0
    before = snapshot(project)
    mtimes = {p: p.stat().st_mtime_ns for p in (project / ".claude").rglob("*") if p.is_file()}
    res = ctx("install")
    assert res.exit_code == 0 and "already installed" in res.output
    assert snapshot(project) == before
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes


def test_uninstall_restores_the_original_bytes(project: Path) -> None:
    assert ctx("install").exit_code == 0
    res = ctx("uninstall")
    assert res.exit_code == 0, res.output
    assert snapshot(project) == {".claude/settings.json": ORIGINAL}
    assert not (project / ".claude" / "skills").exists()
    assert "not installed" in ctx("uninstall").output


def test_uninstall_keeps_settings_changed_after_install(project: Path) -> None:
    assert ctx("install").exit_code == 0
    path = project / ".claude" / "settings.json"
    settings = json.loads(path.read_bytes())
    settings["theme"] = "dark"
    settings["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo later"}]})
    path.write_text(json.dumps(settings))
    assert ctx("uninstall").exit_code == 0
    after = json.loads(path.read_bytes())
    expected = json.loads(ORIGINAL)
    expected["theme"] = "dark"
    expected["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo later"}]})
    assert after == expected


def test_install_then_uninstall_without_prior_settings_leaves_no_trace(tmp_path: Path,
                                                                        monkeypatch) -> None:
    init_store(tmp_path / ".ctx", git=False)
    monkeypatch.chdir(tmp_path)
    assert ctx("install").exit_code == 0
    assert not (tmp_path / ".claude" / "settings.json.bak").exists()  # nothing to back up
    assert set(ctx_handlers(json.loads((tmp_path / ".claude" / "settings.json").read_bytes()))) \
        == set(HOOK_EVENTS)
    # A reinstall from another path does not back up ctx's own file; uninstall leaves nothing.
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.write_bytes(settings_path.read_bytes().replace(b"/", b"/old/", 1))
    assert ctx("install").exit_code == 0
    assert not (tmp_path / ".claude" / "settings.json.bak").exists()
    assert ctx("uninstall").exit_code == 0
    assert not (tmp_path / ".claude").exists()


def test_dry_run_writes_nothing_and_shows_the_change(project: Path) -> None:
    before = snapshot(project)
    res = ctx("install", "--dry-run")
    assert res.exit_code == 0, res.output
    assert snapshot(project) == before
    assert "would update" in res.output and "hook session-start" in res.output
    assert "nothing was written" in res.output
    assert ctx("install").exit_code == 0
    installed = snapshot(project)
    assert ctx("uninstall", "--dry-run").exit_code == 0
    assert snapshot(project) == installed


@pytest.mark.parametrize("bad", [b"{not json", b"[1, 2]", b'{"hooks": {"Stop": {"x": 1}}}',
                                 b'{"hooks": {"Stop": [3]}}'])
def test_invalid_settings_are_refused_and_nothing_is_written(project: Path, bad: bytes) -> None:
    (project / ".claude" / "settings.json").write_bytes(bad)
    before = snapshot(project)
    for command in ("install", "uninstall"):
        res = ctx(command)
        assert res.exit_code == 1, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctx: error[E011]:")
        assert "settings.json" in lines[0] and "Traceback" not in res.output
        assert snapshot(project) == before


def test_reinstall_replaces_entries_of_an_older_install_in_place(project: Path) -> None:
    def handler(command: str) -> dict:
        return {"type": "command", "command": command}

    old = {"hooks": {
        "Stop": [{"hooks": [handler("echo first"), handler("/old/venv/bin/ctx hook stop")]}],
        "SessionStart": [{"matcher": "", "hooks": [handler("ctx hook session-start")]}],
        "UserPromptSubmit": [{"hooks": [
            handler("'/usr/bin/python3' -m ctxstore.cli hook prompt-submit")]}]}}
    (project / ".claude" / "settings.json").write_text(json.dumps(old))
    assert ctx("install").exit_code == 0
    settings = json.loads((project / ".claude" / "settings.json").read_bytes())
    ours = ctx_handlers(settings)
    assert all(len(ours[e]) == 1 and "/old/" not in ours[e][0]["command"] for e in HOOK_EVENTS)
    # The old entry's group keeps its other handler; ctx's group takes the old entry's place.
    stop = settings["hooks"]["Stop"]
    assert len(stop) == 2 and is_ctx_hook(stop[0]["hooks"][0]["command"])
    assert stop[1] == {"hooks": [{"type": "command", "command": "echo first"}]}
    assert len(settings["hooks"]["SessionStart"]) == 1


def test_user_scope_writes_under_home_only(project: Path, monkeypatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    home = Path(os.environ["HOME"])
    before = snapshot(project)
    res = ctx("install", "--user")
    assert res.exit_code == 0, res.output
    assert snapshot(project) == before
    settings = json.loads((home / ".claude" / "settings.json").read_bytes())
    assert set(ctx_handlers(settings)) == set(HOOK_EVENTS)
    assert (home / ".claude" / "skills" / "ctx" / "SKILL.md").is_file()
    assert ctx("uninstall", "--user").exit_code == 0
    assert not (home / ".claude").exists()


def test_user_scope_follows_claude_config_dir(project: Path, tmp_path: Path, monkeypatch) -> None:
    config_dir = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config_dir))
    assert ctx("install", "--user").exit_code == 0
    assert (config_dir / "skills" / "ctx" / "SKILL.md").is_file()
    assert not (Path(os.environ["HOME"]) / ".claude").exists()


def test_project_scope_from_a_subdirectory_uses_the_store_root(project: Path, monkeypatch) -> None:
    sub = project / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert ctx("install", "--project").exit_code == 0
    assert (project / ".claude" / "skills" / "ctx" / "SKILL.md").is_file()
    assert not (sub / ".claude").exists()


def test_plugin_layout(tmp_path: Path) -> None:
    plugin = tmp_path / "ctx-plugin"
    res = ctx("install", "--plugin", str(plugin), "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["changed"] is True
    assert {p.relative_to(plugin).as_posix() for p in plugin.rglob("*") if p.is_file()} == \
        {".claude-plugin/marketplace.json", ".claude-plugin/plugin.json", ".mcp.json", "LICENSE",
         "README.md", "bin/ctx-hook", "hooks/hooks.json", "skills/ctx/SKILL.md",
         *(f"skills/{n}/SKILL.md" for n in SKILL_NAMES)}
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_bytes())
    assert manifest["name"] == "ctx" and manifest["version"]
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_bytes())
    assert set(hooks["hooks"]) == set(HOOK_EVENTS)
    for event, groups in hooks["hooks"].items():
        assert groups[0]["hooks"][0]["command"] == plugin_hook_command(SLUGS[event])
    again = ctx("install", "--plugin", str(plugin), "--format", "json")
    assert json.loads(again.output)["changed"] is False


def test_skill_frontmatter_and_tags() -> None:
    from ctxstore.claude.install import skill_text

    text = skill_text().decode()
    front = text.split("---\n")[1]
    assert "name: ctx" in front and "description:" in front
    description = front.split("description:", 1)[1]
    assert "<" not in description and len(description) < 1024
    for banned in ("disable-model-invocation", "user-invocable", "allowed-tools"):
        assert banned not in front  # spec 001 §12
    for tag in ("remember", "recall", "summarize", "link", "status", "task", "expand",
                "supersede", "forget"):
        assert f"<ctx:{tag}" in text, tag
    assert 'action="start"' in text and 'action="end"' in text


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_resolve_ctx_command_prefers_the_script_next_to_the_interpreter(tmp_path: Path) -> None:
    real = tmp_path / "versions" / "bin"
    real.mkdir(parents=True)
    python = _script(real / "python3", "")
    ctx_script = _script(real / "ctx", f"#!{python}\n")
    link_dir = tmp_path / "usr" / "bin"
    link_dir.mkdir(parents=True)
    (link_dir / "python3").symlink_to(python)
    shim = _script(tmp_path / "ctx-shim", "#!/usr/bin/env bash\nexec pyenv exec ctx \"$@\"\n")
    # The interpreter's own directory, then one symlink hop; a shim on PATH never wins.
    assert resolve_ctx_command(str(python), str(shim)) == [str(ctx_script)]
    assert resolve_ctx_command(str(link_dir / "python3"), str(shim)) == [str(ctx_script)]
    ctx_script.unlink()
    assert resolve_ctx_command(str(python), str(shim)) == [str(python), "-m", "ctxstore.cli"]
    pip_user = _script(tmp_path / "ctx", f"#!{python}\n")
    assert resolve_ctx_command(str(python), str(pip_user)) == [str(pip_user)]


def test_installed_command_is_this_ctx() -> None:
    prefix = resolve_ctx_command(sys.executable, None)
    assert Path(prefix[0]).is_absolute()
    assert "shims" not in prefix[0]


@pytest.mark.parametrize("command,expected", [
    ("/a/b/ctx hook stop", True), ("ctx hook session-start", True),
    ("'/with space/ctx' hook pre-compact", True), ("/usr/bin/python3 -m ctxstore.cli hook stop", True),
    ("ctx list", False), ("notify-send ctx hook", False), ("/a/ctxx hook stop", False),
    ("'unbalanced", False), (None, False)])
def test_is_ctx_hook(command: str | None, expected: bool) -> None:
    assert is_ctx_hook(command) is expected


def test_a_skill_file_of_the_users_is_backed_up_and_restored(project: Path) -> None:
    skill = project / ".claude" / "skills" / "ctx" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    mine = b"---\nname: ctx\ndescription: my own notes\n---\nHand-written.\n"
    skill.write_bytes(mine)
    assert ctx("install").exit_code == 0
    assert skill.read_bytes() != mine and skill.with_name("SKILL.md.bak").read_bytes() == mine
    assert ctx("install").exit_code == 0  # a reinstall keeps the user's copy
    assert skill.with_name("SKILL.md.bak").read_bytes() == mine
    assert ctx("uninstall").exit_code == 0
    assert skill.read_bytes() == mine and not skill.with_name("SKILL.md.bak").exists()
    assert snapshot(project) == {".claude/settings.json": ORIGINAL,
                                 ".claude/skills/ctx/SKILL.md": mine}


def test_uninstall_plugin_removes_what_install_wrote_and_nothing_else(tmp_path: Path) -> None:
    plugin = tmp_path / "ctx-plugin"
    assert ctx("install", "--plugin", str(plugin)).exit_code == 0
    dry = ctx("uninstall", "--plugin", str(plugin), "--dry-run")
    written = [p for p in plugin.rglob("*") if p.is_file()]
    assert dry.exit_code == 0 and dry.output.count("would delete") == len(written) >= 7
    assert (plugin / "hooks" / "hooks.json").is_file()
    res = ctx("uninstall", "--plugin", str(plugin))
    assert res.exit_code == 0, res.output
    assert not plugin.exists()
    assert "no ctx plugin" in ctx("uninstall", "--plugin", str(plugin)).output

    # A plugin directory the user added to keeps their files (and itself).
    assert ctx("install", "--plugin", str(plugin)).exit_code == 0
    (plugin / "README.md").write_text("mine\n")
    hooks = plugin / "hooks" / "hooks.json"
    doc = json.loads(hooks.read_bytes())
    doc["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "notify-send done"}]})
    hooks.write_text(json.dumps(doc))
    assert ctx("uninstall", "--plugin", str(plugin)).exit_code == 0
    assert sorted(p.relative_to(plugin).as_posix() for p in plugin.rglob("*") if p.is_file()) == \
        ["README.md", "hooks/hooks.json"]


def test_project_scope_with_ctx_dir_naming_the_project_plans_files_in_it(project: Path) -> None:
    # --ctx-dir accepts the project folder as well as its .ctx folder (as every command does).
    for ctx_dir in (".", str(project), str(project / ".ctx")):
        res = ctx("--ctx-dir", ctx_dir, "install", "--dry-run", "--format", "json")
        assert res.exit_code == 0, res.output
        doc = json.loads(res.output)
        assert doc["settings"] == str(project / ".claude" / "settings.json"), ctx_dir
        assert {c["path"] for c in doc["changes"]} == {
            str(project / ".claude" / name) for name in (
                "settings.json", "settings.local.json", ".gitignore", "skills/ctx/SKILL.md",
                *(f"skills/{n}/SKILL.md" for n in SKILL_NAMES))}  # issue 16: the slash-command skills


def test_backups_keep_the_mode_of_the_file_they_copy(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    settings.chmod(0o600)  # settings.json can hold secrets in "env"
    skill = project / ".claude" / "skills" / "ctx" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_bytes(b"my own skill\n")
    skill.chmod(0o600)
    assert ctx("install").exit_code == 0
    for path in (settings, skill, settings.with_name("settings.json.bak"),
                 skill.with_name("SKILL.md.bak")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_reinstall_after_ctx_moved_keeps_the_pre_install_backup(project: Path) -> None:
    assert ctx("install").exit_code == 0
    settings_path = project / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_bytes())
    # What a moved virtualenv looks like: ctx's hook commands (and a timeout) differ.
    for groups in settings["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                if is_ctx_hook(handler.get("command")):
                    sub = shlex.split(handler["command"])[-1]
                    handler["command"] = f"/old/venv/bin/ctx hook {sub}"
                    handler["timeout"] = 5
    settings_path.write_text(json.dumps(settings))
    res = ctx("install")
    assert res.exit_code == 0, res.output
    assert "backup" not in res.output
    assert (project / ".claude" / "settings.json.bak").read_bytes() == ORIGINAL
    assert ctx("uninstall").exit_code == 0
    assert snapshot(project) == {".claude/settings.json": ORIGINAL}


# -- containment: no write, read or delete through a link (issue 11, RELIABILITY CF-03) ---------

CLAUDE_PATHS = [".claude", ".claude/skills", ".claude/skills/ctx", ".claude/skills/ctx/SKILL.md",
                ".claude/skills/ctx/SKILL.md.bak", ".claude/settings.json",
                ".claude/settings.json.bak"]


def tree(root: Path) -> dict[str, object]:
    """Every entry below root (links not followed): file bytes, link targets, kinds."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = path.read_bytes()
        else:
            out[rel] = ("dir" if path.is_dir() else "special",)
    return out


def _git(*args: str, cwd: Path) -> None:
    import subprocess

    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def assert_refused(res, link: Path) -> None:
    """One E020 line naming the link, nothing on stdout, exit 1."""
    stderr = res.stderr.strip().splitlines()
    assert (res.returncode if hasattr(res, "returncode") else res.exit_code) == 1, res.stderr
    assert res.stdout == "", res.stdout
    assert len(stderr) == 1 and stderr[0].startswith(f"ctx: error[E020]: refusing {link}:"), stderr


@pytest.mark.parametrize("absolute", [False, True], ids=["relative-link", "absolute-link"])
def test_install_in_a_clone_whose_claude_dir_links_outside_writes_nothing(
        tmp_path: Path, absolute: bool) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    origin = tmp_path / "origin"
    origin.mkdir()
    _git("init", "-q", "-b", "main", cwd=origin)
    (origin / ".claude").symlink_to(outside if absolute else Path("..") / "outside")
    _git("add", ".claude", cwd=origin)
    _git("-c", "commit.gpgsign=false", "commit", "-q", "-m", "hostile", cwd=origin)
    clone = tmp_path / "clone"
    _git("clone", "-q", str(origin), str(clone), cwd=tmp_path)
    assert (clone / ".claude").is_symlink()  # git stores the link as a link
    assert run_ctx(["init"], cwd=clone).returncode == 0
    before, digest = tree(tmp_path), store_digest(clone / ".ctx")
    for args in (["install"], ["install", "--project"], ["install", "--dry-run"], ["uninstall"],
                 ["install", "--format", "json"]):
        res = run_ctx(args, cwd=clone)
        assert_refused(res, clone / ".claude")
        assert "is a symbolic link" in res.stderr
    assert tree(tmp_path) == before and store_digest(clone / ".ctx") == digest
    assert list(outside.iterdir()) == []


def _hostile(project: Path, canary: Path, rel: str) -> Path:
    """Move ``rel`` (installed, or a file made for it) into the canary and link it back."""
    path = project / rel
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"canary file\n")
    moved = canary / rel.replace("/", "_")
    path.rename(moved)
    path.symlink_to(moved)
    return path


@pytest.mark.parametrize("rel", CLAUDE_PATHS)
def test_install_and_uninstall_refuse_a_link_on_any_planned_path(project: Path, tmp_path: Path,
                                                                 rel: str) -> None:
    assert ctx("install").exit_code == 0
    canary = tmp_path / "canary"
    canary.mkdir()
    link = _hostile(project, canary, rel)
    before, canary_before = tree(project), tree(canary)
    for args in (["install"], ["uninstall"], ["install", "--dry-run"]):
        res = CliRunner().invoke(cli, args)
        assert_refused(res, link)
        assert tree(project) == before and tree(canary) == canary_before


@pytest.mark.parametrize("rel", [".claude/skills", ".claude/skills/ctx/SKILL.md",
                                 ".claude/settings.json"])
def test_a_first_install_refuses_a_link_before_writing_anything(project: Path, tmp_path: Path,
                                                                rel: str) -> None:
    canary = tmp_path / "canary"
    canary.mkdir()
    if rel == ".claude/skills":
        (canary / "skills").mkdir()
        (project / rel).symlink_to(canary / "skills")
    else:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).unlink(missing_ok=True)
        (canary / "target").write_bytes(ORIGINAL)
        (project / rel).symlink_to(canary / "target")
    before, canary_before = tree(project), tree(canary)
    res = CliRunner().invoke(cli, ["install"])
    assert_refused(res, project / rel)
    assert tree(project) == before and tree(canary) == canary_before


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_a_special_settings_file_is_refused_without_hanging(project: Path, kind: str) -> None:
    settings = project / ".claude" / "settings.json"
    settings.unlink()
    if kind == "fifo":
        os.mkfifo(settings)
    elif kind == "dev-zero":
        settings.symlink_to("/dev/zero")
    else:
        settings.mkdir()
    before = tree(project)
    for command in ("install", "uninstall"):
        res = run_ctx([command], cwd=project, timeout=30)
        assert_refused(res, settings)
        assert tree(project) == before


def test_plugin_dir_content_links_are_refused(tmp_path: Path) -> None:
    plugin = tmp_path / "ctx-plugin"
    assert ctx("install", "--plugin", str(plugin)).exit_code == 0
    canary = tmp_path / "canary"
    canary.mkdir()
    # uninstall would delete the marked SKILL.md that now sits in the canary
    link = _hostile(plugin, canary, "skills")
    before = tree(tmp_path)
    for args in (["uninstall", "--plugin", str(plugin)], ["install", "--plugin", str(plugin)]):
        assert_refused(CliRunner().invoke(cli, args), link)
        assert tree(tmp_path) == before
    # a plugin directory that is itself a link (say, committed in a clone) is refused too
    other = tmp_path / "linked-plugin"
    other.symlink_to(canary)
    assert_refused(CliRunner().invoke(cli, ["install", "--plugin", str(other)]), other)
    assert tree(tmp_path) == before | {"linked-plugin": ("link", str(canary))}


def test_a_relative_plugin_dir_through_a_link_below_cwd_is_refused(tmp_path: Path,
                                                                    monkeypatch) -> None:
    work, canary = tmp_path / "clone", tmp_path / "canary"
    work.mkdir()
    canary.mkdir()
    (work / "plugins").symlink_to(canary)  # as a clone could commit it
    monkeypatch.chdir(work)
    for args in (["install", "--plugin", "plugins/ctx"], ["uninstall", "--plugin", "plugins/ctx"],
                 ["install", "--plugin", "./plugins/../plugins/ctx"]):
        assert_refused(CliRunner().invoke(cli, args), work / "plugins")
    assert list(canary.iterdir()) == []
    # an absolute path is the user's own choice above the plugin folder
    assert ctx("install", "--plugin", str(work / "plugins" / "ctx")).exit_code == 0
    assert (canary / "ctx" / "hooks" / "hooks.json").is_file()


def _dotfiles(home: Path) -> Path:
    """~/.claude/settings.json as a link into a dotfiles repository; returns the target."""
    target = home / "dotfiles" / "claude-settings.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(ORIGINAL)
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to(target)
    return target


def test_user_settings_linked_into_dotfiles_is_written_through_and_stays_a_link(
        project: Path, monkeypatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    home = Path(os.environ["HOME"])
    target = _dotfiles(home)
    link = home / ".claude" / "settings.json"
    res = ctx("install", "--user")
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    settings = json.loads(target.read_bytes())
    assert settings["model"] == "opus"
    assert all(len(ctx_handlers(settings)[event]) == 1 for event in HOOK_EVENTS)
    backup = home / ".claude" / "settings.json.bak"
    assert not backup.is_symlink() and backup.read_bytes() == ORIGINAL
    installed = tree(home)
    assert "already installed" in ctx("install", "--user").output
    assert tree(home) == installed  # byte-identical, the link kept
    assert ctx("uninstall", "--user").exit_code == 0
    assert link.is_symlink() and target.read_bytes() == ORIGINAL and not backup.exists()


def test_user_claude_dir_linked_into_dotfiles_is_followed(project: Path, monkeypatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    home = Path(os.environ["HOME"])
    real = home / "dotfiles" / "claude"
    real.mkdir(parents=True)
    (home / ".claude").symlink_to(real)
    assert ctx("install", "--user").exit_code == 0
    assert (home / ".claude").is_symlink()
    assert (real / "skills" / "ctx" / "SKILL.md").is_file() and (real / "settings.json").is_file()
    assert ctx("uninstall", "--user").exit_code == 0
    assert (home / ".claude").is_symlink() and list(real.iterdir()) == []


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "dangling"])
def test_user_settings_link_to_a_special_or_missing_file_is_refused(project: Path, monkeypatch,
                                                                    kind: str) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    home = Path(os.environ["HOME"])
    (home / ".claude").mkdir()
    link = home / ".claude" / "settings.json"
    if kind == "fifo":
        os.mkfifo(home / "fifo")
    link.symlink_to("/dev/zero" if kind == "dev-zero" else home / kind)
    before = tree(home)
    for command in ("install", "uninstall"):
        res = run_ctx([command, "--user"], cwd=project, timeout=30)
        assert_refused(res, link)
        assert tree(home) == before


def test_user_uninstall_never_deletes_through_a_linked_skill(project: Path, monkeypatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    home = Path(os.environ["HOME"])
    assert ctx("install", "--user").exit_code == 0
    skill = home / ".claude" / "skills" / "ctx" / "SKILL.md"
    kept = home / "dotfiles" / "SKILL.md"
    kept.parent.mkdir()
    skill.rename(kept)
    skill.symlink_to(kept)
    before = tree(home)
    res = CliRunner().invoke(cli, ["uninstall", "--user"])
    assert_refused(res, skill)
    assert tree(home) == before


def test_two_concurrent_installs_leave_one_valid_settings_file(tmp_path: Path) -> None:
    import subprocess

    expected = None
    for round_ in range(4):
        root = tmp_path / f"p{round_}"
        (root / ".claude").mkdir(parents=True)
        init_store(root / ".ctx", git=False)
        (root / ".claude" / "settings.json").write_bytes(ORIGINAL)
        procs = [subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "install"], cwd=root,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(2)]
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0 and b"Traceback" not in err, err
        settings = json.loads((root / ".claude" / "settings.json").read_bytes())
        counts = {event: len(handlers) for event, handlers in ctx_handlers(settings).items()}
        assert counts == {**dict.fromkeys(HOOK_EVENTS, 1), "PreToolUse": 0}  # not duplicated
        assert (root / ".claude" / "settings.json.bak").read_bytes() == ORIGINAL
        result = tree(root / ".claude")
        expected = expected or result
        assert result == expected  # the same bytes as any other install
        assert not [p for p in (root / ".claude").rglob("*.tmp")]


@pytest.mark.parametrize("bad", [b"[" * 100_000, b'{"x": NaN}', b'{"x": "\\ud800"}',
                                 b"\xff\xfe{}"], ids=["deep", "nan", "surrogate", "utf16"])
def test_hostile_settings_content_is_one_clear_error(project: Path, bad: bytes) -> None:
    (project / ".claude" / "settings.json").write_bytes(bad)
    before = snapshot(project)
    for command in ("install", "uninstall"):
        res = run_ctx([command], cwd=project)
        assert res.returncode == 1 and res.stdout == "", res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctx: error[E011]:"), lines
        assert "settings.json" in lines[0]
        assert snapshot(project) == before


def test_hook_commands_are_absolute_and_quoted(tmp_path: Path) -> None:
    from ctxstore.claude.install import hook_command

    odd = tmp_path / "my venv's $HOME" / "bin"
    odd.mkdir(parents=True)
    python = _script(odd / "python3", "")
    script = _script(odd / "ctx", f"#!{python}\n")
    prefix = resolve_ctx_command(str(python), None)
    command = hook_command(prefix, "stop")
    assert shlex.split(command) == [str(script), "hook", "stop"]
    assert command.startswith("'") and is_ctx_hook(command)
    # through the CLI (--user and --local: this machine's own settings): every command
    # parses back to this ctx by absolute path
    root = tmp_path / "p"
    root.mkdir()
    init_store(root / ".ctx", git=False)
    assert run_ctx(["install", "--local"], cwd=root).returncode == 0
    assert not (root / ".claude" / "settings.json").exists()
    settings = json.loads((root / ".claude" / "settings.local.json").read_bytes())
    for event, handlers in ctx_handlers(settings).items():
        argv = shlex.split(handlers[0]["command"])
        assert Path(argv[0]).is_absolute() and Path(argv[0]).exists(), argv
        assert argv[-2:] == ["hook", SLUGS[event]]


# -- issue 17: portable project installs, the user store, a complete plugin ------------------

def _other_venv(where: Path, log: Path) -> Path:
    """Another machine's ctx: a console script at another path, logging that it ran."""
    bindir = where / "bin"
    bindir.mkdir(parents=True)
    script = bindir / "ctx"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {shlex.quote(str(log))}\n"
                      f"exec {shlex.quote(sys.executable)} -m ctxstore.cli \"$@\"\n")
    script.chmod(0o755)
    return bindir


def _git_out(cwd: Path, *args: str) -> str:
    import subprocess

    res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert res.returncode == 0, (args, res.stderr)  # git's own words when it fails
    return res.stdout


def _run_hook(command: str, cwd: Path, env: dict[str, str], payload: dict) -> tuple[int, dict, str]:
    import subprocess

    proc = subprocess.run(["sh", "-c", command], cwd=cwd, env=env, input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60)
    out = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None
    assert isinstance(out, dict), (proc.returncode, proc.stdout, proc.stderr)
    return proc.returncode, out, proc.stderr


def _machine_env(home: Path, path: str, settings_local: Path | None = None) -> dict[str, str]:
    """The environment Claude Code gives a hook: its own, plus settings.local.json's ``env``."""
    env = {"PATH": path, "HOME": str(home), "LC_ALL": "C.UTF-8", "TZ": "UTC"}
    if settings_local is not None and settings_local.is_file():
        env.update(json.loads(settings_local.read_bytes()).get("env", {}))
    return env


@pytest.mark.git
def test_two_clones_a_project_install_committed_by_one_runs_in_the_other(tmp_path: Path) -> None:
    # Clone A: ctx init + ctx install --project, committed.
    a = tmp_path / "a"
    a.mkdir()
    _git_out(a, "init", "-q", "-b", "main")
    res = run_ctx(["init"], cwd=a)
    assert res.returncode == 0, res.stderr
    res = run_ctx(["install", "--project"], cwd=a)
    assert res.returncode == 0, res.stderr
    _git_out(a, "add", "-A")
    _git_out(a, "commit", "-q", "-m", "ctx for the team")
    tracked = _git_out(a, "ls-files").split()
    assert ".claude/settings.json" in tracked and ".claude/.gitignore" in tracked
    assert ".claude/settings.local.json" not in tracked  # this machine's part stays here
    committed = (a / ".claude" / "settings.json").read_text()
    assert sys.prefix not in committed and str(Path(sys.executable).parent) not in committed
    assert str(tmp_path) not in committed
    # A keeps its PATH-independence: its own ctx, by absolute path, in settings.local.json.
    local_a = json.loads((a / ".claude" / "settings.local.json").read_bytes())
    assert Path(local_a["env"]["CTX_BIN"]).is_absolute()

    # Clone B: another path, another home, ctx installed in another venv, on PATH.
    b = tmp_path / "elsewhere" / "b"
    b.parent.mkdir()
    _git_out(tmp_path, "clone", "-q", str(a), str(b))
    home_b = tmp_path / "home-b"
    home_b.mkdir()
    log = tmp_path / "venv-b.log"
    venv_b = _other_venv(tmp_path / "venv-b", log)
    env = _machine_env(home_b, f"{venv_b}:/usr/bin:/bin", b / ".claude" / "settings.local.json")
    assert "CTX_BIN" not in env
    settings = json.loads((b / ".claude" / "settings.json").read_bytes())
    session = "two-clone-session"
    for event, handlers in ctx_handlers(settings).items():
        payload = {"session_id": session, "cwd": str(b), "hook_event_name": event,
                   "source": "startup", "prompt": "hi"}
        if event == "Stop":
            payload["last_assistant_message"] = (
                '<ctx:remember type="decision">CLONE-B-41 uses the shared hooks</ctx:remember>')
        code, out, err = _run_hook(handlers[0]["command"], b, env, payload)
        assert code == 0, (event, out, err)
        assert "systemMessage" not in out, (event, out)
    ran = log.read_text()
    assert ran.count("hook ") == len(HOOK_EVENTS), ran  # B's own ctx ran every hook
    listed = run_ctx(["--format", "json", "list"], cwd=b, env={**os.environ, "HOME": str(home_b)})
    assert "CLONE-B-41" in listed.stdout, (listed.stdout, listed.stderr)

    # doctor in B names what this fresh clone lacks (the merge driver); its fix makes it pass.
    env_b = {**os.environ, "HOME": str(home_b), "PATH": env["PATH"]}
    first = run_ctx(["doctor"], cwd=b, env=env_b)
    assert first.returncode == 1, first.stdout
    failing = [line for line in first.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 1 and "merge driver" in failing[0] and "fix: ctx init" in failing[0], \
        first.stdout
    res = run_ctx(["init"], cwd=b, env=env_b)
    assert res.returncode == 0, res.stderr
    again = run_ctx(["doctor"], cwd=b, env=env_b)
    assert again.returncode == 0, again.stdout
    assert _git_out(b, "status", "--porcelain", "--", ".claude") == ""


@pytest.mark.git
def test_a_clone_without_ctx_gets_soft_hooks_and_one_install_fixes_it(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.mkdir()
    _git_out(a, "init", "-q", "-b", "main")
    assert run_ctx(["init"], cwd=a).returncode == 0
    assert run_ctx(["install"], cwd=a).returncode == 0
    _git_out(a, "add", "-A")
    _git_out(a, "commit", "-q", "-m", "ctx")
    b = tmp_path / "b"
    _git_out(tmp_path, "clone", "-q", str(a), str(b))
    home_b = tmp_path / "home-b"
    home_b.mkdir()
    # No ctx anywhere the hooks look: every hook exits 0 with JSON, never 127.
    env = _machine_env(home_b, "/usr/bin:/bin")
    settings = json.loads((b / ".claude" / "settings.json").read_bytes())
    for event, handlers in ctx_handlers(settings).items():
        code, out, _err = _run_hook(handlers[0]["command"], b, env, {"cwd": str(b)})
        assert code == 0
        if event == "SessionStart":
            assert "ctx command was not found" in out["systemMessage"]
        else:
            assert out == {}
    # doctor (run with a ctx the hooks' PATH does not reach) says so, with the fix.
    env_b = {**os.environ, "HOME": str(home_b), "PATH": "/usr/bin:/bin"}
    doc = json.loads(run_ctx(["--format", "json", "doctor"], cwd=b, env=env_b).stdout)
    bad = [c for c in doc["checks"] if not c["ok"]]
    assert doc["ok"] is False and any("ctx install --project" in c["fix"] for c in bad)
    # The fix: ctx install here sets this machine's ctx in settings.local.json only.
    assert run_ctx(["install", "--project"], cwd=b, env=env_b).returncode == 0
    assert _git_out(b, "status", "--porcelain") == ""  # nothing committed changes
    # something to show (an empty store injects nothing at session start)
    assert run_ctx(["add", "--type", "fact", "--tag", "tier:reference", "b's first fact"],
                   cwd=b, env=env_b).returncode == 0
    env = _machine_env(home_b, "/usr/bin:/bin", b / ".claude" / "settings.local.json")
    code, out, _err = _run_hook(ctx_handlers(settings)["SessionStart"][0]["command"], b, env,
                                {"cwd": str(b), "source": "startup"})
    assert code == 0 and "hookSpecificOutput" in out


def test_local_install_moves_an_old_absolute_install_out_of_settings_json(project: Path) -> None:
    # An install of an earlier ctx: absolute paths in the committed settings.json.
    old = json.loads(ORIGINAL)
    old["hooks"].setdefault("SessionStart", []).append(
        {"hooks": [{"type": "command", "command": "/old/venv/bin/ctx hook session-start"}]})
    (project / ".claude" / "settings.json").write_text(json.dumps(old))
    res = ctx("install", "--local")
    assert res.exit_code == 0, res.output
    assert json.loads((project / ".claude" / "settings.json").read_bytes()) == json.loads(ORIGINAL)
    local = json.loads((project / ".claude" / "settings.local.json").read_bytes())
    for event, handlers in ctx_handlers(local).items():
        argv = shlex.split(handlers[0]["command"])
        assert Path(argv[0]).is_absolute() and argv[-2:] == ["hook", SLUGS[event]]
    ignore = (project / ".claude" / ".gitignore").read_text().splitlines()
    assert "/settings.local.json" in ignore and "/skills/ctx/" in ignore
    # Switching back to shared, then uninstalling, leaves the project as it was.
    assert ctx("install", "--shared").exit_code == 0
    shared = ctx_handlers(json.loads((project / ".claude" / "settings.json").read_bytes()))
    assert {event for event, found in shared.items() if found} == set(HOOK_EVENTS)
    assert "hooks" not in json.loads((project / ".claude" / "settings.local.json").read_bytes())
    assert ctx("uninstall").exit_code == 0
    assert json.loads((project / ".claude" / "settings.json").read_bytes()) == json.loads(ORIGINAL)
    assert not (project / ".claude" / "settings.local.json").exists()
    assert not (project / ".claude" / ".gitignore").exists()


def test_gitignore_block_keeps_the_users_lines_and_is_stable(project: Path) -> None:
    gitignore = project / ".claude" / ".gitignore"
    gitignore.write_text("mine.txt\n")
    assert ctx("install").exit_code == 0
    text = gitignore.read_text()
    assert text.startswith("mine.txt\n") and "/settings.json.bak" in text
    gitignore.write_text(text + "after.txt\n")
    assert "already installed" in ctx("install").output
    assert ctx("uninstall").exit_code == 0
    assert gitignore.read_text() == "mine.txt\nafter.txt\n"


def test_local_is_refused_for_the_user_scope(project: Path) -> None:
    res = run_ctx(["install", "--user", "--local"], cwd=project)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == ("ctx: error[E011]: --local applies to --project installs only (hint: "
                          "--user settings are this machine's own already)\n")
    assert not (Path(os.environ["HOME"]) / ".claude").exists()


def test_user_install_creates_the_user_store_the_hooks_then_write_to(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    assert not (home / ".ctx").exists()
    res = run_ctx(["install", "--user"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (home / ".ctx" / "HEAD").is_file() and f"created the user store {home / '.ctx'}" in res.stdout
    assert "already installed" in run_ctx(["install", "--user"], cwd=tmp_path).stdout
    proj = tmp_path / "no-store"
    proj.mkdir()
    stop = run_ctx(["hook", "stop"], cwd=proj, stdin=json.dumps({
        "session_id": "s", "cwd": str(proj),
        "last_assistant_message": '<ctx:remember type="fact">USER-STORE-12 kept</ctx:remember>'}))
    assert stop.returncode == 0 and json.loads(stop.stdout) == {}, stop.stdout
    listed = run_ctx(["--ctx-dir", str(home / ".ctx"), "list"], cwd=proj)
    assert "USER-STORE-12" in listed.stdout


def test_a_stop_hook_with_nowhere_to_write_says_so_once_per_session(tmp_path: Path) -> None:
    import uuid

    proj = tmp_path / "p"
    proj.mkdir()
    session = str(uuid.uuid4())
    tag = '<ctx:remember type="fact">NOWHERE-{n} lost</ctx:remember>'

    def stop(n: int, sid: str) -> dict:
        res = run_ctx(["hook", "stop"], cwd=proj, stdin=json.dumps(
            {"session_id": sid, "cwd": str(proj), "prompt_id": f"p{n}",
             "last_assistant_message": tag.format(n=n)}))
        assert res.returncode == 0
        return json.loads(res.stdout)

    first = stop(1, session)
    assert "no ctx store found; 1 command(s) not run" in first["systemMessage"]
    assert "ctx init" in first["systemMessage"]
    assert stop(2, session) == {}
    assert "no ctx store found" in stop(3, str(uuid.uuid4()))["systemMessage"]
    assert not (Path(os.environ["HOME"]) / ".ctx").exists()  # hooks never create a store


def test_plugin_is_portable_complete_and_fails_softly(tmp_path: Path) -> None:
    plugin = tmp_path / "ctx-plugin"
    assert ctx("install", "--plugin", str(plugin)).exit_code == 0
    for path in plugin.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert sys.prefix not in text and str(tmp_path) not in text, path
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_bytes())
    assert manifest["author"]["name"] and manifest["license"] == "MIT"
    market = json.loads((plugin / ".claude-plugin" / "marketplace.json").read_bytes())
    assert market["plugins"][0]["name"] == "ctx" and market["plugins"][0]["source"] == "./"
    assert (plugin / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert len((plugin / "README.md").read_text().split()) >= 40
    assert os.access(plugin / "bin" / "ctx-hook", os.X_OK)
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_bytes())["hooks"]
    start = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert "${CLAUDE_PLUGIN_ROOT}" in start
    home = tmp_path / "home2"
    home.mkdir()
    log = tmp_path / "venv.log"
    venv = _other_venv(tmp_path / "venv", log)
    env = {**_machine_env(home, f"{venv}:/usr/bin:/bin"), "CLAUDE_PLUGIN_ROOT": str(plugin)}
    code, out, _ = _run_hook(start, tmp_path, env, {"cwd": str(tmp_path), "source": "startup"})
    assert code == 0 and "hook session-start" in log.read_text()
    env["PATH"] = "/usr/bin:/bin"
    for groups in hooks.values():
        code, out, _ = _run_hook(groups[0]["hooks"][0]["command"], tmp_path, env, {})
        assert code == 0 and (out == {} or "not found" in out["systemMessage"])


def test_package_metadata_is_ready_to_publish() -> None:
    import tomllib

    from ctxstore.claude.install import LICENSE_TEXT

    assert (ROOT / "LICENSE").read_text() == LICENSE_TEXT
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["license"] == {"text": "MIT"} and project["authors"]
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert meta["tool"]["setuptools"]["license-files"] == ["LICENSE"]
    readme = (ROOT / "README.md").read_text()
    assert "pipx install ctxstore" in readme and "uv tool install ctxstore" in readme
    assert "externally-managed-environment" in readme  # Debian's PEP 668 case


def test_install_never_writes_through_a_claude_dir_swapped_for_a_link_after_its_checks(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks pass, then ``.claude`` becomes a link out of the project before the first
    write: what is written lands in the folder that was checked, or is refused (E020);
    nothing is created or changed where the link leads."""
    from ctxstore import fsio

    out = tmp_path / "OUT"
    (out / "skills" / "ctx").mkdir(parents=True)  # a by-name write would land in here
    (out / "settings.json").write_bytes(b'{"outside": true}\n')
    before = snapshot(out)
    claude = project / ".claude"
    real_open_excl = fsio.open_excl
    swapped: list[Path] = []

    def swap_then_open(*args: object, **kwargs: object) -> int:
        if not swapped:
            os.rename(claude, project / ".claude.real")
            claude.symlink_to(out, target_is_directory=True)
            swapped.append(project / ".claude.real")
        return real_open_excl(*args, **kwargs)  # type: ignore[arg-type]

    patch_fsio(monkeypatch, "open_excl", swap_then_open)
    res = ctx("install")
    assert swapped
    assert snapshot(out) == before
    assert res.exit_code == 1 and "E020" in res.output and str(claude) in res.output
    # The one write made before the refusal (the skill) is in the folder that was checked.
    assert SKILL_MARKER in (swapped[0] / "skills" / "ctx" / "SKILL.md").read_text()
