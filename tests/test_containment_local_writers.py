"""PS-10 for the per-clone and derived writers: hook log, LLM cache, index damage marker,
SCC pointer, Tantivy ``synced`` marker, code stat cache, the Git warning markers.

Each writes below a directory of ``.ctx/`` (``local/``, ``index/``, ``DERIVED/``). The
directory is replaced by a link to an outside ``OUT`` folder at the worst moment: right
after ctx has checked it and just before the first durable write (the first ``open_excl``
or append open), deterministically, by wrapping that fsio primitive. A check by name then
write by name writes into ``OUT``; through directory descriptors the write lands in the
directory that was checked (now renamed aside), and ``OUT`` is untouched (names, bytes,
mtimes). A link already in place before the call is refused: E020 naming it where the
writer reports errors, nothing written where it is best effort (a cache, a log, a marker).
The race run by another process is tests/test_containment_swap_race.py.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import invoke, patch_fsio

from ctxstore import fsio
from ctxstore.claude.hooklog import LOG_FILE, log_problem
from ctxstore.errors import IndexCorrupt, UnsafePath
from ctxstore.graph import scc
from ctxstore.index import DAMAGE_MARKER, INDEX_FILE, open_index
from ctxstore.init import init_store
from ctxstore.llm import cache
from ctxstore.repo import Store, open_store
from tests.test_containment_swap_race import tree_state


def _swap(folder: Path, out: Path) -> Path:
    """Rename ``folder`` aside and put a link to ``out`` in its place; return the aside name."""
    aside = folder.with_name(folder.name + ".real")
    os.rename(folder, aside)
    folder.symlink_to(out, target_is_directory=True)
    return aside


def _link_in_place(folder: Path, out: Path) -> None:
    """A link to ``out`` where ``folder`` is (the real one renamed aside if it exists)."""
    if folder.exists():
        _swap(folder, out)
    else:
        folder.symlink_to(out, target_is_directory=True)


def _swap_at_first(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...], folder: Path,
                   out: Path) -> list[Path]:
    """Swap ``folder`` for a link to ``out`` when any fsio primitive of ``names`` is first called.

    Every caller sees the replacement (``patch_fsio``), so the swap happens between ctx's
    checks (or its directory opens) and its first write. Returns a list that receives the
    aside path once swapped.
    """
    swapped: list[Path] = []
    for name in names:
        owner: object = fsio.Dir if name.startswith("Dir.") else fsio
        attr = name.removeprefix("Dir.")
        real = getattr(owner, attr, None)
        if real is None:  # a helper this version of fsio does not have
            continue

        def once(*args: object, _real: Callable[..., object] = real, **kwargs: object) -> object:
            if not swapped:
                swapped.append(_swap(folder, out))
            return _real(*args, **kwargs)

        if owner is fsio:
            patch_fsio(monkeypatch, attr, once)
        else:
            monkeypatch.setattr(owner, attr, once)
    return swapped


def _index_with_rows(store: Store, runner: CliRunner) -> None:
    for text in ("first note", "second note"):
        assert invoke(runner, store, "add", "--type", "fact", text).exit_code == 0


# -- the hook log (local/hooks.log) ---------------------------------------------------------------
def test_hook_log_never_appends_through_a_local_swapped_after_its_check(
        store: Store, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = store.root / "local"
    local.mkdir(exist_ok=True)
    before = tree_state(out)
    swapped = _swap_at_first(monkeypatch, ("open_append", "Dir.open_append"), local, out)
    assert log_problem(store.root, "stop", "something went wrong")
    assert swapped and tree_state(out) == before
    assert b"something went wrong" in (swapped[0] / LOG_FILE).read_bytes()


def test_hook_log_is_not_written_through_a_linked_local(store: Store, out: Path) -> None:
    _link_in_place(store.root / "local", out)
    before = tree_state(out)
    assert not log_problem(store.root, "stop", "something went wrong")
    assert tree_state(out) == before


def test_hook_answers_json_with_a_local_link_and_writes_nothing_outside(
        store: Store, out: Path) -> None:
    import json

    from conftest import run_ctx

    _link_in_place(store.root / "local", out)
    before = tree_state(out)
    payload = {"session_id": "s1", "hook_event_name": "Stop", "cwd": str(store.root.parent),
               "transcript_path": str(store.root.parent / "missing.jsonl")}
    res = run_ctx(["--ctx-dir", str(store.root), "hook", "stop"], stdin=json.dumps(payload))
    assert res.returncode == 0, res.stderr
    json.loads(res.stdout)  # one valid JSON document
    assert tree_state(out) == before


# -- the LLM prompt-cache record (local/llm_state.json) -------------------------------------------
def test_llm_cache_record_never_written_through_a_local_swapped_after_its_check(
        store: Store, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (store.root / "local").mkdir(exist_ok=True)
    before = tree_state(out)
    swapped = _swap_at_first(monkeypatch, ("open_excl",), store.root / "local", out)
    cache.store_state(store.root, "http://127.0.0.1:1", cache.SlotState(cached_token_count=7))
    assert swapped and tree_state(out) == before
    assert b'"cached_token_count": 7' in (swapped[0] / cache.STATE_FILE).read_bytes()


def test_llm_cache_record_refuses_a_linked_local(store: Store, out: Path) -> None:
    local = store.root / "local"
    _link_in_place(local, out)
    before = tree_state(out)
    with pytest.raises(UnsafePath) as err:
        cache.store_state(store.root, "http://127.0.0.1:1", cache.SlotState())
    assert str(err.value).startswith(f"E020: refusing {local}: is a symbolic link")
    assert tree_state(out) == before


# -- the index damage marker (index/index.sqlite-damaged) -----------------------------------------
def _garbage_first_table(folder: Path) -> None:
    """Overwrite the root page of the first table: reading it is SQLITE_CORRUPT."""
    conn = sqlite3.connect(folder / INDEX_FILE)
    page = conn.execute("SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = "
                        "'nodes'").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with (folder / INDEX_FILE).open("r+b") as fh:
        fh.seek((page - 1) * size)
        fh.write(b"\xa5" * size)


@pytest.mark.parametrize("when", ["after the check", "before the call"])
def test_index_damage_marker_never_written_through_a_linked_index(
        store: Store, runner: CliRunner, out: Path, monkeypatch: pytest.MonkeyPatch, when: str
        ) -> None:
    import ctxstore.index

    _index_with_rows(store, runner)
    folder = store.root / "index"
    monkeypatch.setattr(ctxstore.index, "QUICK_CHECK_MAX_BYTES", 0)  # damage met by a query
    _garbage_first_table(folder)
    conn = open_index(open_store(store.root), sync=False)
    before = tree_state(out)
    swapped = _swap_at_first(monkeypatch, ("open_excl",), folder, out) \
        if when == "after the check" else [_swap(folder, out)]
    try:
        with pytest.raises(IndexCorrupt):
            conn.execute("SELECT * FROM nodes").fetchall()
    finally:
        conn.close()
    assert swapped and tree_state(out) == before
    # Through the descriptor the marker lands in the index folder that was checked; with a
    # link already in place it is refused (best effort: the E007 above is what the user sees).
    assert (swapped[0] / DAMAGE_MARKER).is_file() == (when == "after the check")


# -- the SCC view's pointer (DERIVED/scc_latest) -----------------------------------------------
def test_scc_pointer_never_written_through_a_derived_swapped_after_its_check(
        store: Store, runner: CliRunner, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _index_with_rows(store, runner)
    scc.build_scc(store)
    derived = store.root / "DERIVED"
    assert invoke(runner, store, "add", "--type", "fact", "third note").exit_code == 0
    before = tree_state(out)
    # The view's object goes through the area's descriptor, opened before; the first open_excl
    # of the pointer's own write is where a by-name writer would follow the link.
    swapped: list[Path] = []
    real = fsio.Dir.replace_atomic

    def swap_then_write(self: fsio.Dir, rel: str, data: bytes, **kw: object) -> None:
        if rel == scc.POINTER_NAME and not swapped:
            swapped.append(_swap(derived, out))
        real(self, rel, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(fsio.Dir, "replace_atomic", swap_then_write)
    real_replace_atomic = fsio.replace_atomic  # the by-name writer this replaced

    def swap_then_write_by_name(path: Path, data: bytes, **kw: object) -> None:
        if path.name == scc.POINTER_NAME and not swapped:
            swapped.append(_swap(derived, out))
        real_replace_atomic(path, data, **kw)  # type: ignore[arg-type]

    patch_fsio(monkeypatch, "replace_atomic", swap_then_write_by_name)
    second = scc.build_scc(store)
    assert swapped and tree_state(out) == before
    assert (swapped[0] / scc.POINTER_NAME).read_text() == second.oid.hex() + "\n"


def test_scc_pointer_refuses_a_linked_derived_and_replaces_a_linked_pointer(
        store: Store, runner: CliRunner, out: Path) -> None:
    _index_with_rows(store, runner)
    scc.build_scc(store)
    derived = store.root / "DERIVED"
    pointer = derived / scc.POINTER_NAME
    pointer.unlink()
    pointer.symlink_to(out / "canary")  # a planted pointer link: replaced, never followed
    built = scc.build_scc(store)
    assert not pointer.is_symlink() and pointer.read_text() == built.oid.hex() + "\n"
    assert (out / "canary").read_bytes() == b"canary bytes\n"
    _swap(derived, out)
    before = tree_state(out)
    with pytest.raises(UnsafePath) as err:
        scc.build_scc(store)
    assert str(err.value).startswith(f"E020: refusing {derived}")
    assert tree_state(out) == before


# -- the Tantivy synced marker (index/tantivy.synced) --------------------------------------------
def test_tantivy_marker_never_written_through_an_index_swapped_after_its_check(
        store: Store, runner: CliRunner, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.search.tantivy_index import TANTIVY_DIR, rebuild_tantivy

    pytest.importorskip("tantivy")
    _index_with_rows(store, runner)
    folder = store.root / "index"
    conn = open_index(store)
    before = tree_state(out)
    # Tantivy's own files are written before; the first open_excl is the marker's temp file.
    swapped = _swap_at_first(monkeypatch, ("open_excl",), folder, out)
    try:
        rebuild_tantivy(store.root, conn, lock_timeout=1.0)
    finally:
        conn.close()
    assert swapped and tree_state(out) == before
    assert (swapped[0] / "tantivy.synced").is_file() and (swapped[0] / TANTIVY_DIR).is_dir()


def test_tantivy_rebuild_refuses_a_linked_new_directory(
        store: Store, runner: CliRunner, out: Path) -> None:
    from ctxstore.search.tantivy_index import rebuild_tantivy

    pytest.importorskip("tantivy")
    _index_with_rows(store, runner)
    fresh = store.root / "index" / "tantivy.new"
    fresh.symlink_to(out, target_is_directory=True)
    before = tree_state(out)
    conn = open_index(store)
    with pytest.raises(UnsafePath) as err:
        rebuild_tantivy(store.root, conn, lock_timeout=1.0)
    conn.close()
    assert str(err.value).startswith(f"E020: refusing {fresh}: is a symbolic link")
    assert tree_state(out) == before and (out / "canary").exists()


# -- the code index (index/code.sqlite, index/code.lock) ----------------------------------------
@pytest.mark.parametrize("when", ["after the check", "before the call"])
def test_code_index_never_written_through_a_linked_index(
        store: Store, runner: CliRunner, out: Path, monkeypatch: pytest.MonkeyPatch, when: str
        ) -> None:
    # ctx index writes this clone's code index (and takes its lock) under index/: a link
    # there, made before the run or swapped in after ctx checked the folder, is refused.
    (store.root.parent / "a.py").write_text("def f():\n    return 1\n")
    index = store.root / "index"
    index.mkdir(exist_ok=True)
    before = tree_state(out)
    if when == "after the check":
        swapped = _swap_at_first(monkeypatch, ("Dir.ensure_dir", "hold_lock"), index, out)
    else:
        swapped = [_swap(index, out)]
    r = invoke(runner, store, "index")
    assert swapped and tree_state(out) == before, r.output
    assert r.exit_code == 1 and r.stderr.startswith("ctx: error[E020]: refusing "), r.stderr


# -- the Git warning markers (local/driver-warned, local/untracked) ------------------------------
def test_git_warning_marker_never_written_through_a_local_swapped_after_its_check(
        git_repo: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.git import driver_warning

    ctx_dir = git_repo / ".ctx"
    init_store(ctx_dir, git=False)
    (ctx_dir / "local").mkdir(exist_ok=True)
    before = tree_state(out)
    swapped = _swap_at_first(monkeypatch, ("open_excl",), ctx_dir / "local", out)
    assert driver_warning(ctx_dir) is None  # not tracked by Git: remembered, no warning
    assert swapped and tree_state(out) == before
    assert any(p.is_file() for p in swapped[0].iterdir())


# -- crashes and faults: the moved writes pass through the fault shim ------------------------------
def _child(root: Path, body: str) -> str:
    return ("from pathlib import Path\n"
            "from ctxstore.claude.hooklog import log_problem\n"
            "from ctxstore.graph import scc\n"
            "from ctxstore.llm import cache\n"
            "from ctxstore.repo import open_store\n"
            f"root = Path({str(root)!r})\n{body}\nprint('done')\n")


def test_moved_writes_are_traced_relative_to_their_directory(
        store: Store, runner: CliRunner, tmp_path: Path) -> None:
    from tests.crash._crashlib import read_trace, run_python

    _index_with_rows(store, runner)
    tfile = tmp_path / "trace"
    res = run_python(_child(store.root, "log_problem(root, 'stop', 'boom')\n"
                                        "cache.store_state(root, 'http://x', cache.SlotState())\n"
                                        "scc.build_scc(open_store(root))"),
                     fault=f"trace:{tfile}")
    assert res.stdout.strip() == "done", res.stderr
    ops = [(r["op"], r.get("path"), r.get("dst")) for r in read_trace(tfile) if r["op"] != "stdout"]
    assert ("write_all", "local/hooks.log", None) in ops
    renames = [dst for op, _, dst in ops if op == "replace"]
    assert "local/llm_state.json" in renames and "DERIVED/scc_latest" in renames
    assert ("fsync_dir", "local", None) in ops and ("fsync_dir", "DERIVED", None) in ops


@pytest.mark.parametrize("fault", ["kill:replace:1:before", "err:write_all:1:EIO:once"])
def test_a_crash_or_error_writing_the_llm_record_keeps_the_old_one(
        store: Store, fault: str) -> None:
    from tests.crash._crashlib import run_python

    cache.store_state(store.root, "http://x", cache.SlotState(cached_token_count=1))
    path = store.root / "local" / cache.STATE_FILE
    old = path.read_bytes()
    res = run_python(_child(store.root, "cache.store_state(root, 'http://x', "
                                        "cache.SlotState(cached_token_count=2))"), fault=fault)
    assert "done" not in res.stdout
    assert path.read_bytes() == old
    if fault.startswith("err"):  # E017, and no temp file left
        assert "E017" in res.stderr
        assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(cache.STATE_FILE)) \
            == [cache.STATE_FILE]
