"""The console script keeps the cyclic collector off while it starts, and on for the command.

``ctxstore.cli.main`` turns the collector off while click, the root group and the command's
module are imported (objects that live as long as the process), then moves them out of its
sight (``gc.freeze``) and turns it back on before the command runs: a long-lived command
(``ctx mcp``, ``ctx ui``) must collect its garbage as usual (``ctx index``'s run turns it off
itself, ``code.ingest.run``). A command run in-process (``CliRunner``) leaves the collector as it
found it and freezes nothing.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from ctxstore.cli import cli
from tests.code._ingestlib import make_work, write

# Runs ``main`` as the console script does (argv: the command's module, then its arguments) and
# says at exit which collections ran while it started, and whether the collector is on.
PROBE = """
import atexit, gc, json, sys
command_module = sys.argv[1]
starting = []  # collections after click was imported and before the command's module was
def counted(phase, info):
    if phase == "stop" and "click" in sys.modules and command_module not in sys.modules:
        starting.append(info["generation"])
gc.callbacks.append(counted)
def report():
    sys.stderr.write("PROBE " + json.dumps({"enabled": gc.isenabled(), "starting": starting,
                                             "loaded": command_module in sys.modules}) + "\\n")
atexit.register(report)
sys.argv = ["ctx", *sys.argv[2:]]
from ctxstore.cli import main
main()
"""


def _probe(module: str, args: list[str], cwd: Path) -> dict:
    res = subprocess.run([sys.executable, "-c", PROBE, module, *args], cwd=cwd,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    line = [x for x in res.stderr.splitlines() if x.startswith("PROBE ")]
    assert line, res.stderr
    return json.loads(line[-1][len("PROBE "):])


def test_a_command_starts_without_collections_and_runs_with_the_collector_on(
        tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"a.py": "def a():\n    return 1\n"})
    for module, args in (("ctxstore.cli.status", ["status"]), ("ctxstore.cli.code", ["index"])):
        probe = _probe(module, args, ctx_dir.parent)
        assert probe["loaded"] and probe["starting"] == [], (args, probe)
        assert probe["enabled"], (args, probe)  # on again: a long-lived command collects


def test_in_process_a_run_leaves_the_collector_as_it_was_and_freezes_nothing(
        tmp_path: Path, monkeypatch) -> None:
    from click.testing import CliRunner

    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"a.py": "def a():\n    return 1\n"})
    monkeypatch.chdir(ctx_dir.parent)
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    res = CliRunner().invoke(cli, ["--ctx-dir", str(ctx_dir), "index"])
    assert res.exit_code == 0, res.output
    assert gc.isenabled() and gc.get_freeze_count() == frozen
