"""Harness for the real Claude Code CLI, offline, against a scripted model.

Each turn starts ``fake_anthropic.py`` (a scripted Messages API) on a free 127.0.0.1
port, runs ``claude -p ... --output-format json`` in a temp project with a throw-away
HOME, and returns the CLI's JSON result together with every request the CLI sent to the
model, so a test can check what reached the model. The CLI fires its real hooks with
real payloads, runs real tools and writes its real transcript.

The CLI is ``CTX_CLAUDE_BIN`` when set, else the pinned version under ``.tools/`` in the
checkout, which this harness installs from the npm registry on first use (so the README's
test command needs nothing else). If npm is missing or the install fails, the suite fails
with the reason, unless ``CTX_SKIP_REAL_CLAUDE=1`` asks to skip it. The variables are read
at import, before the per-test environment scrub of tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_MODEL = Path(__file__).with_name("fake_anthropic.py")
CLAUDE_VERSION = "2.1.330"
TOOLS = REPO_ROOT / ".tools"
_DEFAULT_BIN = TOOLS / "node_modules" / ".bin" / "claude"
CLAUDE_BIN = os.environ.get("CTX_CLAUDE_BIN", "")
SKIP_CLAUDE = os.environ.get("CTX_SKIP_REAL_CLAUDE") == "1"
_PASS_ENV = ("PATH", "LANG", "TMPDIR")
_CTX_BINDIR = str(Path(sys.executable).parent)  # where pip put the `ctx` console script


def _version_ok(path: Path) -> bool:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.startswith(CLAUDE_VERSION + " ")


def _install_pinned() -> str | None:
    """Install the pinned CLI into .tools/ (under a lock); None on success, else why not."""
    import fcntl

    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on PATH"
    TOOLS.mkdir(exist_ok=True)
    with open(TOOLS / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _version_ok(_DEFAULT_BIN):
            return None
        log = TOOLS / "npm-install.log"
        with open(log, "w") as out:
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(TOOLS),
                                   f"@anthropic-ai/claude-code@{CLAUDE_VERSION}"],
                                  stdout=out, stderr=subprocess.STDOUT, timeout=900)
        if done.returncode != 0 or not _version_ok(_DEFAULT_BIN):
            return f"npm install of @anthropic-ai/claude-code@{CLAUDE_VERSION} failed (see {log})"
    return None


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The real ``claude`` executable (installed on first use), or a failure saying why."""
    if SKIP_CLAUDE:
        pytest.skip("CTX_SKIP_REAL_CLAUDE=1")
    if CLAUDE_BIN:
        path = Path(CLAUDE_BIN)
        if not os.access(path, os.X_OK):
            pytest.fail(f"CTX_CLAUDE_BIN={CLAUDE_BIN} is not an executable")
        return path
    if not _version_ok(_DEFAULT_BIN):
        problem = _install_pinned()
        if problem is not None:
            pytest.fail(f"real Claude Code CLI unavailable: {problem} "
                        "(set CTX_SKIP_REAL_CLAUDE=1 to skip this suite)")
    return _DEFAULT_BIN


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


@dataclass
class Turn:
    """One ``claude -p`` run: its JSON result and the model requests it made."""

    result: dict[str, Any]
    requests: list[dict[str, Any]]
    stderr: str

    @property
    def session_id(self) -> str:
        return self.result["session_id"]

    @property
    def main_requests(self) -> list[dict[str, Any]]:
        """Requests for the scripted conversation (not titles or token counts)."""
        return [r["req"] for r in self.requests
                if "count_tokens" not in r["path"] and r["req"].get("max_tokens", 0) >= 600]

    def count(self, needle: str, request: int = 0) -> int:
        """How often ``needle`` occurs in one main request's body (JSON text)."""
        return json.dumps(self.main_requests[request], ensure_ascii=False).count(needle)

    def seen(self, needle: str) -> bool:
        """Whether ``needle`` reached the model in any main request."""
        return any(needle in json.dumps(r, ensure_ascii=False) for r in self.main_requests)


@dataclass
class ClaudeProject:
    """A temp Git project with a ctx store and ctx installed, driven through ``claude``."""

    bin: Path
    root: Path
    home: Path
    work: Path
    plugin_dir: Path | None = None
    turns: int = field(default=0)

    def run(self, prompt: str, replies: list[Any], *, resume: str | None = None,
            timeout: float = 90, allowed_tools: str = "Bash",
            env: dict[str, str] | None = None) -> Turn:
        """Run one prompt with the model scripted by ``replies`` (fake_anthropic format).

        ``env``: variables set for the CLI on top of the harness's own.
        """
        self.turns += 1
        folder = self.work / f"turn{self.turns}"
        folder.mkdir()
        script = folder / "script.json"
        script.write_text(json.dumps(replies))
        for _attempt in range(3):  # the free port can be taken between probe and bind
            port = _free_port()
            server = subprocess.Popen([sys.executable, str(FAKE_MODEL), str(port), str(script)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if _wait_listening(port, server):
                break
            server.kill()
            server.wait()
        else:
            pytest.fail("fake model server did not start")
        try:
            args = [str(self.bin), "-p", prompt, "--output-format", "json", "--allowedTools",
                    allowed_tools]
            if resume:
                args += ["--resume", resume]
            if self.plugin_dir:
                args += ["--plugin-dir", str(self.plugin_dir)]
            proc = subprocess.run(args, cwd=self.root, env={**self._env(port), **(env or {})},
                                  capture_output=True,
                                  text=True, timeout=timeout)
        finally:
            server.kill()
            server.wait()
        assert proc.returncode == 0, f"claude failed ({proc.returncode}): {proc.stderr}\n{proc.stdout}"
        log = folder / "requests.jsonl"
        requests = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return Turn(json.loads(proc.stdout), requests, proc.stderr)

    def _env(self, port: int) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        # ctx on the PATH Claude Code passes to its hooks, as an installed ctx is (the
        # plugin's wrapper and the portable project hooks find it there).
        env["PATH"] = os.pathsep.join([_CTX_BINDIR, env.get("PATH", os.defpath)])
        env.update(HOME=str(self.home), ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
                   ANTHROPIC_API_KEY="sk-test", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1",
                   CLAUDE_CODE_DISABLE_AUTO_MEMORY="1", TZ="UTC", LC_ALL="C.UTF-8")
        return env

    def transcript(self, session_id: str) -> str:
        """The session's transcript JSONL as the CLI wrote it (format of the pinned CLI)."""
        found = list(self.home.glob(f".claude/projects/*/{session_id}.jsonl"))
        assert len(found) == 1, found
        return found[0].read_text()

    def ctx(self, *args: str) -> str:
        """Run the installed ctx in the project (its own environment); return stdout."""
        proc = subprocess.run([sys.executable, "-m", "ctxstore.cli", *args], cwd=self.root,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def nodes(self) -> list[dict[str, Any]]:
        """``ctx list --format json`` of the project store."""
        return json.loads(self.ctx("--format", "json", "list", "--limit", "1000"))["nodes"]

    def contents(self) -> list[str]:
        return [n["content"] for n in self.nodes()]


@pytest.fixture(params=["settings", "plugin"])
def cc(request: pytest.FixtureRequest, claude_bin: Path, tmp_path: Path) -> ClaudeProject:
    """A project with ctx installed via .claude/settings.json, or as a --plugin-dir plugin."""
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "turns"
    work.mkdir()
    project = ClaudeProject(claude_bin, root, home, work)
    project.ctx("init")
    if request.param == "settings":
        project.ctx("install", "--project")
        assert (root / ".claude" / "settings.json").is_file()
    else:
        project.plugin_dir = tmp_path / "ctx-plugin"
        project.ctx("install", "--plugin", str(project.plugin_dir))
        assert not (root / ".claude").exists()
    return project


def pytest_report_header() -> list[str]:
    found = CLAUDE_BIN and shutil.which(CLAUDE_BIN)
    return [f"real Claude Code CLI: {found or 'absent (tests/realcc skipped)'}"]
