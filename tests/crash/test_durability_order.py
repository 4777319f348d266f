"""Durability ordering from fault-shim traces (RELIABILITY.md §2.2 DO-01, DO-02, DO-03, DO-04).

A trace lists every durable-I/O operation of one command in order (``CTX_FAULT=trace``),
with the bytes written to stdout (the acknowledgement) as ``stdout`` entries. The rules:

(a) an object's temp file is created and completely written before its rename, and
    never written after it;
(b) every object renamed into place is covered by a barrier (``sync_barrier``, or an
    fsync of the object *and* of its shard directory) before the next pointer rename;
(c) every new directory's parent is fsynced (or globally synced) before the next
    pointer rename (before the ACK if none follows);
(d) every file replaced by temp + rename (pointers, config, narrative) has its temp file
    fsynced after its last write and before the rename, and its directory fsynced after
    the rename; a deleted pointer's directory is fsynced after the unlink;
(e) all of it happens before the first byte of stdout.
"""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path

import pytest
from _crashlib import (
    POINTER_FILES,
    Template,
    build_templates,
    copy_store,
    read_trace,
    run_cli,
    run_python,
    scratch_dir,
    verify_errors,
)

from ctxstore.errors import DeserializationFailed, ObjectNotFound
from ctxstore.objects import ObjectId
from ctxstore.repo import MAIN_REF

pytestmark = pytest.mark.crash

OUTSIDE = "<outside>"  # the directory that holds .ctx (not under the store)


def _is_pointer(path: str | None) -> bool:
    return path in ("HEAD", "STAGE", "local/STAGE") or (path or "").startswith("refs/")


# Loose object areas: the committed one, this clone's staging area (new objects land there;
# a ref move promotes copies into objects/), and the SCC view's derived one.
OBJECT_AREAS = ("objects/", "local/work/objects/", "DERIVED/objects/")


def _parent(path: str) -> str:
    if path == ".":
        return OUTSIDE
    return posixpath.dirname(path) or "."


def durability_problems(trace: list[dict], *, outside: str | None = None) -> list[str]:
    """Every violation of rules (a)-(e) in one command's trace."""
    ops = []
    for r in trace:
        if r["op"] == "KILL":
            continue
        r = dict(r)
        for key in ("path", "dst"):
            if outside and r.get(key) == outside:
                r[key] = OUTSIDE
        ops.append(r)
    probs: list[str] = []
    acks = [i for i, r in enumerate(ops) if r["op"] == "stdout"]
    first_ack = acks[0] if acks else len(ops)
    ptr_renames = [i for i, r in enumerate(ops) if r["op"] == "replace" and _is_pointer(r.get("dst"))]

    def next_pointer(i: int) -> int:
        later = [j for j in ptr_renames if j > i]
        return later[0] if later else first_ack

    def any_op(lo: int, hi: int, op: str, path: str | None = None) -> bool:
        return any(ops[j]["op"] == op and (path is None or ops[j].get("path") == path)
                   for j in range(lo, hi))

    for i, r in enumerate(ops):
        # Every loose object area has the same rule: objects durable (one barrier) before the
        # pointer that names them; a promoted copy before the refs/main move that needs it.
        dst_path = r.get("dst") or ""
        if r["op"] in ("replace", "link") and dst_path.startswith(OBJECT_AREAS):
            src, dst = r["path"], r["dst"]
            opened = [j for j in range(i) if ops[j]["op"] == "open_excl" and ops[j]["path"] == src]
            wrote = [j for j in range(i) if ops[j]["op"] == "write_all" and ops[j]["path"] == src]
            if not opened or not wrote or wrote[0] < opened[-1]:
                probs.append(f"(a) object {dst} renamed before its temp file was written")
            if any(ops[j]["op"] == "write_all" and ops[j]["path"] in (src, dst)
                   for j in range(i + 1, len(ops))):
                probs.append(f"(a) object {dst} written after its rename")
            end = next_pointer(i)
            if end == len(ops):
                continue  # nothing names it yet (an object-only transaction)
            covered = any_op(i + 1, end, "sync_barrier") or (
                any_op(i + 1, end, "fsync_file", dst) and any_op(i + 1, end, "fsync_dir", _parent(dst)))
            if not covered:
                probs.append(f"(b) object {dst} not durable before the next pointer rename/ACK")
        elif r["op"] == "mkdir":
            end = next_pointer(i)
            parent = _parent(r["path"])
            if not (any_op(i + 1, end, "sync_barrier") or any_op(i + 1, end, "fsync_dir", parent)):
                probs.append(f"(c) new directory {r['path']}: parent {parent} never fsynced "
                             "before the next pointer rename/ACK")
        elif r["op"] == "replace":
            src, dst = r["path"], r["dst"]
            writes = [j for j in range(i) if ops[j]["op"] == "write_all" and ops[j]["path"] == src]
            if not writes:
                probs.append(f"(d) {dst} renamed from a temp file never written")
                continue
            if not any_op(writes[-1] + 1, i, "fsync_file", src):
                probs.append(f"(d) temp file of {dst} not fsynced before its rename")
            if not (any_op(i + 1, first_ack, "fsync_dir", _parent(dst))
                    or any_op(i + 1, first_ack, "sync_barrier")):
                probs.append(f"(d/e) directory of {dst} not fsynced after its rename (before the ACK)")
        elif r["op"] == "unlink" and _is_pointer(r.get("path")):
            if not any_op(i + 1, first_ack, "fsync_dir", _parent(r["path"])):
                probs.append(f"(d) directory of deleted pointer {r['path']} not fsynced")
    late = [ops[j]["op"] + " " + str(ops[j].get("path")) for j in range(first_ack, len(ops))
            if ops[j]["op"] not in ("stdout",)]
    if late:
        probs.append(f"(e) durable operations after the ACK: {late[:5]}")
    return probs


@pytest.fixture(scope="module")
def templates():
    with scratch_dir("ctx-do-tpl-") as root:
        yield build_templates(root)


TRACED = {
    "init": (None, ["init", "--no-git"]),
    "add": ("staged", ["add", "--type", "fact", "a traced fact"]),
    "add-new-session": ("clean", ["add", "--type", "fact", "a traced fact"]),
    "add-large": ("staged", ["add", "--type", "fact", "large " * 2000]),
    "commit": ("staged", ["commit", "-m", "traced commit"]),
    "stage-compact": ("staged", ["stage", "compact", "-m", "traced compact"]),
    "stage-start": ("clean", ["stage", "start", "traced task"]),
    "stage-abort": ("staged", ["stage", "abort", "--yes", "--reason", "traced"]),
    "gc": ("garbage", ["gc", "--keep-days", "0"]),
    "recover-garbled": ("garbled", ["stage", "recover"]),
    "recover-missing": ("missing", ["stage", "recover"]),
}


def _trace_command(name: str, templates: dict[str, Template], root: Path) -> tuple[list[dict], Path]:
    tpl_name, args = TRACED[name]
    work = root / "w"
    if tpl_name is None:
        work.mkdir()
        ctx = work / ".ctx"
    else:
        ctx = copy_store(templates[tpl_name].work, work)
    tfile = root / "trace"
    res = run_cli(ctx, args, fault=f"trace:{tfile}")
    assert res.returncode == 0, res.stderr
    return read_trace(tfile), ctx


@pytest.mark.parametrize("name", list(TRACED))
def test_do01_barrier_ordering(name: str, templates: dict[str, Template]) -> None:
    with scratch_dir(f"ctx-do-{name}-") as root:
        trace, ctx = _trace_command(name, templates, root)
        assert trace, "no operations traced (is the shim loaded?)"
        assert any(r["op"] == "stdout" for r in trace), "the ACK was not traced"
        probs = durability_problems(trace, outside=str(ctx.parent))
        assert not probs, "\n".join(probs)
        assert not verify_errors(ctx)


def test_checker_catches_bad_orders() -> None:
    """The checker itself: a pointer renamed before the barrier, an unsynced temp file,
    an ACK before the directory fsync are each reported."""
    good = [
        {"op": "open_excl", "path": "objects/ab/x.tmp"},
        {"op": "write_all", "path": "objects/ab/x.tmp"},
        {"op": "replace", "path": "objects/ab/x.tmp", "dst": "objects/ab/x"},
        {"op": "sync_barrier", "path": "."},
        {"op": "open_excl", "path": "STAGE.1.tmp"},
        {"op": "write_all", "path": "STAGE.1.tmp"},
        {"op": "fsync_file", "path": "STAGE.1.tmp"},
        {"op": "replace", "path": "STAGE.1.tmp", "dst": "STAGE"},
        {"op": "fsync_dir", "path": "."},
        {"op": "stdout"},
    ]
    assert durability_problems(good) == []
    no_barrier = [r for r in good if r["op"] != "sync_barrier"]
    assert any(p.startswith("(b)") for p in durability_problems(no_barrier))
    no_fsync = [r for r in good if r["op"] != "fsync_file"]
    assert any(p.startswith("(d)") for p in durability_problems(no_fsync))
    early_ack = good[:8] + [{"op": "stdout"}, good[8]]
    assert any(p.startswith(("(d", "(e")) for p in durability_problems(early_ack))
    per_file = [{"op": "mkdir", "path": "objects/ab"}, *good[:3],
                {"op": "fsync_file", "path": "objects/ab/x"}, {"op": "fsync_dir", "path": "objects/ab"},
                *good[4:]]
    assert [p for p in durability_problems(per_file) if p.startswith("(c)")] == [
        "(c) new directory objects/ab: parent objects never fsynced before the next pointer "
        "rename/ACK"]
    per_file.insert(6, {"op": "fsync_dir", "path": "objects"})
    assert durability_problems(per_file) == []


# -- DO-02: batched durability is cheap -----------------------------------------------------------

BIG_TX = r"""
import sys
from pathlib import Path
from ctxstore.repo import open_store
store = open_store(Path(sys.argv[1]))
with store.transaction() as tx:
    for i in range(200):
        tx.put_blob(f"DO-02 object {i} ".encode() * 10)
print("done", len(tx.written))
"""

BIG_IMPORT = r"""
import sys
from pathlib import Path
from ctxstore.model.knowledge import NodeRecord
from ctxstore.ids import new_ulid
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.repo import now_ms, open_store
from ctxstore.staging import stage_records
store = open_store(Path(sys.argv[1]))
records, blobs = [], []
for i in range(200):
    data = (f"imported node {i}: " + "body " * 1000).encode()
    blobs.append(data)
    stamp = now_ms()
    records.append(NodeRecord(id=new_ulid(), type="fact", content=None,
                              content_blob=object_id_of(KIND_BLOB, data), summary=None, tags=(),
                              metadata={}, status="active", superseded_by=None, created_at=stamp,
                              updated_at=stamp, author=None, prev=None))
res = stage_records(store, records, message="import 200", blobs=blobs)
print("ACK", res.work_commit.hex())
"""

BARRIERS = ("sync_barrier", "fsync_file", "fsync_dir")


@pytest.mark.parametrize("script", ["transaction", "import"])
def test_do02_many_objects_few_barriers(script: str, templates: dict[str, Template]) -> None:
    with scratch_dir("ctx-do02-") as root:
        ctx = copy_store(templates["staged"].work, root / "w")
        tfile = root / "trace"
        code = BIG_TX if script == "transaction" else BIG_IMPORT
        res = run_python(code.replace("sys.argv[1]", repr(str(ctx))), fault=f"trace:{tfile}")
        assert res.returncode == 0, res.stderr
        trace = read_trace(tfile)
        renamed = [r for r in trace if r["op"] == "replace" and r["dst"].startswith(OBJECT_AREAS)]
        assert len(renamed) >= 200
        barriers = [r["op"] for r in trace if r["op"] in BARRIERS]
        assert len(barriers) <= 3, f"{len(barriers)} barriers for {len(renamed)} objects: {barriers}"
        assert barriers.count("sync_barrier") == 1
        assert not durability_problems(trace, outside=str(ctx.parent))
        assert not verify_errors(ctx)


# -- DO-03: readers write nothing of the store ------------------------------------------------------

@pytest.mark.parametrize("args", [["debug", "verify"], ["--format", "json", "debug", "state"],
                                  ["stage", "status"], ["debug", "refs"]])
def test_do03_readers_do_not_write_store_state(args: list[str], templates: dict[str, Template]
                                               ) -> None:
    with scratch_dir("ctx-do03-") as root:
        ctx = copy_store(templates["staged"].work, root / "w")
        tfile = root / "trace"
        res = run_cli(ctx, args, fault=f"trace:{tfile}")
        assert res.returncode == 0, res.stderr
        for r in read_trace(tfile):
            for key in ("path", "dst"):
                p = r.get(key) or ""
                assert not (p.startswith(("objects", "refs")) or p.split(".")[0] in ("HEAD", "STAGE")
                            ), f"reader {args} did {r['op']} on {p}"


# -- DO-04: refusing a bad pointer target ----------------------------------------------------------

def _tmp_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.tmp"))


@pytest.mark.parametrize("pointer", [MAIN_REF, "STAGE"])
def test_do04_pointer_to_missing_object_refused(pointer: str, store) -> None:  # type: ignore[no-untyped-def]
    before = (store.root / POINTER_FILES[pointer]).read_bytes()
    ptr = store.read_head() if pointer == MAIN_REF else store.read_stage()
    ghost = ObjectId(bytes.fromhex("ab" * 32))
    with pytest.raises(ObjectNotFound) as info:
        with store.transaction() as tx:
            tx.move_pointer(pointer, ghost, expected=ptr)
    assert info.value.code == "E001"
    assert (store.root / POINTER_FILES[pointer]).read_bytes() == before
    assert _tmp_files(store.root) == []


@pytest.mark.parametrize("pointer", [MAIN_REF, "STAGE"])
def test_do04_pointer_to_blob_refused(pointer: str, store) -> None:  # type: ignore[no-untyped-def]
    before = (store.root / POINTER_FILES[pointer]).read_bytes()
    ptr = store.read_head() if pointer == MAIN_REF else store.read_stage()
    with pytest.raises(DeserializationFailed) as info:
        with store.transaction() as tx:
            blob = tx.put_blob(b"just some bytes, not a commit")
            tx.move_pointer(pointer, blob, expected=ptr)
    assert info.value.code == "E004"
    assert (store.root / POINTER_FILES[pointer]).read_bytes() == before
    assert _tmp_files(store.root) == []
    assert not verify_errors(store.root)


def test_trace_lines_are_json_with_relative_paths(templates: dict[str, Template]) -> None:
    with scratch_dir("ctx-do-fmt-") as root:
        trace, ctx = _trace_command("add", templates, root)
        raw = (root / "trace").read_text().splitlines()
        assert all(json.loads(line) for line in raw)
        paths = [r.get("path") for r in trace if r.get("path")]
        assert paths and not any(os.path.isabs(p) for p in paths), paths
        seqs = [r["seq"] for r in trace if r["op"] != "stdout"]
        assert seqs == list(range(1, len(seqs) + 1))
