"""Every command has help with an example, and the docs name every command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ctxstore.cli import COMMANDS, cli

ROOT = Path(__file__).resolve().parent.parent


def _all_commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out = []
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out.extend((f"{name} {sub}", cmd.commands[sub]) for sub in cmd.commands)
    return out


@pytest.mark.parametrize("name,cmd", _all_commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_docs_every_command_has_help_with_example(name: str, cmd: click.Command) -> None:
    r = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert r.exit_code == 0, r.output
    assert (cmd.help or "").strip(), f"{name} has no help text"
    assert "Example" in r.output, f"`ctx {name} --help` shows no example"


def test_docs_root_help_lists_commands() -> None:
    r = CliRunner().invoke(cli, ["--help"])
    for name in COMMANDS:
        assert name in r.output


def test_docs_readme_names_every_command_and_starts_with_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in COMMANDS:
        assert f"ctx {name}" in readme, f"README does not mention ctx {name}"
    blocks = readme.split("```")
    first_block = blocks[1]
    assert "pip install" in first_block and "pytest" in blocks[3]


def test_docs_errors_page_lists_every_code() -> None:
    import ctxstore.errors as errors

    page = (ROOT / "docs" / "errors.md").read_text()
    for name in errors.__all__:
        cls = getattr(errors, name)
        if cls.code != "E000":
            assert cls.code in page and name in page, f"{name} missing from docs/errors.md"


def test_docs_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = readme.split("```")[3].strip().splitlines()[-1]
    assert test_cmd in ci


@pytest.mark.slow
def test_docs_quickstart_runs_with_the_installed_ctx() -> None:
    """README's first command: the tour runs end to end with the installed `ctx`."""
    import os
    import subprocess
    import sys

    bindir = str(Path(sys.executable).parent)  # where pip put the `ctx` console script
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("CTX_DIR", None)
    res = subprocess.run(["bash", str(ROOT / "examples" / "quickstart.sh")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = res.stdout
    assert "committed " in out and "task created" in out
    assert 'kind="default view"' in out and "Retry with exponential backoff" in out
    assert out.count("0 problems: ok") == 1 and "Traceback" not in out + res.stderr
