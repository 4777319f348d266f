"""Invalid arguments (issue 11 items 11 and 12; RELIABILITY.md QL-01..QL-04, I10).

* Text that is not valid UTF-8 on the command line (Python passes it on as lone surrogates)
  is one clear E011 naming the argument, before any command runs: a sweep over every
  command and subcommand of the click tree, through a subprocess with bytes argv.
* Queries that pass the parser also run: nesting, term count, term length and NUL are
  bounded by the parser with one-line E011 errors, and SQLite errors never leak out, through
  ``ctx query``, ``ctx compose --query``, ``ctx view create --query`` and ``ctx search``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from conftest import invoke, session_of, store_digest

from ctxstore.cli import cli
from ctxstore.query.parser import MAX_QUERY_DEPTH, MAX_QUERY_TERMS, MAX_TERM_LENGTH
from ctxstore.repo import Store

BAD = b"x\xff"  # not UTF-8: Python decodes it as 'x\udcff' (surrogateescape)


def run_ctx_bytes(args: list[bytes], *, cwd: Path,
                  stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``python -m ctxstore.cli`` with bytes argv (``run_ctx`` takes only text)."""
    return subprocess.run([sys.executable.encode(), b"-m", b"ctxstore.cli", *args], cwd=cwd,
                          input=stdin, capture_output=True, env=dict(os.environ), timeout=60)


def _walk(cmd: click.Command, path: list[str], ctx: click.Context):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None
            yield from _walk(sub, [*path, name], click.Context(sub, parent=ctx, info_name=name))


COMMANDS = [(path, cmd) for path, cmd in _walk(cli, [], click.Context(cli, info_name="ctx"))
            if path]


def _cases() -> list[tuple[str, list[bytes]]]:
    """Per command: the bad value as a positional argument, and as the value of its first
    text option (file paths are exempt: any bytes are a valid name on POSIX)."""
    cases = []
    for path, cmd in COMMANDS:
        words = [p.encode() for p in path]
        cases.append((" ".join(path) + " POSITIONAL", [*words, BAD]))
        for param in cmd.params:
            if (isinstance(param, click.Option) and not param.is_flag and param.name != "fmt_override"
                    and not isinstance(param.type, (click.Path, click.Choice))):
                cases.append((" ".join(path) + " " + param.opts[-1], [*words, param.opts[-1].encode(), BAD]))
                break
    return cases


CASES = _cases()


def test_the_sweep_covers_every_command() -> None:
    assert len(COMMANDS) >= 57 and len(OPTION_CASES) >= 40
    assert {" ".join(p) for p, _ in COMMANDS} >= {"add", "view create", "stage start", "hook stop",
                                                  "debug verify", "merge-ref", "import"}


@pytest.mark.parametrize("label,args", CASES, ids=[c[0] for c in CASES])
def test_invalid_utf8_argument_is_one_clear_error(store: Store, tmp_path: Path, label: str,
                                                  args: list[bytes]) -> None:
    from ctxstore.knowledge.nodes import add_node

    add_node(session_of(store), "fact", "an existing fact")
    before = store_digest(store.root)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    res = run_ctx_bytes([b"--ctx-dir", str(store.root).encode(), *args], cwd=cwd, stdin=b"{}")
    out, err = res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "internal error" not in err, (label, err)
    if args[0] == b"hook":
        assert res.returncode == 0, (label, err)  # hooks never fail on their input
        assert isinstance(json.loads(out), dict)
    else:
        assert res.returncode in (1, 2), (label, res.returncode, out, err)
        assert out == "", (label, out)
        lines = err.strip().splitlines()
        if res.returncode == 1:
            assert len(lines) == 1 and lines[0].startswith("ctx: error[E0"), (label, err)
    assert store_digest(store.root) == before, label
    assert list(cwd.iterdir()) == [], label  # nothing written where the command ran


def _option_cases() -> list[tuple[str, list[str]]]:
    """Every text option of every command, for the in-process sweep."""
    cases = []
    for path, cmd in COMMANDS:
        for param in cmd.params:
            if (isinstance(param, click.Option) and not param.is_flag and param.name != "fmt_override"
                    and not isinstance(param.type, click.Path)):
                cases.append((" ".join([*path, param.opts[-1]]), [*path, param.opts[-1], "x\udcff"]))
    return cases


OPTION_CASES = _option_cases()


@pytest.mark.parametrize("label,args", OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_invalid_utf8_option_value_is_one_clear_error(store: Store, runner, label: str,
                                                      args: list[str]) -> None:
    """In-process (CliRunner hands click the same lone surrogates argv decoding gives)."""
    from ctxstore.knowledge.nodes import add_node

    add_node(session_of(store), "fact", "an existing fact")
    before = store_digest(store.root)
    r = invoke(runner, store, *args, input="{}")
    if args[0] == "hook":
        assert r.exit_code == 0 and isinstance(json.loads(r.stdout), dict), label
    else:
        assert (r.exit_code, r.stdout) == (1, ""), (label, r.stdout, r.stderr)
        assert r.stderr.startswith("ctx: error[E011]: the value of ") and r.stderr.count("\n") == 1
    assert store_digest(store.root) == before, label


@pytest.mark.parametrize("args,named,shown", [
    ([b"add", b"--type", b"fact", b"text", b"-m", b"\xff"], "the value of --message", "b'\\xff'"),
    ([b"add", b"note", b"\xffnote"], "the argument [note|task|decision] TEXT", "b'\\xffnote'"),
    ([b"add", b"--type", b"fact", b"--tag", b"a:\xff", b"text"], "the value of --tag", "b'a:\\xff'"),
    ([b"add", b"--type", b"fact", b"--meta", b"k=\xff", b"text"], "the value of --meta", "b'k=\\xff'"),
    ([b"commit", b"-m", b"\xff"], "the value of --message", "b'\\xff'"),
    ([b"view", b"create", b"v", b"--query", b"\xff"], "the value of --query", "b'\\xff'"),
    ([b"\xff"], "argument 3 of the command line", "b'\\xff'"),
])
def test_invalid_utf8_error_names_the_argument(store: Store, tmp_path: Path, args: list[bytes],
                                               named: str, shown: str) -> None:
    before = store_digest(store.root)
    res = run_ctx_bytes([b"--ctx-dir", str(store.root).encode(), *args], cwd=tmp_path)
    assert (res.returncode, res.stdout) == (1, b"")
    assert res.stderr.decode() == (f"ctx: error[E011]: {named} is not valid UTF-8 text: {shown} "
                                   "(hint: pass text as UTF-8 (only file paths may hold other "
                                   "bytes))\n")
    assert store_digest(store.root) == before  # `add ... -m $'\xff'` stages nothing


def test_library_refuses_undecodable_text_before_the_first_write(store: Store) -> None:
    from ctxstore.errors import InvalidInput
    from ctxstore.knowledge.nodes import add_node
    from ctxstore.staging import abort_session, commit_stage, start_session

    add_node(session_of(store), "fact", "staged")
    before = store_digest(store.root)
    calls = [
        lambda: add_node(session_of(store), "fact", "ok", metadata={"k": "\udcff"}),
        lambda: add_node(session_of(store), "fact", "ok", metadata={"\udcff": "v"}),
        lambda: add_node(session_of(store), "fact", "x\udcff"),
        lambda: add_node(session_of(store), "fact", "big " * 5000, metadata={"k": "\ud800"}),  # with a blob
        lambda: commit_stage(store, "\udcff"),
        lambda: abort_session(store, "why \udcff"),
    ]
    for call in calls:
        with pytest.raises(InvalidInput):
            call()
        assert store_digest(store.root) == before
    commit_stage(store, "fold")
    with pytest.raises(InvalidInput):
        start_session(store, "task \udcff")


def test_add_with_an_undecodable_message_stages_nothing(store: Store, runner) -> None:
    """In-process (no argv decoding): the -m check runs before the node is staged."""
    before = store_digest(store.root)
    r = invoke(runner, store, "add", "--type", "fact", "text", "-m", "\udcff")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.startswith("ctx: error[E011]: ") and r.stderr.count("\n") == 1
    assert store_digest(store.root) == before


def test_nonutf8_file_paths_stay_allowed(store: Store, tmp_path: Path) -> None:
    """A file path may hold any bytes: `merge-ref` gets it and fails on the missing file."""
    res = run_ctx_bytes([b"--ctx-dir", str(store.root).encode(), b"merge-ref", BAD, BAD, BAD],
                        cwd=tmp_path)
    assert b"not valid UTF-8" not in res.stderr and b"Traceback" not in res.stderr


# -- query limits through every command that takes a query -----------------------------------

def _query_commands(query: str) -> dict[str, list[str]]:
    return {"query": ["query", query], "compose": ["compose", "--query", query],
            "view create": ["view", "create", "v", "--query", query]}


DEEP_MIXED = "NOT (a OR " * (MAX_QUERY_DEPTH // 2) + "x" + ")" * (MAX_QUERY_DEPTH // 2)


@pytest.mark.parametrize("query", [
    "NOT " * 42 + "fact",  # failed in SQLite: parser stack overflow
    "NOT " * MAX_QUERY_DEPTH + "fact",
    "(" * MAX_QUERY_DEPTH + "fact" + ")" * MAX_QUERY_DEPTH,
    DEEP_MIXED,
    "(a OR (b " * (MAX_QUERY_DEPTH // 2) + "fact" + "))" * (MAX_QUERY_DEPTH // 2),
    " OR ".join(f"w{i}" for i in range(MAX_QUERY_TERMS - 1)) + " OR fact",
    " OR ".join(f"tag:t{i}" for i in range(MAX_QUERY_TERMS)),
    "fact " + "w" * MAX_TERM_LENGTH,
], ids=["42-nots", "max-nots", "max-parens", "max-mixed", "max-alternating", "max-or-words",
        "max-or-tags", "max-term-length"])
def test_queries_within_the_limits_run_everywhere(store: Store, runner, query: str) -> None:
    from ctxstore.knowledge.nodes import add_node

    add_node(session_of(store), "fact", "a fact about x")
    for name, args in _query_commands(query).items():
        r = invoke(runner, store, *args)
        assert r.exit_code == 0, (name, r.stderr)


@pytest.mark.parametrize("query,detail", [
    (" OR ".join(f"w{i}" for i in range(995)), "more than 500 terms"),  # failed in SQLite
    ("fact " + "w" * (MAX_TERM_LENGTH + 1), "term is longer than 1,000 characters"),
    ("fact\0x", "a NUL character is not allowed"),  # failed in SQLite: unterminated string
    ("NOT " * (MAX_QUERY_DEPTH + 1) + "a", "nested more than 100 levels"),
    ("(" * 100_000 + "x" + ")" * 100_000, "query is longer than 10,000 characters"),  # QL-01
    ("x" * (1 << 20), "query is longer than 10,000 characters"),  # QL-01: 1 MiB
    ("created:2024-13-45", "created: needs an operator"),  # QL-04
    ("created:>2024-13-45", "created: no such date or time"),
    ("created:>99999-01-01", "created: invalid time"),
    ("tokens:<-1", "tokens: needs an integer"),
    ("tokens:<1e309", "tokens: needs an integer"),
])
def test_queries_over_the_limits_are_one_line_errors(store: Store, runner, query: str,
                                                     detail: str) -> None:
    before = store_digest(store.root)
    for name, args in _query_commands(query).items():
        start = time.perf_counter()
        r = invoke(runner, store, *args)
        assert time.perf_counter() - start < 2, name
        assert (r.exit_code, r.stdout) == (1, ""), (name, r.stdout, r.stderr)
        assert r.stderr.startswith("ctx: error[E011]: query syntax error at column ")
        assert detail in r.stderr and r.stderr.count("\n") == 1, (name, r.stderr)
        assert "\0" not in r.stderr
    assert store_digest(store.root) == before  # no view was saved


@pytest.mark.parametrize("text", ["fact\0x", "\0", " ".join(f"w{i}" for i in range(2000)),
                                  "w" * 100_000, '"' * 1001, "NOT " * 500 + "fact"])
def test_search_never_refuses_free_text(store: Store, runner, text: str) -> None:
    from ctxstore.knowledge.nodes import add_node

    add_node(session_of(store), "fact", "a fact about x")
    r = invoke(runner, store, "search", text)
    assert r.exit_code == 0, r.stderr
    if text == "fact\0x":
        assert "a fact about x" in r.stdout  # NUL separates words, as a space does


def test_sqlite_errors_from_a_query_are_typed(store: Store) -> None:
    from ctxstore.errors import IndexCorrupt
    from ctxstore.index import open_index
    from ctxstore.query.executor import QueryTooComplex, _fetch, run_query, search_nodes

    conn = open_index(store)
    with pytest.raises(QueryTooComplex) as info:
        _fetch(conn, "SELECT " + "(" * 300 + "1" + ")" * 300, [])
    assert info.value.code == "E011" and "parser stack overflow" in info.value.message
    with pytest.raises(QueryTooComplex):
        _fetch(conn, "SELECT 1 WHERE " + " OR ".join(["1"] * 1200), [])
    conn.execute("DROP TABLE nodes_fts")
    with pytest.raises(IndexCorrupt):
        run_query(conn, "fact", now=time.time())
    with pytest.raises(IndexCorrupt):
        search_nodes(conn, "fact")
    assert not isinstance(IndexCorrupt("x"), sqlite3.Error)
