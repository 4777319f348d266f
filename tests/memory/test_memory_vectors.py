"""Vector search of transcript memory (``[memory] vectors = "on"``, the ``ctxstore[embed]`` extra).

The real model runs here (WordLlama from its wheel): the test extra installs it. A turn whose
words share none with the question is found with vectors and not without them; the model loads
with every network connection refused; a configured but missing extra is one line (E027);
vectors are derived data that ``ctx memory vectors --rebuild`` makes again, that a forget
deletes, and that a turn's new text makes stale; the prompt hook with vectors on prints JSON.
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.memory.db import memory_path
from ctxstore.repo import Store
from tests.memory.memtx import Transcript

pytest.importorskip("wordllama")  # the test extra installs it; a bare checkout skips

QUESTION = "what pet do I have"
NOW = "2026-02-20T12:00:00Z"


def ctx(store: Store, *args: str, code: int = 0, env: dict[str, str] | None = None) -> str:
    res = run_ctx(["--ctx-dir", str(store.root), *args], env=env)
    assert res.returncode == code, (res.stdout, res.stderr)
    if code:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ctx: error["), res.stderr
        return res.stderr
    return res.stdout


def cj(store: Store, *args: str) -> dict:
    return json.loads(ctx(store, "--format", "json", *args))


def _vectors(store: Store, on: bool, section: str = "memory", value: str | None = None) -> None:
    """Set ``[section] vectors`` in the store's config.toml (ctx init writes "off")."""
    config = store.root / "config.toml"
    head, sep, tail = config.read_text().partition(f"[{section}]\n")
    assert sep and re.search(r'^vectors = "(off|on)"$', tail, re.M)
    wanted = value or ("on" if on else "off")
    config.write_text(head + sep + re.sub(r'^vectors = "(off|on)"$', f'vectors = "{wanted}"',
                                          tail, count=1, flags=re.M))


def _talk(path: Path, start: datetime | None = None) -> Path:
    """Five turns; the one about the puppy shares no word (nor stem) with ``QUESTION``."""
    t = Transcript(start=start or datetime(2026, 2, 12, 16, 0, tzinfo=UTC))
    for prompt, reply in (
            ("The deploy script fails on the staging server with a permission error.",
             "deploy.sh runs as the www user; run it with sudo -u deploy."),
            ("I adopted a puppy named Rex last week and he chews every shoe.",
             "Puppies chew while teething; chew toys and a crate help."),
            ("We decided to use SQLite for the session cache.",
             "Good for a single machine; Redis later if it grows."),
            ("My sister got married in June, the wedding was lovely.",
             "Congratulations to her and to the family!"),
            ("Which laptop should I buy for work?", "A light one with 16 GB of memory.")):
        t.prompt(prompt)
        t.say(reply)
        t.end_turn()
    return t.write(path)


def _texts(out: dict) -> list[str]:
    return [r["text"] for r in out["results"]]


def test_vectors_find_a_turn_that_shares_no_word_with_the_question(store: Store,
                                                                   tmp_path: Path) -> None:
    path = _talk(tmp_path / "s.jsonl")
    assert cj(store, "memory", "backfill", str(path))["embedded"] == 0  # off: nothing embedded
    off = cj(store, "memory", "search", QUESTION, "--now", NOW)
    assert not any("puppy" in text for text in _texts(off))
    _vectors(store, True)
    filled = cj(store, "memory", "vectors")
    assert filled["embedded"] == 5 and filled["turns_with_vectors"] == 5
    assert filled["model"].startswith("wordllama-l2_supercat-256@")
    on = cj(store, "memory", "search", QUESTION, "--now", NOW)
    assert "puppy named Rex" in _texts(on)[0]
    # the text form too, and a search by the words still ranks the words' turn first
    assert "puppy named Rex" in ctx(store, "memory", "search", QUESTION, "--now", NOW)
    words = cj(store, "memory", "search", "staging permission error", "--now", NOW)
    assert "staging server" in _texts(words)[0]


def test_vectors_backfill_embeds_and_rebuild_makes_them_again(store: Store, tmp_path: Path) -> None:
    _vectors(store, True)
    out = cj(store, "memory", "backfill", str(_talk(tmp_path / "s.jsonl")))
    assert out["turns"] == 5 and out["embedded"] == 5
    conn = sqlite3.connect(memory_path(store.root))
    before = dict(conn.execute("SELECT turn_id, vec FROM turn_vectors").fetchall())
    conn.execute("DELETE FROM turn_vectors WHERE turn_id = (SELECT min(turn_id) FROM turn_vectors)")
    conn.execute("UPDATE turn_vectors SET vec = zeroblob(1024)")  # damaged, as --rebuild mends
    conn.commit()
    assert cj(store, "memory", "vectors")["embedded"] == 1  # only what is missing
    rebuilt = cj(store, "memory", "vectors", "--rebuild")
    assert (rebuilt["embedded"], rebuilt["turns_with_vectors"]) == (5, 5)
    after = dict(conn.execute("SELECT turn_id, vec FROM turn_vectors").fetchall())
    conn.close()
    assert after == before and all(len(v) == 256 * 4 for v in after.values())
    assert "embedded 0 turns" in ctx(store, "memory", "vectors")


def test_vectors_go_with_a_forgotten_session_and_with_a_turn_that_grew(store: Store,
                                                                      tmp_path: Path) -> None:
    from ctxstore.memory.db import open_memory
    from ctxstore.memory.index import index_file

    _vectors(store, True)
    t = Transcript()
    t.prompt("I adopted a puppy named Rex last week.")
    path = t.write(tmp_path / "s.jsonl")
    assert cj(store, "memory", "backfill", str(path))["embedded"] == 1
    t.say("Puppies chew while teething.")  # the open turn's reply arrives later
    t.write(path)
    db = open_memory(store.root, create=False)
    assert db is not None
    with db:
        index_file(db, path)
        assert db.vector_count("wordllama-l2_supercat-256@0.4.0.post1") == (0, 1)  # stale: gone
    assert cj(store, "memory", "vectors")["embedded"] == 1
    ctx(store, "memory", "forget", "--all", "--yes")
    conn = sqlite3.connect(memory_path(store.root))
    assert conn.execute("SELECT count(*) FROM turn_vectors").fetchone() == (0,)
    conn.close()


def test_vectors_model_loads_with_the_network_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.embed.engine import load_embedder

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the embedding model opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_embedder.cache_clear()
    try:
        engine = load_embedder()
        vectors = engine.embed(["my dog Rex", "", "the deploy script"])
    finally:
        load_embedder.cache_clear()
    assert vectors.shape == (3, 256) and str(vectors.dtype) == "float32"
    norms = (vectors * vectors).sum(axis=1)
    assert abs(norms[0] - 1) < 1e-5 and norms[1] == 0 and abs(norms[2] - 1) < 1e-5
    query = engine.embed_query("what pet do I have")
    assert float(vectors[0] @ query) > float(vectors[2] @ query)


def test_vectors_match_wordllamas_own_embedding() -> None:
    """The wheel's files read directly give what WordLlama's loader and ``embed`` give."""
    import numpy as np
    from wordllama import WordLlama

    from ctxstore.embed.wordllama import _package_dir, load_wordllama

    texts = ["I adopted a puppy named Rex.", "deploy.sh runs as the www user"]
    theirs = WordLlama.load(cache_dir=_package_dir(), disable_download=True).embed(texts, norm=True)
    assert np.abs(load_wordllama().embed(texts) - theirs).max() < 1e-3


def test_vectors_configured_without_the_extra_is_one_line(store: Store, tmp_path: Path) -> None:
    _vectors(store, True)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "wordllama.py").write_text("")  # a module, not the package with its weights
    env = {"PYTHONPATH": str(shadow)}
    path = _talk(tmp_path / "s.jsonl")
    err = ctx(store, "memory", "backfill", str(path), code=1, env=env)
    assert "error[E027]" in err and "ctxstore[embed]" in err
    assert not memory_path(store.root).exists()  # named before anything was written
    broken = tmp_path / "broken" / "wordllama"
    (broken / "weights").mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "weights" / "l2_supercat_256.safetensors").write_bytes(b"\xff" * 64)
    err = ctx(store, "memory", "vectors", code=1, env={"PYTHONPATH": str(broken.parent)})
    assert "error[E027]" in err and "cannot be read" in err
    assert "error[E018]" in ctx(store, "memory", "vectors", code=1)  # the extra, no memory yet
    for event in ("stop", "prompt-submit"):  # the hooks stay best effort: valid JSON
        res = run_ctx(["hook", event], env=env, stdin=json.dumps({
            "session_id": "x", "transcript_path": str(path), "cwd": str(store.root.parent),
            "hook_event_name": "Stop" if event == "stop" else "UserPromptSubmit",
            "prompt": QUESTION}))
        assert res.returncode == 0 and isinstance(json.loads(res.stdout), dict), res.stderr
    log = (store.root / "local" / "hooks.log").read_text()
    assert "pip install 'ctxstore[embed]'" in log


def _no_extra(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``wordllama`` is a bare module: the extra as good as missing."""
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    (shadow / "wordllama.py").write_text("")
    return {"PYTHONPATH": str(shadow)}


def test_vectors_configured_without_the_extra_search_falls_back_to_words(store: Store,
                                                                         tmp_path: Path) -> None:
    """`ctx memory search` with vectors on and the extra missing searches by words, as the
    hooks do, and says so once (a note on stderr; ``note`` in JSON): the hits of words alone."""
    ctx(store, "memory", "backfill", str(_talk(tmp_path / "s.jsonl")))  # vectors off
    words = cj(store, "memory", "search", "sqlite session cache", "--now", NOW)
    assert "SQLite" in words["results"][0]["text"]
    _vectors(store, True)
    args = ["--ctx-dir", str(store.root), "memory", "search", "sqlite session cache", "--now", NOW]
    res = run_ctx(["--format", "json", *args], env=_no_extra(tmp_path))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    note = got.pop("note")
    assert note.startswith("searched by words only") and "pip install 'ctxstore[embed]'" in note
    assert got == words
    assert res.stderr.strip().splitlines() == [f"ctx: note: {note}"]
    res = run_ctx(args, env=_no_extra(tmp_path))
    assert res.returncode == 0 and "SQLite" in res.stdout and "searched by words only" in res.stderr


def test_vectors_bad_setting_is_named(store: Store, tmp_path: Path) -> None:
    _vectors(store, False, value="maybe")
    for args in (("memory", "vectors"), ("memory", "backfill", str(_talk(tmp_path / "s.jsonl")))):
        err = ctx(store, *args, code=1)
        assert "error[E015]" in err and "[memory] vectors = 'maybe' is not one of off, on" in err
    assert not memory_path(store.root).exists()


def test_vectors_prompt_hook_brings_the_turn_near_in_meaning(store: Store, tmp_path: Path) -> None:
    _vectors(store, True)
    path = _talk(tmp_path / "s.jsonl", datetime.now(UTC) - timedelta(days=3))
    payload = {"session_id": "4d5611e5-241a-462a-8d15-5122611a9569", "transcript_path": str(path),
               "cwd": str(store.root.parent), "hook_event_name": "Stop"}
    count = 0
    for _ in range(10):  # each Stop indexes, then embeds in what is left of its 0.3 s
        res = run_ctx(["hook", "stop"], stdin=json.dumps(payload))
        assert res.returncode == 0 and json.loads(res.stdout) == {}, res.stdout
        conn = sqlite3.connect(memory_path(store.root))
        count = conn.execute("SELECT count(*) FROM turn_vectors").fetchone()[0]
        conn.close()
        if count == 5:
            break
    assert count == 5
    res = run_ctx(["hook", "prompt-submit"], stdin=json.dumps(
        {**payload, "session_id": "another", "hook_event_name": "UserPromptSubmit",
         "prompt": QUESTION}))
    assert res.returncode == 0, res.stderr
    context = json.loads(res.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "puppy named Rex" in context
    _vectors(store, False)
    res = run_ctx(["hook", "prompt-submit"], stdin=json.dumps(
        {**payload, "session_id": "another", "hook_event_name": "UserPromptSubmit",
         "prompt": QUESTION}))
    assert "puppy" not in res.stdout


_BUILD_LOG = ("The build log shows the compiler flags, the linker order, the object files, the "
              "archive tool output and the final binary size for every target in the matrix. ") * 6


def _decision_talk(path: Path) -> Path:
    """A decision said in one sentence at the end of a long turn about something else."""
    t = Transcript()
    for prompt, reply in (
            ("Tell me about the zoo trip and the animals we saw, lions, dogs, cats and parrots.",
             "The zoo had lions, kittens, puppies and parrots in the petting area."),
            (_BUILD_LOG + "By the way, we decided to adopt a kitten from the shelter.", _BUILD_LOG),
            ("The deploy script fails on the staging server with a permission error.",
             "deploy.sh runs as the www user; run it with sudo -u deploy.")):
        t.prompt(prompt)
        t.say(reply)
        t.end_turn()
    return t.write(path)


def test_vectors_find_a_decision_by_the_meaning_of_its_idea(store: Store, tmp_path: Path) -> None:
    # The turn's own vector is mostly the build log; its decision idea is one sentence, the
    # nearest of all to a question asking for decisions (no word of it is in the turn).
    _vectors(store, True)
    out = cj(store, "memory", "backfill", str(_decision_talk(tmp_path / "s.jsonl")))
    assert out["embedded"] == 3
    filled = cj(store, "memory", "vectors", "--rebuild")
    assert (filled["turns_with_vectors"], filled["ideas_with_vectors"]) == (3, 2)
    assert filled["ideas_embedded"] == 2
    found = cj(store, "memory", "search", "what did we decide about pets", "--limit", "3")
    top = found["results"][0]
    assert top["intent"] == "decision" and [i["text"] for i in top["ideas"]] == [
        "By the way, we decided to adopt a kitten from the shelter."]
    # a question that asks for no intent ranks by the turns' own vectors, as before
    plain = cj(store, "memory", "search", "animals we saw", "--limit", "1")
    assert "zoo" in plain["results"][0]["text"]


def test_vectors_of_ideas_go_with_a_forgotten_session(store: Store, tmp_path: Path) -> None:
    _vectors(store, True)
    cj(store, "memory", "backfill", str(_decision_talk(tmp_path / "s.jsonl")))
    conn = sqlite3.connect(memory_path(store.root))
    assert conn.execute("SELECT count(*) FROM idea_vectors").fetchone() == (2,)
    conn.close()
    ctx(store, "memory", "forget", "--all", "--yes")
    conn = sqlite3.connect(memory_path(store.root))
    assert conn.execute("SELECT count(*), (SELECT count(*) FROM ideas) FROM idea_vectors"
                        ).fetchone() == (0, 0)
    conn.close()
    assert cj(store, "memory", "vectors")["ideas_with_vectors"] == 0


def test_vectors_a_memory_of_schema_6_gains_idea_vectors_and_keeps_its_turns(
        store: Store, tmp_path: Path) -> None:
    from ctxstore.memory.db import SCHEMA_VERSION

    _vectors(store, True)
    cj(store, "memory", "backfill", str(_decision_talk(tmp_path / "s.jsonl")))
    path = memory_path(store.root)
    conn = sqlite3.connect(path)
    turns = conn.execute("SELECT turn_id, model, vec FROM turn_vectors ORDER BY 1").fetchall()
    assert len(turns) == 3
    # what a ctx of schema 6 wrote: turn vectors, no idea vectors
    conn.executescript("DROP TABLE idea_vectors; DROP TABLE span_vectors; "
                       "DELETE FROM schema_version WHERE version = 7; "
                       "UPDATE meta SET value = '6' WHERE key = 'schema_version';")
    conn.close()
    stats = cj(store, "memory", "stats")  # opening migrates
    assert stats["turns"] == 3
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY 1")] == list(
        range(1, SCHEMA_VERSION + 1)) and SCHEMA_VERSION == 7
    assert conn.execute("SELECT turn_id, model, vec FROM turn_vectors ORDER BY 1").fetchall() == turns
    assert conn.execute("SELECT count(*) FROM idea_vectors").fetchone() == (0,)
    conn.close()
    filled = cj(store, "memory", "vectors")  # only the ideas were missing
    assert (filled["embedded"], filled["ideas_embedded"], filled["ideas_with_vectors"]) == (0, 2, 2)


def test_a_hook_past_its_budget_still_embeds_one_batch(store: Store, tmp_path: Path) -> None:
    """Loading the model is the dear part: once it is loaded, a fill past its deadline still
    embeds a batch, so hooks on a busy machine catch up instead of embedding nothing forever."""
    import time

    from ctxstore.memory.db import open_memory
    from ctxstore.memory.settings import memory_settings, vector_engine
    from ctxstore.memory.vectors import BUDGET_BATCH, fill_vectors

    path = _talk(tmp_path / "s.jsonl")
    ctx(store, "memory", "backfill", str(path))  # vectors off: turns indexed, none embedded
    _vectors(store, True)
    engine = vector_engine(memory_settings(store.root))
    assert engine is not None
    db = open_memory(store.root, create=False)
    assert db is not None
    with db:
        assert db.vector_count(engine.model_id) == (0, 5)
        fill = fill_vectors(db, engine, deadline=time.monotonic() - 1.0)
        assert fill.embedded == 5 <= BUDGET_BATCH  # one batch, the deadline long past
        assert db.vector_count(engine.model_id) == (5, 5)
        assert fill_vectors(db, engine, deadline=time.monotonic() - 1.0).embedded == 0
