"""The plugin `ctx install --plugin DIR` writes, checked by the real Claude Code CLI.

`claude plugin validate --strict` (warnings are errors: missing author, unknown fields) on
the plugin and on its marketplace.json, then `claude plugin marketplace add DIR` and
`claude plugin install ctx@ctx` in a throw-away HOME, all offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The real Claude Code CLI: seconds a turn, and an npm install on first use.
pytestmark = pytest.mark.slow


def _claude(claude_bin: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: os.environ[k] for k in ("PATH", "LANG", "TMPDIR") if k in os.environ}
    env.update(HOME=str(home), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
               DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1")
    return subprocess.run([str(claude_bin), *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_plugin_validates_strictly_and_installs_from_its_marketplace(claude_bin: Path,
                                                                     tmp_path: Path) -> None:
    plugin = tmp_path / "ctx-plugin"
    made = subprocess.run([sys.executable, "-m", "ctxstore.cli", "install", "--plugin", str(plugin)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    home = tmp_path / "home"
    home.mkdir()
    for target in (plugin, plugin / ".claude-plugin" / "plugin.json",
                   plugin / ".claude-plugin" / "marketplace.json"):
        res = _claude(claude_bin, home, "plugin", "validate", "--strict", str(target))
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Validation passed" in res.stdout
    added = _claude(claude_bin, home, "plugin", "marketplace", "add", str(plugin))
    assert added.returncode == 0, added.stdout + added.stderr
    installed = _claude(claude_bin, home, "plugin", "install", "ctx@ctx")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    registry = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
    import ctxstore

    assert [e["version"] for e in registry["plugins"]["ctx@ctx"]] == [ctxstore.__version__]
