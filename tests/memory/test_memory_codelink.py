"""Transcript entities linked to the code graph's files and symbols (installed CLI end to end)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxstore.memory.codelink import resolve_file
from ctxstore.memory.db import SCHEMA_VERSION, memory_path, open_memory
from ctxstore.repo import Store
from tests.memory.memtx import Transcript
from tests.memory.test_memory_cli import cj

NOW = "2026-02-13T12:00:00Z"


def _project(store: Store) -> None:
    src = store.root.parent / "src"
    src.mkdir()
    (src / "cache.py").write_text("class SessionCache:\n    def evict(self, key):\n"
                                  "        return key\n\n\ndef make_cache():\n"
                                  "    return SessionCache()\n")
    (src / "login.py").write_text("def render_login():\n    return 'form'\n")
    cj(store, "index")


def _talk(tmp_path: Path) -> Path:
    t = Transcript()
    t.prompt("How should we evict entries from the session cache?")
    t.say("We decided to change SessionCache.evict in /home/user/demo/src/cache.py so it drops "
          "the oldest key first.")
    t.prompt("Now let's talk about the login page layout")
    t.say("The login page keeps its two-column grid; we decided not to touch it.")
    t.prompt("Where does the cache come from?")
    t.say("The cache is created by make_cache(); the problem is that notes.py is not code.")
    return t.write(tmp_path / "s.jsonl")


def test_codelink_backfill_links_names_and_search_finds_turns_by_path(store: Store,
                                                                       tmp_path: Path) -> None:
    _project(store)
    out = cj(store, "memory", "backfill", str(_talk(tmp_path)))
    assert out["linked"] == 3  # the absolute path, SessionCache.evict, make_cache
    found = cj(store, "memory", "search", "src/cache.py", "--now", NOW)["results"]
    assert found and "drops the oldest key" in found[0]["text"]
    assert {"name": "/home/user/demo/src/cache.py", "type": "file",
            "code": {"path": "src/cache.py"}} in found[0]["entities"]
    assert {"name": "SessionCache.evict", "type": "symbol",
            "code": {"path": "src/cache.py", "qualname": "cache.SessionCache.evict"}} \
        in found[0]["entities"]
    assert all("login" not in hit["text"] for hit in found)
    # a qualified name finds the turn that wrote the short one
    assert "drops the oldest key" in cj(store, "memory", "search", "cache.SessionCache.evict",
                                        "--now", NOW)["results"][0]["text"]
    unlinked = [e for hit in cj(store, "memory", "search", "notes.py", "--now", NOW)["results"]
                for e in hit["entities"] if e["name"] == "notes.py"]
    assert unlinked and all("code" not in e for e in unlinked)
    assert cj(store, "memory", "backfill", str(tmp_path / "s.jsonl"))["linked"] == 0


def test_codelink_links_later_when_the_code_is_indexed_after(store: Store, tmp_path: Path) -> None:
    assert cj(store, "memory", "backfill", str(_talk(tmp_path)))["linked"] == 0
    _project(store)
    assert cj(store, "memory", "backfill", str(tmp_path / "s.jsonl"))["linked"] == 3


def test_codelink_resolve_file_takes_the_longest_indexed_tail() -> None:
    paths = {"src/cache.py", "lib/cache.py", "src/app/main.py"}
    base = {"cache.py": ["src/cache.py", "lib/cache.py"], "main.py": ["src/app/main.py"]}
    assert resolve_file("./src/cache.py", paths, base) == "src/cache.py"
    assert resolve_file("/home/me/repo/src/app/main.py", paths, base) == "src/app/main.py"
    assert resolve_file("main.py", paths, base) == "src/app/main.py"
    assert resolve_file("cache.py", paths, base) is None  # two files have that name
    assert resolve_file("other/cache.py", paths, base) is None
    assert resolve_file("/", paths, base) is None


def test_codelink_schema_1_memory_is_upgraded_in_place(store: Store, tmp_path: Path) -> None:
    cj(store, "memory", "backfill", str(_talk(tmp_path)))
    conn = sqlite3.connect(memory_path(store.root))
    # what a ctx of schema 1 wrote: no code links, no schema_version table (meta names it),
    # no provenance of ideas (schema 5)
    conn.executescript("ALTER TABLE ideas DROP COLUMN branch; ALTER TABLE ideas DROP COLUMN git_commit;"
                       "DROP INDEX entities_code_path; ALTER TABLE entities DROP COLUMN code_path;"
                       "ALTER TABLE entities DROP COLUMN code_qualname; DROP TABLE schema_version;"
                       "DROP TABLE turn_vectors; DROP TABLE idea_vectors; DROP TABLE span_vectors;"
                       "UPDATE meta SET value = '1' WHERE key = 'schema_version';")
    conn.close()
    db = open_memory(store.root, create=False)
    assert db is not None
    with db:
        version = db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
        assert version.fetchone()[0] == str(SCHEMA_VERSION)
        assert db.stats()["turns"] == 3
    _project(store)
    assert cj(store, "memory", "backfill", str(tmp_path / "s.jsonl"))["linked"] == 3
