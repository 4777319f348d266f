"""`ctx install --agent NAME` / `ctx uninstall --agent NAME` on each agent's real configuration.

Each fixture is a configuration file as that agent's users keep it (other servers, other
settings, comments where the format allows them). The written file is read back with a
parser that is not ctx's (``tomllib``, ``json``, ``json5`` for JSON with comments), its entry
must have the shape the agent's documentation gives, everything else must be unchanged, and
uninstall must give the original bytes back.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import json5
import pytest
from conftest import patch_fsio, run_ctx

from ctxstore.agents.registry import AGENTS
from ctxstore.init import init_store

FIXTURES = Path(__file__).parent / "fixtures"

# agent -> (fixture, scope, path of its file below the project or home)
CASES: dict[str, tuple[str, str, str]] = {
    "codex": ("codex-config.toml", "project", ".codex/config.toml"),
    "gemini": ("gemini-settings.json", "project", ".gemini/settings.json"),
    "cursor": ("cursor-mcp.json", "project", ".cursor/mcp.json"),
    "vscode": ("vscode-mcp.json", "project", ".vscode/mcp.json"),
    "claude-desktop": ("claude-desktop-config.json", "user", ".config/Claude/claude_desktop_config.json"),
    "windsurf": ("windsurf-mcp_config.json", "user", ".codeium/windsurf/mcp_config.json"),
}
USER_CASES: dict[str, str] = {  # the user files of agents that also have a project file
    "codex": ".codex/config.toml",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/mcp.json",
    "vscode": ".config/Code/User/mcp.json",
}


def load(agent: str, raw: bytes) -> Any:
    """The file as the agent reads it, by a parser that is not ctx's."""
    text = raw.decode("utf-8")
    fmt = AGENTS[agent].format
    if fmt == "toml":
        return tomllib.loads(text)
    if fmt == "json":
        return json.loads(text)
    return json5.loads(text)


def check_entry(agent: str, entry: Any, *, portable: bool) -> None:
    """The ``ctx`` server has the shape the agent documents for a stdio server."""
    assert isinstance(entry, dict), entry
    assert isinstance(entry["command"], str) and entry["command"]
    assert isinstance(entry["args"], list) and all(isinstance(a, str) for a in entry["args"])
    assert entry["args"][-1] == "mcp"
    if agent == "vscode":
        assert entry["type"] == "stdio"
    else:
        assert set(entry) == {"command", "args"}
    if portable:  # a committed file names nothing of this machine
        assert entry["command"] == "ctx" and entry["args"] == ["mcp"]
    else:
        assert os.path.isabs(entry["command"])


def without_ctx(agent: str, data: dict[str, Any]) -> dict[str, Any]:
    key = AGENTS[agent].servers_key
    out = json.loads(json.dumps(data))
    out.get(key, {}).pop("ctx", None)
    if key in out and not out[key]:
        del out[key]
    return out


def comments(agent: str, text: str) -> list[str]:
    if AGENTS[agent].format == "toml":
        return [line[line.index("#"):] for line in text.splitlines() if "#" in line]
    return re.findall(r"//[^\n]*|/\*.*?\*/", text, re.S)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    """A project with a store, and a home of its own (the user's files go there)."""
    project = tmp_path / "proj"
    project.mkdir()
    init_store(project / ".ctx", git=False)
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": "", "CODEX_HOME": "", "APPDATA": ""}
    return {"project": project, "home": home, "env": env}


def ctx(world: dict[str, Any], *args: str):
    return run_ctx(list(args), cwd=world["project"], env=world["env"])


def snapshot(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*"))
            if p.is_file() and ".ctx" not in p.parts}


def place(world: dict[str, Any], agent: str) -> Path:
    fixture, scope, rel = CASES[agent]
    path = (world["project"] if scope == "project" else world["home"]) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((FIXTURES / fixture).read_bytes())
    return path


@pytest.mark.parametrize("agent", list(CASES))
def test_install_merges_into_the_agents_real_file_and_uninstall_restores_it(
        world: dict[str, Any], agent: str) -> None:
    path = place(world, agent)
    original = path.read_bytes()
    before = load(agent, original)
    scope = CASES[agent][1]

    res = ctx(world, "install", "--agent", agent)
    assert res.returncode == 0, res.stderr
    after = load(agent, path.read_bytes())
    check_entry(agent, after[AGENTS[agent].servers_key]["ctx"], portable=scope == "project")
    assert without_ctx(agent, after) == before  # every other setting as it was
    new_text = path.read_text()
    assert comments(agent, new_text) == comments(agent, original.decode())  # comments kept
    backup = path.with_name(path.name + ".bak")
    assert backup.read_bytes() == original
    if scope == "project":  # the backup never reaches Git
        assert "/" + backup.name in (path.parent / ".gitignore").read_text().splitlines()

    state = snapshot(world["project"], world["home"])
    res = ctx(world, "install", "--agent", agent)
    assert res.returncode == 0, res.stderr
    assert snapshot(world["project"], world["home"]) == state  # a second run changes nothing
    assert "already registered" in res.stdout

    res = ctx(world, "uninstall", "--agent", agent)
    assert res.returncode == 0, res.stderr
    assert path.read_bytes() == original  # byte for byte
    assert not backup.exists()
    assert not (path.parent / ".gitignore").exists()


@pytest.mark.parametrize("agent", list(CASES))
def test_without_a_file_install_creates_it_and_uninstall_leaves_no_trace(
        world: dict[str, Any], agent: str) -> None:
    _, scope, rel = CASES[agent]
    path = (world["project"] if scope == "project" else world["home"]) / rel
    state = snapshot(world["project"], world["home"])
    res = ctx(world, "install", "--agent", agent)
    assert res.returncode == 0, res.stderr
    data = load(agent, path.read_bytes())
    assert list(data) == [AGENTS[agent].servers_key]
    check_entry(agent, data[AGENTS[agent].servers_key]["ctx"], portable=scope == "project")
    res = ctx(world, "uninstall", "--agent", agent)
    assert res.returncode == 0, res.stderr
    assert snapshot(world["project"], world["home"]) == state
    assert not path.parent.exists()  # the folder ctx created went with the file


@pytest.mark.parametrize("agent", list(USER_CASES))
def test_user_scope_writes_this_ctx_by_absolute_path_in_the_users_file(
        world: dict[str, Any], agent: str) -> None:
    res = ctx(world, "install", "--agent", agent, "--user")
    assert res.returncode == 0, res.stderr
    path = world["home"] / USER_CASES[agent]
    check_entry(agent, load(agent, path.read_bytes())[AGENTS[agent].servers_key]["ctx"],
                portable=False)
    assert not any(p.name != ".ctx" for p in world["project"].iterdir())  # nothing in the project
    res = ctx(world, "uninstall", "--agent", agent, "--user")
    assert res.returncode == 0, res.stderr
    assert not path.exists()


def test_ctx_dir_binds_a_user_entry_to_that_store(world: dict[str, Any]) -> None:
    store = world["project"] / ".ctx"
    res = run_ctx(["--ctx-dir", str(store), "install", "--agent", "claude-desktop"],
                  cwd=world["home"], env=world["env"])
    assert res.returncode == 0, res.stderr
    path = world["home"] / CASES["claude-desktop"][2]
    args = json.loads(path.read_text())["mcpServers"]["ctx"]["args"]
    assert args[-3:] == ["--ctx-dir", str(store), "mcp"]


def test_codex_home_and_xdg_config_home_are_followed(world: dict[str, Any], tmp_path: Path) -> None:
    env = {**world["env"], "CODEX_HOME": str(tmp_path / "codex-home"),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    for agent in ("codex", "claude-desktop"):
        res = run_ctx(["install", "--agent", agent, "--user"], cwd=world["project"], env=env)
        assert res.returncode == 0, res.stderr
    assert "mcp_servers" in tomllib.loads((tmp_path / "codex-home" / "config.toml").read_text())
    assert (tmp_path / "xdg" / "Claude" / "claude_desktop_config.json").is_file()


def test_uninstall_after_the_user_changed_the_file_removes_only_ctxs_entry(
        world: dict[str, Any]) -> None:
    path = place(world, "vscode")
    assert ctx(world, "install", "--agent", "vscode").returncode == 0
    text = path.read_text().replace('"servers": {', '"servers": {\n\t\t"mine": {"type": "stdio", '
                                    '"command": "mine"}, // added later', 1)
    path.write_text(text)
    res = ctx(world, "uninstall", "--agent", "vscode")
    assert res.returncode == 0, res.stderr
    data = json5.loads(path.read_text())
    assert "ctx" not in data["servers"] and data["servers"]["mine"] == {"type": "stdio",
                                                                        "command": "mine"}
    assert "// added later" in path.read_text()
    assert path.with_name("mcp.json.bak").exists()  # the file is not the original: backup kept


def test_codex_uninstall_keeps_other_tables_after_the_user_added_one(world: dict[str, Any]) -> None:
    path = place(world, "codex")
    assert ctx(world, "install", "--agent", "codex").returncode == 0
    path.write_text(path.read_text() + "\n[mcp_servers.later]\ncommand = \"later\"\n")
    res = ctx(world, "uninstall", "--agent", "codex")
    assert res.returncode == 0, res.stderr
    data = tomllib.loads(path.read_text())
    assert "ctx" not in data["mcp_servers"] and data["mcp_servers"]["later"] == {"command": "later"}
    assert data["mcp_servers"]["docs"]["env"] == {"DOCS_REGION": "eu"}


@pytest.mark.parametrize("agent,bad", [
    ("codex", b"model = \n"),
    ("codex", b"mcp_servers = 3\n"),
    ("gemini", b'{"mcpServers": [}'),
    ("cursor", b'{"mcpServers": []}'),
    ("claude-desktop", b'{"mcpServers": {}, // no comments here\n}'),
    ("vscode", b'{"servers": {}, "servers": {"x": {}}}'),
    ("cursor", b'{"mcpServers": {"ctx": {}, "ctx": {"args": ["mcp"]}}}'),
    ("vscode", b"\xff\xfe{}"),
])
def test_an_invalid_file_is_refused_with_one_line_and_left_as_it_was(
        world: dict[str, Any], agent: str, bad: bytes) -> None:
    _, scope, rel = CASES[agent]
    path = (world["project"] if scope == "project" else world["home"]) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bad)
    state = snapshot(world["project"], world["home"])
    for command in ("install", "uninstall"):
        res = ctx(world, command, "--agent", agent)
        assert res.returncode != 0
        assert res.stderr.startswith("ctx: error[E011]: "), res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert snapshot(world["project"], world["home"]) == state


@pytest.mark.parametrize("agent", ["codex", "cursor", "vscode"])
def test_a_ctx_server_ctx_did_not_write_is_refused_and_kept(world: dict[str, Any], agent: str) -> None:
    _, _, rel = CASES[agent]
    path = world["project"] / rel
    path.parent.mkdir(parents=True)
    if agent == "codex":
        path.write_text('[mcp_servers.ctx]\ncommand = "other-tool"\nargs = ["serve"]\n')
    else:
        key = AGENTS[agent].servers_key
        path.write_text(json.dumps({key: {"ctx": {"command": "other-tool", "args": ["serve"]}}}))
    original = path.read_bytes()
    res = ctx(world, "install", "--agent", agent)
    assert res.returncode != 0 and "that ctx did not write" in res.stderr
    res = ctx(world, "uninstall", "--agent", agent)
    assert res.returncode == 0, res.stderr
    assert path.read_bytes() == original


def test_codex_inline_table_is_refused_not_guessed(world: dict[str, Any]) -> None:
    path = world["project"] / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text('mcp_servers = { other = { command = "x" } }\n')
    original = path.read_bytes()
    res = ctx(world, "install", "--agent", "codex")
    assert res.returncode != 0 and "E011" in res.stderr, res.stderr
    assert path.read_bytes() == original


def test_several_agents_are_planned_before_anything_is_written(world: dict[str, Any]) -> None:
    bad = world["project"] / ".cursor" / "mcp.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    state = snapshot(world["project"], world["home"])
    res = ctx(world, "install", "--agent", "codex", "--agent", "cursor")
    assert res.returncode != 0
    assert snapshot(world["project"], world["home"]) == state  # codex's file not written either


def test_dry_run_shows_the_change_and_writes_nothing(world: dict[str, Any]) -> None:
    place(world, "gemini")
    state = snapshot(world["project"], world["home"])
    res = ctx(world, "install", "--agent", "gemini", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "would update" in res.stdout and '+    "ctx": {' in res.stdout
    assert snapshot(world["project"], world["home"]) == state


def test_json_report(world: dict[str, Any]) -> None:
    res = ctx(world, "--format", "json", "install", "--agent", "codex", "--agent", "cursor")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert [(a["agent"], a["scope"], a["changed"]) for a in report["agents"]] == [
        ("codex", "project", True), ("cursor", "project", True)]


def test_an_agent_without_the_scope_asked_for_is_a_clear_error(world: dict[str, Any]) -> None:
    res = ctx(world, "install", "--agent", "claude-desktop", "--project")
    assert res.returncode != 0
    assert res.stderr.startswith("ctx: error[E011]: Claude Desktop has no project configuration")


@pytest.mark.parametrize("option", ["--mcp", "--local"])
def test_agent_does_not_combine_with_claude_code_options(world: dict[str, Any], option: str) -> None:
    res = ctx(world, "install", "--agent", "codex", option)
    assert res.returncode != 0 and f"--agent and {option} cannot be combined" in res.stderr


def test_a_link_in_the_projects_agent_folder_is_refused(world: dict[str, Any], tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (world["project"] / ".vscode").symlink_to(outside, target_is_directory=True)
    for command in ("install", "uninstall"):
        res = ctx(world, command, "--agent", "vscode")
        assert res.returncode != 0 and "E020" in res.stderr, res.stderr
    assert list(outside.iterdir()) == []


def test_a_linked_user_file_is_written_through_and_stays_a_link(world: dict[str, Any],
                                                               tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "mcp.json"
    real.write_bytes((FIXTURES / "cursor-mcp.json").read_bytes())
    original = real.read_bytes()
    link = world["home"] / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(real)
    res = ctx(world, "install", "--agent", "cursor", "--user")
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and "ctx" in json.loads(real.read_text())["mcpServers"]
    res = ctx(world, "uninstall", "--agent", "cursor", "--user")
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and real.read_bytes() == original


@pytest.mark.parametrize("remove", [False, True])
def test_a_failed_write_at_any_point_leaves_each_file_whole_and_a_rerun_finishes(
        world: dict[str, Any], monkeypatch: pytest.MonkeyPatch, remove: bool) -> None:
    """The k-th rename (or delete) fails: every file is its old or its new content, never a mix."""
    from ctxstore import fsio
    from ctxstore.agents.install import plan_agent, plan_unagent, server_entry, target
    from ctxstore.agents.registry import Where
    from ctxstore.claude.install import apply_plan

    where = Where(world["home"])
    goal = target(AGENTS["vscode"], "project", project=world["project"], where=where)
    path = place(world, "vscode")

    def plan():  # install, or uninstall of a fresh install
        return plan_unagent(goal) if remove else plan_agent(goal, server_entry(
            AGENTS["vscode"], "project", ["ctx"]))

    if remove:
        apply_plan(plan())
    start = snapshot(world["project"])
    apply_plan(plan())
    done = snapshot(world["project"])
    real_replace, real_unlink = fsio.replace, fsio.unlink
    for k in range(1, 10):
        for name, data in start.items():  # back to the start
            Path(name).parent.mkdir(parents=True, exist_ok=True)
            Path(name).write_bytes(data)
        for name in set(done) - set(start):
            Path(name).unlink()
        calls = {"n": 0}

        def failing(real: Any, calls: dict[str, int] = calls, k: int = k) -> Any:
            def op(*args: Any, **kwargs: Any) -> None:
                calls["n"] += 1
                if calls["n"] == k:
                    raise OSError(5, "Input/output error")
                real(*args, **kwargs)
            return op

        patch_fsio(monkeypatch, "replace", failing(real_replace))
        patch_fsio(monkeypatch, "unlink", failing(real_unlink))
        try:
            apply_plan(plan())
            failed = False
        except OSError:
            failed = True
        patch_fsio(monkeypatch, "replace", real_replace)
        patch_fsio(monkeypatch, "unlink", real_unlink)
        now = snapshot(world["project"])
        for name in set(start) | set(done):
            assert now.get(name) in (start.get(name), done.get(name)), (k, name)
        assert not [n for n in now if n not in start and n not in done], (k, now.keys())
        apply_plan(plan())  # a clean rerun finishes the job
        assert snapshot(world["project"]) == done, k
        assert json5.loads(path.read_text()) is not None
        if not failed:
            break
    else:
        pytest.fail("the plan never ran to the end")


@pytest.mark.parametrize("agent,bad", [
    ("codex", b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("vscode", b'{"servers": {}, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
], ids=["codex", "vscode"])  # short ids: pytest puts the id in the children's environment
def test_a_deeply_nested_file_is_one_clear_error(world: dict[str, Any], agent: str, bad: bytes) -> None:
    path = world["project"] / CASES[agent][2]
    path.parent.mkdir(parents=True)
    path.write_bytes(bad)
    for command in ("install", "uninstall"):
        res = ctx(world, command, "--agent", agent)
        assert res.returncode == 1 and res.stderr.startswith("ctx: error[E011]: "), res.stderr[-500:]
        assert "nested too deeply" in res.stderr
    assert path.read_bytes() == bad
