"""``ctx ui`` through the installed CLI: serving until interrupted, and the static export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import run_ctx

from tests.ui.project import Project, make_project, tree_digest


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return make_project(tmp_path_factory.mktemp("ui-cli"))


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as res:  # noqa: S310 (a 127.0.0.1 URL)
            return res.status, res.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_cli_ui_serves_until_interrupted_and_prints_the_url(project: Project) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(project.ctx),
                             "ui", "--no-open"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        status, body = _get(url + "api/timeline")
        assert status == 200 and json.loads(body)["store"] == str(project.ctx.resolve())
        base = url.rsplit("/", 2)[0]
        assert _get(base + "/")[0] == 403
        assert _get(base + "/api/timeline")[0] == 403
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err.decode()
    assert "press Ctrl-C to stop" in err.decode()


def _serve(project: Project, env: dict[str, str], *args: str) -> tuple[str, str]:
    """Start ``ctx ui ARGS``, read the URL it prints, stop it with SIGINT: the URL and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(project.ctx),
                             "ui", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:"), url
        assert _get(url)[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return url, err.decode()


def test_cli_ui_opens_the_url_in_the_users_browser(project: Project, tmp_path: Path) -> None:
    # $BROWSER names the user's browser (Python's webbrowser reads it): here a script that
    # writes down what it was asked to open
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {opened}\n')
    browser.chmod(0o755)
    url, err = _serve(project, {**os.environ, "BROWSER": f"{browser} %s"})
    assert opened.read_text() == url + "\n"
    assert "no browser could be opened" not in err
    # --no-open opens nothing
    opened.unlink()
    _serve(project, {**os.environ, "BROWSER": f"{browser} %s"}, "--no-open")
    assert not opened.exists()


def test_cli_ui_says_so_when_no_browser_opens(project: Project, tmp_path: Path) -> None:
    # a $BROWSER that fails, and no other browser in an empty PATH
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "BROWSER": "false", "PATH": str(empty)}
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    _, err = _serve(project, env)
    assert "ctx: note: no browser could be opened; open the URL above" in err
    assert "Traceback" not in err


def test_cli_ui_json_prints_the_url_as_json(project: Project) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(project.ctx),
                             "ui", "--no-open", "--format", "json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or lines[-1] != b"}\n":
            lines.append(proc.stdout.readline())
        doc = json.loads(b"".join(lines))
        assert doc["version"] == 1 and doc["url"].startswith("http://127.0.0.1:")
        assert _get(doc["url"])[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_cli_ui_export_writes_pages_that_embed_the_data(project: Project, tmp_path: Path) -> None:
    before = tree_digest(project.ctx)
    site = tmp_path / "site"
    res = run_ctx(["--ctx-dir", str(project.ctx), "--format", "json", "ui", "--export", str(site),
                   "--pack", "fix the retry loop"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["packs"] == 1 and doc["node_pages"] >= 4 and doc["left_out"] == 0
    for name in ("index.html", "node.html", "graph.html", "pack.html", "memory.html",
                 "assets/app.js", "assets/graph.js", "assets/style.css", "data.js", ".ctx-ui-export"):
        assert (site / name).is_file(), name
    table = (site / "data.js").read_text()
    assert table.startswith("window.CTX_STATIC = {files:")
    files = json.loads(table.removeprefix("window.CTX_STATIC = {files:").split(",packs:")[0])
    keys = {json.dumps(json.loads(k)) for k in files}
    assert json.dumps(["timeline", []]) in keys
    assert json.dumps(["graph", [["level", "files"]]]) in keys
    assert json.dumps(["node", [["ref", project.decision]]]) in keys
    assert json.dumps(["node", [["ref", "file:pkg/a.py"]]]) in keys
    assert json.dumps(["pack", [["task", "fix the retry loop"]]]) in keys
    graph_file = files[json.dumps(["graph", [["level", "files"]]], separators=(",", ":"))]
    assert "file:pkg/a.py" in (site / graph_file).read_text()
    assert tree_digest(project.ctx) == before
    # an earlier export is overwritten, its old answers removed
    res = run_ctx(["--ctx-dir", str(project.ctx), "ui", "--export", str(site)])
    assert res.returncode == 0 and res.stdout.startswith("exported ")
    assert len(list((site / "data").iterdir())) == len(files) - 1  # the pack is gone


def test_cli_ui_export_refuses_a_directory_in_the_store_or_one_that_holds_files(
        project: Project, tmp_path: Path) -> None:
    before = tree_digest(project.ctx)
    res = run_ctx(["--ctx-dir", str(project.ctx), "ui", "--export", str(project.ctx / "site")])
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.startswith("ctx: error[E011]: refusing to export into ")
    assert not (project.ctx / "site").exists() and tree_digest(project.ctx) == before
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    res = run_ctx(["--ctx-dir", str(project.ctx), "ui", "--export", str(busy)])
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (f"ctx: error[E011]: {busy} is not empty and holds no earlier export "
                          "(hint: name a new or empty directory)\n")
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]


def test_cli_ui_pack_needs_export(project: Project) -> None:
    res = run_ctx(["--ctx-dir", str(project.ctx), "ui", "--pack", "x", "--no-open"])
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.startswith("ctx: error[E011]: --pack goes with --export")
