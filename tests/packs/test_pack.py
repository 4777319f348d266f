"""``ctx pack`` over a real indexed work tree: budget, ``why``, schema, symbols, graph, any text."""

from __future__ import annotations

import json
import re
import sqlite3
import string
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import run_ctx, session_of, store_digest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.code.ingest import index_tree
from ctxstore.init import init_store
from ctxstore.narrative.entries import add_decision
from ctxstore.packs.pack import build_pack, pack_notes
from ctxstore.packs.render import FORMATS, PROMPT_FORMATS, render_pack
from ctxstore.packs.seed import rank_files
from ctxstore.repo import Store, open_store
from ctxstore.search.rank import Corpus, Document, Params
from ctxstore.search.task import parse_query
from ctxstore.search.tokenize import tokenize
from ctxstore.session import Session
from ctxstore.tokens import estimate_tokens

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "pack.schema.json").read_text())

FILES = {
    "shop/__init__.py": "",
    "shop/billing.py": (
        "from shop.money import Amount\n\n\n"
        "class InvoiceRenderer:\n"
        '    """Render an invoice as text lines."""\n\n'
        "    def render(self, total: Amount) -> str:\n"
        "        return f'total {total}'\n\n\n"
        "def send_reminder(customer):\n"
        "    return customer.email\n"),
    "shop/money.py": (
        "class Amount:\n"
        '    """A sum of money in cents, rounded half to even."""\n\n'
        "    def __init__(self, cents: int) -> None:\n"
        "        self.cents = cents\n\n"
        "    def rounded(self) -> int:\n"
        "        return round(self.cents, -2)\n"),
    "shop/catalog.py": (
        "def list_products(shelf):\n"
        '    """Products on a shelf, by name."""\n'
        "    return sorted(shelf)\n"),
    "tests/test_billing.py": (
        "from shop.billing import InvoiceRenderer\n\n\n"
        "def test_render():\n"
        "    assert InvoiceRenderer().render(1)\n"),
    "README.md": "# Shop\n\nA tiny shop: catalog, billing and money.\n",
}


def _indexed(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Store]:
    """A work tree of ``files`` with a store, indexed: (the tree, its store)."""
    root = tmp_path / "work"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    init_store(root / ".ctx", git=False)
    store = open_store(root / ".ctx")
    index_tree(session_of(store), jobs=1)
    return root, store


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A work tree with the files above, a store, one decision, indexed."""
    root, store = _indexed(tmp_path_factory.mktemp("shop"), FILES)
    add_decision(session_of(store), "Invoices round money half to even",
                 "The billing renderer keeps cents; Amount.rounded decides.")
    yield root


def _pack(work: Path, task: str, **options: Any) -> dict[str, Any]:
    with Session.open(work / ".ctx") as session:
        return build_pack(session, task, **options)


def _validate(pack: dict[str, Any]) -> None:
    jsonschema.validate({"version": 1, **pack}, SCHEMA)


def test_pack_a_query_naming_a_symbol_ranks_its_file_first(work: Path) -> None:
    pack = _pack(work, "Fix InvoiceRenderer output", budget=4000)
    assert pack["ranked_files"][0] == "shop/billing.py"
    first = next(i for i in pack["retrieved"] if i.get("path") == "shop/billing.py")
    assert "InvoiceRenderer".lower() in [d.lower() for d in first["why"].get("defines", [])]
    assert "symbol:invoicerenderer" in pack["graph_context"]["seed_nodes"]
    _validate(pack)


def test_pack_graph_expansion_brings_in_an_imported_file_with_its_edge_path(work: Path) -> None:
    pack = _pack(work, "send_reminder email customer", budget=8000, include_narrative=False)
    assert pack["ranked_files"][0] == "shop/billing.py"
    assert "file:shop/money.py" in pack["graph_context"]["expanded_nodes"]
    money = [i for i in pack["retrieved"] if i.get("path") == "shop/money.py"]
    assert money, pack["retrieved"]
    assert money[0]["why"]["edge_path"] == ["shop/billing.py", "Imports", "shop/money.py"]
    no_graph = _pack(work, "send_reminder email customer", budget=8000, include_narrative=False,
                     graph=False)
    assert no_graph["graph_context"]["expanded_nodes"] == []
    assert all(i.get("path") != "shop/money.py" for i in no_graph["retrieved"])


def test_pack_includes_a_relevant_decision_and_recent_narrative(work: Path) -> None:
    pack = _pack(work, "how do invoices round money?", budget=8000, include_narrative=True)
    decisions = [i for i in pack["retrieved"] if i["chunk_kind"] == "Decision"]
    assert decisions and "half to even" in decisions[0]["snippet"]
    assert decisions[0]["why"]["matched_terms"]
    assert "Invoices round money" in pack["recent_narrative"]
    _validate(pack)


def test_pack_every_item_has_a_why_and_the_json_validates(work: Path) -> None:
    for task in ("money rounding", "list products on a shelf", "test render", "README shop"):
        pack = _pack(work, task, budget=6000)
        assert pack["retrieved"]
        for item in pack["retrieved"]:
            assert item["why"], item
        _validate(pack)


def _cost(pack: dict[str, Any]) -> int:
    """What the pack's content costs, counted independently of the builder."""
    items = sum(estimate_tokens(i["title"]) + estimate_tokens(i["snippet"]) for i in pack["retrieved"])
    return items + (estimate_tokens(pack["recent_narrative"]) if pack["recent_narrative"] else 0)


@settings(max_examples=40, deadline=None)
@given(budget=st.integers(min_value=1, max_value=3000),
       task=st.text(alphabet=string.ascii_letters + " _.", min_size=1, max_size=40))
def test_pack_never_exceeds_its_budget(work: Path, budget: int, task: str) -> None:
    pack = _pack(work, task, budget=budget)
    tb = pack["token_budget"]
    assert tb["total"] == budget
    assert _cost(pack) <= tb["used"] <= tb["total"] - tb["reserved_for_response"]
    _validate(pack)


@settings(max_examples=40, deadline=None)
@given(task=st.text(max_size=300))
def test_pack_accepts_arbitrary_text(work: Path, task: str) -> None:
    pack = _pack(work, task, budget=2000)
    _validate(pack)


def test_pack_cli_formats_output_file_and_bad_input(work: Path, tmp_path: Path) -> None:
    base = ["--ctx-dir", str(work / ".ctx"), "pack"]
    res = run_ctx([*base, "money rounding", "--format", "json", "--budget", "3000"], cwd=work)
    assert res.returncode == 0, res.stderr
    _validate(json.loads(res.stdout))
    for fmt, marker in (("yaml", '"task": "money rounding"'), ("text", "why:"),
                        ("markdown", "# Task: money rounding")):
        res = run_ctx([*base, "money rounding", "--format", fmt], cwd=work)
        assert res.returncode == 0 and marker in res.stdout, (fmt, res.stdout, res.stderr)
    out = tmp_path / "pack.json"
    res = run_ctx([*base, "money rounding", "--output", str(out)], cwd=work)
    assert res.returncode == 0 and res.stdout == ""
    _validate(json.loads(out.read_text()))
    res = run_ctx([*base, "x", "--budget", "0"], cwd=work)
    assert res.returncode != 0 and "--budget" in res.stderr
    res = run_ctx([*base, "(((\"' -- * read()", "--depth", "1"], cwd=work)
    assert res.returncode == 0, res.stderr


def test_pack_yaml_parses_to_the_json_pack(work: Path) -> None:
    yaml = pytest.importorskip("yaml")
    base = ["--ctx-dir", str(work / ".ctx"), "pack", "Amount rounded cents\n\"quoted\" \\ tab\t"]
    as_json = json.loads(run_ctx([*base, "--format", "json"], cwd=work).stdout)
    as_yaml = yaml.safe_load(run_ctx([*base, "--format", "yaml"], cwd=work).stdout)
    assert as_yaml == as_json


def test_pack_without_code_index_still_answers(tmp_path: Path) -> None:
    init_store(tmp_path / ".ctx", git=False)
    with Session.open(tmp_path / ".ctx") as session:
        pack = build_pack(session, "anything at all", budget=500)
    assert pack["retrieved"] == [] or all(i["chunk_kind"] != "FileContent" for i in pack["retrieved"])
    assert pack["ranked_files"] == []
    _validate(pack)


def test_pack_output_failure_is_one_line_and_leaves_nothing(work: Path, tmp_path: Path) -> None:
    before = store_digest(work / ".ctx")
    target = tmp_path / "missing" / "pack.json"
    res = run_ctx(["--ctx-dir", str(work / ".ctx"), "pack", "money", "--output", str(target)],
                  cwd=work)
    assert res.returncode != 0
    assert res.stderr.count("\n") == 1 and "error[E011]" in res.stderr  # no such directory
    assert not (tmp_path / "missing").exists()
    assert store_digest(work / ".ctx") == before  # a pack is read-only


def test_pack_carries_the_latest_diagnostics_of_its_files(work: Path) -> None:
    from ctxstore.code.runs import record_command

    record_command(session_of(open_store(work / ".ctx")), "mypy shop",
                   b"shop/money.py:7: error: Incompatible return value type  [return-value]\n",
                   argv=("mypy", "shop"), exit_code=1, tool="mypy")
    pack = _pack(work, "Amount rounded cents", budget=8000, include_narrative=False)
    diags = [i for i in pack["retrieved"] if i["chunk_kind"] == "DiagnosticOutput"]
    assert diags and diags[0]["path"] == "shop/money.py"
    assert "Incompatible return value" in diags[0]["snippet"]
    assert diags[0]["why"]["edge_path"][:2] == ["shop/money.py", "Diagnostic"]
    _validate(pack)


def test_pack_uses_the_import_cycles_ctx_index_keeps(tmp_path: Path) -> None:
    # ctx index keeps the components of the import graph between files (file_sccs); a pack
    # reads its seeds' rows only, with no SCC view loaded (issue 30: that cost 170 ms).
    files = {"ring/__init__.py": "",
             "ring/alpha.py": "from ring import beta\n\ndef spin():\n    return beta\n",
             "ring/beta.py": "from ring import alpha\n\ndef wobble():\n    return alpha\n",
             "ring/gamma.py": "def idle():\n    return 0\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    init_store(tmp_path / ".ctx", git=False)
    store = open_store(tmp_path / ".ctx")
    index_tree(session_of(store), jobs=1)
    assert not (tmp_path / ".ctx" / "DERIVED" / "scc_latest").exists()
    pack = _pack(tmp_path, "spin", budget=4000, include_narrative=False)
    assert pack["graph_context"]["scc_dag_used"] is True
    beta = [i for i in pack["retrieved"] if i.get("path") == "ring/beta.py"]
    assert beta and beta[0]["why"]["edge_path"][0] == "ring/alpha.py"
    assert "file:ring/beta.py" in pack["graph_context"]["expanded_nodes"]
    assert all(i.get("path") != "ring/gamma.py" for i in pack["retrieved"])
    _validate(pack)
    code = tmp_path / ".ctx" / "index" / "code.sqlite"

    def sccs() -> tuple[list[tuple[str, int]], bool]:
        conn = sqlite3.connect(code)
        try:
            rows = conn.execute("SELECT path, scc FROM file_sccs ORDER BY 1").fetchall()
            meta = dict(conn.execute("SELECT key, value FROM code_meta").fetchall())
        finally:
            conn.close()
        return rows, meta.get("sccs") == meta["generation"]

    assert sccs() == ([("ring/alpha.py", 0), ("ring/beta.py", 0)], True)
    # A body changed, imports and names the same: the components stand, current.
    (tmp_path / "ring" / "alpha.py").write_text(
        "from ring import beta\n\ndef spin():\n    return beta.wobble()\n")
    index_tree(session_of(store), jobs=1)
    assert sccs() == ([("ring/alpha.py", 0), ("ring/beta.py", 0)], True)
    # The cycle broken: the next index run recomputes the components.
    (tmp_path / "ring" / "beta.py").write_text("def wobble():\n    return 1\n")
    index_tree(session_of(store), jobs=1)
    assert sccs() == ([], True)
    assert _pack(tmp_path, "spin", budget=4000, include_narrative=False)[
        "graph_context"]["scc_dag_used"] is True


def test_graph_cycles_strong_components_match_networkx() -> None:
    import random

    import networkx as nx

    from ctxstore.graph.cycles import strong_components

    rng = random.Random(7)
    for _ in range(50):
        nodes = [f"n{i}" for i in range(rng.randint(1, 40))]
        edges = [(rng.choice(nodes), rng.choice(nodes)) for _ in range(rng.randint(0, 80))]
        graph: nx.DiGraph[str] = nx.DiGraph(edges)
        want = sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)
        assert strong_components(edges) == want


def test_pack_index_ranks_as_the_in_process_ranker(work: Path) -> None:
    # The index stores the ranker's own tokens (whole snake_case names included), so ranking
    # over it gives the in-process scores; prose (README.md) is a corpus of its own.
    params = Params(symbol_boost=0.0, graph_weight=0.0)
    source = [p for p in FILES if p.endswith(".py")]
    library = Corpus.from_documents(
        [Document(p, tokenize(FILES[p])) for p in source], params)
    query = parse_query("send_reminder: email the customer about the invoice total")
    expected = {h.path: h.score for h in library.rank(query, matched_only=True)}
    with Session.open(work / ".ctx") as session:
        got = {h.path: h.score for h in rank_files(session.index(), query, params, matched_only=True)
               if h.path in source}
    assert got.keys() == expected.keys()
    assert all(abs(got[p] - expected[p]) < 1e-9 for p in got), (got, expected)
    assert "send_reminder" in next(h for h in library.rank(query) if h.path == "shop/billing.py").terms


def test_pack_reindexed_file_replaces_its_postings(tmp_path: Path) -> None:
    root, store = _indexed(tmp_path, {"pkg/a.py": "def parse_header(line):\n    return line\n"})
    assert _pack(root, "parse_header")["ranked_files"] == ["pkg/a.py"]
    (root / "pkg" / "a.py").write_text("def render_footer(page):\n    return page\n")
    index_tree(session_of(store), jobs=1)
    assert _pack(root, "parse_header")["ranked_files"] == []
    assert _pack(root, "render_footer")["ranked_files"] == ["pkg/a.py"]


def _document_frequencies(root: Path) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """``term_df`` as stored, and as counted from ``file_terms``."""
    conn = sqlite3.connect(root / ".ctx" / "index" / "code.sqlite")
    try:
        stored = {(t, f): n for t, f, n in conn.execute("SELECT term, field, df FROM term_df")}
        counted = {(t, f): n for t, f, n in conn.execute(
            "SELECT term, field, count(*) FROM file_terms GROUP BY term, field")}
    finally:
        conn.close()
    return stored, counted


def test_pack_document_frequencies_follow_every_change_of_the_tree(tmp_path: Path) -> None:
    # term_df is kept by deltas as files are applied: after new, changed and removed files
    # it must equal counting the postings (and hold no term no file has any more).
    root, store = _indexed(tmp_path, {
        "pkg/a.py": "def parse_header(line):\n    return line\n",
        "pkg/b.py": "def parse_body(line, header):\n    return header\n"})
    _pack(root, "parse")  # the index catches up
    stored, counted = _document_frequencies(root)
    assert stored == counted and stored[("parse", 0)] == 2 and stored[("header", 0)] == 2
    (root / "pkg" / "a.py").write_text("def render_footer(page):\n    return page\n")
    (root / "pkg" / "c.py").write_text("class HeaderCache:\n    pass\n")
    (root / "pkg" / "b.py").unlink()
    index_tree(session_of(store), jobs=1)
    assert _pack(root, "parse header")["ranked_files"] == ["pkg/c.py"]
    stored, counted = _document_frequencies(root)
    assert stored == counted
    assert ("parse", 0) not in stored and stored[("page", 0)] == 1


def test_pack_corpus_cache_is_written_once_and_follows_new_files(tmp_path: Path) -> None:
    root, store = _indexed(tmp_path, {"pkg/a.py": "def parse_header(line):\n    return line\n"})
    index = root / ".ctx" / "index" / "code.sqlite"
    assert _pack(root, "parse_header")["ranked_files"] == ["pkg/a.py"]
    first = sqlite3.connect(index).execute("SELECT generation, data FROM corpus_cache").fetchall()
    assert len(first) == 1
    assert _pack(root, "parse_header")["ranked_files"] == ["pkg/a.py"]
    assert sqlite3.connect(index).execute("SELECT generation, data FROM corpus_cache").fetchall() \
        == first  # read, not written again
    # a new file is applied: the generation moves and the cache is rebuilt with it
    (root / "pkg" / "z.py").write_text("def parse_header_fast(line):\n    return line\n")
    index_tree(session_of(store), jobs=1)
    assert _pack(root, "parse_header_fast")["ranked_files"][0] == "pkg/z.py"
    second = sqlite3.connect(index).execute("SELECT generation, data FROM corpus_cache").fetchall()
    assert second[0][0] != first[0][0]
    # a damaged value of the current generation is not trusted: the ranking is the same
    conn = sqlite3.connect(index)
    conn.execute("UPDATE corpus_cache SET data = x'0102'")
    conn.commit()
    conn.close()
    assert _pack(root, "parse_header_fast")["ranked_files"][0] == "pkg/z.py"
    assert sqlite3.connect(index).execute("SELECT data FROM corpus_cache").fetchone()[0] \
        == second[0][1]


def test_pack_corpus_cache_holds_the_test_files_and_refuses_bad_positions() -> None:
    from ctxstore.index.retrieval import FileCorpus, decode_corpus, encode_corpus

    corpus = FileCorpus([7, 3, 9], ["src/a.py", "tests/test_a.py", "docs/x.md"], [5, 6, 7],
                        [1, 2, 2], 2, [1])
    decoded = decode_corpus(encode_corpus(corpus))
    assert decoded is not None
    assert (list(decoded.ids), decoded.paths, list(decoded.tests), decoded.split) \
        == ([7, 3, 9], corpus.paths, [1], 2)
    for tests in ([3], [-1], [1, 1], [2, 1]):  # past the files, negative, repeated, descending
        assert decode_corpus(encode_corpus(FileCorpus(
            corpus.ids, corpus.paths, corpus.body, corpus.path_terms, 2, tests))) is None
    assert decode_corpus(encode_corpus(corpus)[:60]) is None  # cut inside its arrays


def test_pack_does_not_wait_for_a_writer_to_store_its_cache(tmp_path: Path) -> None:
    # Another process holding the index's write lock: the pack answers at once from the
    # file table and leaves the cache to the next pack (it would otherwise wait 30 s).
    root, store = _indexed(tmp_path, {"pkg/a.py": "def parse_header(line):\n    return line\n"})
    _pack(root, "nothing")
    index = root / ".ctx" / "index" / "code.sqlite"
    holder = sqlite3.connect(index, isolation_level=None)
    holder.execute("DELETE FROM corpus_cache")
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        assert _pack(root, "parse_header")["ranked_files"] == ["pkg/a.py"]
        assert time.monotonic() - started < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert sqlite3.connect(index).execute("SELECT count(*) FROM corpus_cache").fetchone()[0] == 0
    _pack(root, "parse_header")
    assert sqlite3.connect(index).execute("SELECT count(*) FROM corpus_cache").fetchone()[0] == 1


def test_pack_recent_narrative_selects_what_the_query_language_does(tmp_path: Path) -> None:
    # The pack reads recent tasks and log entries without the query language: the same nodes
    # in the same order as `type:task AND updated:>Nd` and the log's query.
    from ctxstore.index.read import recent_nodes
    from ctxstore.query.executor import run_query

    root = tmp_path / "work"
    root.mkdir()
    init_store(root / ".ctx", git=False)
    for i, kind in enumerate(["task", "decision", "observation", "fact", "task", "decision"]):
        r = run_ctx(["--ctx-dir", str(root / ".ctx"), "add", "--type", kind, f"entry {i} {kind}"],
                    cwd=root)
        assert r.returncode == 0, r.stderr
    with Session.open(root / ".ctx") as session:
        conn = session.index()
        now_ms = int(time.time() * 1000) + 5
        for days in (1, 7):
            after = now_ms - days * 86_400_000
            assert [n.id for n in recent_nodes(conn, ("task",), after_ms=after, limit=3)] == \
                [n.id for n in run_query(conn, f"type:task AND updated:>{days}d",
                                         now=now_ms / 1000, limit=3)]
            log = recent_nodes(conn, ("observation", "decision"), after_ms=after, by="created",
                               limit=50)
            assert len(log) == 3 and [n.id for n in log] == [n.id for n in run_query(
                conn, f"(type:observation OR type:decision) AND created:>{days}d",
                now=now_ms / 1000, limit=50)]
        assert recent_nodes(conn, ("task",), after_ms=now_ms, limit=3) == []


def _cli(work: Path, *args: str) -> Any:
    from click.testing import CliRunner

    from ctxstore.cli import cli

    return CliRunner().invoke(cli, ["--ctx-dir", str(work / ".ctx"), *args])


def test_pack_takes_the_global_format_when_given_else_json(work: Path) -> None:
    text = _cli(work, "--format", "text", "pack", "money rounding")
    assert text.exit_code == 0 and text.stdout.startswith("Task: money rounding\n"), text.stdout
    assert _cli(work, "--format", "markdown", "pack", "money").stdout.startswith("# Task: money\n")
    assert json.loads(_cli(work, "pack", "money").stdout)["version"] == 1  # no global: json
    assert json.loads(_cli(work, "--format", "json", "pack", "money").stdout)["task"] == "money"
    own = _cli(work, "--format", "text", "pack", "money", "--format", "yaml")
    assert own.stdout.startswith('"version": 1\n')  # the pack's own --format wins


WORDS = ["money", "rounding", "InvoiceRenderer", "render", "Amount.rounded", "shelf", "products",
         "`send_reminder`", "the", "cents", "catalog", "#12", "```", "é", "\n"]


@settings(max_examples=80, deadline=None)
@given(fmt=st.sampled_from(FORMATS), budget=st.integers(min_value=1, max_value=3000),
       task=st.one_of(st.text(max_size=200),
                      st.lists(st.sampled_from(WORDS), max_size=600).map(" ".join)))
@pytest.mark.slow
def test_pack_rendering_never_exceeds_its_budget_in_any_format(work: Path, fmt: str, budget: int,
                                                               task: str) -> None:
    pack = _pack(work, task, budget=budget, fmt=fmt)
    tb = pack["token_budget"]
    room = tb["total"] - tb["reserved_for_response"]
    assert tb["total"] == budget and tb["used"] <= room
    if fmt in PROMPT_FORMATS:  # everything printed is counted, the echoed task included
        assert estimate_tokens(render_pack(pack, fmt)) <= tb["used"]
    else:
        assert _cost(pack) <= tb["used"]
    _validate(pack)


def test_pack_cli_markdown_of_a_long_task_stays_in_its_budget(work: Path) -> None:
    task = (FILES["shop/billing.py"] + FILES["shop/money.py"]) * 20  # ~8,000 characters
    assert len(task) > 7000
    for fmt in PROMPT_FORMATS:
        res = _cli(work, "pack", task, "--budget", "1000", "--format", fmt)
        assert res.exit_code == 0, res.stderr
        assert estimate_tokens(res.stdout) <= 1000 - 250, (fmt, estimate_tokens(res.stdout))
        assert " … (task cut to fit the budget)\n" in res.stdout
        assert "## Symbol" in res.stdout or "SymbolDefinition" in res.stdout  # items still fit


@pytest.mark.slow
def test_pack_recent_narrative_holds_whole_entries_only(work: Path) -> None:
    full = _pack(work, "money", budget=50_000)["recent_narrative"].splitlines()
    assert full and all(line.startswith("- ") for line in full)
    seen = set()
    for budget in range(1, 400):
        recent = _pack(work, "money", budget=budget)["recent_narrative"]
        lines = recent.splitlines()
        assert lines == full[:len(lines)], (budget, recent)  # never "- 2026-1"
        seen.add(len(lines))
    assert seen >= {0, 1}


@pytest.mark.parametrize("task", ["", "?!", "((( -- )))"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_pack_task_without_words_is_an_empty_pack_with_a_note(work: Path, task: str,
                                                              fmt: str) -> None:
    res = _cli(work, "pack", task, "--format", fmt, "--no-narrative")
    assert res.exit_code == 0
    assert res.stderr == ("ctx: note: the task has no searchable words: no files or memory "
                          "were ranked\n")
    if fmt == "json":
        pack = json.loads(res.stdout)
        assert (pack["retrieved"], pack["ranked_files"]) == ([], [])
        _validate({k: v for k, v in pack.items() if k != "version"})
    elif fmt in PROMPT_FORMATS:
        assert res.stdout.startswith(("Task: ", "# Task: ")) and "0 items" in res.stdout
    else:
        assert res.stdout.startswith('"version": 1\n')
    words = _cli(work, "pack", "money", "--format", fmt)
    assert words.exit_code == 0 and words.stderr == ""


def test_pack_a_task_naming_a_file_ranks_that_file_first(tmp_path: Path) -> None:
    # `websockets.py` in the task: the file itself first, not the document about it nor
    # `py.typed` (the extension is no word of the task); `why` says it was named.
    root, _ = _indexed(tmp_path, {
        "app/websockets.py": "class WebSocket:\n    def close(self, code=1000):\n        pass\n",
        "app/routing.py": "from app.websockets import WebSocket\n\ndef route(path):\n    return path\n",
        "app/py.typed": "",
        "docs/websockets.md": "# WebSockets\n\nA bug in websockets: close, close, close the bug.\n"})
    for task in ("fix a bug in websockets.py", "fix a bug in app/websockets.py"):
        r = run_ctx(["pack", task, "--format", "json", "--no-narrative"], cwd=root)
        assert r.returncode == 0, r.stderr
        pack = json.loads(r.stdout)
        assert pack["ranked_files"][0] == "app/websockets.py", pack["ranked_files"]
        assert "app/py.typed" not in pack["ranked_files"][:2]
        first = next(i for i in pack["retrieved"] if i.get("path") == "app/websockets.py")
        assert first["why"]["named"] == [task.split()[-1]]
        _validate(pack)
        text = run_ctx(["pack", task, "--format", "text", "--no-narrative"], cwd=root).stdout
        assert f"why: named {task.split()[-1]}" in text  # the text rendering says it too


def test_pack_notes_a_missing_index_and_files_changed_since(tmp_path: Path) -> None:
    # No `ctx index` yet: the pack is memory only, and stderr says how to get code in it.
    bare = tmp_path / "bare"
    bare.mkdir()
    init_store(bare / ".ctx", git=False)
    r = run_ctx(["pack", "parse the header", "--format", "json"], cwd=bare)
    assert r.returncode == 0 and json.loads(r.stdout)["ranked_files"] == []
    assert "ctx: note: no code is indexed here" in r.stderr and "`ctx index`" in r.stderr
    # Indexed and unchanged: no note. A file of the pack edited afterwards: named.
    root, _ = _indexed(tmp_path, {"pkg/a.py": "def parse_header(line):\n    return line\n",
                                  "pkg/b.py": "def other():\n    return 1\n"})
    r = run_ctx(["pack", "parse_header", "--format", "json"], cwd=root)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    (root / "pkg" / "a.py").write_text("def parse_header(line):\n    return line.strip()\n")
    r = run_ctx(["pack", "parse_header", "--format", "json"], cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["ranked_files"][0] == "pkg/a.py"
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("ctx: note: pkg/a.py changed or removed since `ctx index`")
    (root / "pkg" / "a.py").unlink()  # removed: also out of date
    r = run_ctx(["pack", "parse_header", "--format", "json"], cwd=root)
    assert "pkg/a.py changed or removed since `ctx index`" in r.stderr


def test_pack_notes_judge_a_file_by_ctx_index_stat_cache(tmp_path: Path) -> None:
    """A file with the size and modification time ``ctx index`` recorded is the version it
    read (as ``ctx index`` judges it): not read again. Any other is read and compared."""
    import os

    root = tmp_path / "work"
    (root / "pkg").mkdir(parents=True)
    a = root / "pkg" / "a.py"
    a.write_text("def parse_header(line):\n    return line\n")
    past = time.time() - 60  # out of the stat cache's racy window
    os.utime(a, (past, past))
    init_store(root / ".ctx", git=False)
    index_tree(session_of(open_store(root / ".ctx")), jobs=1)
    with Session.open(root / ".ctx") as session:
        pack = build_pack(session, "parse_header")
        assert pack_notes(session, pack) == []
        a.write_text("def parse_header(line):\n    return lin3\n")  # the same size
        assert pack_notes(session, pack)[0].startswith("pkg/a.py changed or removed")
        os.utime(a, (past, past))  # size and time as indexed: taken for the indexed file
        assert pack_notes(session, pack) == []


def test_pack_memory_holding_one_word_of_the_task_does_not_head_it(tmp_path: Path) -> None:
    root, store = _indexed(tmp_path, {
        "pkg/python_extractor.py": "class PythonExtractor:\n    def extract(self, text):\n"
                                   "        return text\n",
        "pkg/other.py": "def other():\n    return 1\n"})
    add_decision(session_of(store), "File ranking keeps BM25 in Python, not in SQLite")
    pack = _pack(root, "rename the python extractor class")
    assert pack["retrieved"][0].get("path") == "pkg/python_extractor.py", pack["retrieved"][0]
    weak = next(i for i in pack["retrieved"] if i["snippet"].startswith("File ranking"))
    assert weak["why"]["matched_terms"] == ["python"] and weak["relevance_score"] <= 0.25
    # memory holding the task's words is as relevant as the best file
    add_decision(session_of(store), "Rename the Python extractor class when the extractor moves")
    strong = next(i for i in _pack(root, "rename the python extractor class")["retrieved"]
                  if i["snippet"].startswith("Rename"))
    assert strong["relevance_score"] == 1.0


def test_pack_reads_the_task_from_stdin_with_a_dash(tmp_path: Path) -> None:
    root, _ = _indexed(tmp_path, {"pkg/a.py": "def parse_header(line):\n    return line\n"})
    log = "Traceback (most recent call last):\n  File x, in parse_header\n" * 2000  # ~130 KB
    r = run_ctx(["pack", "-", "--format", "json", "--no-narrative"], cwd=root, stdin=log)
    assert r.returncode == 0, r.stderr
    pack = json.loads(r.stdout)
    assert pack["task"] == log and pack["ranked_files"][0] == "pkg/a.py"
    bad = run_ctx(["pack", "-"], cwd=root, stdin=b"\xff\xfe")
    assert bad.returncode == 1 and bad.stderr == \
        "ctx: error[E011]: the task on standard input is not UTF-8 text\n"


def test_pack_notes_never_read_through_a_linked_directory(tmp_path: Path) -> None:
    # The indexed pkg/ replaced by a link to a directory outside the work tree: its file is
    # not compared (nor read), so no note names it; the pack itself is unchanged.
    root, _ = _indexed(tmp_path, {"pkg/a.py": "def parse_header(line):\n    return line\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text("def parse_header(line):\n    return line.strip()  # else\n")
    (root / "pkg" / "a.py").unlink()
    (root / "pkg").rmdir()
    (root / "pkg").symlink_to(outside, target_is_directory=True)
    with Session.open(root / ".ctx") as session:
        pack = build_pack(session, "parse_header")
        assert pack["ranked_files"] == ["pkg/a.py"]
        assert pack_notes(session, pack) == []


TOO_SMALL = re.compile(r"ctx: note: the budget of (\d+) tokens? is too small to hold any item "
                       r"found; the smallest that holds one is (\d+) \(--budget \2\)\n")


@pytest.mark.parametrize("fmt", FORMATS)
def test_pack_budget_too_small_for_any_item_says_so_and_names_the_smallest(work: Path,
                                                                           fmt: str) -> None:
    smallest = set()
    for budget in (1, 9, 15, 25):
        res = _cli(work, "pack", "money rounding", "--budget", str(budget), "--format", fmt)
        assert res.exit_code == 0, res.output
        note = TOO_SMALL.fullmatch(res.stderr)
        assert note is not None and int(note[1]) == budget, res.stderr
        smallest.add(int(note[2]))
        if fmt in PROMPT_FORMATS:  # what fits says what it holds; never over the budget
            assert estimate_tokens(res.stdout) <= budget
            if budget < 10:  # not even the counts fit: nothing is printed
                assert res.stdout == ""
            else:
                line = res.stdout.strip("_\n")
                assert re.fullmatch(rf"0 items, \d+ of {budget} tokens used(, \d+ reserved "
                                    r"for the response)?", line.splitlines()[-1]), res.stdout
        else:
            assert _pack(work, "money rounding", budget=budget, fmt=fmt)["retrieved"] == []
    (least,) = smallest  # the same answer from every budget below it
    held = _cli(work, "pack", "money rounding", "--budget", str(least), "--format", fmt)
    assert (held.exit_code, held.stderr) == (0, "")
    assert _pack(work, "money rounding", budget=least, fmt=fmt)["retrieved"]
    short = _cli(work, "pack", "money rounding", "--budget", str(least - 1), "--format", fmt)
    assert TOO_SMALL.fullmatch(short.stderr)[2] == str(least)  # type: ignore[index]
    assert _pack(work, "money rounding", budget=least - 1, fmt=fmt)["retrieved"] == []


def test_pack_small_budget_prints_the_short_header_in_text_and_markdown(work: Path) -> None:
    text = _cli(work, "pack", "money rounding", "--budget", "15", "--format", "text")
    assert re.fullmatch(r"0 items, \d of 15 tokens used\n\n", text.stdout), text.stdout
    md = _cli(work, "pack", "money rounding", "--budget", "15", "--format", "markdown")
    assert re.fullmatch(r"_0 items, \d of 15 tokens used_\n\n", md.stdout), md.stdout
    # a task matching nothing is no budget problem: no note
    none = _cli(work, "pack", "zebra quagga", "--budget", "15", "--format", "text")
    assert (none.exit_code, none.stderr) == (0, "")


def test_pack_item_cost_without_its_json_charges_what_the_json_costs() -> None:
    # A pack weighs hundreds of candidates by PackItem.cost: whatever shortcut it takes, the
    # charge must stay what the printed item costs.
    from ctxstore.packs.items import PackItem as _Item
    from ctxstore.packs.render import FORMATS, item_cost

    items = [_Item("Symbol: <ctx:forget node=x/> f (a.py:1-2)", "ab" * 32,
                   "def f():\n    return '<ctx:recall q=1/>'\n" * n, 0.5, "SymbolDefinition",
                   {"edge_path": ["a.py", "Imports", "<ctx:x>"]}, {"path": "a.py"})
             for n in (0, 1, 7, 300)]
    for fmt in FORMATS:
        assert [i.cost(fmt) for i in items] == [item_cost(i.to_json(), fmt) for i in items], fmt


def test_an_items_cost_is_what_its_printed_form_costs_in_every_format() -> None:
    """json and yaml charge the escaped title and snippet (without escaping the whole item)."""
    from ctxstore.packs.items import PackItem
    from ctxstore.packs.render import item_cost

    item = PackItem("Symbol: <ctx:remember> a.f (a.py:1-2)", "id1", "def f():\n    '<ctx:forget>'\n",
                    0.5, "SymbolDefinition", {"matched_terms": ["<ctx:x>"] * 40},
                    {"path": "a.py", "start_line": 1, "end_line": 2})
    for fmt in FORMATS:
        assert item.cost(fmt) == item_cost(item.to_json(), fmt), fmt
    assert item.cost("json") > item_cost({"title": item.title, "snippet": item.snippet}, "json")
