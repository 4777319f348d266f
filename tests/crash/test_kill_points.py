"""CR-01 (enumerated kill points), CR-03 (random-time SIGKILL loop), CR-06 (a damaged file
where the next object goes) and CR-09 (lock released on crash). RELIABILITY.md §2.1.

For every mutating command the number N of durable-I/O operations is counted with the
fault shim (``CTX_FAULT=count``); then for every k in 1..N, killed both *before* and
*after* the k-th operation, a fresh copy of a populated store gets the command with
``kill:*:k:<when>`` (plus a trace, which tells exactly which operations completed), and
the store is checked in-process:

* ``verify_store`` reports no error (leftover ``*.tmp`` warnings are allowed);
* every node acknowledged before the command is there with identical content;
* the in-flight command is all-or-nothing: each pointer is byte-identical to before
  unless its rename completed, and the knowledge state is the one from before or the
  one from after, as the completed renames say;
* ``stage recover`` run twice leaves the same state digest (and changes nothing);
* ``gc`` with no grace period, run on the crash state, keeps every reachable object
  and removes every leftover ``*.tmp`` file;
* a following write (``add``) and a fold (``commit``) succeed and verify.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from _crashlib import (
    POINTERS,
    PointFailures,
    Template,
    build_templates,
    child_env,
    copy_store,
    ledger_problems,
    nodes_with_text,
    pointer_bytes,
    pointer_renames,
    read_trace,
    run_cli,
    scratch_dir,
    stage_kind,
    state,
    verify_errors,
)

from ctxstore import fsio
from ctxstore.errors import LockConflict, StoreExists
from ctxstore.gc import collect_garbage
from ctxstore.history.upgrade import upgrade
from ctxstore.init import init_store
from ctxstore.knowledge.nodes import add_node
from ctxstore.objects import KIND_BLOB, canonical_bytes, object_id_of
from ctxstore.recover import recover
from ctxstore.repo import open_store
from ctxstore.session import Session
from ctxstore.staging import commit_stage

pytestmark = pytest.mark.crash

WORKERS = int(os.environ.get("CTX_CRASH_WORKERS", "0")) or max(2, min(4, os.cpu_count() or 2))
INFLIGHT = "in-flight fact written while the writer is killed: " + "abcdefghij" * 4
INFLIGHT_LARGE = "in-flight large fact (stored as a blob): " + "0123456789abcdef" * 400
FOLLOW_UP = "follow-up write after the crash"


@pytest.fixture(scope="module")
def templates():
    with scratch_dir("ctx-crash-tpl-") as root:
        yield build_templates(root)


# -- commands -------------------------------------------------------------------------------------

@dataclass
class Cmd:
    template: str | None          # None: a fresh directory (init)
    args: list[str]
    kind: str


COMMANDS: dict[str, Cmd] = {
    "init": Cmd(None, ["init", "--no-git"], "init"),
    "add": Cmd("staged", ["add", "--type", "fact", INFLIGHT], "add"),
    "add-new-session": Cmd("clean", ["add", "--type", "fact", INFLIGHT], "add"),
    "add-large": Cmd("staged", ["add", "--type", "fact", INFLIGHT_LARGE], "add"),
    "commit": Cmd("staged", ["commit", "-m", "crash commit"], "fold"),
    "stage-start": Cmd("clean", ["stage", "start", "crash task"], "start"),
    "stage-compact": Cmd("staged", ["stage", "compact", "-m", "crash compact"], "fold"),
    "stage-abort": Cmd("staged", ["stage", "abort", "--yes", "--reason", "crash"], "abort"),
    "gc": Cmd("garbage", ["gc", "--keep-days", "0"], "gc"),
    "recover-garbled-stage": Cmd("garbled", ["stage", "recover"], "recover"),
    "recover-missing-tip": Cmd("missing", ["stage", "recover"], "recover"),
    "upgrade": Cmd("legacy", ["upgrade"], "fold"),
}


def _inflight_text(cmd: Cmd) -> str | None:
    if cmd.kind != "add":
        return None
    return cmd.args[-1]


@dataclass
class Reference:
    ops: int
    after_digest: str | None


def clean_run(cmd: Cmd, tpl: Template | None, where: Path) -> Reference:
    """Run the command without a fault (counting operations); return N and the result."""
    work = where / "w"
    if tpl is None:
        work.mkdir(parents=True)
        ctx = work / ".ctx"
    else:
        ctx = copy_store(tpl.work, work)
    count = where / "count"
    res = run_cli(ctx, cmd.args, fault=f"count:{count}")
    assert res.returncode == 0, f"clean run failed: {res.stderr}"
    assert not verify_errors(ctx)
    ops = int(count.read_text())
    digest = None if cmd.kind in ("add", "init") else state(ctx).digest()
    return Reference(ops, digest)


# -- the checks after one crash -------------------------------------------------------------------

def _follow_up(ctx: Path, required: dict[str, str]) -> list[str]:
    """recover twice (idempotent), then a write and a fold succeed and verify."""
    probs: list[str] = []
    before = state(ctx).digest()
    if open_store(ctx).needs_upgrade():  # an upgrade killed before its fold: run it again
        with Session.open(ctx) as db:
            upgrade(db)
        if open_store(ctx).needs_upgrade() or state(ctx).digest() != before:
            probs.append("re-running the interrupted upgrade did not fold the received work")
            return probs
    recover(open_store(ctx))
    d1 = state(ctx).digest()
    recover(open_store(ctx))
    d2 = state(ctx).digest()
    if d1 != d2:
        probs.append("stage recover is not idempotent")
    if d1 != before:
        probs.append("stage recover changed the state of a consistent store")
    errs = verify_errors(ctx)
    if errs:
        probs.append(f"verify after recover: {errs[:3]}")
        return probs
    # gc on the crash state (no grace): it must keep everything reachable and remove
    # every leftover temp file.
    collect_garbage(open_store(ctx), keep_days=0)
    errs = verify_errors(ctx)
    if errs:
        probs.append(f"verify after gc: {errs[:3]}")
        return probs
    if state(ctx).digest() != before:
        probs.append("gc changed the state")
    leftovers = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*.tmp"))
    if leftovers:
        probs.append(f"temp files survive gc: {leftovers[:3]}")
    with Session(open_store(ctx)) as db:  # in a worker thread: its own session, closed here
        nid = add_node(db, "fact", FOLLOW_UP).node.id
    commit_stage(open_store(ctx), "fold after crash")
    errs = verify_errors(ctx)
    if errs:
        probs.append(f"verify after follow-up write: {errs[:3]}")
        return probs
    probs += ledger_problems(ctx, {**required, nid: FOLLOW_UP})
    return probs


def check_point(cmd: Cmd, tpl: Template, ref: Reference, ctx: Path, trace: list[dict]) -> list[str]:
    errs = verify_errors(ctx)
    if errs:
        return [f"verify: {errs[:3]}"]
    probs: list[str] = []
    moved = pointer_renames(trace)
    now = pointer_bytes(ctx)
    for name in POINTERS:
        if name not in moved and now[name] != tpl.pointers[name]:
            probs.append(f"{name} changed although its rename never completed")
    legacy = tpl.work / ".ctx" / "STAGE"
    if legacy.is_file() and (ctx / "STAGE").read_bytes() != legacy.read_bytes():
        probs.append("the committed .ctx/STAGE of the older layout was written")
    aborted = cmd.kind == "abort" and "STAGE" in moved
    required = tpl.committed if aborted else tpl.ledger
    probs += ledger_problems(ctx, required)
    digest = state(ctx).digest()
    if cmd.kind == "add":
        text = _inflight_text(cmd)
        nodes = nodes_with_text(ctx)
        prefix = text[:30]
        partial = [n for n, (_, t) in nodes.items() if t.startswith(prefix) and t != text]
        full = [n for n, (typ, t) in nodes.items() if t == text and typ == "fact"]
        if partial:
            probs.append(f"in-flight node present with partial content: {partial}")
        want = 1 if "STAGE" in moved else 0
        if len(full) != want:
            probs.append(f"in-flight node present {len(full)} times, expected {want} "
                         f"(completed pointer renames: {moved})")
    elif cmd.kind in ("fold", "start", "gc"):
        if digest != tpl.digest:
            probs.append("knowledge state changed")
        if cmd.kind in ("fold", "start"):
            want_stage = ("commit" if cmd.kind == "fold" else "work") if "STAGE" in moved \
                else tpl.stage
            if stage_kind(ctx) != want_stage:
                probs.append(f"STAGE names a {stage_kind(ctx)}, expected a {want_stage}")
    elif cmd.kind == "abort":
        want = ref.after_digest if "STAGE" in moved else tpl.digest
        if digest != want:
            probs.append(f"state is neither before nor after (STAGE moved: {'STAGE' in moved})")
    if probs:
        return probs
    return _follow_up(ctx, required)


def check_init_point(ctx: Path, trace: list[dict]) -> list[str]:
    probs: list[str] = []
    complete = (ctx / "HEAD").is_file() and (ctx / "refs" / "main").is_file()
    if complete:
        errs = verify_errors(ctx)
        if errs:
            return [f"init left a store that exists but does not verify: {errs[:3]}"]
        try:
            init_store(ctx, git=False)
            probs.append("re-running init on a complete store did not refuse")
        except StoreExists:
            pass
    else:
        init_store(ctx, git=False)  # finishing an interrupted init must work
        errs = verify_errors(ctx)
        if errs:
            return [f"verify after re-running init: {errs[:3]}"]
    if not (ctx / "config.toml").is_file():
        probs.append("store without config.toml")
    return probs + _follow_up(ctx, {})


def check_recover_point(cmd: Cmd, tpl: Template, ref: Reference, ctx: Path,
                        trace: list[dict]) -> list[str]:
    moved = pointer_renames(trace)
    if "STAGE" in moved:
        errs = verify_errors(ctx)
        if errs:
            return [f"STAGE was rewritten but the store does not verify: {errs[:3]}"]
    for name in ("HEAD", "refs/main"):
        if pointer_bytes(ctx)[name] != tpl.pointers[name]:
            return [f"recover changed {name}"]
    if "STAGE" not in moved and pointer_bytes(ctx)["STAGE"] != tpl.pointers["STAGE"]:
        return ["STAGE changed although its rename never completed"]
    rep = recover(open_store(ctx))  # a clean recovery after the crashed one
    errs = verify_errors(ctx)
    if errs:
        return [f"verify after recovering ({rep.state}): {errs[:3]}"]
    probs = ledger_problems(ctx, tpl.ledger)
    if state(ctx).digest() != ref.after_digest:
        probs.append("recovery after a crashed recovery differs from a clean recovery")
    return probs or _follow_up(ctx, tpl.ledger)


# -- the driver -----------------------------------------------------------------------------------

CLI_SAMPLE = 8  # every 8th point is also checked through `ctx debug verify|state`


def _cli_cross_check(ctx: Path) -> list[str]:
    """The CLI readers agree with the in-process checks: verify exits 0 (warnings only)
    and ``debug state`` reports the same digest as ``replay``."""
    res = run_cli(ctx, ["--format", "json", "debug", "verify"])
    if res.returncode != 0:
        return [f"`ctx debug verify` exit {res.returncode}: {res.stdout.strip()[:300]}"]
    doc = json.loads(res.stdout)
    if not doc["ok"] or any(p["severity"] != "warning" for p in doc["problems"]):
        return [f"`ctx debug verify` problems: {doc['problems'][:3]}"]
    res = run_cli(ctx, ["--format", "json", "debug", "state"])
    if res.returncode != 0 or json.loads(res.stdout)["digest"] != state(ctx).digest():
        return [f"`ctx debug state` disagrees (exit {res.returncode})"]
    return []


def _run_point(cmd: Cmd, tpl: Template | None, ref: Reference, root: Path, k: int, when: str,
               extra_fault: str = "") -> tuple[bool, list[str]]:
    pdir = root / f"p{k:04d}{when[0]}"
    pdir.mkdir()
    try:
        work = pdir / "w"
        if tpl is None:
            work.mkdir()
            ctx = work / ".ctx"
        else:
            ctx = copy_store(tpl.work, work)
        tfile = pdir / "trace"
        res = run_cli(ctx, cmd.args, fault=f"kill:*:{k}:{when};trace:{tfile}{extra_fault}")
        killed = res.returncode == -signal.SIGKILL
        if not killed and res.returncode != 0:
            return killed, [f"exit {res.returncode}: {res.stderr.strip()[:300]}"]
        if "Traceback" in res.stderr:
            return killed, ["traceback on stderr"]
        trace = read_trace(tfile)
        try:
            if k % CLI_SAMPLE == 1 and cmd.kind not in ("init", "recover"):
                probs = _cli_cross_check(ctx)
                if probs:
                    return killed, probs
            if cmd.kind == "init":
                return killed, check_init_point(ctx, trace)
            assert tpl is not None
            if cmd.kind == "recover":
                return killed, check_recover_point(cmd, tpl, ref, ctx, trace)
            return killed, check_point(cmd, tpl, ref, ctx, trace)
        except Exception as exc:  # a check that blows up is a finding too
            return killed, [f"check raised {type(exc).__name__}: {exc}"]
    finally:
        import shutil

        shutil.rmtree(pdir, ignore_errors=True)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_kill_at_every_operation(name: str, templates: dict[str, Template]) -> None:
    cmd = COMMANDS[name]
    tpl = templates[cmd.template] if cmd.template else None
    with scratch_dir(f"ctx-crash-{name}-") as root:
        ref = clean_run(cmd, tpl, root / "ref")
        assert ref.ops > 0
        points = [(k, when) for k in range(1, ref.ops + 1) for when in ("before", "after")]
        failures = PointFailures()
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(lambda p: _run_point(cmd, tpl, ref, root, *p), points))
        killed = 0
        for (k, when), (was_killed, probs) in zip(points, results, strict=True):
            killed += was_killed
            failures.add(f"{name} kill:*:{k}:{when}", probs)
    print(f"[crash] {name}: N={ref.ops} operations, {len(points)} crash points, {killed} killed")
    # Operation counts vary a little between runs (a new shard directory or not), so a
    # few of the last points may run to completion; most must really be crashes.
    assert killed >= len(points) - 8, f"only {killed} of {len(points)} points were killed"
    failures.assert_none(len(points))


def test_harness_catches_an_unsafe_pointer_write(templates: dict[str, Template]) -> None:
    """Self-test: with ``replace_atomic`` made non-atomic by the shim (unlink, create,
    write: a kill in between leaves STAGE missing or empty), the same checks fail."""
    cmd = COMMANDS["add"]
    tpl = templates[cmd.template]
    with scratch_dir("ctx-crash-selftest-") as root:
        ref = clean_run(cmd, tpl, root / "ref")
        points = [(k, when) for k in range(1, ref.ops + 1) for when in ("before", "after")]
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(
                lambda p: _run_point(cmd, tpl, ref, root, *p, extra_fault=";unsafe:replace_atomic"),
                points))
    caught = [(p, probs) for p, (_, probs) in zip(points, results, strict=True) if probs]
    assert len(caught) >= 2, "the kill harness did not notice a non-atomic pointer write"
    serious = [x for _, probs in caught for x in probs if "lost" in x or x.startswith("verify")]
    assert serious, f"only bookkeeping differences were noticed: {caught}"


def test_crash_point_total(templates: dict[str, Template], capsys: pytest.CaptureFixture[str]) -> None:
    """The kill tests together try at least 200 crash points.

    ``test_kill_at_every_operation`` kills each command before and after every operation of
    its clean run; this counts those points from clean runs of its own, so it holds under any
    test order or split across pytest-xdist workers.
    """
    tried: dict[str, int] = {}
    with scratch_dir("ctx-crash-total-") as root:
        for name, cmd in COMMANDS.items():
            tpl = templates[cmd.template] if cmd.template else None
            tried[name] = 2 * clean_run(cmd, tpl, root / name).ops
    total = sum(tried.values())
    with capsys.disabled():
        print(f"\n[crash] {total} crash points tried: "
              + ", ".join(f"{k}={v}" for k, v in tried.items()))
    assert total >= 200


# -- CR-03: random-time SIGKILL loop ------------------------------------------------------------

WORKER = r"""
import sys
from pathlib import Path
from ctxstore.knowledge.nodes import add_node
from ctxstore.repo import open_store
from ctxstore.session import Session
db = Session(open_store(Path(sys.argv[1])))
tag = sys.argv[2]
print("READY", flush=True)
i = 0
while True:
    text = f"{tag} note {i:05d} " + "payload " * 20
    node = add_node(db, "observation", text).node
    print(f"ACK {node.id} {i}", flush=True)
    i += 1
"""


def test_random_time_sigkill_loop(templates: dict[str, Template]) -> None:
    rng = random.Random(int(os.environ.get("CTX_CRASH_SEED", "20240603")))
    iterations = int(os.environ.get("CTX_CR03_ITERATIONS", "10"))
    # On the real disk: with real fsync costs a worker writes a few dozen notes per run
    # (on tmpfs it writes thousands, and checking them all dominates the run time).
    with scratch_dir("ctx-cr03-", on_disk=True) as root:
        ctx = copy_store(templates["staged"].work, root / "w")
        acked: dict[str, str] = dict(templates["staged"].ledger)
        total_acks = 0
        for it in range(iterations):
            tag = f"cr03-{it:02d}"
            proc = subprocess.Popen([sys.executable, "-c", WORKER, str(ctx), tag],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=child_env(), text=True)
            lines: list[str] = []
            reader = threading.Thread(target=lines.extend, args=(proc.stdout,), daemon=True)
            reader.start()
            deadline = time.monotonic() + 30
            while not any(line.startswith("READY") for line in list(lines)):
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(rng.uniform(0.2, 1.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            reader.join(timeout=30)
            proc.stderr.close()
            new = {}
            for line in lines:
                parts = line.split()
                if parts and parts[0] == "ACK" and len(parts) == 3:
                    new[parts[1]] = f"{tag} note {int(parts[2]):05d} " + "payload " * 20
            total_acks += len(new)
            acked.update(new)
            errs = verify_errors(ctx)
            assert not errs, f"iteration {it}: {errs}"
            assert not ledger_problems(ctx, acked), f"iteration {it}: {ledger_problems(ctx, acked)}"
            nodes = nodes_with_text(ctx)
            unacked = [n for n, (_, t) in nodes.items() if t.startswith(tag) and n not in new]
            assert len(unacked) <= 1, f"iteration {it}: {len(unacked)} un-ACKed notes visible"
            for n in unacked:
                assert nodes[n][1].endswith("payload " * 20), "un-ACKed note is incomplete"
        assert total_acks >= iterations, "the worker hardly ever got to write"
        d1 = state(ctx).digest()
        recover(open_store(ctx))
        assert state(ctx).digest() == d1
        assert not verify_errors(ctx)
        print(f"[crash] CR-03: {iterations} random kills, {total_acks} acknowledged notes kept")


# -- CR-06: a damaged file already sits where a new object will go -------------------------------

def _plant_variants(store, data: bytes) -> list[tuple[str, bytes]]:  # type: ignore[no-untyped-def]
    # What a correct write puts there (new objects go to the staging area).
    good = store.objects.staging._compress(canonical_bytes(KIND_BLOB, data))
    with store.transaction() as tx:
        other = tx.put_blob(b"a different, valid object")
    misnamed = store.objects.path_for(other).read_bytes()
    return [("empty", b""), ("truncated", good[: len(good) // 2]), ("misnamed", misnamed)]


@pytest.mark.parametrize("variant", ["empty", "truncated", "misnamed"])
def test_damaged_file_at_next_object_path_is_repaired(variant: str, store) -> None:  # type: ignore[no-untyped-def]
    data = f"CR-06 payload {variant} ".encode() * 50
    oid = object_id_of(KIND_BLOB, data)
    planted = dict(_plant_variants(store, data))[variant]
    path = store.objects.path_for(oid)
    fsio.ensure_dir(path.parent)
    path.write_bytes(planted)
    os.chmod(path, 0o444)
    with store.transaction() as tx:
        got = tx.put_blob(data)
    assert got == oid
    assert store.objects.read(oid).payload == data  # the object verifies afterwards
    assert not verify_errors(store.root)


@pytest.mark.parametrize("variant", ["empty", "truncated", "misnamed"])
def test_damaged_file_at_next_blob_path_cli_add(variant: str, store) -> None:  # type: ignore[no-untyped-def]
    """Through ``ctx add``: a large node's content blob id is predictable."""
    text = f"CR-06 large node content ({variant}) " + "lorem ipsum " * 600
    data = text.encode()
    oid = object_id_of(KIND_BLOB, data)
    planted = dict(_plant_variants(store, data))[variant]
    path = store.objects.path_for(oid)
    fsio.ensure_dir(path.parent)
    path.write_bytes(planted)
    res = run_cli(store.root, ["add", "--type", "fact", text])
    if res.returncode == 0:
        nid = res.stdout.strip()
        assert store.objects.read(oid).payload == data
        assert nodes_with_text(store.root)[nid][1] == text
        assert not verify_errors(store.root)
    else:  # the allowed alternative: E002 naming the id, no pointer moved
        assert "E002" in res.stderr and oid.hex() in res.stderr, res.stderr
        assert state(store.root).nodes == {}


# -- CR-09: the lock dies with its holder ---------------------------------------------------------

HOLDER = r"""
import sys, time
from pathlib import Path
from ctxstore.repo import open_store
from ctxstore.session import Session
store = open_store(Path(sys.argv[1]))
with store.lock():
    print("LOCKED", flush=True)
    time.sleep(120)
"""


def test_lock_released_when_holder_is_killed(store) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True)
    try:
        assert proc.stdout.readline().strip() == "LOCKED", proc.stderr.read()
        # while it lives, the lock is really held
        with pytest.raises(LockConflict):
            with fsio.hold_lock(store.root / "LOCK", timeout=0.2):
                pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    # Free at once, not after waiting out a stale holder: the wait allowed is far longer than
    # the bound, which only leaves room for a loaded machine.
    t0 = time.monotonic()
    with fsio.hold_lock(store.root / "LOCK", timeout=30.0):
        waited = time.monotonic() - t0
    assert waited < 5, f"lock acquired only after {waited:.3f}s"
    t0 = time.monotonic()
    res = run_cli(store.root, ["add", "--type", "fact", "written after the holder died"])
    elapsed = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr  # no stale-lock message
    # Under the store's lock wait (10 s): it did not wait out a stale lock. The rest is
    # starting Python, seconds on a loaded machine.
    assert elapsed < 8, f"ctx add took {elapsed:.2f}s"
    assert res.stdout.strip() in state(store.root).nodes
