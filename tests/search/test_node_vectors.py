"""Knowledge nodes found by meaning (``[retrieval] vectors = "on"``, the ``ctxstore[embed]`` extra).

Through the installed CLI: ``ctx search`` finds a node that shares no word with the question,
fused with BM25 by reciprocal rank; the vectors live in ``.ctx/index/vectors.sqlite`` (derived,
never in ``objects``), follow edits, and ``ctx rebuild`` makes them again.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.repo import Store

pytest.importorskip("wordllama")  # the test extra installs it; a bare checkout skips

QUESTION = "which animal lives with me"


def ctx(store: Store, *args: str, code: int = 0) -> str:
    res = run_ctx(["--ctx-dir", str(store.root), *args])
    assert res.returncode == code, (res.stdout, res.stderr)
    return res.stderr if code else res.stdout


def cj(store: Store, *args: str) -> dict:
    return json.loads(ctx(store, "--format", "json", *args))


def _vectors(store: Store, value: str) -> None:
    config = store.root / "config.toml"
    head, sep, tail = config.read_text().partition("[retrieval]\n")
    assert sep and re.search(r'^vectors = "(off|on)"$', tail, re.M)  # ctx init writes "off"
    config.write_text(head + sep + re.sub(r'^vectors = "(off|on)"$', f'vectors = "{value}"',
                                          tail, count=1, flags=re.M))


def _nodes(store: Store) -> dict[str, str]:
    ids = {}
    for key, text in (("pet", "I adopted a puppy named Rex last spring; he chews every shoe."),
                      ("cache", "The session cache moves from SQLite to Redis."),
                      ("deploy", "deploy.sh runs as the www user; run it with sudo -u deploy."),
                      ("laptop", "Buy light laptops with 16 GB of memory for the team.")):
        ids[key] = ctx(store, "add", "--type", "fact", text).strip()
    return ids


def _keys(out: dict) -> list[str]:
    return [r["key"] for r in out["results"]]


def _vector_rows(store: Store) -> dict[str, bytes]:
    conn = sqlite3.connect(store.root / "index" / "vectors.sqlite")
    try:
        return dict(conn.execute("SELECT node_id, vec FROM node_vectors").fetchall())
    finally:
        conn.close()


@pytest.mark.slow
def test_node_vectors_find_a_node_that_shares_no_word_with_the_question(store: Store) -> None:
    ids = _nodes(store)
    off = cj(store, "search", QUESTION, "--kind", "node")
    assert ids["pet"] not in _keys(off)
    assert not (store.root / "index" / "vectors.sqlite").exists()  # off: nothing made
    _vectors(store, "on")
    on = cj(store, "search", QUESTION, "--kind", "node")
    assert _keys(on)[0] == ids["pet"]
    assert ids["pet"] in ctx(store, "search", QUESTION)  # the text form, every kind
    # words still lead: a node holding the query's terms is first
    words = cj(store, "search", "session cache Redis", "--kind", "node")
    assert _keys(words)[0] == ids["cache"]
    # derived, per clone: in the index folder, one vector per node, nothing under objects
    rows = _vector_rows(store)
    assert set(rows) == set(ids.values()) and all(len(v) == 256 * 4 for v in rows.values())
    assert not any(p.name == "vectors.sqlite" for p in (store.root / "objects").rglob("*"))


@pytest.mark.slow
def test_node_vectors_follow_edits_and_rebuild_makes_them_again(store: Store) -> None:
    _vectors(store, "on")
    ids = _nodes(store)
    cj(store, "search", QUESTION)
    before = _vector_rows(store)
    # a node replaced by another: the old one leaves the live set, the new one is embedded
    new = ctx(store, "add", "--type", "fact", "We adopted a kitten called Mia.").strip()
    ctx(store, "supersede", ids["pet"], new)
    found = cj(store, "search", QUESTION, "--kind", "node")
    assert _keys(found)[0] == new and ids["pet"] not in _keys(found)
    after = _vector_rows(store)
    assert new in after and after[ids["cache"]] == before[ids["cache"]]
    # damaged derived data: ctx rebuild makes it whole again
    conn = sqlite3.connect(store.root / "index" / "vectors.sqlite")
    conn.execute("UPDATE node_vectors SET vec = zeroblob(1024)")
    conn.commit()
    conn.close()
    rebuilt = cj(store, "rebuild")
    assert rebuilt["node_vectors"] == len(after)
    assert _vector_rows(store) == after
    assert _keys(cj(store, "search", QUESTION, "--kind", "node"))[0] == new
    # vectors off: rebuild removes the file, and search finds by words only
    _vectors(store, "off")
    assert "node_vectors" not in cj(store, "rebuild")
    assert not (store.root / "index" / "vectors.sqlite").exists()
    assert new not in _keys(cj(store, "search", QUESTION, "--kind", "node"))


def test_node_vectors_configured_without_the_extra_is_one_line(store: Store,
                                                               tmp_path: Path) -> None:
    _nodes(store)
    _vectors(store, "on")
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('wordllama', 'tokenizers'):\n"
        "            raise ImportError(name=name)\n"
        "sys.meta_path.insert(0, _Block())\n")
    res = run_ctx(["--ctx-dir", str(store.root), "search", QUESTION],
                  env={"PYTHONPATH": str(blocker)})
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctx: error[E027]"), res.stderr


def test_node_vectors_off_imports_no_model(store: Store) -> None:
    _nodes(store)
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "ctxstore.cli", "--ctx-dir",
                          str(store.root), "search", QUESTION, "--format", "json"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    imported = {line.split("|")[-1].strip() for line in res.stderr.splitlines()
                if line.startswith("import time:")}
    assert "ctxstore.search.search" in imported  # the log is real
    assert not imported & {"numpy", "tokenizers", "ctxstore.embed.engine",
                           "ctxstore.search.node_vectors"}


@pytest.mark.slow
def test_node_vectors_damaged_file_is_made_again(store: Store) -> None:
    ids = _nodes(store)
    _vectors(store, "on")
    cj(store, "search", QUESTION)
    path = store.root / "index" / "vectors.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"not a database at all" * 100)  # derived data: damaged, made again
    assert _keys(cj(store, "search", QUESTION, "--kind", "node"))[0] == ids["pet"]
    assert set(_vector_rows(store)) == set(ids.values())


@pytest.mark.slow
def test_node_vectors_file_that_is_a_link_is_refused(store: Store, out: Path) -> None:
    _nodes(store)
    _vectors(store, "on")
    index = store.root / "index"
    index.mkdir(exist_ok=True)
    (index / "vectors.sqlite").symlink_to(out / "canary")
    res = run_ctx(["--ctx-dir", str(store.root), "search", QUESTION])
    assert res.returncode != 0 and "error[E020]" in res.stderr, res.stderr
    assert (out / "canary").read_bytes() == b"canary bytes\n"
    assert sorted(p.name for p in out.iterdir()) == ["canary"]


@pytest.mark.slow
def test_node_vectors_hyde_draft_finds_what_the_question_alone_misses(store: Store) -> None:
    from tests.llm._llmserver import Behaviour, serve

    ids = _nodes(store)
    _vectors(store, "on")
    question = "who keeps me company at home"  # its own vector is nearest to the laptops

    def search(*extra: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
        res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "search", question,
                       "--kind", "node", *extra], env=env)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout), res.stderr

    plain, _ = search()
    assert _keys(plain)[0] != ids["pet"] and "hyde" not in plain
    b = Behaviour(protocol="llama", answer="I have a young dog named Rex who chews shoes.")
    with serve(b) as url:
        found, err = search(env={"CTX_LLM_SERVER": url})
        assert _keys(found)[0] == ids["pet"] and err == ""
        assert found["hyde"]["draft"] == "I have a young dog named Rex who chews shoes."
        posts = [r for r in b.requests if r["method"] == "POST"]
        assert len(posts) == 1 and question in posts[0]["body"]["prompt"]
        assert _keys(search("--no-hyde", env={"CTX_LLM_SERVER": url})[0]) == _keys(plain)
        b.completion_status = 503  # a failing server: the plain search, and a note
        (store.root / "local" / "hyde.json").unlink()
        failed, err = search(env={"CTX_LLM_SERVER": url})
    assert _keys(failed) == _keys(plain) and failed["hyde"]["draft"] is None
    assert err.startswith("ctx: note: HyDE: ") and "HTTP 503" in err
