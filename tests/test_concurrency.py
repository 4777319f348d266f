"""Concurrency (RELIABILITY 2.4): many CLI writers, readers and gc at once; the writer lock.

Writers are real ``python -m ctxstore.cli add`` processes (several at a time, each writer
running its adds one after another), so every acknowledged id comes from a process that
exited 0. The harness retries E006 (lock wait exceeded) and nothing else.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import run_ctx, session_of, store_digest

from ctxstore.errors import LockConflict
from ctxstore.knowledge.nodes import add_node
from ctxstore.model import ChangeBatch, WorkCommit
from ctxstore.model.knowledge import NodeRecord
from ctxstore.repo import Store, open_store
from ctxstore.staging import commit_stage, stage_chain
from ctxstore.verify import Problem, _pointer_roots, walk_reachable

pytestmark = pytest.mark.concurrency

ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


# -- harness ------------------------------------------------------------------------------------

@dataclass
class Ledger:
    """Acknowledged writes (H4) and what the harness saw on the way."""

    acks: dict[int, list[str]] = field(default_factory=dict)  # writer -> ids in ack order
    contents: dict[str, str] = field(default_factory=dict)  # id -> content
    e006_waits: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def all_ids(self) -> list[str]:
        return [i for ids in self.acks.values() for i in ids]


def _writer(root: Path, writer: int, count: int, ledger: Ledger, lock_timeout: float) -> None:
    for seq in range(count):
        content = f"cc writer {writer} note {seq} {uuid.uuid4().hex}"
        while True:
            t0 = time.monotonic()
            res = run_ctx(["--ctx-dir", str(root), "add", "--type", "fact", content], timeout=120)
            waited = time.monotonic() - t0
            if res.returncode == 0:
                break
            # Retry on E006 only, and only after the configured wait (never earlier).
            assert res.stderr.startswith("ctx: error[E006]: "), res.stderr
            assert waited >= lock_timeout - 0.05, waited
            with ledger.lock:
                ledger.e006_waits.append(waited)
        node_id = res.stdout.strip()
        assert ULID.match(node_id), res.stdout
        with ledger.lock:
            ledger.acks.setdefault(writer, []).append(node_id)
            ledger.contents[node_id] = content


def run_writers(root: Path, writers: int, per_writer: int, *, lock_timeout: float = 10.0,
                background: list[Callable[[threading.Event], None]] = ()) -> Ledger:
    """Run ``writers`` concurrent writer loops (plus background loops until they finish)."""
    ledger = Ledger()
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=writers + len(background)) as pool:
        bg = [pool.submit(fn, stop) for fn in background]
        futs = [pool.submit(_writer, root, w, per_writer, ledger, lock_timeout)
                for w in range(writers)]
        try:
            for fut in futs:
                fut.result()
        finally:
            stop.set()
            for fut in bg:
                fut.result()
    return ledger


def state_node_ids(root: Path) -> list[str]:
    res = run_ctx(["--ctx-dir", str(root), "--format", "json", "debug", "state"])
    assert res.returncode == 0, res.stderr
    return [r["key"][1] for r in json.loads(res.stdout)["records"] if r["key"][0] == "node"]


def assert_verify_ok(root: Path) -> None:
    res = run_ctx(["--ctx-dir", str(root), "--format", "json", "debug", "verify"])
    data = json.loads(res.stdout)
    assert res.returncode == 0 and data["ok"], data["problems"]
    assert [p for p in data["problems"] if p["severity"] != "warning"] == []


def populate(store: Store) -> tuple[list[str], list[str]]:
    """S0, small: three committed nodes, two staged ones. Returns (committed, staged) ids."""
    committed = [add_node(session_of(store), "fact", f"s0 committed {i}").node.id for i in range(3)]
    commit_stage(store, "s0")
    staged = [add_node(session_of(store), "decision", f"s0 staged {i}").node.id for i in range(2)]
    return committed, staged


def set_lock_timeout(root: Path, seconds: float) -> None:
    cfg = root / "config.toml"
    text = cfg.read_text()
    new = re.sub(r"(?m)^timeout_seconds\s*=.*$", f"timeout_seconds = {seconds}", text)
    if new == text:
        new = text + f"\n[lock]\ntimeout_seconds = {seconds}\n"
    cfg.write_text(new)


# -- CC-01 N CLI writers, no lost update ----------------------------------------------------------

@pytest.mark.timeout(240)
def test_cc01_concurrent_cli_writers_lose_nothing(store: Store) -> None:
    committed, staged = populate(store)
    writers, per_writer = 8, 50
    t0 = time.monotonic()
    ledger = run_writers(store.root, writers, per_writer)
    elapsed = time.monotonic() - t0
    acked = ledger.all_ids
    assert len(acked) == writers * per_writer and len(set(acked)) == len(acked)

    # Every acknowledged note is present exactly once, with its content.
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "debug", "state"])
    assert res.returncode == 0, res.stderr
    records = [r for r in json.loads(res.stdout)["records"] if r["key"][0] == "node"]
    seen = Counter(r["key"][1] for r in records)
    assert all(seen[i] == 1 for i in acked)
    content = {r["key"][1]: r["record"]["content"] for r in records}
    assert all(content[i] == ledger.contents[i] for i in acked)
    assert set(seen) == set(acked) | set(committed) | set(staged)

    # The STAGE chain is linear and holds exactly one work commit per acknowledged write:
    # no read-modify-write of STAGE was lost.
    fresh = open_store(store.root)
    chain = stage_chain(fresh, fresh.read_stage().heads)
    assert len(chain) == len(staged) + len(acked)
    assert chain[0][1].parents == ()
    for (prev, _), (_, work) in zip(chain, chain[1:], strict=False):  # consecutive pairs
        assert work.parents == (prev,)
    per_commit = []
    for _, work in chain:
        ids = [rec.id for bid in work.change_batches
               for rec in fresh.read_typed(bid, ChangeBatch).records
               if isinstance(rec, NodeRecord)]  # (auto-links ride in the same batch)
        per_commit.append(ids)
    assert all(len(ids) == 1 for ids in per_commit)
    assert Counter(i for ids in per_commit for i in ids) == Counter(staged + acked)
    # Each writer's adds appear in the chain in the order that writer made them.
    order = {ids[0]: n for n, ids in enumerate(per_commit)}
    for ids in ledger.acks.values():
        assert [order[i] for i in ids] == sorted(order[i] for i in ids)

    assert_verify_ok(store.root)
    # The lock is free and a new write works (H5 g).
    assert run_ctx(["--ctx-dir", str(store.root), "add", "--type", "fact", "after"]).returncode == 0
    print(f"CC-01: {len(acked)} adds by {writers} writers in {elapsed:.1f}s, "
          f"{len(ledger.e006_waits)} E006 retries")


# -- CC-03 (lite) readers during writes -----------------------------------------------------------

@pytest.mark.timeout(180)
def test_cc03_readers_see_monotonic_snapshots(store: Store) -> None:
    committed, staged = populate(store)
    base = set(committed) | set(staged)
    observations: dict[int, list[set[str]]] = {}
    failures: list[str] = []

    def reader(rid: int) -> Callable[[threading.Event], None]:
        def loop(stop: threading.Event) -> None:
            seen: list[set[str]] = observations.setdefault(rid, [])
            while True:
                last = stop.is_set()
                res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "debug", "state"])
                if res.returncode != 0 or res.stderr:
                    failures.append(f"reader {rid}: exit {res.returncode}: {res.stderr}")
                    return
                recs = json.loads(res.stdout)["records"]
                seen.append({r["key"][1] for r in recs if r["key"][0] == "node"})
                if last:
                    return
        return loop

    ledger = run_writers(store.root, 4, 20, background=[reader(0), reader(1)])
    assert failures == []
    acked = set(ledger.all_ids)
    final = set(state_node_ids(store.root))
    assert final == acked | base
    for rid, snaps in observations.items():
        assert len(snaps) >= 3, f"reader {rid} only read {len(snaps)} times"
        for before, after in zip(snaps, snaps[1:], strict=False):  # consecutive pairs
            assert before <= after, f"reader {rid} lost {sorted(before - after)[:3]}"
        for snap in snaps:
            # Nothing that was never acknowledged, nothing from before lost.
            assert base <= snap <= acked | base
            # A snapshot holds a prefix of every writer's (sequential) acknowledged writes.
            for ids in ledger.acks.values():
                present = [i in snap for i in ids]
                k = sum(present)
                assert present == [True] * k + [False] * (len(ids) - k), (rid, present)
        assert snaps[-1] == final
    assert_verify_ok(store.root)


# -- CC-10 (lite) gc against writers --------------------------------------------------------------

@pytest.mark.timeout(180)
def test_cc10_aggressive_gc_never_deletes_acknowledged_objects(store: Store) -> None:
    committed, staged = populate(store)
    deleted: list[str] = []
    runs: list[int] = []
    failures: list[str] = []

    def gc_loop(stop: threading.Event) -> None:
        while not stop.is_set():
            res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "gc", "--aggressive"])
            if res.returncode == 0:
                runs.append(1)
                deleted.extend(json.loads(res.stdout)["deleted_ids"])
            elif not res.stderr.startswith("ctx: error[E006]: "):
                failures.append(f"gc exit {res.returncode}: {res.stderr}")
                return

    ledger = run_writers(store.root, 4, 20, background=[gc_loop])
    assert failures == []
    assert len(runs) >= 2, "gc never ran concurrently with the writers"
    acked = ledger.all_ids
    # Everything acknowledged is still there, with its content.
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "debug", "state"])
    records = {r["key"][1]: r["record"] for r in json.loads(res.stdout)["records"]
               if r["key"][0] == "node"}
    assert set(records) == set(acked) | set(committed) | set(staged)
    assert all(records[i]["content"] == ledger.contents[i] for i in acked)
    # No object reachable now (every acknowledged work commit, batch, commit) was deleted.
    fresh = open_store(store.root)
    problems: list[Problem] = []
    reachable = walk_reachable(fresh, _pointer_roots(fresh, problems), problems)
    assert problems == []
    assert not {bytes.fromhex(d) for d in deleted} & reachable
    chain = stage_chain(fresh, fresh.read_stage().heads)
    assert len(chain) == len(staged) + len(acked)
    assert all(isinstance(w, WorkCommit) for _, w in chain)
    assert_verify_ok(store.root)
    # gc had real work: the work commits folded by the S0 commit are gone.
    assert deleted


# -- CC-07 / CC-08 the writer lock ----------------------------------------------------------------

HOLDER = """
import os, sys
from pathlib import Path
from ctxstore import fsio
from ctxstore.repo import open_store

store = open_store(Path(sys.argv[1]))
with store.lock():
    lock = store.root / "LOCK"
    if sys.argv[2] == "reopen":
        # What a status read of the holder's pid does: open LOCK again, then close it.
        fsio.read_lock_pid(lock)
        os.close(os.open(lock, os.O_RDONLY))
        open(lock, "rb").close()
    print("locked", os.getpid(), flush=True)
    sys.stdin.read()  # hold the lock until the test closes stdin
print("released", flush=True)
"""


class Holder:
    """A separate process that holds the store's writer lock until ``release()``."""

    def __init__(self, root: Path, mode: str = "plain") -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("locked "), (line, self.proc.stderr.read())
        self.pid = int(line.split()[1])
        assert self.pid == self.proc.pid

    def release(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            assert self.proc.stdout.readline().startswith("released")
            self.proc.wait(timeout=10)


@pytest.fixture
def holder_factory():
    made: list[Holder] = []

    def make(root: Path, mode: str = "plain") -> Holder:
        h = Holder(root, mode)
        made.append(h)
        return h

    yield make
    for h in made:
        if h.proc.poll() is None:
            h.proc.kill()  # only the process this test started
            h.proc.wait()


@pytest.mark.timeout(60)
def test_cc07_reopening_lock_file_in_holder_keeps_the_lock(store: Store, holder_factory) -> None:
    holder = holder_factory(store.root, "reopen")
    # The library, from this (another) process.
    other = open_store(store.root)
    other.lock_timeout = 0.5
    t0 = time.monotonic()
    with pytest.raises(LockConflict) as info:
        with other.lock():
            pass
    assert time.monotonic() - t0 >= 0.45
    assert info.value.pid == holder.pid and info.value.code == "E006"
    # The CLI: a writer still waits and gives up with E006 naming the holder.
    set_lock_timeout(store.root, 1)
    before = store_digest(store.root)
    res = run_ctx(["--ctx-dir", str(store.root), "add", "--type", "fact", "blocked"])
    assert res.returncode != 0
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("ctx: error[E006]: ") and f"process {holder.pid}" in line, line
    assert store_digest(store.root) == before
    # Released: the next writer gets it at once.
    holder.release()
    res = run_ctx(["--ctx-dir", str(store.root), "add", "--type", "fact", "now free"])
    assert res.returncode == 0, res.stderr


CONTROL = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)
os.close(os.open(sys.argv[1], os.O_RDONLY))  # drops a POSIX record lock
print("ready", flush=True)
sys.stdin.read()
"""


def test_cc07_control_posix_lockf_would_be_caught(tmp_path: Path) -> None:
    """Power of CC-07 [M3]: with ``lockf`` the same sequence loses the lock, so a lockf-based
    store lock would fail the test above."""
    path = tmp_path / "LOCK"
    proc = subprocess.Popen([sys.executable, "-c", CONTROL, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # succeeds: the lock was lost
        finally:
            os.close(fd)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


@pytest.mark.timeout(120)
def test_cc08_bounded_wait_names_the_holder(store: Store, holder_factory) -> None:
    populate(store)
    wait = 2  # the configured wait, a fifth of the default
    # Starting Python and opening the store, around each wait: seconds on a loaded machine.
    slack = 15
    set_lock_timeout(store.root, wait)
    holder = holder_factory(store.root)
    before = store_digest(store.root)
    for args in (("add", "--type", "fact", "waits"), ("commit", "-m", "waits")):
        t0 = time.monotonic()
        res = run_ctx(["--ctx-dir", str(store.root), *args])
        elapsed = time.monotonic() - t0
        assert res.returncode not in (0, 2) and res.stdout == ""
        (line,) = res.stderr.strip().splitlines()
        assert line.startswith("ctx: error[E006]: "), line
        assert f"process {holder.pid}" in line, line
        # The wait the command reports is its own, without starting Python: never less than
        # the configured wait, and well under twice it.
        reported = re.search(r"gave up after (\d+\.\d)s", line)
        assert reported and wait <= float(reported.group(1)) < 2 * wait, line
        # Seen from outside, it ends, and not before the configured wait.
        assert wait <= elapsed < wait + slack, f"gave up after {elapsed:.2f}s, want {wait} s"
    assert store_digest(store.root) == before
    # Readers never take the lock: one that waited for it would take the whole (now longer)
    # configured wait, or fail with E006.
    set_lock_timeout(store.root, 2 * slack)
    t0 = time.monotonic()
    assert run_ctx(["--ctx-dir", str(store.root), "debug", "state"]).returncode == 0
    assert time.monotonic() - t0 < slack
    holder.release()
    assert run_ctx(["--ctx-dir", str(store.root), "add", "--type", "fact", "ok"]).returncode == 0


@pytest.mark.timeout(60)
def test_a_command_behind_a_busy_index_gives_one_clear_error(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holds the index's write lock (a long rebuild): a command that must catch
    the index up waits its busy timeout, then says so in one E006 line; nothing is lost."""
    from click.testing import CliRunner
    from conftest import invoke

    import ctxstore.index

    runner = CliRunner()
    assert invoke(runner, store, "add", "--type", "fact", "alpha beta").exit_code == 0
    assert invoke(runner, store, "search", "alpha").exit_code == 0  # the index exists, current
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(60)",
         str(store.root / "index" / "index.sqlite")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setattr(ctxstore.index, "BUSY_TIMEOUT", 0.3)
        added = invoke(runner, store, "add", "--type", "fact", "gamma delta")
        assert added.exit_code == 0  # the write itself does not need the index
        r = invoke(runner, store, "search", "gamma")
        assert r.exit_code == 1 and r.stdout == ""
        assert r.stderr.startswith("ctx: error[E006]: index is busy") and r.stderr.count("\n") == 1
    finally:
        holder.kill()
        holder.wait()
    r = invoke(runner, store, "search", "gamma")  # the lock gone: caught up, found
    assert r.exit_code == 0 and "gamma delta" in r.stdout
