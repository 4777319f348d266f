"""The read fast path: an index already in sync with HEAD/STAGE/refs is opened without the
store handle or the object model (``index.open_current``, ``Session.index``); anything else
takes the normal path, which syncs and repairs as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import session_of, stage_file

from ctxstore import fsio
from ctxstore.errors import RefNotFound
from ctxstore.index import DAMAGE_MARKER, INDEX_FILE, index_dir, open_current, open_index
from ctxstore.knowledge.nodes import add_node
from ctxstore.repo import Store
from ctxstore.session import Session


def _synced(store: Store) -> None:
    open_index(store).close()


def _count(conn: object) -> int:
    return int(conn.execute("SELECT count(*) FROM nodes").fetchone()[0])  # type: ignore[attr-defined]


def test_unchanged_store_opens_without_the_store_handle(store: Store) -> None:
    add_node(session_of(store), "fact", "the retry loop backs off exponentially")
    _synced(store)
    with Session.open(store.root) as db:
        conn = db.index()
        assert db._store is None  # the fast path: no Store built
        assert _count(conn) == 1
        assert db.index() is conn and db._store is None  # still current: no sync needed


def test_pointer_moved_since_the_last_sync_takes_the_slow_path(store: Store) -> None:
    add_node(session_of(store), "fact", "first")
    _synced(store)
    add_node(session_of(store), "fact", "second: STAGE moved, the index has not seen it")
    assert open_current(store.root) is None
    with Session.open(store.root) as db:
        assert _count(db.index()) == 2  # synced through the store
    conn = open_current(store.root)
    assert conn is not None and _count(conn) == 2
    conn.close()


def test_a_long_lived_session_syncs_when_another_writer_moves_the_pointers(store: Store) -> None:
    _synced(store)
    with Session.open(store.root) as db:
        conn = db.index()
        assert db._store is None and _count(conn) == 0
        add_node(session_of(store), "fact", "written by another handle after the session opened")
        assert _count(db.index()) == 1


def test_damaged_index_is_repaired_by_the_normal_path(store: Store) -> None:
    add_node(session_of(store), "fact", "survives the repair")
    _synced(store)
    path = index_dir(store) / INDEX_FILE
    for suffix in ("-wal", "-shm"):
        (path.parent / (INDEX_FILE + suffix)).unlink(missing_ok=True)
    path.write_bytes(b"not a database" * 100)
    assert open_current(store.root) is None
    with Session.open(store.root) as db:
        conn = db.index()
        assert conn.repaired is not None and _count(conn) == 1
        assert db.take_repairs()


def test_damage_marker_sends_the_open_to_the_rebuild(store: Store) -> None:
    add_node(session_of(store), "fact", "still here")
    _synced(store)
    fsio.replace_atomic(index_dir(store) / DAMAGE_MARKER, b"database disk image is malformed")
    assert open_current(store.root) is None
    with Session.open(store.root) as db:
        conn = db.index()
        assert conn.repaired is not None and _count(conn) == 1


def test_no_index_yet_is_created_by_the_normal_path(store: Store) -> None:
    assert open_current(store.root) is None
    assert not (index_dir(store) / INDEX_FILE).exists()  # the fast path creates nothing
    with Session.open(store.root) as db:
        assert _count(db.index()) == 0
    assert (index_dir(store) / INDEX_FILE).exists()


def test_unreadable_pointer_is_reported_by_the_normal_path(store: Store) -> None:
    _synced(store)
    stage_file(store.root).write_bytes(b"garbage\n")
    assert open_current(store.root) is None
    with Session.open(store.root) as db, pytest.raises(RefNotFound) as caught:
        db.index()
    assert caught.value.code == "E005" and "stage recover" in (caught.value.hint or "")


@pytest.mark.slow
def test_ctx_search_on_an_unchanged_store_imports_no_object_model(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ctx = [sys.executable, "-m", "ctxstore.cli"]
    subprocess.run([*ctx, "init", "--no-git"], cwd=work, check=True, capture_output=True)
    subprocess.run([*ctx, "add", "--type", "fact", "the retry loop backs off"], cwd=work,
                   check=True, capture_output=True)
    subprocess.run([*ctx, "search", "retry"], cwd=work, check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ctxstore.cli", "search",
                           "retry"], cwd=work, check=True, capture_output=True, text=True)
    assert "backs off" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "ctxstore.model" not in imported and "ctxstore.repo" not in imported
