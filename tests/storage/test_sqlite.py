"""ctxstore.sqlite: connect, error classification and ordered migrations, on real SQLite files.

The three databases of a store (the derived index, the hook state, transcript memory) go through
this module; their own suites (test_index_damage.py, claude/test_state_damage.py, memory/) test
what each does with a class of error.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ctxstore import sqlite as db
from ctxstore.errors import UnsafePath


def _filled(path: Path, rows: int = 2000) -> Path:
    """A database of about 1 MB, its WAL checkpointed into the file."""
    conn = db.connect(path, busy_seconds=1)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,) for _ in range(rows)])
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def _read_all(path: Path) -> object:
    conn = db.connect(path, busy_seconds=1)
    try:
        return conn.execute("SELECT count(*), sum(length(x)) FROM t").fetchone()
    finally:
        conn.close()


def _error(call: object) -> sqlite3.Error:
    with pytest.raises(sqlite3.Error) as info:
        call()  # type: ignore[operator]
    return info.value


# -- classification ------------------------------------------------------------------------------

@pytest.mark.parametrize("keep", [0.5, 4106, 50])
def test_sqlite_a_truncated_file_is_damaged(tmp_path: Path, keep: float) -> None:
    path = _filled(tmp_path / "t.sqlite")
    assert _read_all(path) == (2000, 1_000_000)
    os.truncate(path, int(path.stat().st_size * keep) if keep < 1 else int(keep))
    exc = _error(lambda: _read_all(path))
    assert db.classify(exc) == "damaged" and db.is_damage(exc)
    assert not db.is_busy(exc) and not db.is_read_only(exc)


@pytest.mark.parametrize("content", [b"hello, this is a text file\n" * 10, os.urandom(8192)],
                         ids=["text", "random bytes"])
def test_sqlite_a_file_that_is_not_a_database_is_damaged_and_left_as_it_was(
        tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.sqlite"
    path.write_bytes(content)
    exc = _error(lambda: db.connect(path, busy_seconds=1))
    assert db.classify(exc) == "damaged"
    assert db.primary_code(exc) == 26  # SQLITE_NOTADB, read from the code, not the message
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.sqlite"]


def test_sqlite_a_locked_database_is_busy_after_the_timeout(tmp_path: Path) -> None:
    path = _filled(tmp_path / "t.sqlite", rows=10)
    holder = db.connect(path, busy_seconds=1)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO t VALUES ('held')")
    other = db.connect(path, busy_seconds=0.2)
    try:
        assert other.execute("SELECT count(*) FROM t").fetchone() == (10,)  # WAL: reads go on
        began = time.monotonic()
        exc = _error(lambda: other.execute("BEGIN IMMEDIATE"))
        assert time.monotonic() - began >= 0.15  # it waited for the lock first
        assert db.classify(exc) == "busy" and db.is_busy(exc) and not db.is_damage(exc)
        holder.execute("COMMIT")
        other.execute("BEGIN IMMEDIATE")  # free again
        other.execute("ROLLBACK")
    finally:
        other.close()
        holder.close()


def test_sqlite_other_errors_are_neither_damage_nor_busy(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "t.sqlite", busy_seconds=1)
    conn.execute("CREATE TABLE t (x TEXT NOT NULL)")
    missing = _error(lambda: conn.execute("SELECT * FROM nowhere"))
    assert db.classify(missing) == "other" and db.is_missing_object(missing)
    syntax = _error(lambda: conn.execute("SELEKT 1"))
    assert db.classify(syntax) == "other" and not db.is_missing_object(syntax)
    constraint = _error(lambda: conn.execute("INSERT INTO t VALUES (NULL)"))
    assert db.classify(constraint) == "other" and db.primary_code(constraint) in db.NOT_OURS
    conn.close()


# -- connect -------------------------------------------------------------------------------------

def test_sqlite_connect_sets_wal_and_the_synchronous_level(tmp_path: Path) -> None:
    for level, number in (("NORMAL", 1), ("FULL", 2)):
        conn = db.connect(tmp_path / f"{level}.sqlite", busy_seconds=2.5, synchronous=level)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (number,)
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (2500,)
        assert conn.isolation_level is None  # autocommit: transactions are explicit
        conn.close()
    with pytest.raises(ValueError):
        db.connect(tmp_path / "off.sqlite", busy_seconds=1, synchronous="OFF")


def test_sqlite_read_only_changes_nothing(tmp_path: Path) -> None:
    path = _filled(tmp_path / "t.sqlite", rows=10)
    before = path.read_bytes()
    conn = db.connect(path, busy_seconds=1, read_only=True)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (10,)
    exc = _error(lambda: conn.execute("INSERT INTO t VALUES ('no')"))
    assert db.classify(exc) == "read-only"
    conn.close()
    assert path.read_bytes() == before
    exc = _error(lambda: db.connect(tmp_path / "absent.sqlite", busy_seconds=1, read_only=True))
    assert db.classify(exc) == "read-only"  # SQLITE_CANTOPEN: nothing is created
    assert not (tmp_path / "absent.sqlite").exists()


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_sqlite_connect_refuses_a_linked_file_or_companion(tmp_path: Path, suffix: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = _filled(outside / "victim.sqlite", rows=3)
    before = victim.read_bytes()
    inside = tmp_path / "store" / "db.sqlite"
    inside.parent.mkdir()
    if suffix:
        _filled(inside, rows=1)
    Path(f"{inside}{suffix}").symlink_to(victim)
    for read_only in (False, True):
        with pytest.raises(UnsafePath, match="is a symbolic link, not a regular file"):
            db.connect(inside, busy_seconds=1, read_only=read_only)
    assert victim.read_bytes() == before
    assert sorted(p.name for p in outside.iterdir()) == ["victim.sqlite"]


def test_sqlite_irregular_files_names_each_one(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    assert list(db.irregular_files(path)) == []
    path.write_bytes(b"")
    os.mkfifo(f"{path}-wal")
    Path(f"{path}-shm").mkdir()
    assert [p.name for p, _ in db.irregular_files(path)] == ["db.sqlite-wal", "db.sqlite-shm"]
    assert list(db.irregular_files(tmp_path / "file" / "below-a-file")) == []


# -- migrations ----------------------------------------------------------------------------------

STEPS = [
    db.Migration(1, "CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);"),
    db.Migration(2, "ALTER TABLE a ADD COLUMN y TEXT DEFAULT 'two;three'; "
                    "CREATE TRIGGER a_ins AFTER INSERT ON a BEGIN UPDATE a SET y = 'trig;ger' "
                    "WHERE rowid = new.rowid; END;"),
    db.Migration(3, lambda conn: conn.execute("CREATE INDEX a_x ON a(x)")),
]


def _recorded(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]


def test_sqlite_migrate_applies_each_step_once_and_records_it(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "m.sqlite", busy_seconds=1)
    assert db.migrate(conn, STEPS) == 3
    assert _recorded(conn) == [1, 2, 3]
    assert all(len(at) == 20 and at.endswith("Z") for (at,) in
               conn.execute("SELECT applied_at FROM schema_version"))
    conn.execute("INSERT INTO a (x) VALUES (2)")
    assert conn.execute("SELECT x, y FROM a ORDER BY x").fetchall() == [(1, "two;three"),
                                                                       (2, "trig;ger")]
    assert db.migrate(conn, STEPS) == 3  # nothing left: nothing runs again
    assert conn.execute("SELECT count(*) FROM a").fetchone() == (2,)
    assert db.migrate(conn, STEPS[:2]) == 3  # an older program sees a newer file: it is told
    conn.close()


def test_sqlite_a_migration_that_fails_halfway_leaves_its_version_unrecorded(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "m.sqlite", busy_seconds=1)
    broken = [STEPS[0], db.Migration(2, "CREATE TABLE b (x); INSERT INTO a VALUES (7); "
                                        "INSERT INTO nowhere VALUES (1);")]
    with pytest.raises(sqlite3.OperationalError, match="no such table: nowhere"):
        db.migrate(conn, broken)
    assert not conn.in_transaction
    assert _recorded(conn) == [1]  # step 1 committed alone, step 2 not at all
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"schema_version", "a"}
    assert conn.execute("SELECT x FROM a").fetchall() == [(1,)]

    def fails_after_writing(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO a VALUES (8)")
        raise RuntimeError("stopped part-way")

    with pytest.raises(RuntimeError, match="stopped part-way"):
        db.migrate(conn, [STEPS[0], db.Migration(2, fails_after_writing)])
    assert _recorded(conn) == [1] and conn.execute("SELECT x FROM a").fetchall() == [(1,)]
    assert db.migrate(conn, STEPS) == 3  # fixed: the next open applies it
    assert _recorded(conn) == [1, 2, 3]
    conn.close()


def test_sqlite_migrate_refuses_steps_out_of_order(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "m.sqlite", busy_seconds=1)
    for steps in ([STEPS[1], STEPS[0]], [STEPS[0], STEPS[2]], [db.Migration(0, "")]):
        with pytest.raises(ValueError):
            db.migrate(conn, steps)
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    conn.close()


def test_sqlite_migrate_adopts_a_file_made_before_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    conn = db.connect(path, busy_seconds=1)
    conn.executescript("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1), (5);"
                       "CREATE TABLE meta (v TEXT); INSERT INTO meta VALUES ('1');")
    seen: list[bool] = []

    def adopt(c: sqlite3.Connection) -> int:
        seen.append(c.in_transaction)
        return int(c.execute("SELECT v FROM meta").fetchone()[0])

    assert db.migrate(conn, STEPS, adopt=adopt) == 3
    assert seen == [True]  # in the transaction that creates schema_version
    assert _recorded(conn) == [1, 2, 3]
    assert conn.execute("SELECT x, y FROM a ORDER BY x").fetchall() == [(1, "two;three"),
                                                                       (5, "two;three")]
    assert db.migrate(conn, STEPS, adopt=adopt) == 3 and seen == [True]  # adopted once
    conn.close()


def test_sqlite_a_newer_file_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    conn = db.connect(path, busy_seconds=1)
    conn.executescript("CREATE TABLE meta (v TEXT); INSERT INTO meta VALUES ('9');")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = path.read_bytes()
    assert db.migrate(conn, STEPS, adopt=lambda c: 9) == 9
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("meta",)]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert path.read_bytes() == before
    conn.close()


def test_sqlite_statements_keeps_semicolons_inside_strings_and_triggers() -> None:
    script = ("CREATE TABLE t (x); INSERT INTO t VALUES ('a;b');\n"
              "CREATE TRIGGER g AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;;  ;\n")
    assert [s.strip() for s in db.statements(script)] == [
        "CREATE TABLE t (x);", "INSERT INTO t VALUES ('a;b');",
        "CREATE TRIGGER g AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;"]


_CONCURRENT = textwrap.dedent("""
    import sys, time
    from ctxstore import sqlite as db

    def step(n):
        def run(conn):
            conn.execute("INSERT INTO log VALUES (?, ?)", (n, sys.argv[2]))
            time.sleep(0.05)  # widen the window a second process could slip into
        return run

    steps = [db.Migration(1, "CREATE TABLE log (version INTEGER, pid TEXT)"),
             *[db.Migration(n, step(n)) for n in range(2, 6)]]
    conn = db.connect(sys.argv[1], busy_seconds=30)
    print(db.migrate(conn, steps))
""")


def test_sqlite_concurrent_migrations_run_each_step_once(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    script = tmp_path / "migrate.py"
    script.write_text(_CONCURRENT)
    procs = [subprocess.Popen([sys.executable, str(script), str(path), str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert [o.strip() for o, _ in outs] == ["5"] * 4
    conn = db.connect(path, busy_seconds=1)
    assert [r[0] for r in conn.execute("SELECT version FROM log ORDER BY version")] == [2, 3, 4, 5]
    assert _recorded(conn) == [1, 2, 3, 4, 5]
    conn.close()
