"""Transcript memory indexing killed part way (kill -9): the next run gives the full result."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxstore.memory.db import memory_path
from ctxstore.memory.index import index_transcript
from tests.memory.test_memory_index import _ctx, _long_session, dump

REPO = Path(__file__).resolve().parents[2]

_CRASH_SCRIPT = """
import sys
from pathlib import Path
import ctxstore.memory.index as index
index.BATCH_BYTES = 2048
from ctxstore.memory.db import open_memory
db = open_memory(Path(sys.argv[1]), create=True)
index.index_file(db, Path(sys.argv[2]))
"""


@pytest.mark.slow
def test_index_kill_9_mid_backfill_then_rerun_gives_the_full_result(tmp_path: Path) -> None:
    data = _long_session(150).data()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    full, crashed = _ctx(tmp_path, "full"), _ctx(tmp_path, "crashed")
    index_transcript(full, path)
    killed = []
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _CRASH_SCRIPT, str(crashed), str(path)],
                                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 20
        offset = 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                conn = sqlite3.connect(memory_path(crashed), timeout=0.1)
                row = conn.execute("SELECT offset FROM index_state").fetchone()
                conn.close()
                offset = row[0] if row else 0
            except sqlite3.Error:
                pass
            if offset > (attempt + 1) * len(data) // 5:
                break
            time.sleep(0.005)
        killed.append(proc.poll() is None and offset < len(data))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert any(killed)  # at least one run died part-way
    index_transcript(crashed, path)
    assert dump(crashed) == dump(full)
