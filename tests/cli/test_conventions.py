"""CLI conventions every command keeps: broken pipes, config keys, progress, consistency, help."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import invoke, session_of

from ctxstore.cli.root import cli
from ctxstore.config import DEFAULTS, RESERVED, load_config, render_default_config
from ctxstore.repo import Store

ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def ok(runner: CliRunner, store: Store, *args: str, input: str | None = None) -> str:
    r = invoke(runner, store, *args, input=input)
    assert r.exit_code == 0, (r.output, r.stderr)
    return r.stdout


def add(runner: CliRunner, store: Store, text: str, *more: str) -> str:
    return ok(runner, store, "add", "--type", "fact", *more, text).strip()


def _ctx(args: list[str], *, stdout: int | None = None, stderr: int | None = None,
         env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "ctxstore.cli", *args], stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=stderr, env={**os.environ, **(env or {})})


def _on_pty(args: list[str], *, which: str) -> tuple[int, bytes, bytes]:
    """Run ctx with stdout or stderr (``which``) on a pseudo-terminal; the other one piped."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:  # a full pty buffer would block the child
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    if which == "stderr":
        proc = _ctx(args, stdout=subprocess.PIPE, stderr=slave)
    else:
        proc = _ctx(args, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out, err = proc.communicate(timeout=120)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, b"".join(chunks), out if which == "stderr" else err


# -- item 10: a closed pipe ends quietly -------------------------------------------------------


@pytest.mark.parametrize("command", [["status"], ["list"], ["log"], ["export"]])
def test_root_broken_pipe_exits_141_without_a_message(store: Store, runner: CliRunner,
                                                      command: list[str]) -> None:
    for i in range(3):
        add(runner, store, f"fact {i}")
    # The reader is gone before ctx writes anything: every write meets EPIPE.
    proc = _ctx(["--ctx-dir", str(store.root), *command], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (141, b"")


@pytest.mark.slow
def test_root_broken_pipe_in_a_shell_pipeline_prints_nothing(store: Store, runner: CliRunner
                                                             ) -> None:
    for i in range(200):
        add(runner, store, f"fact number {i} " + "x" * 200)
    res = subprocess.run(f'"{sys.executable}" -m ctxstore.cli --ctx-dir "{store.root}" list '
                         "| head -1", shell=True, capture_output=True, timeout=60)
    assert res.stderr == b"" and ULID.match(res.stdout.decode())


# -- item 11: config keys that do nothing ------------------------------------------------------


def _set_config(store: Store, text: str) -> None:
    (store.root / "config.toml").write_text(render_default_config("t") + text)


def test_config_default_budget_sets_compose_and_view_budget(store: Store, runner: CliRunner,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    text = render_default_config("t").replace("default_budget = 50000", "default_budget = 1234")
    (store.root / "config.toml").write_text(text)
    add(runner, store, "one fact")
    assert json.loads(ok(runner, store, "compose", "--format", "json"))["meta"]["budget"] == 1234
    assert json.loads(ok(runner, store, "view", "render", "default", "--format",
                         "json"))["meta"]["budget"] == 1234
    assert json.loads(ok(runner, store, "compose", "--query", "type:fact", "--format",
                         "json"))["meta"]["budget"] == 1234
    monkeypatch.setenv("CTX_DEFAULT_BUDGET", "999")  # the environment still wins
    assert json.loads(ok(runner, store, "compose", "--format", "json"))["meta"]["budget"] == 999


def test_config_rendered_default_holds_only_keys_that_are_used() -> None:
    """A key written into a new config.toml is read somewhere (config.get or a section lookup)."""
    import ctxstore

    text = render_default_config("t")
    keys = {(s, k) for s, t in DEFAULTS.items() for k in t if f"\n{k} = " in text}
    assert ("retrieval", "default_budget") in keys and not keys & RESERVED
    sources = "".join(p.read_text() for p in Path(ctxstore.__file__).parent.rglob("*.py")
                      if p.name != "config.py")
    keys.discard(("repo", "ctx_version"))  # read by load_config itself (newer stores refused)
    unused = sorted(f"[{s}] {k}" for s, k in keys if f'"{k}"' not in sources)
    assert unused == []
    assert "[index]\nfulltext = " in text  # the one [index] key not reserved


def test_config_reserved_keys_are_accepted_without_a_warning(store: Store, runner: CliRunner
                                                            ) -> None:
    text = render_default_config("t")
    assert text.count("[index]\n") == 1  # the default names the section: the keys join it
    (store.root / "config.toml").write_text(
        text.replace("[index]\n", '[index]\nbackend = "sqlite"\nenable_tantivy = false\n'))
    assert load_config(store.root / "config.toml").unknown == []
    r = invoke(runner, store, "status")
    assert (r.exit_code, r.stderr) == (0, "")


def test_config_unknown_keys_warn_once_per_command(store: Store, runner: CliRunner) -> None:
    _set_config(store, "[future]\nx = 1\n")
    text = (store.root / "config.toml").read_text().replace("[gc]\n", "[gc]\nbogus = 2\n")
    (store.root / "config.toml").write_text(text)
    r = invoke(runner, store, "list")
    assert r.exit_code == 0
    assert r.stderr == (f"ctx: warning: {store.root / 'config.toml'}: unknown keys [gc] bogus, "
                        "[future] (ignored)\n")


# -- item 12: progress on a terminal, nothing when piped ---------------------------------------


def _import_document(n: int) -> dict[str, object]:
    from ctxstore.ids import new_ulid

    stamp = "2026-01-01T00:00:00.000Z"
    nodes = [{"id": new_ulid(), "type": "fact", "content": f"fact {i}", "summary": None,
              "tags": [], "metadata": {}, "status": "active", "superseded_by": None,
              "created_at": stamp, "updated_at": stamp, "author": None} for i in range(n)]
    return {"version": 1, "format": "ctx-export", "nodes": nodes, "edges": [], "views": []}


@pytest.mark.slow
def test_progress_rebuild_and_verify_draw_on_a_terminal_only(store: Store, runner: CliRunner,
                                                             tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps(_import_document(1200)))
    ok(runner, store, "import", str(doc))
    base = ["--ctx-dir", str(store.root)]
    code, tty, out = _on_pty([*base, "rebuild"], which="stderr")
    assert code == 0 and out.startswith(b"rebuilt index: 1200 nodes")
    assert b"rebuild records" in tty and b"1200/1200" in tty, tty
    code, tty, _ = _on_pty([*base, "debug", "verify"], which="stderr")
    assert code == 0 and b"verify objects" in tty, tty
    for args in (["rebuild"], ["debug", "verify"]):
        piped = subprocess.run([sys.executable, "-m", "ctxstore.cli", *base, *args],
                               capture_output=True, timeout=120)
        assert (piped.returncode, piped.stderr) == (0, b"")


@pytest.mark.slow
def test_progress_import_indexes_with_a_bar_on_a_terminal(store: Store, tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps(_import_document(2500)))
    code, tty, out = _on_pty(["--ctx-dir", str(store.root), "import", str(doc)], which="stderr")
    assert (code, out) == (0, b"imported 2500 nodes, 0 edges, 0 views\n")
    assert b"indexing records" in tty and b"2500/2500" in tty, tty
    # Already indexed: the next read has nothing to catch up with and draws nothing.
    code, tty, _ = _on_pty(["--ctx-dir", str(store.root), "status"], which="stderr")
    assert (code, tty) == (0, b"")


def test_progress_index_catch_up_is_silent_when_piped(store: Store, tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps(_import_document(2500)))
    res = subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(store.root),
                          "import", str(doc)], capture_output=True, timeout=120)
    assert (res.returncode, res.stderr) == (0, b"")


@pytest.mark.slow
def test_progress_commit_of_a_large_session_draws_on_a_terminal_only(tmp_path: Path) -> None:
    from ctxstore.init import init_store
    from ctxstore.knowledge.nodes import add_node
    from ctxstore.repo import open_store

    roots = []
    for name in ("tty", "piped"):
        root = tmp_path / name / ".ctx"
        init_store(root)
        store = open_store(root)
        for i in range(520):  # one work commit per write: a session of 520 steps
            add_node(session_of(store), "fact", f"fact {i}")
        roots.append(root)
    code, tty, out = _on_pty(["--ctx-dir", str(roots[0]), "commit", "-m", "big"], which="stderr")
    assert code == 0 and out.startswith(b"committed "), out
    assert b"folding work commits" in tty and b"520/520" in tty, tty
    piped = subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(roots[1]),
                            "commit", "-m", "big"], capture_output=True, timeout=120)
    assert (piped.returncode, piped.stderr) == (0, b"")
    assert b"records from 520 work commits" in piped.stdout


# -- item 13: consistency ----------------------------------------------------------------------

# JSON in and out by contract (hooks, the MCP server, the Git merge driver).
NO_FORMAT = {"hook", "mcp", "merge-ref"}


def test_format_is_accepted_by_every_command() -> None:
    ctx = click.Context(cli)
    missing = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
        elif path[0] not in NO_FORMAT and not any("--format" in getattr(p, "opts", [])
                                                  for p in cmd.params):
            missing.append(" ".join(path))

    walk(cli, [])
    assert missing == []


def test_format_json_on_export(store: Store, runner: CliRunner) -> None:
    add(runner, store, "exported")
    doc = json.loads(ok(runner, store, "export", "--format", "json"))
    assert [n["content"] for n in doc["nodes"]] == ["exported"]


def test_since_accepts_the_query_language_times(store: Store, runner: CliRunner) -> None:
    nid = add(runner, store, "recent")
    for since in ("1h", "2w", "2020-01-31", "2020-01-31T12:00:00Z"):
        assert ok(runner, store, "list", "--since", since).split()[0] == nid
    assert ok(runner, store, "list", "--since", "9999-12-31T23:59:59Z") == ""
    r = invoke(runner, store, "list", "--since", "3x")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == ("ctx: error[E011]: --since: invalid time '3x' (want a duration like 24h, "
                        "7d, 1w, a date YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ)\n")


def test_tag_validation_is_the_same_for_every_command(store: Store, runner: CliRunner,
                                                      tmp_path: Path) -> None:
    nid = add(runner, store, "tagged")
    src = tmp_path / "src.txt"
    src.write_text("source text\n")
    line = ("ctx: error[E011]: invalid tag 'bad tag' (want namespace:value, e.g. project:ctx)\n")
    for args in (["add", "--type", "fact", "--tag", "bad tag", "x"],
                 ["add", "note", "--tag", "bad tag", "x"], ["list", "--tag", "bad tag"],
                 ["tag", nid, "bad tag"], ["untag", nid, "bad tag"],
                 ["summarize", nid, "--content", "s", "--tag", "bad tag"],
                 ["ingest", str(src), "--tag", "bad tag"]):
        r = invoke(runner, store, *args)
        assert (r.exit_code, r.stdout, r.stderr) == (1, "", line), args


def test_query_misspelt_field_suggests_the_field(store: Store, runner: CliRunner) -> None:
    add(runner, store, "a fact")
    r = invoke(runner, store, "query", "tpye:fact")
    assert (r.exit_code, r.stdout) == (0, "")
    assert r.stderr == "ctx: note: 'tpye:fact' is searched as text; did you mean 'type:'?\n"
    r = invoke(runner, store, "query", "type:fact")
    assert r.stderr == "" and r.stdout.count("\n") == 1


def test_unknown_command_suggests_the_nearest(runner: CliRunner) -> None:
    r = runner.invoke(cli, ["lsit"])
    assert r.exit_code == 2
    assert r.stderr == "ctx: error: No such command 'lsit'. Did you mean 'list'? (see 'ctx --help')\n"
    r = runner.invoke(cli, ["zzzzzz"])
    assert r.stderr == "ctx: error: No such command 'zzzzzz'. (see 'ctx --help')\n"


@pytest.mark.parametrize("argv, message", [
    (["search", "x", "--kind", "bogus"], "Invalid value for '--kind'"),
    (["pack", "x", "--budget", "abc"], "Invalid value for '--budget'"),
    (["search"], "Missing argument 'TEXT'"),
    (["--format", "yaml", "list"], "Invalid value for '--format'"),
    (["--bogus", "list"], "No such option '--bogus'"),
    (["memory", "search"], "Missing argument 'TEXT'"),
])
def test_usage_errors_are_one_line_with_exit_2(store: Store, runner: CliRunner, argv: list[str],
                                                message: str) -> None:
    r = invoke(runner, store, *argv)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ctx: error: ")
    assert message in r.stderr and "--help')" in r.stderr


def test_a_group_without_its_command_shows_its_help(runner: CliRunner) -> None:
    r = runner.invoke(cli, ["memory"])
    assert r.exit_code == 2 and "Commands:" in r.stdout + r.stderr


def test_plurals_in_command_output(store: Store, runner: CliRunner, tmp_path: Path) -> None:
    a, b = add(runner, store, "one"), add(runner, store, "two")
    ok(runner, store, "link", a, b, "--type", "RELATES_TO")
    assert ok(runner, store, "unlink", a, b) == "removed 1 edge\n"
    ok(runner, store, "link", a, b, "--type", "RELATES_TO")
    assert ok(runner, store, "delete", a) == f"deleted {a} (1 edge)\n"
    ok(runner, store, "tag", b, "tier:pinned")
    assert "  pinned: 1 node (" in ok(runner, store, "status")
    doc = tmp_path / "one.json"
    doc.write_text(json.dumps(_import_document(1)))
    assert ok(runner, store, "import", str(doc)) == "imported 1 node, 0 edges, 0 views\n"


def test_log_oneline_shows_short_ids(store: Store, runner: CliRunner) -> None:
    add(runner, store, "first", "-m", "First line\n\nbody")
    out = ok(runner, store, "log", "--oneline")
    full = json.loads(ok(runner, store, "log", "--format", "json"))["commits"]
    assert out == "".join(f"{c['id'][:12]} {c['message'].splitlines()[0]}\n" for c in full)
    assert out.splitlines()[0] == f"{full[0]['id'][:12]} First line"


def test_add_prints_bare_id_when_piped_and_added_on_a_terminal(store: Store, runner: CliRunner
                                                               ) -> None:
    assert ULID.fullmatch(add(runner, store, "piped"))
    code, tty, err = _on_pty(["--ctx-dir", str(store.root), "add", "--type", "fact", "shown"],
                             which="stdout")
    assert (code, err) == (0, b"")
    assert re.fullmatch(rb"Added: [0-9A-Z]{26}\r\n", tty), tty


# -- item 15: ctx help [COMMAND] ---------------------------------------------------------------


def test_help_command_is_the_same_as_help_option(runner: CliRunner) -> None:
    for words in ([], ["add"], ["view", "render"], ["debug", "verify"]):
        via_help = runner.invoke(cli, ["help", *words])
        via_option = runner.invoke(cli, [*words, "--help"])
        assert (via_help.exit_code, via_help.stdout) == (0, via_option.stdout), words


def test_help_unknown_command_is_one_line_with_a_suggestion(runner: CliRunner) -> None:
    r = runner.invoke(cli, ["help", "lsit"])
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == ("ctx: error[E011]: no such command: lsit "
                        "(hint: did you mean `ctx help list`?)\n")
    r = runner.invoke(cli, ["help", "view", "rendr"])
    assert r.stderr == ("ctx: error[E011]: no such command: view rendr "
                        "(hint: did you mean `ctx help view render`?)\n")
