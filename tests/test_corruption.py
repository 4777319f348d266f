"""Corruption (RELIABILITY 2.5): damaged objects, garbage pointers, hostile HEAD, deep history.

Every case runs the real CLI (in-process through CliRunner, plus spot checks in real processes)
against a populated store: committed nodes in two commits, a large node stored as a
blob, and two staged work commits (one with a blob). The invariants checked are I1, I4, I10:
damage is always detected and named with its code, never a traceback, and a command that
fails because of it changes nothing on disk.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from conftest import invoke, object_file, object_files, run_ctx, stage_file, store_digest

from ctxstore.init import init_store
from ctxstore.model import Commit, WorkCommit, codec
from ctxstore.objects import HEADER_SIZE, KIND_BLOB, KIND_TYPED, ObjectId
from ctxstore.repo import Store, open_store

ERR_LINE = re.compile(r"^ctx: error\[(E\d{3})\]: ")
CORRUPT_CODES = ("E002", "E003")


# -- the populated store ------------------------------------------------------------------------

@dataclass(frozen=True)
class Pop:
    """A populated store and the ids of its interesting parts."""

    root: Path
    committed_ids: tuple[str, ...]
    staged_ids: tuple[str, ...]
    big_staged: str  # staged node whose content is the staged blob
    targets: dict[str, str]  # target name -> object id (hex)


def _ctx_ok(root: Path, *args: str, env: dict[str, str]) -> str:
    res = run_ctx(["--ctx-dir", str(root), *args], env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Pop:
    """Built once per module through the CLI; each test works on a copy."""
    base = tmp_path_factory.mktemp("corruption-template")
    env = {"HOME": str(base / "home"), "TZ": "UTC", "LC_ALL": "C.UTF-8"}
    (base / "home").mkdir()
    work = base / "work"
    work.mkdir()
    init_store(work / ".ctx", git=False)
    root = work / ".ctx"
    committed = [_ctx_ok(root, "add", "--type", "fact", f"committed fact {i}", env=env)
                 for i in range(3)]
    _ctx_ok(root, "commit", "-m", "c1", env=env)
    committed.append(_ctx_ok(root, "add", "--type", "observation", "committed blob " + "B" * 6000,
                             env=env))
    committed.append(_ctx_ok(root, "add", "--type", "decision", "a committed decision", env=env))
    _ctx_ok(root, "commit", "-m", "c2", env=env)
    staged = [_ctx_ok(root, "add", "--type", "fact", "staged fact one", env=env)]
    big = _ctx_ok(root, "add", "--type", "task", "staged blob " + "S" * 6000, env=env)
    staged.append(big)

    store = open_store(root)
    c2_id = store.read_head().single
    c2 = store.read_typed(c2_id, Commit)
    c1 = store.read_typed(ObjectId(c2.parents[0]), Commit)
    w2_id = store.read_stage().single
    w2 = store.read_typed(w2_id, WorkCommit)
    w1_id = ObjectId(w2.parents[0])
    w1 = store.read_typed(w1_id, WorkCommit)
    assert len(w2.payload) == 1 and len(w1.change_batches) == 1 and len(c1.change_batches) == 1
    targets = {
        "head_commit": c2_id.hex(),             # the commit refs/main names
        "history_commit": c2.parents[0].hex(),  # a commit further down HEAD's path
        "work_commit": w1_id.hex(),             # a work commit on STAGE's path
        "stage_tip": w2_id.hex(),               # the work commit STAGE names
        "staged_batch": w1.change_batches[0].hex(),
        "committed_batch": c1.change_batches[0].hex(),
        "blob": w2.payload[0].hex(),            # content of the big staged node
    }
    # Sanity: the template verifies.
    res = run_ctx(["--ctx-dir", str(root), "debug", "verify"], env=env)
    assert res.returncode == 0, res.stdout
    return Pop(root, tuple(committed), tuple(staged), big, targets)


@pytest.fixture
def pop(template: Pop, tmp_path: Path) -> Pop:
    """A private copy of the populated store."""
    dest = tmp_path / "copy" / ".ctx"
    # Without the template's derived index: it was made for another copy of the store, so the
    # first command would rebuild it and say so. Each copy builds its own, silently.
    shutil.copytree(template.root, dest, symlinks=True,
                    ignore=lambda folder, names: ["index"] if Path(folder) == template.root else [])
    return Pop(dest, template.committed_ids, template.staged_ids, template.big_staged,
               dict(template.targets))


# -- helpers ------------------------------------------------------------------------------------

def obj_path(root: Path, oid: str) -> Path:
    return object_file(root, oid)


def writable(path: Path) -> Path:
    os.chmod(path, 0o644)  # objects are 0444; root ignores that, but be explicit
    return path


def ctx(root: Path, *args: str):
    """Run the CLI in-process; an exception escaping the error funnel fails the test."""
    res = invoke(CliRunner(), root, *args)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    return res


def verify(root: Path) -> tuple[int, list[dict]]:
    """``ctx debug verify --format json``: exit code and the non-warning problems."""
    res = ctx(root, "--format", "json", "debug", "verify")
    data = json.loads(res.stdout)
    assert data["ok"] == (res.exit_code == 0)
    return res.exit_code, [p for p in data["problems"] if p["severity"] != "warning"]


def assert_error_line(res, codes: tuple[str, ...], *needles: str) -> str:
    """Non-zero exit (never 2), exactly one ``ctx: error[E00x]`` line naming ``needles``."""
    assert res.exit_code not in (0, 2), (res.exit_code, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    match = ERR_LINE.match(lines[0])
    assert match, lines[0]
    assert match.group(1) in codes, lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return match.group(1)


def assert_verify_names_object(root: Path, oid: str, codes: tuple[str, ...]) -> None:
    """verify exits 3 and every error it lists is about ``oid`` (and nothing else)."""
    code, problems = verify(root)
    assert code == 3, problems
    assert problems, "verify found nothing"
    for p in problems:
        assert p["code"] in codes, p
        assert p["subject"] in (oid, "refs/main", "STAGE", "HEAD"), p
        assert oid in p["subject"] or oid in p["message"], p
    # A damaged object is listed under its own id, as an error (not as gc-able garbage); a
    # missing one named directly by a pointer is listed under the pointer's name.
    assert any(p["subject"] == oid for p in problems) or (
        codes == ("E001",) and any(p["subject"] in ("refs/main", "STAGE") for p in problems)), problems


# What each target is needed by (reads and writes that must fail), and commands that must not
# care about it. Writes are checked to leave every committed file unchanged.
NEEDED_BY: dict[str, list[tuple[str, ...]]] = {
    "head_commit": [("debug", "state"), ("log",), ("commit", "-m", "x"),
                    ("add", "--type", "fact", "new")],
    "history_commit": [("debug", "state"), ("log",)],
    "work_commit": [("debug", "state"), ("log",), ("commit", "-m", "x"), ("stage", "status")],
    "stage_tip": [("debug", "state"), ("log",), ("commit", "-m", "x"), ("stage", "status"),
                  ("add", "--type", "fact", "new")],
    "staged_batch": [("debug", "state"), ("log",), ("commit", "-m", "x")],
    "committed_batch": [("debug", "state")],
    "blob": [("debug", "cat", "{oid}"), ("show", "{big}")],
}
NOT_NEEDED_BY: dict[str, list[tuple[str, ...]]] = {
    "head_commit": [("debug", "refs")],
    "history_commit": [("stage", "status"), ("debug", "refs")],
    "work_commit": [("debug", "refs")],
    "stage_tip": [("debug", "refs")],
    "staged_batch": [("debug", "refs")],
    "committed_batch": [("log",), ("stage", "status")],
    "blob": [("debug", "state"), ("log",), ("stage", "status")],
}


def check_damaged(pop: Pop, name: str, codes: tuple[str, ...]) -> None:
    """The shared assertions of CO-01/02/03/04 for one damaged target."""
    oid = pop.targets[name]
    assert_verify_names_object(pop.root, oid, codes)
    shutil.rmtree(pop.root / "index", ignore_errors=True)  # `show` must read the blob itself
    before = store_digest(pop.root)
    for args in NEEDED_BY[name]:
        args = tuple(a.format(oid=oid, big=pop.big_staged) for a in args)
        res = ctx(pop.root, *args)
        assert_error_line(res, codes, oid)
        assert res.stdout == "" or args[0] in ("show",), (args, res.stdout)
    for args in NOT_NEEDED_BY[name]:
        res = ctx(pop.root, *args)
        assert res.exit_code == 0, (args, res.output)
    # Failed writes and reads changed nothing that is committed.
    assert store_digest(pop.root) == before


# -- CO-01 bit flips ----------------------------------------------------------------------------

TARGETS = list(NEEDED_BY)
FLIP_AT = {"magic": 0, "frame_header": 4, "first_block": 7, "middle": "half", "last": -1,
           "last4": -4}


@pytest.mark.parametrize("where", list(FLIP_AT))
@pytest.mark.parametrize("name", TARGETS)
def test_co01_bit_flip(pop: Pop, name: str, where: str) -> None:
    path = writable(obj_path(pop.root, pop.targets[name]))
    data = bytearray(path.read_bytes())
    off = FLIP_AT[where]
    off = len(data) // 2 if off == "half" else off % len(data)
    data[off] ^= 0x01
    path.write_bytes(bytes(data))
    check_damaged(pop, name, CORRUPT_CODES)


# -- CO-02 truncation ---------------------------------------------------------------------------

CUT_TO = {"zero": 0, "one": 1, "four": 4, "half": "half", "minus1": -1}


@pytest.mark.parametrize("cut", list(CUT_TO))
@pytest.mark.parametrize("name", TARGETS)
def test_co02_truncation(pop: Pop, name: str, cut: str) -> None:
    path = writable(obj_path(pop.root, pop.targets[name]))
    data = path.read_bytes()
    n = CUT_TO[cut]
    n = len(data) // 2 if n == "half" else (len(data) + n if n < 0 else n)
    path.write_bytes(data[:n])
    check_damaged(pop, name, CORRUPT_CODES)


@pytest.mark.parametrize("name,damage", [("head_commit", "flip"), ("stage_tip", "zero"),
                                         ("staged_batch", "half"), ("blob", "flip")])
def test_co01_co02_real_process(pop: Pop, name: str, damage: str) -> None:
    """The same through `python -m ctxstore.cli` (a real process: no traceback, one line)."""
    oid = pop.targets[name]
    path = writable(obj_path(pop.root, oid))
    data = path.read_bytes()
    if damage == "flip":
        data = data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0x80]) + data[len(data) // 2 + 1:]
    else:
        data = data[:0 if damage == "zero" else len(data) // 2]
    path.write_bytes(data)
    res = run_ctx(["--ctx-dir", str(pop.root), "debug", "verify"])
    assert res.returncode == 3
    errors = [ln for ln in res.stdout.splitlines() if ln.startswith("error ")]
    assert errors and all(oid in ln and ln.split()[1] in CORRUPT_CODES for ln in errors), res.stdout
    shutil.rmtree(pop.root / "index", ignore_errors=True)
    before = store_digest(pop.root)
    cmd = ["debug", "cat", oid] if name == "blob" else ["commit", "-m", "x"]
    res = run_ctx(["--ctx-dir", str(pop.root), *cmd])
    assert res.returncode not in (0, 2)
    (line,) = res.stderr.strip().splitlines()
    assert ERR_LINE.match(line) and oid in line, line
    assert store_digest(pop.root) == before


# -- CO-03 missing object -----------------------------------------------------------------------

@pytest.mark.parametrize("name", TARGETS)
def test_co03_missing_object(pop: Pop, name: str) -> None:
    for path in object_files(pop.root, pop.targets[name]):
        path.unlink()
    # A missing parent (or base) commit breaks the history: E009 (issue 17 item 9), and E001
    # where a pointer names it; any other missing object E001.
    codes = {"history_commit": ("E009",), "head_commit": ("E001", "E009"),
             "work_commit": ("E001", "E009")}.get(name, ("E001",))
    check_damaged(pop, name, codes)


def test_co03_missing_object_is_named_in_state(pop: Pop) -> None:
    oid = pop.targets["history_commit"]
    for path in object_files(pop.root, oid):
        path.unlink()
    code, problems = verify(pop.root)
    assert code == 3
    assert [(p["code"], p["subject"]) for p in problems] == [("E009", oid)]
    assert pop.targets["head_commit"] in problems[0]["message"]  # who refers to it
    res = ctx(pop.root, "debug", "state")
    assert_error_line(res, ("E009",), oid, "is missing", pop.targets["head_commit"])
    assert res.exit_code == 3


# -- CO-04 misnamed object ----------------------------------------------------------------------

@pytest.mark.parametrize("name", TARGETS)
def test_co04_misnamed_object(pop: Pop, name: str) -> None:
    """X's file holds the bytes of another valid object Y: E002 naming X."""
    x = pop.targets[name]
    y = pop.targets["committed_batch" if name != "committed_batch" else "staged_batch"]
    path = writable(obj_path(pop.root, x))
    path.write_bytes(obj_path(pop.root, y).read_bytes())
    check_damaged(pop, name, ("E002",))
    code, problems = verify(pop.root)
    own = [p for p in problems if p["subject"] == x]
    assert own and y in own[0]["message"]  # "content hashes to Y"


# -- trailing data, concatenated frames, zip bombs -----------------------------------------------

@pytest.mark.parametrize("extra", ["garbage", "second_frame", "zero_byte"])
@pytest.mark.parametrize("name", ["head_commit", "stage_tip", "blob"])
def test_trailing_data_after_frame_is_e003(pop: Pop, name: str, extra: str) -> None:
    oid = pop.targets[name]
    path = writable(obj_path(pop.root, oid))
    data = path.read_bytes()
    tail = {"garbage": b"GARBAGE", "second_frame": data, "zero_byte": b"\0"}[extra]
    path.write_bytes(data + tail)
    check_damaged(pop, name, ("E003",))


def _hwm_runner(tmp_path: Path) -> Path:
    """A wrapper that runs the CLI and records the process's peak RSS (VmHWM, KiB)."""
    script = tmp_path / "hwm_ctx.py"
    script.write_text(
        "import atexit, sys\n"
        "out = sys.argv[1]\n"
        "def _report():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM'):\n"
        "            open(out, 'w').write(line.split()[1])\n"
        "atexit.register(_report)\n"
        "sys.argv = ['ctx'] + sys.argv[2:]\n"
        "from ctxstore.cli import main\n"
        "main()\n")
    return script


def _run_measured(tmp_path: Path, root: Path, *args: str) -> tuple[subprocess.CompletedProcess, int]:
    script = _hwm_runner(tmp_path)
    out = tmp_path / "hwm.txt"
    proc = subprocess.run([sys.executable, str(script), str(out), "--ctx-dir", str(root), *args],
                          capture_output=True, timeout=120)
    assert b"Traceback" not in proc.stderr, proc.stderr
    return proc, int(out.read_text()) // 1024  # MiB


def _streamed_zero_frame(envelope_len: int, zeros_mib: int, *, content_size: bool) -> bytes:
    """One zstd frame: a CTXO1 blob header declaring ``envelope_len`` + ``zeros_mib`` MiB of
    zeros, streamed so the parent never holds the expanded bytes."""
    buf = io.BytesIO()
    total = HEADER_SIZE + (zeros_mib << 20)
    comp = zstandard.ZstdCompressor(level=3, write_content_size=content_size)
    with comp.stream_writer(buf, closefd=False, size=total if content_size else -1) as w:
        w.write(struct.pack("<5sBQ", b"CTXO1", KIND_BLOB, envelope_len))
        chunk = bytes(1 << 20)
        for _ in range(zeros_mib):
            w.write(chunk)
    return buf.getvalue()


def _set_max_object_bytes(root: Path, value: int) -> None:
    cfg = root / "config.toml"
    text = cfg.read_text()
    new = re.sub(r"(?m)^max_object_bytes\s*=.*$", f"max_object_bytes = {value}", text)
    if new == text:
        new = text + f"\n[storage]\nmax_object_bytes = {value}\n"
    cfg.write_text(new)


def test_zip_bomb_declaring_huge_size_is_refused_unallocated(pop: Pop, tmp_path: Path) -> None:
    """A 17-byte frame that declares 1 TiB of content (crafted header + one RLE block)."""
    oid = pop.targets["blob"]
    bomb = (b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", 1 << 40)
            + bytes([(1 | 1 << 1 | 100 << 3) & 0xFF, (100 << 3) >> 8, 0]) + b"\0")
    assert zstandard.get_frame_parameters(bomb).content_size == 1 << 40
    writable(obj_path(pop.root, oid)).write_bytes(bomb)
    for args in (("debug", "verify"), ("debug", "cat", oid)):
        t0 = time.monotonic()
        proc, peak = _run_measured(tmp_path, pop.root, *args)
        assert proc.returncode == 3, proc
        text = (proc.stdout + proc.stderr).decode()
        assert f"E003 {oid}" in text or f"error[E003]: object {oid}" in text, text
        assert "declares 1099511627776 bytes" in text
        assert peak < 150, f"peak RSS {peak} MiB"
        assert time.monotonic() - t0 < 20


def test_zip_bomb_over_configured_limit_is_refused(pop: Pop, tmp_path: Path) -> None:
    """64 MiB of zeros (2 KiB compressed) with [storage] max_object_bytes = 1 MiB, with and
    without a declared content size: E003, and memory stays near the limit."""
    oid = pop.targets["blob"]
    _set_max_object_bytes(pop.root, 1 << 20)
    for declared in (True, False):
        frame = _streamed_zero_frame(64 << 20, 64, content_size=declared)
        assert len(frame) < 8192
        writable(obj_path(pop.root, oid)).write_bytes(frame)
        proc, peak = _run_measured(tmp_path, pop.root, "debug", "cat", oid)
        assert proc.returncode == 3
        (line,) = proc.stderr.decode().strip().splitlines()
        assert line.startswith(f"ctx: error[E003]: object {oid} is corrupt"), line
        assert peak < 120, f"peak RSS {peak} MiB"
        code, problems = verify(pop.root)
        assert code == 3 and [(p["code"], p["subject"]) for p in problems] == [("E003", oid)]


def test_zip_bomb_without_size_is_capped_by_its_envelope(pop: Pop, tmp_path: Path) -> None:
    """DESIGN §3: the output cap is the envelope's length + header (and the configured
    maximum). A frame with no declared size whose envelope claims 100 bytes but which expands
    to 256 MiB must be refused without decoding the 256 MiB (default max is 1 GiB)."""
    oid = pop.targets["blob"]
    frame = _streamed_zero_frame(100, 256, content_size=False)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    writable(obj_path(pop.root, oid)).write_bytes(frame)
    proc, peak = _run_measured(tmp_path, pop.root, "debug", "cat", oid)
    assert proc.returncode == 3
    (line,) = proc.stderr.decode().strip().splitlines()
    assert line.startswith(f"ctx: error[E003]: object {oid} is corrupt"), line
    assert peak < 150, f"peak RSS {peak} MiB: the frame was expanded past its envelope"


# -- CO-05 garbage refs -------------------------------------------------------------------------

def _garbage(hexid: str) -> dict[str, bytes | None]:
    h = hexid.encode()
    return {
        "empty": b"",
        "newline": b"\n",
        "hex63": h[:63] + b"\n",
        "hex65": h + b"0\n",
        "upper": h.upper() + b"\n",
        "xyz": b"xyz\n",
        "hex_space_lf": h + b" \n",
        "bom_hex": b"\xef\xbb\xbf" + h + b"\n",
        "nul": b"\0" * 65,
        "hex_nul": h + b"\0\n",
        "one_mib": b"a" * (1 << 20),
        "directory": None,
    }


GARBAGE_NAMES = list(_garbage("0" * 64))


@pytest.mark.parametrize("case", GARBAGE_NAMES)
@pytest.mark.parametrize("ref", ["refs/main", "STAGE"])
def test_co05_garbage_ref(pop: Pop, ref: str, case: str) -> None:
    path = stage_file(pop.root) if ref == "STAGE" else pop.root / ref
    data = _garbage(path.read_text().strip())[case]
    path.unlink()
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    code, problems = verify(pop.root)
    assert code == 3
    assert any(p["code"] == "E005" and (p["subject"] == ref or f"pointer {ref} " in p["message"])
               for p in problems), problems
    before = store_digest(pop.root)
    for args in (("debug", "state"), ("log",), ("stage", "status"),
                 ("add", "--type", "fact", "must not land"), ("commit", "-m", "x")):
        res = ctx(pop.root, *args)
        assert_error_line(res, ("E005",), f"pointer {ref} ")
        # A write never replaces (or "repairs") a pointer it could not parse.
        if data is None:
            assert path.is_dir()
        else:
            assert path.read_bytes() == data
    assert store_digest(pop.root) == before, "a failed write left files behind"


@pytest.mark.parametrize("form", ["hex", "hex_lf", "hex_crlf"])
@pytest.mark.parametrize("ref", ["refs/main", "STAGE"])
def test_co05_accepted_ref_forms(pop: Pop, ref: str, form: str) -> None:
    path = stage_file(pop.root) if ref == "STAGE" else pop.root / ref
    hexid = path.read_text().strip()
    path.write_bytes(hexid.encode() + {"hex": b"", "hex_lf": b"\n", "hex_crlf": b"\r\n"}[form])
    assert verify(pop.root) == (0, [])
    state = json.loads(ctx(pop.root, "--format", "json", "debug", "state").stdout)
    ids = {r["key"][1] for r in state["records"] if r["key"][0] == "node"}
    assert set(pop.committed_ids + pop.staged_ids) <= ids
    assert ctx(pop.root, "log").exit_code == 0
    res = ctx(pop.root, "add", "--type", "fact", "after an odd but valid pointer")
    assert res.exit_code == 0, res.output
    assert verify(pop.root) == (0, [])


# -- CO-06 pointer to a missing or non-commit object ---------------------------------------------

@pytest.mark.parametrize("what", ["missing", "blob", "staged_batch", "work_commit"])
def test_co06_main_names_missing_or_non_commit(pop: Pop, what: str) -> None:
    oid = "ab" * 32 if what == "missing" else pop.targets[what]
    want = ("E001",) if what == "missing" else ("E004",)
    (pop.root / "refs/main").write_text(oid + "\n")
    code, problems = verify(pop.root)
    assert code == 3
    assert any(p["code"] in want and p["subject"] == "refs/main" and oid in p["message"]
               for p in problems), problems
    before = store_digest(pop.root)
    if what != "work_commit":  # a work commit still replays (verify flags it, see above)
        assert_error_line(ctx(pop.root, "debug", "state"), want, oid)
        assert_error_line(ctx(pop.root, "log"), want, oid)
    # Writes refuse to build on a HEAD that is not a commit: no acknowledged write whose
    # work commit has a missing or mistyped base.
    for args in (("add", "--type", "fact", "on a broken HEAD"), ("commit", "-m", "x"),
                 ("stage", "abort"), ("stage", "compact", "-m", "x")):
        assert_error_line(ctx(pop.root, *args), want, oid)
    # Same for a new session (nothing staged yet).
    stage_file(pop.root).write_text(pop.targets["head_commit"] + "\n")
    before = store_digest(pop.root)
    assert_error_line(ctx(pop.root, "stage", "start", "a task"), want, oid)
    assert_error_line(ctx(pop.root, "add", "--type", "fact", "x"), want, oid)
    assert store_digest(pop.root) == before


@pytest.mark.parametrize("what", ["missing", "blob", "staged_batch", "committed_batch"])
def test_co06_stage_names_missing_or_non_commit_then_recover(pop: Pop, what: str) -> None:
    oid = "cd" * 32 if what == "missing" else pop.targets[what]
    want = ("E001",) if what == "missing" else ("E004",)
    stage_file(pop.root).write_text(oid + "\n")
    code, problems = verify(pop.root)
    assert code == 3
    assert any(p["code"] in want and p["subject"] == "STAGE" and oid in p["message"]
               for p in problems), problems
    before = store_digest(pop.root)
    assert_error_line(ctx(pop.root, "debug", "state"), want, oid)
    assert_error_line(ctx(pop.root, "add", "--type", "fact", "x"), want, oid)
    assert store_digest(pop.root) == before

    res = ctx(pop.root, "--format", "json", "stage", "recover")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["state"] in ("repaired", "reset")
    assert oid in rep["lost"]
    assert verify(pop.root) == (0, [])
    state = json.loads(ctx(pop.root, "--format", "json", "debug", "state").stdout)
    ids = {r["key"][1] for r in state["records"] if r["key"][0] == "node"}
    # Both staged work commits are intact: none of their records is lost.
    assert set(pop.committed_ids + pop.staged_ids) <= ids
    assert ctx(pop.root, "add", "--type", "fact", "after recovery").exit_code == 0
    assert verify(pop.root) == (0, [])


@pytest.mark.parametrize("lost", ["stage_tip", "work_commit"])
def test_co06_recover_keeps_every_intact_work_commit(pop: Pop, lost: str) -> None:
    """A damaged work commit on STAGE's path: recover re-links the intact ones and reports
    the damaged one; verify passes afterwards."""
    oid = pop.targets[lost]
    path = writable(obj_path(pop.root, oid))
    path.write_bytes(path.read_bytes()[:3])
    res = ctx(pop.root, "--format", "json", "stage", "recover")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["state"] == "repaired" and rep["lost"] == [oid] and rep["kept"] == 1
    assert verify(pop.root) == (0, [])
    state = json.loads(ctx(pop.root, "--format", "json", "debug", "state").stdout)
    ids = {r["key"][1] for r in state["records"] if r["key"][0] == "node"}
    survivor = pop.staged_ids[0] if lost == "stage_tip" else pop.staged_ids[1]
    gone = pop.staged_ids[1] if lost == "stage_tip" else pop.staged_ids[0]
    assert set(pop.committed_ids) | {survivor} <= ids and gone not in ids
    # Idempotent.
    again = json.loads(ctx(pop.root, "--format", "json", "stage", "recover").stdout)
    assert again["state"] == "clean" and again["kept"] == 1


# -- CO-07 hostile HEAD -------------------------------------------------------------------------

AUDIT_WRAPPER = (
    "import sys\n"
    "log = open(sys.argv[1], 'w')\n"
    "def hook(event, args):\n"
    "    if event == 'open' and isinstance(args[0], (str, bytes)):\n"
    "        log.write(str(args[0]) + '\\n'); log.flush()\n"
    "sys.addaudithook(hook)\n"
    "sys.argv = ['ctx'] + sys.argv[2:]\n"
    "from ctxstore.cli import main\n"
    "main()\n")


@pytest.mark.parametrize("head", [b"ref: refs/../../x\n", b"ref: /etc/passwd\n",
                                  b"ref: refs/missing\n", b"ref: ../refs/main\n",
                                  b"refs/main\n", b"", b"ref: refs/main\nref: refs/x\n"])
def test_co07_hostile_head(pop: Pop, head: bytes, tmp_path: Path) -> None:
    (pop.root / "HEAD").write_bytes(head)
    (pop.root.parent / "x").write_text("outside\n")  # what refs/../../x would reach
    code, problems = verify(pop.root)
    assert code == 3 and any(p["code"] == "E005" for p in problems), problems
    before = store_digest(pop.root)
    for args in (("debug", "state"), ("log",), ("add", "--type", "fact", "x"),
                 ("commit", "-m", "x")):
        assert_error_line(ctx(pop.root, *args), ("E005",))
    assert store_digest(pop.root) == before
    assert (pop.root / "HEAD").read_bytes() == head
    # The traversal forms are refused before any path is opened (audit log of a real process).
    wrapper = tmp_path / "audit_ctx.py"
    wrapper.write_text(AUDIT_WRAPPER)
    log = tmp_path / "opened.txt"
    for args in (("debug", "state"), ("add", "--type", "fact", "x"), ("debug", "verify")):
        proc = subprocess.run([sys.executable, str(wrapper), str(log), "--ctx-dir", str(pop.root),
                               *args], capture_output=True, timeout=60)
        assert proc.returncode != 0 and b"Traceback" not in proc.stderr, proc.stderr
        opened = log.read_text().splitlines()
        bad = [p for p in opened if "/.." in p or p == "/etc/passwd" or p.endswith("/copy/x")]
        assert not bad, bad


@pytest.mark.parametrize("head", [b"ref: refs/main", b"ref: refs/main\r\n"])
def test_co07_head_without_newline_works(pop: Pop, head: bytes) -> None:
    (pop.root / "HEAD").write_bytes(head)
    assert verify(pop.root) == (0, [])
    assert ctx(pop.root, "debug", "state").exit_code == 0
    assert ctx(pop.root, "log").exit_code == 0
    assert ctx(pop.root, "add", "--type", "fact", "fine").exit_code == 0
    assert ctx(pop.root, "commit", "-m", "fine").exit_code == 0
    assert verify(pop.root) == (0, [])


# -- CO-08 very deep history --------------------------------------------------------------------

PY_RECURSION_LIMIT = 1_000  # CPython's default: the limit every ctx process runs with


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_co08_deep_history_no_recursion(store: Store) -> None:
    # Three times Python's recursion limit: a walk that recursed once per commit dies of
    # RecursionError well before the root. A deeper chain would only cost time.
    n = 3 * PY_RECURSION_LIMIT
    t_start = time.monotonic()
    ptr = store.read_head()
    base = ptr.single
    t0 = store.read_typed(base, Commit).timestamp_unix
    with store.transaction() as tx:
        prev = base
        for i in range(n):
            prev = tx.put(Commit(parents=(prev,), timestamp_unix=t0 + i + 1, message=f"deep {i}"))
        tx.move_pointer("refs/main", prev, expected=ptr)
    tip = prev
    assert store.read_head().single == tip

    fresh = open_store(store.root)  # no cache: every commit is read from disk
    raised = sys.getrecursionlimit()
    sys.setrecursionlimit(PY_RECURSION_LIMIT)  # as in a fresh process, whatever raised it here
    try:
        history = [oid for oid, _ in fresh.iter_history([tip])]
    finally:
        sys.setrecursionlimit(raised)
    assert len(history) == n + 1 and history[0] == tip and history[-1] == base

    res = run_ctx(["--ctx-dir", str(store.root), "log", "-n", "5"], timeout=60)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    commits = re.findall(r"^commit ([0-9a-f]{64})$", res.stdout, re.M)
    assert len(commits) == 5 and commits[0] == tip.hex()
    assert f"deep {n - 1}" in res.stdout and f"deep {n - 5}" in res.stdout

    res = run_ctx(["--ctx-dir", str(store.root), "debug", "verify"], timeout=90)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    assert res.stdout.strip().endswith(": ok")
    assert "RecursionError" not in res.stderr
    # A hang guard only, far above the few seconds this takes (speed is measured under bench/).
    assert time.monotonic() - t_start < 60


# -- CO-09 object from the future ---------------------------------------------------------------

@pytest.mark.parametrize("value,needle", [
    ({"type": "commit", "v": 999, "parents": [], "message": "from 2030"}, "newer ctx"),
    ({"type": "hologram", "v": 1, "beam": "x"}, "unknown object type"),
])
def test_co09_object_from_the_future(store: Store, value: dict, needle: str) -> None:
    payload = codec.encode(value)
    oid, wrote = store.objects.write(KIND_TYPED, payload)
    assert wrote
    res = ctx(store.root, "--format", "json", "debug", "verify")
    assert res.exit_code == 3
    problems = json.loads(res.stdout)["problems"]
    mine = [p for p in problems if p["subject"] == oid.hex()]
    assert len(mine) == 1, problems
    assert mine[0]["severity"] == "unsupported" and mine[0]["code"] == "E004"
    assert needle in mine[0]["message"]
    if needle == "newer ctx":
        assert "v999" in mine[0]["message"]
    # Nothing else is wrong with the store.
    assert [p for p in problems if p["severity"] != "warning" and p is not mine[0]] == []

    # Reachable from refs/main: readers fail with E004 naming it, and say to upgrade.
    (store.root / "refs/main").write_text(oid.hex() + "\n")
    res = ctx(store.root, "debug", "state")
    line = res.stderr.strip()
    assert_error_line(res, ("E004",), oid.hex(), needle)
    if needle == "newer ctx":
        assert "upgrade" in line
    res = ctx(store.root, "debug", "cat", oid.hex())
    assert_error_line(res, ("E004",), oid.hex())
