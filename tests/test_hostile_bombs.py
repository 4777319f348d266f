"""Decompression bombs cost neither memory nor a crash (issue 34 item 1; RELIABILITY: bombs).

A clone can carry any object file. A few KiB of zstd frame (a valid envelope header, then
run-length blocks of zeros) may declare a gigabyte. Before this fix every command and hook
that read it allocated what it declared: 1 GiB at the default cap, in ``ctx status`` and
both hooks, and ``internal error: MemoryError`` under an address-space limit. Now:

- a commit (or staging step) is small: a file declaring more than ``MAX_COMMIT_BYTES`` is
  E003 from what it declares, before anything is decoded;
- any other object is streamed and hashed as it decompresses when it is large, so one that
  does not hash to its name is E002 without ever being held;
- a valid object too large for the memory the process may use is E010, one line, never an
  internal error.

Every run is the installed CLI (or hook) in a child whose address space is limited with
``RLIMIT_AS``, and a process timeout: the limits are the assertion.
"""

from __future__ import annotations

import json
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import blake3
import pytest
from conftest import object_files, run_ctx

from ctxstore.init import init_store
from ctxstore.model import Commit
from ctxstore.model.knowledge import NodeRecord
from ctxstore.objects import HEADER_SIZE, KIND_BLOB, KIND_TYPED
from ctxstore.repo import MAX_COMMIT_BYTES, open_store

MIB = 1 << 20
# Python, ctx's imports and SQLite fit well within this; a gigabyte buffer does not.
ADDRESS_SPACE = 600 * MIB
_BLOCK = 128 * 1024  # zstd's largest block


def zero_frame(kind: int, payload_bytes: int, *, declare_size: bool = True,
               envelope_bytes: int | None = None) -> bytes:
    """A zstd frame of a CTXO1 envelope of ``payload_bytes`` zeros, a few KiB per GiB.

    The envelope header goes in a raw block, the zeros in run-length blocks. The frame
    declares its content size (``declare_size``) and has a 2 MiB window, as ctx's own large
    objects do. ``envelope_bytes`` is what the header claims (default: the truth).
    """
    head = struct.pack("<5sBQ", b"CTXO1", kind,
                       payload_bytes if envelope_bytes is None else envelope_bytes)
    total = HEADER_SIZE + payload_bytes
    out = bytearray(b"\x28\xb5\x2f\xfd")
    out.append(0xC0 if declare_size else 0x00)  # 8-byte content size, or none; with a window
    out.append(11 << 3)  # window descriptor: 2 ** (10 + 11) bytes
    if declare_size:
        out += struct.pack("<Q", total)
    sizes = [len(head)] + [_BLOCK] * (payload_bytes // _BLOCK) \
        + ([payload_bytes % _BLOCK] if payload_bytes % _BLOCK else [])
    for i, size in enumerate(sizes):
        last = int(i == len(sizes) - 1)
        if i == 0:
            out += (last | 0 << 1 | size << 3).to_bytes(3, "little") + head  # raw block
        else:
            out += (last | 1 << 1 | size << 3).to_bytes(3, "little") + b"\0"  # RLE block
    return bytes(out)


def zero_object_id(kind: int, payload_bytes: int) -> bytes:
    """The id of the envelope of ``payload_bytes`` zeros (hashed without holding them)."""
    hasher = blake3.blake3(struct.pack("<5sBQ", b"CTXO1", kind, payload_bytes))
    zeros = bytes(8 * MIB)
    left = payload_bytes
    while left:
        step = min(left, len(zeros))
        hasher.update(zeros[:step])
        left -= step
    return hasher.digest()


def limited(args: list[str], *, stdin: str | None = None, timeout: float = 20,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ctx ARGS`` in a child limited to ``ADDRESS_SPACE`` bytes of address space."""
    import os

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    res = subprocess.run([sys.executable, "-m", "ctxstore.cli", *args], input=stdin,
                         capture_output=True, text=True, timeout=timeout, preexec_fn=limit,
                         env={**os.environ, **(env or {})})
    assert "Traceback" not in res.stderr, res.stderr
    return res


def _store(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    work.mkdir()
    init_store(work / ".ctx", git=False)
    ctx = work / ".ctx"
    for args in (["add", "--type", "fact", "--tag", "tier:pinned", "a pinned fact"],
                 ["commit", "-m", "one"]):
        assert run_ctx(["--ctx-dir", str(ctx), *args]).returncode == 0
    return ctx


def _plant(ctx: Path, oid: bytes, frame: bytes) -> None:
    paths = object_files(ctx, oid.hex()) or [ctx / "objects" / oid.hex()[:2] / oid.hex()]
    for path in paths:
        path.parent.mkdir(exist_ok=True)
        if path.exists():
            path.chmod(0o644)
        path.write_bytes(frame)
    shutil.rmtree(ctx / "index", ignore_errors=True)  # the index would answer without it


@pytest.mark.slow
def test_commit_bomb_is_refused_from_what_it_declares(tmp_path: Path) -> None:
    # The head commit's file replaced by 32 KiB that declare 1 GiB (the default cap): before,
    # every command and hook allocated it (MemoryError under the limit: an internal error).
    ctx = _store(tmp_path)
    head = open_store(ctx).read_head().heads[0]
    frame = zero_frame(KIND_TYPED, (1 << 30) - 64)
    assert len(frame) < 40_000
    _plant(ctx, head, frame)
    limit = f"over the {MAX_COMMIT_BYTES + HEADER_SIZE}-byte limit"
    for args in (["status"], ["list"], ["log"]):
        res = limited(["--ctx-dir", str(ctx), *args], timeout=15)
        assert res.returncode == 3 and res.stdout == "", (args, res.stderr)
        assert res.stderr.startswith(f"ctx: error[E003]: object {head.hex()} is corrupt"), res.stderr
        assert limit in res.stderr
    payload = json.dumps({"session_id": "s", "cwd": str(ctx.parent), "source": "startup",
                          "prompt": "pinned fact"})
    shutil.rmtree(ctx / "index")  # the commands above left a partial index behind
    for hook in (["hook", "session-start"], ["hook", "stop", "--response", "<ctx:remember>x</ctx:remember>"]):
        res = limited(hook, stdin=payload, env={"CTX_DIR": str(ctx)}, timeout=15)
        assert res.returncode == 0, res.stderr
        message = json.loads(res.stdout)["systemMessage"]
        assert "E003" in message and limit in message, message


@pytest.mark.parametrize("declare_size", [True, False])
def test_commit_bomb_with_a_small_envelope_is_cut_at_it(tmp_path: Path, declare_size: bool) -> None:
    # The envelope claims 100 bytes, the frame holds 1 GiB: decoding stops at what was claimed.
    ctx = _store(tmp_path)
    head = open_store(ctx).read_head().heads[0]
    _plant(ctx, head, zero_frame(KIND_TYPED, (1 << 30) - 64, declare_size=declare_size,
                                 envelope_bytes=100))
    res = limited(["--ctx-dir", str(ctx), "status"], timeout=15)
    assert res.returncode == 3 and res.stderr.startswith("ctx: error[E003]:"), res.stderr


@pytest.mark.slow
def test_blob_bomb_is_hashed_as_it_streams(tmp_path: Path) -> None:
    # A blob the head commit names, replaced by 24 KiB declaring 768 MiB of zeros (under the
    # 1 GiB cap, so it must be decoded to be checked): hashed in 1 MiB pieces, never held.
    ctx = _store(tmp_path)
    store = open_store(ctx)
    blob = next(oid for oid in store.objects.iter_ids() if store.objects.read(oid).kind == KIND_BLOB)
    _plant(ctx, blob, zero_frame(KIND_BLOB, 768 * MIB))
    res = limited(["--ctx-dir", str(ctx), "debug", "cat", blob.hex()], timeout=30)
    assert res.returncode == 3, res.stderr
    assert res.stderr.startswith(f"ctx: error[E002]: object {blob.hex()} is corrupt"), res.stderr
    res = limited(["--ctx-dir", str(ctx), "--format", "json", "debug", "verify"], timeout=30)
    assert res.returncode == 3, res.stderr
    problems = json.loads(res.stdout)["problems"]
    assert ("E002", blob.hex()) in [(p["code"], p["subject"]) for p in problems]


def test_valid_object_larger_than_memory_is_e010(tmp_path: Path) -> None:
    # A valid blob of 700 MiB of zeros (it hashes to its name) read under a 600 MiB limit:
    # one E010 line naming the object, not "internal error: MemoryError".
    ctx = _store(tmp_path)
    oid = zero_object_id(KIND_BLOB, 700 * MIB)
    _plant(ctx, oid, zero_frame(KIND_BLOB, 700 * MIB))
    res = limited(["--ctx-dir", str(ctx), "debug", "cat", oid.hex()], timeout=30)
    assert res.returncode == 1 and res.stdout == "", res.stderr
    assert res.stderr.startswith("ctx: error[E010]: out of memory while reading object "
                                 f"{oid.hex()}"), res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_commit_over_the_limit_is_never_written(tmp_path: Path) -> None:
    # What a read refuses is never written: a commit that large is refused before it is.
    from ctxstore.errors import BudgetExceeded

    store = open_store(_store(tmp_path))
    huge = Commit(parents=(), timestamp_unix=0, message="m" * (MAX_COMMIT_BYTES + 1))
    with pytest.raises(BudgetExceeded), store.lock(), store.transaction() as tx:
        tx.put(huge)


def test_scan_for_unnamed_work_reads_no_bomb(tmp_path: Path) -> None:
    # `ctx stage recover` with STAGE gone scans every object file for staged work: only
    # commits are wanted, so 16 files declaring 1 GiB each are refused from what they declare
    # (before: each hashed in full, about 13 s in all; now about 0.3 s).
    ctx = _store(tmp_path)
    assert run_ctx(["--ctx-dir", str(ctx), "add", "--type", "fact", "staged"]).returncode == 0
    for i in range(16):
        oid = blake3.blake3(b"bomb %d" % i).digest()
        folder = ctx / "objects" / oid.hex()[:2]
        folder.mkdir(exist_ok=True)
        (folder / oid.hex()).write_bytes(zero_frame(KIND_BLOB, GIB_DECLARED))
    (ctx / "local" / "STAGE").unlink()
    res = limited(["--ctx-dir", str(ctx), "stage", "recover"], timeout=6)
    assert res.returncode == 0, res.stderr
    assert "staged" in run_ctx(["--ctx-dir", str(ctx), "list"]).stdout


GIB_DECLARED = (1 << 30) - 64


def test_change_batch_bomb_is_refused_from_what_it_declares(tmp_path: Path) -> None:
    # The committed change batch replaced by 32 KiB declaring 1 GiB: a batch is never written
    # over MAX_BATCH_BYTES (writes split), so a rebuild refuses it before decoding it.
    from ctxstore.repo import MAX_BATCH_BYTES

    ctx = _store(tmp_path)
    store = open_store(ctx)
    batch = store.read_typed(store.read_head().heads[0], Commit).change_batches[0]
    _plant(ctx, batch, zero_frame(KIND_TYPED, (1 << 30) - 64))
    res = limited(["--ctx-dir", str(ctx), "rebuild"], timeout=15)
    assert res.returncode == 3 and res.stdout == "", res.stderr
    assert res.stderr.startswith(f"ctx: error[E003]: object {batch.hex()} is corrupt"), res.stderr
    assert f"over the {MAX_BATCH_BYTES + HEADER_SIZE}-byte limit" in res.stderr


def _note(i: int, text: str) -> NodeRecord:
    return NodeRecord(id=f"01J{i:023d}", type="note", content=text, content_blob=None,
                      summary=None, tags=(), metadata={}, status="active", superseded_by=None,
                      created_at=1, updated_at=1, author=None, prev=None)


def test_records_over_a_batch_are_split_and_all_replayed(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # With the limit lowered, a write of 40 notes and the fold that commits them each store
    # several batches, every one under the limit, and every note is there after a replay.
    from ctxstore.errors import BudgetExceeded
    from ctxstore.model import ChangeBatch
    from ctxstore.replay import replay
    from ctxstore.repo import caps, transaction
    from ctxstore.staging import commit_stage, stage_records

    monkeypatch.setattr(transaction, "MAX_BATCH_BYTES", 2048)  # where a write splits batches
    monkeypatch.setitem(caps._TYPED_CAPS, ChangeBatch, 2048)  # what a read accepts
    store = open_store(_store(tmp_path))
    notes = [_note(i, f"note number {i} " + "x" * 80) for i in range(40)]
    with store.lock():
        staged = stage_records(store, notes, message="forty notes")
    assert len(staged.batches) > 2
    for oid in staged.batches:
        assert len(store.objects.read(oid).payload) <= 2048
    with store.lock():
        folded = commit_stage(store, "forty")
    assert folded.commit is not None
    commit = store.read_typed(folded.commit, Commit)
    assert len(commit.change_batches) > 2
    contents = {w.record.content for w in replay(store).winners.values()
                if isinstance(w.record, NodeRecord)}
    assert {n.content for n in notes} <= contents
    before = sorted(p.name for p in (store.root / "objects").rglob("*"))
    with pytest.raises(BudgetExceeded, match="over the 2048-byte limit of a change batch"), \
            store.lock():
        stage_records(store, [_note(99, "y" * 4096)], message="too big")
    assert sorted(p.name for p in (store.root / "objects").rglob("*")) == before
