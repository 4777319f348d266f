"""Shared fixtures: a scrubbed environment, real stores in tmp_path, CLI runners."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import blake3
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from ctxstore import fsio
from ctxstore.cli import cli
from ctxstore.init import init_store
from ctxstore.repo import Store, open_store
from ctxstore.session import Session

REPO_ROOT = Path(__file__).resolve().parent.parent

# pytest imports this file as ``conftest`` (tests/ has no __init__.py). A second copy imported as
# ``tests.conftest`` would keep a registry of sessions of its own, which the autouse fixture below
# never closes: tests import these helpers as ``from conftest import ...`` (tests/README.md).
if __name__ != "conftest":
    raise ImportError(f"import the test helpers as `from conftest import ...`, not as {__name__}")

for _name, _examples in (("quick", 60), ("full", 2000), ("soak", 50000)):
    settings.register_profile(_name, max_examples=_examples, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))


# -- one scrubbed environment for the whole process ------------------------------------------------
#
# Nothing a test runs may depend on the user's own configuration: Git identity, default branch,
# signing, hooks (``core.hooksPath``), templates, aliases, ``~/.ctx``. The environment below is set
# when this file is imported, before collection, so it holds for every fixture whatever its scope
# (a module-scoped fixture runs before any function-scoped one) and in every pytest-xdist worker;
# ``_scrub_env`` sets it again around each test, with a HOME of the test's own.

# Knobs of the test harness itself, read when a test module is imported (see README.md).
_HARNESS_KNOBS = ("CTX_CLAUDE_BIN", "CTX_SKIP_REAL_CLAUDE", "CTX_CRASH_", "CTX_CR03_",
                  "CTX_SOAK", "CTX_MERGE_HISTORIES")
_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
_HOME_PREFIX = "ctx-tests-home-"


def _process_home() -> Path:
    """An empty HOME holding an empty Git config, made once per test run.

    pytest-xdist workers inherit the environment of the process that started them: each finds the
    home already made through ``GIT_CONFIG_GLOBAL`` and shares it.
    """
    made = Path(os.environ.get("GIT_CONFIG_GLOBAL", "/nonexistent"))
    if made.parent.name.startswith(_HOME_PREFIX) and made.is_file() and made.stat().st_size == 0:
        return made.parent
    home = Path(tempfile.mkdtemp(prefix=_HOME_PREFIX))
    (home / "gitconfig").write_bytes(b"")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


PROCESS_HOME = _process_home()

# What every test runs under; _scrub_env gives each test a HOME (and an empty Git config) of its own.
TEST_ENV = {
    "HOME": str(PROCESS_HOME),
    "GIT_CONFIG_GLOBAL": str(PROCESS_HOME / "gitconfig"),  # ~/.gitconfig and ~/.config/git unread
    "GIT_CONFIG_NOSYSTEM": "1",  # /etc/gitconfig unread
    **_IDENTITY,
    "TZ": "UTC",
    "LC_ALL": "C.UTF-8",
}


def _scrubbed(var: str, *, keep_knobs: bool) -> bool:
    """Whether ``var`` of the caller's environment must not reach a test."""
    if keep_knobs and var.startswith(_HARNESS_KNOBS):
        return False
    return var.startswith(("XDG_", "GIT_", "CTX_"))


for _var in [v for v in os.environ if _scrubbed(v, keep_knobs=True)]:
    del os.environ[_var]
os.environ.update(TEST_ENV)

# Bytecode is cached even where the caller's environment asks Python not to write it
# (PYTHONDONTWRITEBYTECODE): without the cache every `python -m ctxstore.cli` the tests start
# compiles ctxstore again (about half of a short command's CPU time) and every pytest process
# rewrites the asserts of every test module again. The caches go where Python puts them by
# default (__pycache__, ignored by Git) and change nothing a test checks.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture(autouse=True)
def _scrub_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in [v for v in os.environ if _scrubbed(v, keep_knobs=False)]:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_bytes(b"")
    for var, value in TEST_ENV.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))


# Suites left out of the everyday run (`pytest -m "not slow"`, README "Tests") whatever their
# size: kill and fault sweeps, several processes at once, real Git histories.
SLOW_SUITES = ("crash", "concurrency", "git")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW_SUITES):
            item.add_marker(pytest.mark.slow)


_SESSIONS: dict[int, tuple[Store, Session]] = {}


def patch_fsio(monkeypatch: pytest.MonkeyPatch, name: str, replacement: object) -> None:
    """Replace the fsio primitive ``name`` for every caller, as the fault shim does.

    fsio's own modules (``Dir``, the lock, the writes by path) call it through ``fsio.core``,
    where it is defined; the rest of ctx through the package, which re-exports it. A name the
    package defines in another module (``hold_lock``) is replaced in the package only.
    """
    if hasattr(fsio.core, name):
        monkeypatch.setattr(fsio.core, name, replacement)
    monkeypatch.setattr(fsio, name, replacement)


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


def adopt_index(root: Path) -> None:
    """Make a copied store's index files stand for the copy's own (as if built here).

    The index (``meta`` ``clone``) and the code index (``code_meta`` ``clone``) record the copy
    of the store they were made for; a copy of a prepared store names the original, and ctx
    rebuilds (the code index: drops) what names another copy. Tests that copy a template to
    save building it again rebind both rows to the copy.
    """
    import sqlite3

    from ctxstore.index import clone_id

    for name, table in (("index.sqlite", "meta"), ("code.sqlite", "code_meta")):
        path = root / "index" / name
        if path.is_file():
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute(f"INSERT OR REPLACE INTO {table}(key, value) VALUES ('clone', ?)",
                         (clone_id(root),))
            conn.close()


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


def no_git_provenance(source: str = "explicit", session: str | None = None) -> dict:
    """The ``provenance`` metadata of a node written outside Git (a store in ``tmp_path``)."""
    return {"source": source, "session": session, "branch": None, "commit": None, "files": []}
