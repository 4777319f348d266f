"""Configuration trust (RELIABILITY.md §2.11 CF-01, CF-02; issue 11 item 2).

A cloned repository is untrusted input: its committed ``.ctx/config.toml`` must not make
the Stop hook write outside the repository, follow a link, or write CLAUDE.md at all
without the user's own consent (``ctx trust``), recorded in the clone's Git config, which
``git clone`` never copies. Out-of-range values are rejected with one clear error and the
hooks still print one JSON object.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx, store_digest

pytestmark = pytest.mark.git

REMEMBER = '<ctx:remember type="fact" tags="tier:pinned">{}</ctx:remember>'


# -- helpers -------------------------------------------------------------------------------
def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=check)


def ctx(repo: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    res = run_ctx(list(args), cwd=repo)
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    return res


def set_claude(config: Path, **values: object) -> None:
    """Rewrite keys of the [claude] table of a config.toml."""
    lines = config.read_text().splitlines()
    for key, value in values.items():
        text = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
        lines = [f"{key} = {text}" if line.split(" = ")[0] == key else line for line in lines]
    config.write_text("\n".join(lines) + "\n")


def tree_digest(folder: Path) -> dict[str, str]:
    """Every entry below ``folder`` (links by target, files by content), for "unchanged"."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


class Hostile:
    """An origin repository whose committed .ctx/config.toml asks for claude_md_on_stop,
    and a real ``git clone`` of it: the teammate's checkout."""

    def __init__(self, tmp_path: Path, claude_md_path: str, setup=None) -> None:
        self.tmp = tmp_path
        self.outside = tmp_path / "outside"
        self.outside.mkdir()
        (self.outside / "canary.txt").write_text("CANARY\n")
        (self.outside / ".bashrc").write_text("# my shell\n")
        self.origin = tmp_path / "origin"
        self.origin.mkdir()
        git(self.origin, "init", "-q", "-b", "main")
        git(self.origin, "config", "commit.gpgsign", "false")
        ctx(self.origin, "init")
        set_claude(self.origin / ".ctx" / "config.toml", claude_md_on_stop=True,
                   claude_md_path=claude_md_path)
        if setup is not None:
            setup(self.origin)
        git(self.origin, "add", "-A")
        git(self.origin, "commit", "-qm", "hostile config")
        self.clone = tmp_path / "clone"
        git(tmp_path, "clone", "-q", str(self.origin), str(self.clone))
        self.outside_before = tree_digest(self.outside)

    def stop(self, text: str, turn: str) -> dict:
        res = run_ctx(["hook", "stop"], stdin=json.dumps({
            "session_id": "s1", "cwd": str(self.clone), "prompt_id": turn,
            "last_assistant_message": REMEMBER.format(text)}))
        assert res.returncode == 0, (res.stdout, res.stderr)
        assert res.stdout.count("\n") == 1
        out = json.loads(res.stdout)
        assert isinstance(out, dict)
        return out

    def contents(self) -> set[str]:
        res = ctx(self.clone, "--format", "json", "list")
        return {n["content"] for n in json.loads(res.stdout)["nodes"]}

    def assert_outside_unchanged(self) -> None:
        assert tree_digest(self.outside) == self.outside_before
        assert sorted(p.name for p in self.tmp.iterdir()) == ["clone", "origin", "outside"]


def _link_claude_md(origin: Path) -> None:
    (origin / "CLAUDE.md").symlink_to("../outside/canary.txt")


def _link_dir(origin: Path) -> None:
    (origin / "docs").symlink_to("../outside")


def _link_dir_abs(origin: Path) -> None:
    (origin / "docs").symlink_to(origin.parent / "outside")


HOSTILE_PATHS = {
    "dotdot": ("../outside/.bashrc", None, "E015"),
    "dotdot-inner": ("docs/../../outside/.bashrc", None, "E015"),
    "absolute": ("{outside}/.bashrc", None, "E015"),
    "symlinked-claude-md": ("CLAUDE.md", _link_claude_md, "E020"),
    "symlinked-dir": ("docs/CLAUDE.md", _link_dir, "E020"),
    "symlinked-dir-absolute": ("docs/CLAUDE.md", _link_dir_abs, "E020"),
    "into-git-dir": (".git/hooks/pre-commit.md", None, "E015"),
    "into-store": (".ctx/narrative/x.md", None, "E015"),
    "not-markdown": ("Makefile", None, "E015"),
    "empty": ("", None, "E015"),
    "nul": ("a\x00b.md", None, "E015"),
}


def hostile(tmp_path: Path, case: str) -> tuple[Hostile, str]:
    path, setup, code = HOSTILE_PATHS[case]
    return Hostile(tmp_path, path.format(outside=tmp_path / "outside"), setup), code


# -- CF-01: the Stop hook on a fresh clone ---------------------------------------------------
@pytest.mark.parametrize("case", sorted(HOSTILE_PATHS))
def test_trust_stop_hook_on_a_hostile_clone_writes_nothing_outside_the_store(
        tmp_path: Path, case: str) -> None:
    repo, _ = hostile(tmp_path, case)
    before = tree_digest(repo.clone)
    out = repo.stop("remember me", "t1")
    assert "remember me" in repo.contents()  # the command itself ran
    assert "ctx trust" in out.get("systemMessage", ""), out
    repo.assert_outside_unchanged()
    after = tree_digest(repo.clone)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(k.startswith(".ctx/") for k in changed), changed  # no CLAUDE.md, no link replaced


def test_trust_stop_hook_needs_consent_and_says_so_once(tmp_path: Path) -> None:
    repo = Hostile(tmp_path, "CLAUDE.md")
    first = repo.stop("first fact", "t1")["systemMessage"]
    assert "claude_md_on_stop" in first and "`ctx trust`" in first
    assert repo.stop("second fact", "t2") == {}  # said once, not on every turn
    assert {"first fact", "second fact"} <= repo.contents()
    assert not (repo.clone / "CLAUDE.md").exists()
    repo.assert_outside_unchanged()


def test_trust_consent_lets_the_stop_hook_write_inside_the_repository(tmp_path: Path) -> None:
    repo = Hostile(tmp_path, ".claude/CLAUDE.md")
    res = ctx(repo.clone, "trust")
    assert res.stdout.startswith("trusted: ") and ".claude/CLAUDE.md" in res.stdout
    assert repo.stop("deploy on tuesdays", "t1") == {}
    assert "deploy on tuesdays" in (repo.clone / ".claude" / "CLAUDE.md").read_text()
    assert ctx(repo.clone, "trust").stdout.startswith("already trusted: ")
    # The record lives in the clone's Git config, not in anything the repository carries.
    assert "claude_md_path" in git(repo.clone, "config", "--local", "--get-all", "ctx.trusted").stdout
    repo.assert_outside_unchanged()


def test_trust_consent_is_tied_to_the_values_consented_to(tmp_path: Path) -> None:
    repo = Hostile(tmp_path, "CLAUDE.md")
    ctx(repo.clone, "trust")
    assert repo.stop("before the pull", "t1") == {}
    assert "before the pull" in (repo.clone / "CLAUDE.md").read_text()
    # Upstream changes the path; after a pull the old consent no longer applies.
    set_claude(repo.origin / ".ctx" / "config.toml", claude_md_path="docs/MEMORY.md")
    git(repo.origin, "commit", "-qam", "move it")
    git(repo.clone, "pull", "-q", "--no-rebase")
    out = repo.stop("after the pull", "t2")
    assert "`ctx trust`" in out.get("systemMessage", "")
    # It names the file it did not write and says the consent is for other values.
    assert "docs/MEMORY.md was not written" in out["systemMessage"], out
    assert "consented to other values" in out["systemMessage"], out
    assert not (repo.clone / "docs").exists()
    listed = json.loads(ctx(repo.clone, "trust", "--list", "--format", "json").stdout)
    assert [(r["claude_md_path"], r["current"]) for r in listed["records"]] == [("CLAUDE.md", False)]


def test_trust_revoke_and_list(tmp_path: Path) -> None:
    repo = Hostile(tmp_path, "CLAUDE.md")
    assert json.loads(ctx(repo.clone, "trust", "--list", "--format", "json").stdout)["records"] == []
    ctx(repo.clone, "trust")
    listed = json.loads(ctx(repo.clone, "trust", "--list", "--format", "json").stdout)
    assert listed["version"] == 1
    assert listed["records"] == [{"store": ".ctx", "claude_md_on_stop": True,
                                  "claude_md_path": "CLAUDE.md", "current": True}]
    assert "CLAUDE.md" in ctx(repo.clone, "trust", "--list").stdout
    assert ctx(repo.clone, "trust", "--revoke").stdout.startswith("revoked: ")
    assert git(repo.clone, "config", "--local", "--get-all", "ctx.trusted", check=False).stdout == ""
    assert "`ctx trust`" in repo.stop("after revoke", "t1").get("systemMessage", "")
    assert not (repo.clone / "CLAUDE.md").exists()
    assert ctx(repo.clone, "trust", "--revoke").stdout.startswith("nothing to revoke")


@pytest.mark.parametrize("case", sorted(HOSTILE_PATHS))
def test_trust_refuses_to_record_consent_for_an_unsafe_path(tmp_path: Path, case: str) -> None:
    repo, code = hostile(tmp_path, case)
    res = ctx(repo.clone, "trust", code=1)
    assert res.stdout == "" and res.stderr.startswith(f"ctx: error[{code}]: ")
    assert res.stderr.count("\n") == 1, res.stderr
    assert git(repo.clone, "config", "--local", "--get-all", "ctx.trusted", check=False).stdout == ""
    repo.assert_outside_unchanged()


@pytest.mark.parametrize("case", sorted(HOSTILE_PATHS))
def test_trust_claude_md_command_refuses_a_committed_path_out_of_the_repository(
        tmp_path: Path, case: str) -> None:
    repo, code = hostile(tmp_path, case)
    before = tree_digest(repo.clone)
    digest = store_digest(repo.clone / ".ctx")
    res = ctx(repo.clone, "claude-md", code=1)
    assert res.stdout == "" and res.stderr.startswith(f"ctx: error[{code}]: ")
    assert res.stderr.count("\n") == 1, res.stderr
    assert store_digest(repo.clone / ".ctx") == digest
    after = tree_digest(repo.clone)
    assert {k: v for k, v in after.items() if not k.startswith(".ctx/")} == \
        {k: v for k, v in before.items() if not k.startswith(".ctx/")}
    repo.assert_outside_unchanged()


def test_trust_claude_md_command_works_inside_the_repository_without_consent(tmp_path: Path) -> None:
    repo = Hostile(tmp_path, "docs/CLAUDE.md")
    ctx(repo.clone, "add", "--type", "fact", "explicit run")
    res = ctx(repo.clone, "claude-md")
    assert res.stdout == f"updated: {repo.clone / 'docs' / 'CLAUDE.md'}\n"
    assert "explicit run" in (repo.clone / "docs" / "CLAUDE.md").read_text()
    repo.assert_outside_unchanged()


def test_trust_claude_md_command_refuses_a_symlink_given_with_path(tmp_path: Path) -> None:
    repo = Hostile(tmp_path, "CLAUDE.md")
    (repo.clone / "LINK.md").symlink_to(repo.outside / "canary.txt")
    res = ctx(repo.clone, "claude-md", "--path", "LINK.md", code=1)
    assert res.stdout == "" and res.stderr.startswith("ctx: error[E020]: ")
    assert (repo.clone / "LINK.md").is_symlink()
    repo.assert_outside_unchanged()


def test_trust_claude_md_fifo_is_refused_not_read(tmp_path: Path) -> None:
    repo = Hostile(tmp_path, "CLAUDE.md")
    os.mkfifo(repo.clone / "CLAUDE.md")
    res = run_ctx(["claude-md"], cwd=repo.clone, timeout=20)
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E020]: "), res.stderr


def test_trust_a_committed_bare_repository_cannot_grant_consent(tmp_path: Path) -> None:
    """A clone may commit a directory shaped like a bare repository whose ``config`` holds a
    consent record: git run in it would read that committed file as the clone's own."""
    from types import SimpleNamespace

    from ctxstore.claude import trust

    clone = tmp_path / "clone"
    clone.mkdir()
    git(clone, "init", "-q")
    sub = clone / "sub"
    for folder in ("objects/xx", "refs/heads", ".ctx"):
        (sub / folder).mkdir(parents=True)
    (sub / "HEAD").write_text("ref: refs/heads/main\n")
    (sub / "objects" / "xx" / "keep").write_text("")
    (sub / "refs" / "heads" / "keep").write_text("")
    record = trust.TrustRecord(".ctx", True, "CLAUDE.md").encode()
    (sub / "config").write_text("[ctx]\n\ttrusted = " + json.dumps(record) + "\n")
    planted = git(sub, "config", "--local", "--get-all", "ctx.trusted", check=False)
    assert planted.stdout.strip() == record  # what an unguarded git would read
    values = {"claude_md_on_stop": True, "claude_md_path": "CLAUDE.md", "agents_md_on_stop": False}
    store = SimpleNamespace(worktree=sub, root=sub / ".ctx",
                            config=SimpleNamespace(get=lambda _table, key: values[key]))
    with pytest.raises(trust.ConsentRequired):
        trust.decide(store)  # type: ignore[arg-type]


def test_trust_outside_git_the_config_is_the_users_own(tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    ctx(work, "init", "--no-git")
    set_claude(work / ".ctx" / "config.toml", claude_md_on_stop=True)
    res = ctx(work, "trust")
    assert res.stdout.startswith("nothing to trust: ")
    out = run_ctx(["hook", "stop"], stdin=json.dumps({
        "session_id": "s", "cwd": str(work), "prompt_id": "p",
        "last_assistant_message": REMEMBER.format("plain store")}))
    assert json.loads(out.stdout) == {}
    assert "plain store" in (work / "CLAUDE.md").read_text()


def test_trust_help_has_an_example() -> None:
    res = run_ctx(["trust", "--help"])
    assert res.returncode == 0 and "Examples:" in res.stdout and "ctx trust --revoke" in res.stdout


# -- CF-02: out-of-range values --------------------------------------------------------------
BAD_VALUES = [
    ("storage", "compression_level", "100"),
    ("storage", "max_object_bytes", "-1"),
    ("lock", "timeout_seconds", "1e12"),
    ("lock", "timeout_seconds", "nan"),
    ("lock", "timeout_seconds", "inf"),
    ("lock", "timeout_seconds", "-1.0"),
    ("retrieval", "default_budget", "nan"),
    ("retrieval", "default_budget", "0"),
    ("ingestion", "max_files_per_step", "0"),
    ("ingestion", "max_files_per_step", "-5"),
    ("ingestion", "max_bytes_per_step", "-1"),
    ("llm", "max_response_tokens", "-1"),
    ("llm", "max_response_tokens", "1000000000000"),
    ("claude", "claude_md_lines", "1e9"),
    ("gc", "keep_days", "-3"),
]


def _with_value(store_dir: Path, section: str, key: str, value: str) -> None:
    config = store_dir / "config.toml"
    lines = config.read_text().splitlines()
    if f"[{section}]" not in lines:  # a reserved table a new config.toml leaves out
        lines += ["", f"[{section}]"]
    at = lines.index(f"[{section}]")
    lines = [ln for ln in lines if not (ln.startswith(f"{key} = ") and lines.index(ln) > at)]
    lines.insert(at + 1, f"{key} = {value}")
    config.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("section,key,value", BAD_VALUES, ids=lambda v: str(v))
def test_trust_out_of_range_config_is_one_clear_error_and_hooks_stay_json(
        tmp_path: Path, section: str, key: str, value: str) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ctx(work, "init", "--no-git")
    _with_value(work / ".ctx", section, key, value)
    digest = store_digest(work / ".ctx")
    res = ctx(work, "list", code=1)
    assert res.stdout == "" and res.stderr.startswith("ctx: error[E015]: "), res.stderr
    assert f"[{section}] {key}" in res.stderr and res.stderr.count("\n") == 1
    for event in ("session-start", "prompt-submit", "stop", "session-end"):
        out = run_ctx(["hook", event], stdin=json.dumps({
            "session_id": "s", "cwd": str(work), "prompt": "hi", "prompt_id": "p",
            "last_assistant_message": REMEMBER.format("x")}))
        assert out.returncode == 0 and out.stdout.count("\n") == 1, (event, out)
        assert isinstance(json.loads(out.stdout), dict)
    assert store_digest(work / ".ctx") == digest


def test_trust_malformed_toml_is_one_clear_error(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ctx(work, "init", "--no-git")
    (work / ".ctx" / "config.toml").write_text("[claude\nclaude_md_on_stop = tru")
    res = ctx(work, "list", code=1)
    assert res.stderr.startswith("ctx: error[E015]: ") and res.stderr.count("\n") == 1
    out = run_ctx(["hook", "stop"], stdin=json.dumps({
        "session_id": "s", "cwd": str(work), "last_assistant_message": REMEMBER.format("x")}))
    assert out.returncode == 0 and isinstance(json.loads(out.stdout), dict)
