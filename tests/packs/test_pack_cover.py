"""What enters a pack: the best-ranked distinct files before a second chunk of one, docs in their place.

Through the installed CLI (``ctx index`` then ``ctx pack``) over real work trees, and the
selection rule (``packs.select``) on typed items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_ctx

from ctxstore.packs.items import PackItem
from ctxstore.packs.select import (
    DOC_SHARE,
    GLIMPSE_LINES,
    LEAD_MARGIN,
    SECOND_CHUNK_MARGIN,
    choose,
    is_code_path,
    is_doc_path,
    is_doc_task,
    lead_file,
)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for args in (["init", "--no-git"], ["index"]):
        done = run_ctx(args, cwd=root)
        assert done.returncode == 0, done.stderr
    return root


def _pack(root: Path, task: str, budget: int) -> dict[str, Any]:
    done = run_ctx(["pack", task, "--budget", str(budget), "--no-narrative", "--format", "json"],
                   cwd=root)
    assert done.returncode == 0, done.stderr
    pack: dict[str, Any] = json.loads(done.stdout)
    return pack


def _function(name: str, words: str) -> str:
    body = "\n".join(f"    step_{k} = '{words}'" for k in range(12))
    return f"def {name}(request):\n    \"\"\"{words}\"\"\"\n{body}\n    return request\n\n\n"


# One long module whose every function speaks of the task, and a short one that does too,
# less often: the long one ranks first, the short one second.
LONG = "".join(_function(f"retry_timeout_{k}", "retry the connection after a timeout")
               for k in range(10))
SHORT = ("def backoff(delay):\n    \"\"\"Wait before the next retry after a connection timeout.\"\"\"\n"
         + "".join(f"    delay_{k} = delay * {k}  # the retry waits longer after each connection timeout\n"
                   for k in range(12))
         + "    return delay * 2\n")


def test_a_pack_holds_the_next_ranked_file_before_a_long_files_further_chunks(tmp_path: Path
                                                                               ) -> None:
    root = _tree(tmp_path / "work", {"net/client.py": LONG, "net/backoff.py": SHORT,
                                     "net/__init__.py": ""})
    pack = _pack(root, "retry the connection after a timeout", 1200)
    assert pack["ranked_files"][:2] == ["net/client.py", "net/backoff.py"]
    paths = [item.get("path") for item in pack["retrieved"]]
    assert "net/backoff.py" in paths, paths
    # the best file still comes first, and still gives its further chunks once both had a turn
    assert paths[0] == "net/client.py"
    assert paths.count("net/client.py") >= 2, paths
    for item in pack["retrieved"]:
        assert item["why"], item  # every item says why it is there


CHANGES = "".join(f"Version 1.{k}\n-----------\n\n- Retry the connection after a timeout in the "
                  f"client. The retry timeout and connection backoff changed. :issue:`{k}`\n\n"
                  for k in range(60))


def test_a_changelog_never_crowds_out_the_code_of_a_code_task(tmp_path: Path) -> None:
    root = _tree(tmp_path / "work", {"net/client.py": LONG, "net/backoff.py": SHORT,
                                     "net/__init__.py": "", "CHANGES.rst": CHANGES,
                                     "docs/retries.md": "# Retries\n\n" + CHANGES})
    budget = 4000
    pack = _pack(root, "retry the connection after a timeout", budget)
    room = budget - pack["token_budget"]["reserved_for_response"]
    docs = [i for i in pack["retrieved"] if is_doc_path(i.get("path") or "")]
    code = [i for i in pack["retrieved"] if i.get("path", "").endswith(".py")]
    assert code, pack["retrieved"]
    doc_cost = sum(len(i["title"]) + len(i["snippet"]) for i in docs) / 4 + 8 * len(docs)
    assert doc_cost <= DOC_SHARE * room + 1, (doc_cost, [i["title"] for i in docs])
    # a task about the docs is not capped: the changelog takes what its rank earns
    about = _pack(root, "Update the docs: the connection retry timeout changed", budget)
    about_docs = [i for i in about["retrieved"] if is_doc_path(i.get("path") or "")]
    about_cost = sum(len(i["title"]) + len(i["snippet"]) for i in about_docs) / 4 \
        + 8 * len(about_docs)
    assert about_cost > DOC_SHARE * room, [i["title"] for i in about["retrieved"]]


@pytest.mark.parametrize(("path", "doc"), [
    ("CHANGES.rst", True), ("CHANGELOG.md", True), ("HISTORY", True), ("NEWS.txt", True),
    ("docs/api.py", True), ("pkg/doc/guide.txt", True), ("README.md", True),
    ("docs.py", False), ("src/changes_view.py", False), ("CHANGES", True), ("src/news/feed.py", False),
    ("crates/core/src/lib.rs", False), ("setup.cfg", False)])
def test_documentation_paths(path: str, doc: bool) -> None:
    assert is_doc_path(path) is doc


def test_a_documentation_task_says_so_names_a_doc_or_matches_only_docs() -> None:
    code = ["src/app.py", "docs/app.rst"]
    assert not is_doc_task("fix the timeout in the client", code, [])
    assert is_doc_task("Document the timeout option", code, [])
    assert is_doc_task("fix a typo", code, ["README.md"])
    assert is_doc_task("the timeout option", ["docs/app.rst", "CHANGES.rst"], [])
    assert is_doc_task("\n  Update the README: the timeout changed\n", code, [])
    # an identifier or code that holds a doc word is no word of the task's
    assert not is_doc_task("printer: use `doc_cfg` instead of `doc_auto_cfg`", code, [])
    assert not is_doc_task("use the `docs` flag for the timeout", code, [])
    # a body that mentions the docs in passing: the task is its first line
    assert not is_doc_task("fix the timeout in the client\n\nThe docs and CHANGELOG are updated.",
                           code, [])


def _item(path: str | None, score: float, n: int = 0, size: int = 40) -> PackItem:
    extra: dict[str, Any] = {} if path is None else {"path": path, "start_line": n + 1}
    return PackItem(f"{path}:{n}", f"{path}-{n}", "x" * size, score, "FileContent",
                    {"matched_terms": ["x"]}, extra)


def test_a_second_chunk_goes_first_only_at_the_margin() -> None:
    a1, a2 = _item("a.py", 1.0, 0), _item("a.py", 0.9, 1)
    b_low = _item("b.py", 0.9 / SECOND_CHUNK_MARGIN - 0.01)
    b_near = _item("b.py", 0.9 / SECOND_CHUNK_MARGIN + 0.01)
    assert [i.title for i in choose([a1, a2, b_low], 10_000, "json")[0]] == \
        [a1.title, a2.title, b_low.title]
    assert [i.title for i in choose([a1, a2, b_near], 10_000, "json")[0]] == \
        [a1.title, b_near.title, a2.title]


def test_a_file_whose_best_chunk_does_not_fit_offers_its_next_as_its_first() -> None:
    big, small = _item("a.py", 1.0, 0, size=4000), _item("a.py", 0.35, 1)
    other, other2 = _item("b.py", 0.5, 0), _item("b.py", 0.45, 1)
    chosen, used = choose([big, small, other, other2], 100, "json")
    assert [i.title for i in chosen] == [other.title, small.title, other2.title]
    assert used == sum(i.cost("json") for i in chosen) <= 100


def test_items_without_a_file_compete_on_score_and_docs_keep_to_their_room() -> None:
    node = _item(None, 0.95)
    doc1, doc2 = _item("CHANGES.rst", 0.99, 0), _item("CHANGES.rst", 0.98, 1)
    code = _item("a.py", 0.5)
    cost = doc1.cost("json")
    chosen, _ = choose([node, doc1, doc2, code], 10_000, "json", doc_room=cost)
    assert [i.title for i in chosen] == [doc1.title, node.title, code.title]
    chosen, _ = choose([node, doc1, doc2, code], 10_000, "json")
    assert [i.title for i in chosen] == [doc1.title, node.title, doc2.title, code.title]


def _text(items: list[dict[str, Any]], path: str) -> int:
    return sum(len(i["title"]) + len(i["snippet"]) for i in items if i.get("path") == path)


def test_a_confident_ranking_gives_its_lead_file_the_pack_and_glimpses_of_the_rest(
        tmp_path: Path) -> None:
    root = _tree(tmp_path / "work", {"net/client.py": LONG, "net/backoff.py": SHORT,
                                     "net/__init__.py": "", "README.md": "# Net\n\n" + CHANGES})
    pack = _pack(root, "retry the connection after a timeout", 4000)
    assert pack["ranked_files"][:2] == ["net/client.py", "net/backoff.py"]
    items = pack["retrieved"]
    paths = [i.get("path") for i in items]
    assert paths[0] == "net/client.py" and "net/backoff.py" in paths, paths
    # the next file is named and located, in a glimpse of its first lines
    (short,) = [i for i in items if i.get("path") == "net/backoff.py"]
    assert short["snippet"] == "\n".join(SHORT.split("\n")[:GLIMPSE_LINES])
    assert (short["start_line"], short["end_line"]) == (1, GLIMPSE_LINES)
    assert f"net/backoff.py:1-{GLIMPSE_LINES}" in short["title"]
    lead = _text(items, "net/client.py")
    assert lead >= 0.8 * sum(len(i["title"]) + len(i["snippet"]) for i in items), paths
    for item in items:
        assert item["why"], item


def test_close_scores_keep_the_other_files_text(tmp_path: Path) -> None:
    twin = LONG.replace("retry_timeout_", "reconnect_timeout_")
    root = _tree(tmp_path / "work", {"net/client.py": LONG, "net/session.py": twin,
                                     "net/__init__.py": ""})
    pack = _pack(root, "retry the connection after a timeout", 4000)
    assert sorted(pack["ranked_files"][:2]) == ["net/client.py", "net/session.py"]
    first, second = pack["ranked_files"][:2]
    items = pack["retrieved"]
    assert [i.get("path") for i in items][0] == first
    # the second file, as likely as the first, gives more than a glimpse
    assert sum(1 for i in items if i.get("path") == second) >= 2, [i["title"] for i in items]


def test_the_lead_is_the_best_ranked_code_file_and_the_confidence_its_margin() -> None:
    ranked = [("README.md", 2.0), ("src/app.pyi", 1.9), ("Cargo.toml", 1.5), ("src/app.py", 1.0),
              ("src/util.py", 0.95)]
    assert lead_file(ranked, doc_task=False) == ("src/app.py", False)
    assert lead_file(ranked[:4] + [("src/util.py", LEAD_MARGIN - 0.01)], doc_task=False) == \
        ("src/app.py", True)
    assert lead_file(ranked, doc_task=True) == ("README.md", False)
    assert lead_file([("README.md", 1.0)], doc_task=False) == ("README.md", True)
    assert lead_file([], doc_task=False) == (None, False)
    assert [is_code_path(p) for p, _ in ranked] == [False, False, False, True, True]


def test_a_confident_lead_stops_the_pack_short_of_its_room() -> None:
    lead1, lead2 = _item("a.py", 1.0, 0), _item("a.py", 0.9, 1)
    other = PackItem("b.py:0", "b-0", "first\nsecond\nthird\nfourth", 0.8, "FileContent",
                     {"matched_terms": ["x"]}, {"path": "b.py", "start_line": 1, "end_line": 4})
    other2 = _item("b.py", 0.7, 1)
    chosen, used = choose([lead1, lead2, other, other2], 10_000, "json", lead="a.py",
                          confident=True)
    assert [i.title for i in chosen] == [lead1.title, other.title, lead2.title]
    assert chosen[1].snippet == "first\nsecond" and chosen[1].extra["end_line"] == 2
    assert used == sum(i.cost("json") for i in chosen)
    chosen, _ = choose([lead1, lead2, other, other2], 10_000, "json", lead="a.py",
                       confident=False)
    assert [i.title for i in chosen] == [lead1.title, other.title, lead2.title, other2.title]
