"""The derived index: catch-up, rebuild triggers, concurrency, damage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_ctx, session_of

from ctxstore.index import open_index
from ctxstore.index.schema import (
    EXPECTED_SCHEMA_DIGEST,
    expected_schema,
    read_schema,
    schema_digest,
)
from ctxstore.knowledge.nodes import add_node, tag_node
from ctxstore.repo import Store
from ctxstore.staging import abort_session, commit_stage, start_session


def _ids(store: Store) -> set[str]:
    return {r[0] for r in open_index(store).execute("SELECT id FROM nodes")}


def test_index_catches_up_incrementally(store: Store) -> None:
    a = add_node(session_of(store), "fact", "one").node.id
    conn = open_index(store)
    applied = conn.execute("SELECT count(*) FROM applied").fetchone()[0]
    b = add_node(session_of(store), "fact", "two").node.id
    assert _ids(store) == {a, b}
    assert open_index(store).execute("SELECT count(*) FROM applied").fetchone()[0] == applied + 1


def test_index_follows_commit_abort_and_amend(store: Store) -> None:
    a = add_node(session_of(store), "fact", "kept").node.id
    assert _ids(store) == {a}
    commit_stage(store, "c1")
    assert _ids(store) == {a}
    start_session(store, "doomed")
    b = add_node(session_of(store), "fact", "aborted").node.id
    assert _ids(store) == {a, b}
    abort_session(store, None)
    assert _ids(store) == {a}
    c = add_node(session_of(store), "fact", "amended in").node.id
    commit_stage(store, None, amend=True)
    assert _ids(store) == {a, c}
    tag_node(session_of(store), a, ["x:y"])
    rows = open_index(store).execute("SELECT tag FROM tags WHERE node_id = ?", (a,))
    assert [r[0] for r in rows] == ["x:y"]


@pytest.mark.slow
def test_index_concurrent_catch_up_applies_once(store: Store) -> None:
    for i in range(200):
        add_node(session_of(store), "observation", f"note {i}")
    procs = [subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(store.root),
                               "--format", "json", "list"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    docs = [json.loads(o[0]) for o in outs]
    assert all(d == docs[0] for d in docs) and docs[0]["count"] == 200
    conn = open_index(store)
    assert conn.execute("SELECT count(*), count(DISTINCT oid) FROM applied").fetchone()[0] == 201
    assert conn.execute("SELECT count(*) FROM nodes_fts").fetchone()[0] == 200


def test_expected_schema_digest_is_current(store: Store) -> None:
    # A SCHEMA change updates EXPECTED_SCHEMA_DIGEST (and INDEX_SCHEMA_VERSION); a file
    # open_index creates takes the fast path of the schema check.
    assert schema_digest(expected_schema()) == EXPECTED_SCHEMA_DIGEST
    assert schema_digest(read_schema(open_index(store))) == EXPECTED_SCHEMA_DIGEST


def test_expected_code_schema_digest_is_current(store: Store) -> None:
    # A CODE_SCHEMA change updates EXPECTED_CODE_DIGEST and CODE_SCHEMA_VERSION (the code index
    # is derived from the work tree: an outdated one is dropped and `ctx index` rebuilds it).
    from ctxstore.index.codedb import (
        EXPECTED_CODE_DIGEST,
        expected_code_schema,
        read_code_schema,
    )

    assert schema_digest(expected_code_schema()) == EXPECTED_CODE_DIGEST
    assert schema_digest(read_code_schema(open_index(store))) == EXPECTED_CODE_DIGEST


def test_code_index_of_another_version_is_dropped_with_a_notice(store: Store) -> None:
    import sqlite3

    from ctxstore.index import IndexRepair

    (store.root.parent / "m.py").write_text("def mooring():\n    return 1\n")
    from ctxstore.code.ingest import index_tree

    index_tree(session_of(store), jobs=1)
    session_of(store).close_index()
    code = store.root / "index" / "code.sqlite"
    conn = sqlite3.connect(code)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    conn2 = open_index(store)
    assert conn2.execute("SELECT count(*) FROM files").fetchone() == (0,)  # dropped, empty
    repair = conn2.repaired
    assert isinstance(repair, IndexRepair) and repair.code
    assert "run `ctx index` to rebuild it" in repair.message()
    conn2.close()
    assert index_tree(session_of(store), jobs=1).written == ["m.py"]


def test_index_outdated_schema_is_rebuilt(store: Store) -> None:
    a = add_node(session_of(store), "fact", "survives").node.id
    conn = open_index(store)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    assert _ids(store) == {a}


def test_index_from_another_version_is_rebuilt_without_calling_it_damage(store: Store) -> None:
    a = add_node(session_of(store), "fact", "survives").node.id
    conn = open_index(store)
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    r = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "list"])
    assert r.returncode == 0 and json.loads(r.stdout)["nodes"][0]["id"] == a
    assert r.stderr.startswith("ctx: index was written by another version of ctx (schema version 3")
    assert "damaged" not in r.stderr


def test_index_folder_that_is_a_file_is_one_clear_error(store: Store) -> None:
    # A read-only checkout is in tests/index/test_index_damage.py (a read-only filesystem).
    import shutil

    add_node(session_of(store), "fact", "readable")
    shutil.rmtree(store.root / "index")
    (store.root / "index").write_text("not a directory")
    r = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "list"])
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith(f"ctx: error[E020]: refusing {store.root / 'index'}: is a regular "
                               "file, not a directory")
    assert (store.root / "index").read_text() == "not a directory"
    os.unlink(store.root / "index")


def test_readers_do_not_touch_store_state(store: Store) -> None:
    add_node(session_of(store), "fact", "x")
    before = {p: p.stat().st_mtime_ns for p in store.root.rglob("*")
              if p.is_file() and p.relative_to(store.root).parts[0] not in ("index", "local")}
    for args in (["list"], ["status"], ["search", "x"], ["compose"], ["view", "list"], ["tags"]):
        assert run_ctx(["--ctx-dir", str(store.root), *args]).returncode == 0, args
    after = {p: p.stat().st_mtime_ns for p in store.root.rglob("*")
             if p.is_file() and p.relative_to(store.root).parts[0] not in ("index", "local")}
    assert before == after


@pytest.mark.slow
def test_compose_query_equals_compose_of_full_rows(store: Store) -> None:
    import random

    from ctxstore.packs.compose import compose, compose_query
    from ctxstore.query.executor import run_query

    rnd = random.Random(7)
    tiers = ["tier:pinned", "tier:reference", "tier:working", "tier:off-context"]
    for i in range(120):
        add_node(session_of(store), rnd.choice(["fact",
                 "decision"]), "  word " * rnd.randint(1, 60) + f" n{i}  ",
                 tags=[rnd.choice(tiers)])
    conn = open_index(store)
    query = "tag:tier:pinned OR tag:tier:reference OR tag:tier:working"
    for budget in (60, 400, 1500, 100000):
        lazy = compose_query(conn, query, budget, now_ms=1_700_000_000_000)
        full = compose(conn, run_query(conn, query, now=1_700_000_000), budget, now_ms=1_700_000_000_000)
        assert (lazy.text, lazy.skipped) == (full.text, full.skipped)


def test_status_counts_every_tier_and_sizes_the_index_file(store: Store) -> None:
    from ctxstore.index import INDEX_FILE, index_dir
    from ctxstore.knowledge.status import store_status

    ids = [add_node(session_of(store), "fact", f"tiered {tier}").node.id
           for tier in ("pinned", "reference", "working", "off-context")]
    for node_id, tier in zip(ids, ("pinned", "reference", "working", "off-context"), strict=True):
        tag_node(session_of(store), node_id, [f"tier:{tier}"])
    add_node(session_of(store), "fact", "untiered")
    conn = open_index(store)
    st = store_status(store, conn, kind="explicit")
    assert list(st.tiers) == ["pinned", "reference", "working", "off-context"]
    assert all(count == 1 and tokens > 0 for count, tokens in st.tiers.values())
    files = [index_dir(store) / name for name in (INDEX_FILE, INDEX_FILE + "-wal")]
    assert st.size_bytes == sum(f.stat().st_size for f in files if f.exists()) > 0
    assert st.size_bytes >= (store.root / "index" / "index.sqlite").stat().st_size


def test_short_ids_are_the_shortest_unique_prefixes_by_query_and_by_bisect(store: Store) -> None:
    from ctxstore.index import read

    ids = [add_node(session_of(store), "fact", f"short id probe {i}").node.id for i in range(90)]
    conn = open_index(store)

    def brute(node_id: str, minimum: int = 8) -> str:
        n = minimum
        while any(o != node_id and o.startswith(node_id[:n]) for o in ids):
            n += 1
        return node_id[:n]

    # ULIDs made in one millisecond share long prefixes: the neighbours decide, not the length.
    lookup = read.short_id_lookup(conn)
    got = [lookup(i) for i in ids]  # the first 64 by indexed queries, the rest by bisect
    assert got == [brute(i) for i in ids]
    assert any(len(g) > 8 for g in got)
    fresh = read.short_id_lookup(conn)
    assert [fresh(i) for i in reversed(ids)] == list(reversed(got))
    gone = ids[0][:-1] + ("0" if ids[0][-1] != "0" else "1")  # no such node: still unique
    assert read.short_id_lookup(conn)(gone) == brute(gone)


def test_one_open_that_repairs_both_indexes_tells_the_user_both(tmp_path: Path) -> None:
    """The main index damaged and this clone's code index damaged too: one command, two notices."""

    root = tmp_path / "proj"
    root.mkdir()
    (root / "m.py").write_text("def mooring():\n    return 1\n")
    for args in (["init", "--no-git"], ["add", "--type", "fact", "mooring lines hold"], ["index"]):
        assert run_ctx(args, cwd=root).returncode == 0
    folder = root / ".ctx" / "index"
    (folder / "index.sqlite").write_bytes(b"not a database at all" * 100)
    (folder / "code.sqlite").write_bytes(b"not a code index either" * 100)
    res = run_ctx(["search", "mooring"], cwd=root)
    assert res.returncode == 0, res.stderr
    assert "mooring lines hold" in res.stdout
    notices = [line for line in res.stderr.splitlines() if line.startswith("ctx: ")]
    assert any("index was damaged" in n and "rebuilt from the store" in n for n in notices), notices
    assert any("the code index was damaged" in n and "run `ctx index`" in n for n in notices), notices
    again = run_ctx(["search", "mooring"], cwd=root)
    assert again.returncode == 0 and again.stderr == ""


@pytest.mark.slow
def test_a_code_index_that_is_not_a_database_is_dropped_not_taken_for_the_main_index(
        tmp_path: Path) -> None:
    """Damage SQLite reports while attaching ``code.sqlite`` is the code index's, not index.sqlite's."""

    root = tmp_path / "proj"
    root.mkdir()
    (root / "m.py").write_text("def mooring():\n    return 1\n")
    for args in (["init", "--no-git"], ["add", "--type", "fact", "mooring lines hold"], ["index"]):
        assert run_ctx(args, cwd=root).returncode == 0
    (root / ".ctx" / "index" / "code.sqlite").write_bytes(b"not a code index" * 100)
    res = run_ctx(["search", "mooring"], cwd=root)
    assert res.returncode == 0, res.stderr
    assert "mooring lines hold" in res.stdout
    assert [line for line in res.stderr.splitlines() if line.startswith("ctx: ")] == [
        "ctx: the code index was damaged (file is not a database); it was dropped: run "
        "`ctx index` to rebuild it"]
    assert run_ctx(["index"], cwd=root).returncode == 0
    assert "mooring" in run_ctx(["search", "mooring"], cwd=root).stdout
