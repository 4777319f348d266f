"""ctxstore.sqlite killed inside a migration: the next open finds the step unrecorded and runs it again."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxstore import sqlite as db
from tests.storage.test_sqlite import _recorded

_KILLED = textwrap.dedent("""
    import os, signal, sys
    from ctxstore import sqlite as db

    def dies(conn):
        conn.execute("CREATE TABLE half (x)")
        conn.execute("INSERT INTO a VALUES (99)")
        os.kill(os.getpid(), signal.SIGKILL)  # killed inside the migration's transaction

    conn = db.connect(sys.argv[1], busy_seconds=5)
    db.migrate(conn, [db.Migration(1, "CREATE TABLE a (x); INSERT INTO a VALUES (1)"),
                      db.Migration(2, dies)])
""")


@pytest.mark.crash
def test_sqlite_a_migration_killed_part_way_is_run_again_by_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    script = tmp_path / "killed.py"
    script.write_text(_KILLED)
    res = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, timeout=60)
    assert res.returncode == -signal.SIGKILL, res.stderr
    copy = tmp_path / "copy"
    copy.mkdir()
    for entry in tmp_path.glob("m.sqlite*"):  # what a crash left, -wal included
        shutil.copy(entry, copy / entry.name)
    conn = db.connect(copy / "m.sqlite", busy_seconds=1)
    assert _recorded(conn) == [1]
    assert conn.execute("SELECT x FROM a").fetchall() == [(1,)]
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchone() is None
    assert db.migrate(conn, [db.Migration(1, "CREATE TABLE a (x)"),
                             db.Migration(2, "CREATE TABLE half (x)")]) == 2
    assert _recorded(conn) == [1, 2]
    conn.close()
