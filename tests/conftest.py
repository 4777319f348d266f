"""Shared fixtures: a scrubbed environment, real stores in tmp_path, CLI runners."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import blake3
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from ctxstore.cli import cli
from ctxstore.init import init_store
from ctxstore.repo import Store, open_store
from ctxstore.session import Session

REPO_ROOT = Path(__file__).resolve().parent.parent

for _name, _examples in (("quick", 60), ("full", 2000), ("soak", 50000)):
    settings.register_profile(_name, max_examples=_examples, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))


@pytest.fixture(autouse=True)
def _scrub_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var in list(os.environ):
        if var.startswith(("XDG_", "GIT_", "CTX_")):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")


_SESSIONS: dict[int, tuple[Store, Session]] = {}


def session_of(store: Store) -> Session:
    """The ``Session`` around ``store`` (one per store handle), closed when the test ends.

    Operations take the Session (issue 29); a test holding a ``Store`` calls them through
    this, so a test makes one index connection per store, as a command does.
    """
    found = _SESSIONS.get(id(store))
    if found is None or found[0] is not store:
        found = (store, Session(store))
        _SESSIONS[id(store)] = found
    return found[1]


@pytest.fixture(autouse=True)
def _close_sessions() -> object:
    yield
    for _, db in _SESSIONS.values():
        db.close()
    _SESSIONS.clear()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A freshly initialised store (no Git) at tmp_path/work/.ctx."""
    work = tmp_path / "work"
    work.mkdir()
    init_store(work / ".ctx", git=False)
    return open_store(work / ".ctx")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A directory outside every store, for links to lead to (containment tests), holding a canary."""
    folder = tmp_path / "OUT"
    folder.mkdir()
    (folder / "canary").write_bytes(b"canary bytes\n")
    return folder


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def without_autolink(store: Store) -> Store:
    """``store`` reopened with ``[lifecycle] autolink = false`` (on by default, spec 003).

    For tests that count exactly the edges they wrote and test something other than linking.
    """
    path = store.root / "config.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("\nautolink = true", "\nautolink = false")
                    if "\nautolink = " in text else text + "\n[lifecycle]\nautolink = false\n",
                    encoding="utf-8")
    return open_store(store.root)


def invoke(runner: CliRunner, store_or_dir: Store | Path, *args: str, input: str | None = None):
    """Run the CLI in-process against a store; returns click's Result."""
    root = store_or_dir.root if isinstance(store_or_dir, Store) else store_or_dir
    return runner.invoke(cli, ["--ctx-dir", str(root), *args], input=input)


def run_ctx(args: list[str], *, cwd: Path | None = None, stdin: str | bytes | None = None,
            env: dict[str, str] | None = None, timeout: float = 60,
            check_traceback: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``python -m ctxstore.cli`` as a subprocess (the installed package)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "ctxstore.cli", *args], cwd=cwd, input=data,
                          capture_output=True, env=full_env, timeout=timeout)
    res = subprocess.CompletedProcess(proc.args, proc.returncode,
                                      proc.stdout.decode("utf-8", "replace"),
                                      proc.stderr.decode("utf-8", "replace"))
    if check_traceback:
        assert "Traceback (most recent call last)" not in res.stderr, res.stderr
    return res


STAGE_FILE = "local/STAGE"  # STAGE is per clone (refs.STAGE_PATH)


def stage_file(root: Path) -> Path:
    """A store's STAGE pointer file."""
    return root / STAGE_FILE


def object_file(root: Path, oid: str) -> Path:
    """An object's file: the committed copy if there is one, else this clone's staging copy."""
    canonical = root / "objects" / oid[:2] / oid
    staged = root / "local" / "work" / "objects" / oid[:2] / oid
    return canonical if canonical.exists() or not staged.exists() else staged


def object_files(root: Path, oid: str) -> list[Path]:
    """Every copy of an object: a promoted one is in both areas until ``ctx gc``."""
    return [p for p in (root / "objects" / oid[:2] / oid,
                        root / "local" / "work" / "objects" / oid[:2] / oid) if p.exists()]


def store_digest(root: Path) -> str:
    """BLAKE3 over every file of a store's state: objects of both areas, pointers, config, narrative."""
    h = blake3.blake3()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        state = rel == STAGE_FILE or rel.startswith("local/work/")
        if (rel.split("/")[0] in ("index", "DERIVED", "local") and not state) or rel == "LOCK":
            continue
        if path.is_file():
            h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def verify_json(root: Path) -> dict:
    """``ctx debug verify --format json`` through a subprocess."""
    res = run_ctx(["--ctx-dir", str(root), "--format", "json", "debug", "verify"])
    return json.loads(res.stdout)


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """An empty Git work tree with identity set (no ctx store yet)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "commit.gpgsign", "false"], check=True)
    return repo
