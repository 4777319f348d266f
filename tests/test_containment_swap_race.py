"""PS-10: a directory under ``.ctx/`` swapped for a symlink while ctx writes (RELIABILITY.md §2.9, I7).

A second process exchanges a store directory (``narrative/tasks``, a shard of
``local/work/objects``, a ``refs/`` subdirectory) with a symbolic link to an outside ``OUT``
directory as fast as it can (``renameat2(RENAME_EXCHANGE)``: one atomic system call, so the
name is always either the real directory or the link), while ctx writes there in a loop:
``add_task`` through the operations layer, some ``ctx add task`` runs of the installed CLI,
object writes into the swapped shard, pointer writes below the swapped ``refs/`` folder.

A check by name followed by a write by name loses this race (the write follows the link
that replaced the checked directory); ctx writes through directory descriptors opened with
``O_NOFOLLOW`` instead (``fsio.Dir.replace_atomic``). Asserted: nothing under ``OUT`` is
ever created or changed (names, bytes, mtimes), every refused write is one clean E020 error
naming the swapped path (no traceback), and the race really ran (some writes refused, some
done). The swapper is a process, not a thread: a thread would hold the GIL between swaps
and barely interleave with the writer. ``CTX_SOAK=1`` runs each case for at least 10,000
swaps (the soak tier) instead of a few seconds.
"""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import blake3
import pytest
from conftest import run_ctx, session_of

from ctxstore import refs
from ctxstore.errors import CtxError
from ctxstore.narrative.entries import add_task
from ctxstore.objects import KIND_BLOB, LooseObjectStore, canonical_bytes
from ctxstore.repo import Store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="renameat2(RENAME_EXCHANGE) is Linux-only")

SOAK = os.environ.get("CTX_SOAK") == "1"
SECONDS = 60.0 if SOAK else 2.0   # how long each case writes
MIN_SWAPS = 10_000 if SOAK else 200

# The swapper: exchange DIR and LINK (a symlink to OUT) until STOP exists, an even number of
# times (the real directory ends where it started); print the count.
_SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
folder, link, stop, want = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3], int(sys.argv[4])
n = 0
print("ready", flush=True)
while n < want or not os.path.exists(stop):
    if libc.renameat2(-100, folder, -100, link, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    n += 1
if n % 2:
    libc.renameat2(-100, folder, -100, link, 2)
    n += 1
print(n, flush=True)
"""


@contextmanager
def swapping(folder: Path, out: Path, *, min_swaps: int = MIN_SWAPS) -> Iterator[Callable[[], int]]:
    """Swap ``folder`` with a link to ``out`` in another process until the block ends.

    Yields a function that stops the swapper and returns how many swaps it made.
    """
    link = folder.with_name(folder.name + ".swap")
    link.symlink_to(out, target_is_directory=True)
    stop = folder.parent.parent / "stop-swapping"
    proc = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(folder), str(link), str(stop),
                             str(min_swaps)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    swaps: list[int] = []

    def finish() -> int:
        if not swaps:
            stop.touch()
            out_text, _ = proc.communicate(timeout=120)
            swaps.append(int(out_text.strip()))
            stop.unlink()
            link.unlink()
        return swaps[0]

    try:
        yield finish
    finally:
        if not swaps:
            proc.kill()
            proc.wait()


def tree_state(folder: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Names, kinds, sizes, mtimes and bytes of ``folder`` and everything under it.

    Links are not followed. ``folder``'s own mtime changes when a name is created in it,
    even one removed again (a temp file), so a write that was undone is caught too.
    """
    st = os.lstat(folder)
    found = {".": (st.st_mode, 0, st.st_mtime_ns, b"")}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            body = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
            found[str(path.relative_to(folder))] = (st.st_mode, st.st_size, st.st_mtime_ns, body)
    return found


def _run_for(seconds: float, step: Callable[[int], None]) -> None:
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        step(i)
        i += 1


def _is_e020(exc: CtxError | OSError, folder: Path) -> bool:
    """Whether ``exc`` is the one clean refusal of a write through the swapped ``folder``.

    "is a symbolic link"; or, when the link was swapped out again before ctx could look at
    what it refused, "is not a directory (it changed while being opened)".
    """
    text = str(exc)
    return isinstance(exc, CtxError) and exc.code == "E020" and "\n" not in text.strip() \
        and text.startswith((f"E020: refusing {folder}: is a symbolic link",
                             f"E020: refusing {folder}: is not a directory (it changed"))


def test_ps10_add_task_never_writes_through_a_swapped_tasks_folder(store: Store, out: Path) -> None:
    tasks = store.root / "narrative" / "tasks"
    add_task(session_of(store), "first task")  # tasks/ exists before the race starts
    before = tree_state(out)
    done = refused = 0
    other: list[str] = []
    cli_runs: list[subprocess.CompletedProcess[str]] = []
    with swapping(tasks, out) as finish:
        def step(i: int) -> None:
            nonlocal done, refused
            if i % 25 == 1:  # the installed CLI too, early enough to run on a slow machine
                cli_runs.append(run_ctx(["--ctx-dir", str(store.root), "add", "task", f"cli {i}"],
                                        timeout=60))
                return
            try:
                add_task(session_of(store), f"task {i}")
                done += 1
            except (CtxError, OSError) as exc:
                refused += 1
                if not _is_e020(exc, tasks):
                    other.append(str(exc))

        _run_for(SECONDS, step)
        swaps = finish()
    assert tree_state(out) == before, "something was written through the link"
    assert other == [], other[:3]
    assert not tasks.is_symlink() and tasks.is_dir()
    for res in cli_runs:
        assert "Traceback" not in res.stderr
        if res.returncode:
            assert res.returncode == 1 and res.stdout == "", (res.returncode, res.stdout)
            assert res.stderr.startswith("ctx: error[E020]: ") and res.stderr.count("\n") == 1, \
                res.stderr
            assert f"refusing {tasks}: is " in res.stderr, res.stderr
    assert cli_runs, "no CLI run"
    assert swaps >= MIN_SWAPS and done > 0 and refused > 0, (swaps, done, refused)
    # Every write that was acknowledged is in the real folder, none in OUT.
    files = {p.name for p in tasks.iterdir()}
    assert len(files) >= done + 1


@functools.cache
def _blob_in_shard(shard: str, i: int) -> bytes:
    """Blob data whose object lands in ``shard`` (about 256 tries)."""
    n = 0
    while True:
        data = f"blob {i} {n}\n".encode()
        if blake3.blake3(canonical_bytes(KIND_BLOB, data)).hexdigest()[:2] == shard:
            return data
        n += 1


def _race(folder: Path, out: Path, write: Callable[[int], None]) -> tuple[int, int, int]:
    """Run ``write(i)`` for SECONDS while ``folder`` is swapped with a link to ``out``.

    Asserts that nothing under ``out`` changed and that every refusal was one clean E020
    naming ``folder``; returns (swaps, writes done, writes refused).
    """
    before = tree_state(out)
    done = refused = 0
    other: list[str] = []
    with swapping(folder, out) as finish:
        def step(i: int) -> None:
            nonlocal done, refused
            try:
                write(i)
                done += 1
            except (CtxError, OSError) as exc:
                refused += 1
                if not _is_e020(exc, folder):
                    other.append(str(exc))

        _run_for(SECONDS, step)
        swaps = finish()
    assert tree_state(out) == before, "something was written through the link"
    assert other == [], other[:3]
    return swaps, done, refused


def test_ps10_object_writes_never_go_through_a_swapped_shard(store: Store, out: Path,
                                                              tmp_path: Path) -> None:
    area = store.objects.staging
    # Object files of 64 blobs in shard ab, written again and again (store_file always
    # writes: no dedup), plus write() of the same blobs (dedup check, then a write).
    scratch = LooseObjectStore(tmp_path / "scratch")
    oids = [scratch.write(KIND_BLOB, _blob_in_shard("ab", i))[0] for i in range(64)]
    raws = [scratch.path_for(oid).read_bytes() for oid in oids]
    area.store_file(oids[0], raws[0])
    shard = area.root / "ab"
    assert shard.is_dir()

    def write(i: int) -> None:
        k = i % len(oids)
        if i % 4:
            area.store_file(oids[k], raws[k])
        else:
            area.write(KIND_BLOB, _blob_in_shard("ab", k))

    swaps, done, refused = _race(shard, out, write)
    assert swaps >= MIN_SWAPS and done > 0 and refused > 0, (swaps, done, refused)
    for oid in oids[1:]:  # what was written is in the real shard, intact
        if (shard / oid.hex()).exists():
            assert area.read(oid).payload


def test_ps10_pointer_writes_never_go_through_a_swapped_refs_folder(store: Store, out: Path) -> None:
    head = store.read_head().heads[0]
    refs.write_pointer(store.root, "refs/side/one", head)
    folder = store.root / "refs" / "side"
    swaps, done, refused = _race(
        folder, out, lambda i: refs.write_pointer(store.root, f"refs/side/p{i % 50}", head))
    assert swaps >= MIN_SWAPS and done > 0 and refused > 0, (swaps, done, refused)
    assert refs.read_pointer(store.root, "refs/side/p0") is not None
