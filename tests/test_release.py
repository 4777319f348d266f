"""The release: the wheel and sdist build, install into a fresh virtual environment and run.

``python -m build`` makes the sdist and then the wheel from the sdist (so a file missing from
the sdist breaks the wheel too); the wheel is installed with its dependencies into a new
virtual environment that has never seen this checkout, and the installed ``ctx`` must run:
``--version``, the README's quickstart, ``ctx mcp`` answering ``tools/list``, code indexing
with each grammar, and every data file (skills, narrative templates, secret rules) present.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import ctxstore

ROOT = Path(__file__).resolve().parents[1]
VERSION = ctxstore.__version__

pytestmark = pytest.mark.slow  # a build, a virtual environment and a pip install: a minute


def data_files() -> list[str]:
    """Every data file of the source tree, as the installed package names it."""
    found = [p.relative_to(ROOT).as_posix() for p in (ROOT / "ctxstore").rglob("*")
             if p.is_file() and p.suffix in (".md", ".json", ".toml", ".txt")]
    found += ["ctxstore/narrative_templates/" + p.name
              for p in (ROOT / "narrative_templates").glob("*.md")]
    return sorted(found)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTX_")}
    res = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    wheel = dist / f"ctxstore-{VERSION}-py3-none-any.whl"
    res = subprocess.run([str(where / "bin" / "pip"), "install", "-q", str(wheel)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return where


def clean_env(venv: Path, home: Path) -> dict[str, str]:
    """Only the fresh environment's ``bin`` and the system's on PATH; no CTX_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTX_", "PYTHON", "VIRTUAL_ENV"))}
    system = [p for p in os.environ.get("PATH", "").split(os.pathsep)
              if p and Path(p).resolve() != Path(sys.executable).parent.resolve()]
    env.update(PATH=os.pathsep.join([str(venv / "bin"), *system]), HOME=str(home))
    return env


def test_changelog_names_the_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    released = [h for h in headings if h != "Unreleased"]
    assert released and released[0] == VERSION, headings
    assert headings[:1] in (["Unreleased"], [VERSION])  # nothing above the newest release
    assert f'__version__ = "{VERSION}"' in (ROOT / "ctxstore" / "__init__.py").read_text()
    assert "dynamic = [\"version\"]" in (ROOT / "pyproject.toml").read_text()


def test_wheel_and_sdist_carry_every_data_file_and_the_version(dist: Path) -> None:
    wheel = dist / f"ctxstore-{VERSION}-py3-none-any.whl"
    sdist = dist / f"ctxstore-{VERSION}.tar.gz"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(f"ctxstore-{VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {VERSION}\n" in metadata
    assert "Requires-Dist: mcp" in metadata  # ctx mcp works in every install
    wanted = data_files()
    assert len(wanted) >= 20  # skills, templates, rules: the list itself is not empty
    assert [f for f in wanted if f not in names] == []
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE", "docs/release.md",
                 "examples/quickstart.sh",
                 "narrative_templates/log.md", "ctxstore/claude/skills/recall/SKILL.md",
                 "ctxstore/security/rules.json"):
        assert name in members, name


def test_the_installed_ctx_runs_from_a_fresh_virtualenv(venv: Path, tmp_path: Path) -> None:
    env = clean_env(venv, tmp_path / "home")
    (tmp_path / "home").mkdir()
    ctx = str(venv / "bin" / "ctx")
    res = subprocess.run([ctx, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert (res.returncode, res.stdout.strip()) == (0, f"ctx, version {VERSION}"), res.stderr
    # The package imported is the installed one, not this checkout.
    probe = ("import ctxstore, importlib.metadata as m, importlib.resources as r;"
             "print(ctxstore.__file__); print(m.version('ctxstore'));"
             "print(sorted(p.name for p in (r.files('ctxstore.claude') / 'skills').iterdir()))")
    res = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True,
                         text=True, env=env, timeout=60, cwd=tmp_path)
    where, version, skills = res.stdout.splitlines()
    assert Path(where).is_relative_to(venv) and version == VERSION
    assert eval(skills) == sorted(p.name for p in (ROOT / "ctxstore/claude/skills").iterdir()
                                  if (p / "SKILL.md").is_file())
    site = Path(where).parent
    assert [f for f in data_files() if not (site.parent / f).is_file()] == []


def test_the_quickstart_runs_with_the_installed_ctx(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = clean_env(venv, tmp_path / "home")
    res = subprocess.run(["bash", str(ROOT / "examples" / "quickstart.sh")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "committed " in res.stdout and "Retry with exponential backoff" in res.stdout
    assert "0 problems: ok" in res.stdout and "Traceback" not in res.stdout + res.stderr


def test_installed_ctx_mcp_answers_and_grammars_and_plugin_work(venv: Path, tmp_path: Path) -> None:
    from ctxstore.mcp.probe import probe_server

    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(venv, home)
    ctx = str(venv / "bin" / "ctx")
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True, env=env)
    (project / "main.go").write_text("package main\n\nfunc RetryWithBackoff() int { return 1 }\n")
    (project / "lib.rs").write_text("pub fn parse_header(x: u8) -> u8 { x }\n")
    (project / "w.ts").write_text("export function renderWidget(): number { return 1 }\n")
    (project / "app.js").write_text("function startServer() { return 1 }\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([ctx, *args], cwd=project, env=env, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        return res

    run("init")
    run("index")
    for name, path in (("RetryWithBackoff", "main.go"), ("parse_header", "lib.rs"),
                       ("renderWidget", "w.ts"), ("startServer", "app.js")):
        out = run("debug", "index", f"name:item:{name}").stdout
        assert f"path={path}" in out and "kind=function" in out, out

    result = probe_server([ctx, "mcp"], cwd=project, env=env, timeout=60)
    assert result.ok, result.detail
    assert {"remember", "recall", "search", "pack"} <= set(result.tools)

    plugin = tmp_path / "plugin"
    run("install", "--plugin", str(plugin))
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["version"] == VERSION
    assert (plugin / "skills" / "recall" / "SKILL.md").is_file()
