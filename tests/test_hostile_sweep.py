"""The symlink / special-file sweep (RELIABILITY.md §2.9 PS-07, HK-03; issue 11 items 1, 3, 9).

Every path under ``.ctx/`` of a populated store is replaced in turn by
- ``link``: a symbolic link to a copy of it outside the store (the canary: a target that
  looks valid, so a command that follows it would happily work there);
- ``fifo``: a FIFO (a plain ``open`` blocks on it forever);
- ``devzero``: a symbolic link to ``/dev/zero`` (an unbounded read);
- ``wrong``: a directory where a file is expected, a file where a directory is expected;
and every command family runs on the result. Each run must:
- write nothing outside the store (the canary tree's names, kinds, sizes, mtimes and
  bytes are unchanged);
- finish within a few seconds (a hang is caught by a watchdog thread);
- show no traceback and no internal error, and exit 0, 1 or 3 (never 2);
- from a hook, print exactly one JSON object.

The commands run in-process (click's CliRunner) for speed: one run takes milliseconds,
where a subprocess costs a Python start-up. The parametrisation is 17 paths x 4 kinds;
each case runs the 17 command families of ``COMMANDS`` on one copy of the template store.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxstore.cli import cli
from ctxstore.init import init_store

HOOK_TIMEOUT = 4.0  # seconds; a healthy run takes a small fraction of one

# The paths of a populated store, and whether each is a file or a directory. SHARD and
# OBJECT stand for the shard and the file of the commit refs/main names (always read).
PATHS: dict[str, str] = {
    "LOCK": "file", "HEAD": "file", "local/STAGE": "file", "config.toml": "file",
    "refs": "dir", "refs/main": "file", "objects": "dir", "SHARD": "dir", "OBJECT": "file",
    "index": "dir", "index/index.sqlite": "file", "local": "dir",
    "local/state.sqlite": "file", "local/work": "dir", "local/work/objects": "dir",
    "narrative": "dir", "narrative/log": "dir", "narrative/tasks": "dir", "DERIVED": "dir",
}
KINDS = ("link", "fifo", "devzero", "wrong")
REMEMBER = "<ctx:remember>sweep remembered fact</ctx:remember>"


def _commands(work: Path, node: str) -> list[tuple[str, list[str], str | None]]:
    payload = json.dumps({"session_id": "sweep", "cwd": str(work), "prompt": "hello",
                          "source": "startup"})
    return [
        ("list", ["list"], None),
        ("show", ["show", node], None),
        ("add", ["add", "--type", "fact", "sweep fact"], None),
        ("add note", ["add", "note", "sweep note"], None),
        ("add task", ["add", "task", "sweep task"], None),
        ("search", ["search", "sqlite"], None),
        ("query", ["query", "type:fact"], None),
        ("compose", ["compose"], None),
        ("status", ["status"], None),
        ("commit", ["commit", "-m", "sweep"], None),
        ("gc", ["gc"], None),
        ("rebuild", ["rebuild"], None),
        ("debug verify", ["debug", "verify"], None),
        ("export", ["export"], None),
        ("hook session-start", ["hook", "session-start"], payload),
        ("hook prompt-submit", ["hook", "prompt-submit"], payload),
        ("hook stop", ["hook", "stop", "--response", REMEMBER], payload),
    ]


def _invoke(root: Path, argv: list[str], stdin: str | None) -> Result:
    return CliRunner().invoke(cli, ["--ctx-dir", str(root), *argv], input=stdin)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with every path of ``PATHS``: nodes, narrative, a commit, staged work, the
    index, the hook state and the lock file. Returns (the .ctx dir, a node id)."""
    work = tmp_path_factory.mktemp("template") / "work"
    work.mkdir()
    root = work / ".ctx"
    init_store(root, git=False)
    res = _invoke(root, ["add", "--type", "fact", "We use SQLite in WAL mode"], None)
    assert res.exit_code == 0, res.output
    node = res.stdout.split()[-1]
    for argv in (["add", "note", "a note"], ["add", "task", "a task"],
                 ["add", "decision", "a decision"], ["commit", "-m", "first"],
                 ["add", "--type", "fact", "staged fact"], ["list"]):
        assert _invoke(root, argv, None).exit_code == 0
    stop = json.dumps({"session_id": "t", "cwd": str(work)})
    assert _invoke(root, ["hook", "stop", "--response", REMEMBER], stop).exit_code == 0
    for rel, kind in PATHS.items():
        if rel not in ("SHARD", "OBJECT"):
            assert (root / rel).is_dir() == (kind == "dir"), rel
    return root, node


def _resolve(root: Path, rel: str) -> Path:
    if rel in ("SHARD", "OBJECT"):
        oid = (root / "refs" / "main").read_text().strip()
        obj = root / "objects" / oid[:2] / oid
        return obj.parent if rel == "SHARD" else obj
    return root / rel


def _digest(folder: Path) -> dict[str, tuple]:
    """Names, kinds, sizes, mtimes and content hashes of a tree, never following a link."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = os.lstat(path)
            digest = ""
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(path)
            out[str(path.relative_to(folder))] = (stat.S_IFMT(st.st_mode), st.st_size,
                                                  st.st_mtime_ns, digest)
    return out


def _replace(path: Path, kind: str, is_dir: bool, outside: Path) -> None:
    """Put the hostile ``kind`` at ``path`` (whose original is moved or copied outside)."""
    if kind == "link":
        target = outside / ("copy-of-" + path.name)
        shutil.move(str(path), str(target))  # the canary holds the real content
        path.symlink_to(target)
        return
    if is_dir:
        shutil.rmtree(path)
    else:
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    elif is_dir:
        path.write_bytes(b"not a directory\n")
    else:
        path.mkdir()


def _unblock(root: Path) -> None:
    """Open every FIFO of the store for writing and close it: a reader blocked in
    ``open`` then sees end-of-file, so a hung command finishes (and the failure is
    reported without leaving a stuck thread behind)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass


def _run_with_watchdog(root: Path, argv: list[str], stdin: str | None) -> Result | None:
    """Run one command in a thread; None if it did not finish within ``HOOK_TIMEOUT``.

    A thread, not a signal: a read blocked inside SQLite's C code retries on EINTR, so
    only a watchdog that stops waiting can see that hang."""
    global _HUNG
    box: list[Result] = []
    thread = threading.Thread(target=lambda: box.append(_invoke(root, argv, stdin)),
                              daemon=True)
    thread.start()
    thread.join(HOOK_TIMEOUT)
    if thread.is_alive():
        _unblock(root)
        thread.join(2)
        _HUNG = thread.is_alive()
        return None
    return box[0]


_HUNG = False


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rel", list(PATHS))
def test_sweep_hostile_path_never_escapes_hangs_or_crashes(
        template: tuple[Path, str], tmp_path: Path, rel: str, kind: str) -> None:
    if _HUNG:
        pytest.skip("an earlier case hung: this process's stdio is no longer reliable")
    src, node = template
    work = tmp_path / "work"
    shutil.copytree(src.parent, work, symlinks=True)
    root = work / ".ctx"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text("canary\n")
    _replace(_resolve(root, rel), kind, PATHS[rel] == "dir", outside)
    failures: list[str] = []
    for name, argv, stdin in _commands(work, node):
        before = _digest(outside)
        res = _run_with_watchdog(root, argv, stdin)
        if res is None:
            failures.append(f"{rel} as {kind}: `ctx {name}` did not finish in {HOOK_TIMEOUT}s")
            if _HUNG:
                break
            continue
        after = _digest(outside)
        where = f"{rel} as {kind}: `ctx {name}`"
        if after != before:
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            failures.append(f"{where} changed files outside the store: {changed}")
        exc = res.exception
        if exc is not None and not isinstance(exc, SystemExit):
            failures.append(f"{where} raised {type(exc).__name__}: {exc}")
            continue
        text = res.stdout + res.stderr
        if "Traceback" in text or "internal error" in text:
            failures.append(f"{where} reported an internal error: {res.stderr.strip()[:300]}")
        if res.exit_code not in (0, 1, 3):
            failures.append(f"{where} exited {res.exit_code}: {res.stderr.strip()[:300]}")
        if argv[0] == "hook":
            lines = res.stdout.splitlines()
            if len(lines) != 1 or not isinstance(json.loads(lines[0] or "null"), dict):
                failures.append(f"{where} printed {res.stdout!r}, not one JSON object")
        elif res.exit_code != 0 and not (argv[:2] == ["debug", "verify"] and res.stdout):
            # (verify reports what it found on stdout and exits non-zero: that is its job)
            err = res.stderr.strip().splitlines()
            if len(err) != 1 or not err[0].startswith("ctx: error[E"):
                failures.append(f"{where}: not one `ctx: error[E0xx]` line: {res.stderr!r}")
        if kind == "link" and rel in TOP_LEVEL:
            failures += _check_refused(where, root / rel, argv, res)
    assert not failures, "\n".join(failures)


# Entries every command checks when it opens the store (repo.check_layout): a link there
# is refused by every command and by the hooks that open the store, naming the link.
TOP_LEVEL = ("LOCK", "HEAD", "local/STAGE", "config.toml", "refs", "objects", "index", "narrative",
             "narrative/log", "narrative/tasks", "DERIVED", "local/work", "local/work/objects")


def _check_refused(where: str, link: Path, argv: list[str], res: Result) -> list[str]:
    line = f"refusing {link}: is a symbolic link"
    if argv[0] != "hook":
        if res.exit_code != 1 or not res.stderr.startswith(f"ctx: error[E020]: {line}"):
            return [f"{where}: not refused with E020 naming the link: {res.stderr!r}"]
        return []
    if argv[1] == "prompt-submit":
        return []  # reads only local/state.sqlite (and nothing when nothing is pending)
    out = json.loads(res.stdout)
    if res.exit_code != 0 or line not in out.get("systemMessage", ""):
        return [f"{where}: no systemMessage naming the link: {res.stdout!r}"]
    return []
