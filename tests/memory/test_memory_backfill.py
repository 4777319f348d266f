"""Backfill groups small transcripts into one transaction: all of a group, or none of it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ctxstore.memory.backfill import _groups, backfill
from ctxstore.memory.db import open_memory
from ctxstore.memory.index import BATCH_BYTES
from tests.memory.memtx import conversation
from tests.memory.test_memory_index import _ctx, dump

SESSIONS = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(1, 5)]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "projects"
    for session in SESSIONS:
        conversation(session).write(folder / f"{session}.jsonl")
    return folder


def test_backfill_groups_runs_of_small_files_and_leaves_big_ones_alone() -> None:
    files = [(Path("a"), 10), (Path("big"), BATCH_BYTES), (Path("b"), BATCH_BYTES - 5),
             (Path("c"), 5), (Path("d"), 1)]
    assert [[p.name for p, _ in g] for g in _groups(files)] == [["a"], ["big"], ["b", "c"], ["d"]]


def test_backfill_fault_mid_group_keeps_nothing_of_it_and_a_rerun_completes(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    full, faulty = _ctx(tmp_path, "full"), _ctx(tmp_path, "faulty")
    with open_memory(full, create=True) as db:  # type: ignore[union-attr]
        backfill(db, [folder])
    db = open_memory(faulty, create=True)
    assert db is not None
    with db:
        # a real SQLite failure while the third transcript of the group is being indexed
        db.conn.execute("CREATE TEMP TRIGGER fail BEFORE INSERT ON main.turns WHEN "
                        f"new.session = '{SESSIONS[2]}' BEGIN SELECT RAISE(ABORT, 'disk gone'); END")
        with pytest.raises(sqlite3.IntegrityError, match="disk gone"):
            backfill(db, [folder])
        assert db.stats()["turns"] == 0 and db.get_cursor(str(folder / f"{SESSIONS[0]}.jsonl")) is None
        db.conn.execute("DROP TRIGGER fail")
        backfill(db, [folder])
    assert dump(faulty) == dump(full)

