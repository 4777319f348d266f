"""A committed [security] that lets secrets through applies only after `ctx trust` in a clone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx
from secret_tokens import TOKENS

pytestmark = pytest.mark.git

GH = next(t for t in TOKENS if t.name == "github-classic-pat")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


def ctx(work: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    res = run_ctx(["--ctx-dir", str(work / ".ctx"), *args], cwd=work)
    assert res.returncode == code, (args, res.stdout, res.stderr)
    return res


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of a repository whose committed config.toml weakens the secret policy."""
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    ctx(origin, "init")
    (origin / "app.env.example").write_text("x\n")
    (origin / ".env").write_text(GH.text + "\n")
    config = origin / ".ctx" / "config.toml"
    text = config.read_text()
    text = text.replace('explicit = "refuse"', 'explicit = "allow"')
    text = text.replace("index_sensitive_files = false", "index_sensitive_files = true")
    config.write_text(text)
    git(origin, "add", "-A")
    git(origin, "-c", "commit.gpgsign=false", "commit", "-qm", "weakened policy")
    work = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    return work


def test_committed_weakening_is_set_aside_until_trusted(clone: Path) -> None:
    # Without consent the defaults apply: the explicit write is refused, .env not read.
    err = ctx(clone, "add", "--type", "fact", GH.text, code=1).stderr
    assert err.startswith("ctx: error[E025]:")
    assert ".env" in ctx(clone, "index").stderr
    res = ctx(clone, "trust")
    assert '[security] explicit = "allow"' in res.stdout
    assert "index_sensitive_files = true" in res.stdout
    listed = json.loads(ctx(clone, "--format", "json", "trust", "--list").stdout)
    assert listed["security"][0]["current"] is True
    # With it, the clone's policy is the committed one.
    ctx(clone, "add", "--type", "fact", GH.text)
    assert ".env" not in ctx(clone, "index").stderr
    # A pull that changes the weakening makes the consent stale: the defaults again.
    config = clone / ".ctx" / "config.toml"
    config.write_text(config.read_text().replace('commands = "redact"', 'commands = "allow"'))
    assert ctx(clone, "add", "--type", "fact", GH.text, code=1).stderr.startswith("ctx: error[E025]:")
    ctx(clone, "trust", "--revoke")


def test_a_stronger_policy_needs_no_consent(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    git(work, "init", "-q")
    ctx(work, "init")
    config = work / ".ctx" / "config.toml"
    config.write_text(config.read_text().replace('commands = "redact"', 'commands = "refuse"'))
    res = run_ctx(["--ctx-dir", str(work / ".ctx"), "add", "command", "--name", "env", "--stdin"],
                  cwd=work, stdin=f"starting\n{GH.text}\n")
    assert res.returncode == 1
    assert res.stderr.startswith("ctx: error[E025]: the output holds a secret (github-pat on line 2)")
    assert "nothing to trust" in ctx(work, "trust").stdout


def test_a_store_outside_git_applies_its_own_policy(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ctx(work, "init", "--no-git")
    config = work / ".ctx" / "config.toml"
    config.write_text(config.read_text().replace('explicit = "refuse"', 'explicit = "allow"'))
    ctx(work, "add", "--type", "fact", GH.text)


def test_sensitive_file_screen_agrees_with_matching_every_pattern() -> None:
    # sensitive_file turns most names away before any fnmatch (ctx index asks it of every
    # listed file on every run): it must answer as trying every pattern in order does.
    from fnmatch import fnmatch

    from ctxstore.security.secrets import SENSITIVE_FILES, sensitive_file

    def every_pattern(path: str) -> str | None:
        low = path.lower()
        name = low.rsplit("/", 1)[-1]
        if name.endswith(".pub") or name in ("known_hosts", "authorized_keys"):
            return None
        for pattern, reason in SENSITIVE_FILES:
            if fnmatch(low, pattern) or fnmatch(low, "*/" + pattern) if "/" in pattern \
                    else fnmatch(name, pattern):
                return reason
        return None

    names = [p.replace("*", fill) for p, _ in SENSITIVE_FILES for fill in ("", "x", "a.b")]
    names += ["a.py", "README.md", ".env.local", "ID_RSA", "id_foo_sk", "a.kube/config",
              ".kube/config.bak", "Credentials", "x.tfstate.backup", "id_rsa.pub", "known_hosts"]
    paths = [d + n for d in ("", "src/", "a/.ssh/", "deep/er/") for n in names]
    assert [sensitive_file(p) for p in paths] == [every_pattern(p) for p in paths]
    assert sum(sensitive_file(p) is not None for p in paths) > len(paths) // 2
