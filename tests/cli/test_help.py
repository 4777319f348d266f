"""``ctx help [COMMAND]... --format text|json|markdown``: help as text, as data, as Markdown."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import run_ctx

from ctxstore.cli import COMMANDS
from ctxstore.cli.root import cli


def _help(runner: CliRunner, *args: str) -> str:
    r = runner.invoke(cli, list(args), prog_name="ctx")
    assert (r.exit_code, r.stderr) == (0, ""), (r.output, r.exception)
    return r.stdout


def test_help_json_describes_a_command_from_its_click_parameters() -> None:
    res = run_ctx(["help", "pack", "--format", "json"])  # the installed CLI
    assert (res.returncode, res.stderr) == (0, "")
    doc = json.loads(res.stdout)
    assert {k: doc[k] for k in ("version", "name", "command", "summary", "usage", "commands")} == {
        "version": 1, "name": "pack", "command": "ctx pack",
        "summary": COMMANDS["pack"][2], "usage": "ctx pack [OPTIONS] TASK", "commands": []}
    assert doc["help"].startswith("Build a prompt pack: ") and "\b" not in doc["help"]
    assert doc["arguments"] == [{"name": "task", "metavar": "TASK", "type": "text",
                                 "required": True, "nargs": 1, "default": None, "choices": None}]
    options = {o["name"]: o for o in doc["options"]}
    assert options["budget"] == {
        "name": "budget", "flags": ["--budget"], "type": "integer range", "metavar": "TOKENS",
        "default": None, "required": False, "multiple": False, "choices": None, "envvar": None,
        "help": "Token budget, the response reserve included ([retrieval] default_budget)."}
    assert options["format"]["choices"] == ["json", "yaml", "text", "markdown"]
    assert options["no-graph"]["type"] == "flag" and options["no-graph"]["default"] is False
    assert options["include-narrative"]["flags"] == ["--include-narrative", "--no-narrative"]
    assert "help" not in options and "_click_default_help" not in options


def test_help_json_honours_the_global_format(runner: CliRunner) -> None:
    own = _help(runner, "help", "pack", "--format", "json")
    assert _help(runner, "--format", "json", "help", "pack") == own
    assert json.loads(own)["name"] == "pack"
    # the command's own --format wins over the global one
    assert _help(runner, "--format", "json", "help", "pack", "--format", "text") \
        == _help(runner, "pack", "--help")


def test_help_json_of_a_group_lists_its_commands_and_of_ctx_every_command(runner: CliRunner
                                                                         ) -> None:
    view = json.loads(_help(runner, "help", "view", "--format", "json"))
    assert view["usage"] == "ctx view [OPTIONS] COMMAND [ARGS]..."
    assert [c["name"] for c in view["commands"]] == ["create", "delete", "list", "render", "update"]
    assert view["commands"][0]["summary"] == "Save a view."
    root = json.loads(_help(runner, "help", "--format", "json"))
    assert (root["name"], root["usage"]) == ("ctx", "ctx [OPTIONS] COMMAND [ARGS]...")
    assert root["commands"] == [{"name": n, "summary": COMMANDS[n][2]} for n in sorted(COMMANDS)]
    fmt = next(o for o in root["options"] if o["name"] == "format")
    assert (fmt["default"], fmt["choices"]) == ("text", ["text", "json", "markdown"])
    ctx_dir = next(o for o in root["options"] if o["name"] == "ctx-dir")
    assert ctx_dir["envvar"] == "CTX_DIR"


def test_help_json_of_add_shows_the_node_form_and_the_other_forms(runner: CliRunner) -> None:
    add = json.loads(_help(runner, "help", "add", "--format", "json"))
    assert add["usage"] == "ctx add [OPTIONS] [note|task|decision] TEXT"
    assert {"type", "tag", "stdin", "global", "format"} <= {o["name"] for o in add["options"]}
    assert [c["name"] for c in add["commands"]] == ["cargo", "command", "file", "rust"]
    cargo = json.loads(_help(runner, "help", "add", "cargo", "--format", "json"))
    assert (cargo["command"], cargo["usage"]) == ("ctx add cargo", "ctx add cargo [OPTIONS]")


def test_help_markdown_renders_usage_examples_and_options(runner: CliRunner) -> None:
    md = _help(runner, "help", "pack", "--format", "markdown")
    assert md.startswith("# ctx pack\n\n```\nctx pack [OPTIONS] TASK\n```\n\nBuild a prompt pack: ")
    assert "**Examples:**\n\n```\nctx pack \"What files are involved" in md
    assert "## Arguments\n\n- `TASK` (text, required)\n" in md
    assert "- `--budget` (TOKENS): Token budget, the response reserve included" in md
    assert "\b" not in md
    assert _help(runner, "--format", "markdown", "help", "pack") == md
    view = _help(runner, "help", "view", "--format", "markdown")
    assert "## Commands\n\n- `ctx view create`: Save a view.\n" in view
    assert _help(runner, "help", "--format", "markdown").startswith("# ctx\n")


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_help_unknown_command_in_any_format_is_one_line(runner: CliRunner, fmt: str) -> None:
    r = runner.invoke(cli, ["help", "lsit", "--format", fmt])
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == ("ctx: error[E011]: no such command: lsit "
                        "(hint: did you mean `ctx help list`?)\n")


def test_help_refuses_an_unknown_format(runner: CliRunner) -> None:
    r = runner.invoke(cli, ["help", "pack", "--format", "yaml"])
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr.startswith("ctx: error: Invalid value for '--format': 'yaml'")
