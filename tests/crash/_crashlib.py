"""Shared helpers of the crash and fault-injection tests (RELIABILITY.md §2.0 H3-H5).

* child processes run ``python -m ctxstore.cli`` with ``tests/_shim`` on ``PYTHONPATH``
  and a ``CTX_FAULT`` spec (see ``tests/_shim/sitecustomize.py``);
* stores live on tmpfs (``/dev/shm``) when there is one: these tests kill processes,
  they do not simulate power loss, so fsync latency is only cost;
* the checks after a crash run in-process through the library (``verify_store``,
  ``replay``, ``recover``, ``add_node``), which is much cheaper than more subprocesses.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from conftest import adopt_index

from ctxstore.init import init_store
from ctxstore.knowledge.nodes import add_node
from ctxstore.model import Commit, WorkCommit
from ctxstore.model.knowledge import NodeRecord
from ctxstore.objects import ObjectId
from ctxstore.replay import KnowledgeState, replay
from ctxstore.repo import Store, open_store
from ctxstore.session import Session
from ctxstore.staging import commit_stage, start_session
from ctxstore.verify import verify_store

TESTS_DIR = Path(__file__).resolve().parent.parent
SHIM_DIR = TESTS_DIR / "_shim"
POINTERS = ("HEAD", "refs/main", "STAGE")
# Where each pointer's file is, relative to .ctx (STAGE is per clone: refs.STAGE_PATH).
POINTER_FILES = {"HEAD": "HEAD", "refs/main": "refs/main", "STAGE": "local/STAGE"}
_POINTER_OF_FILE = {path: name for name, path in POINTER_FILES.items()}


# -- scratch space -------------------------------------------------------------------------------

def scratch_parent() -> str | None:
    """tmpfs if available (override with CTX_CRASH_TMP), else the default temp dir."""
    explicit = os.environ.get("CTX_CRASH_TMP")
    if explicit:
        return explicit
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return str(shm)
    return None


@contextmanager
def scratch_dir(prefix: str = "ctx-crash-", *, on_disk: bool = False) -> Iterator[Path]:
    """A temporary directory, on tmpfs unless ``on_disk`` (real fsync costs)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=None if on_disk else scratch_parent()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def copy_store(template: Path, dest: Path) -> Path:
    """Copy a template work dir (holding ``.ctx``); returns the new ``.ctx``.

    Its index files are rebound to the copy (``adopt_index``): as copied they name the
    template's copy of the store, and the first command would rebuild them and say so.
    """
    shutil.copytree(template, dest, symlinks=True)
    adopt_index(dest / ".ctx")
    return dest / ".ctx"


# -- child processes -----------------------------------------------------------------------------

def child_env(fault: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CTX_FAULT", None)
    env.pop("CTX_FAULT_ROOT", None)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SHIM_DIR) + (os.pathsep + old if old else "")
    if fault:
        env["CTX_FAULT"] = fault
    if extra:
        env.update(extra)
    return env


def run_cli(ctx_dir: Path, args: list[str], *, fault: str | None = None,
            cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m ctxstore.cli --ctx-dir CTX ARGS`` with an optional fault spec."""
    return ctx_child(["--ctx-dir", str(ctx_dir), *args], cwd=cwd or ctx_dir.parent, fault=fault,
                     timeout=timeout)


def ctx_child(argv: list[str], *, cwd: Path, fault: str | None = None, stdin: str | None = None,
              extra_env: dict[str, str] | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m ctxstore.cli ARGV`` in ``cwd``, the shim on its path (armed with ``fault``).

    The child is forked from the fork server (``_forkserver.py``: the same process, minus
    the start-up) unless ``CTX_CRASH_FORK=0``, which starts each one afresh.
    """
    env = child_env(fault, extra_env)
    if os.environ.get("CTX_CRASH_FORK", "1") != "0":
        server = _forkserver_client()
        if server.starts_like(env):
            return server.run(argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout)
    return run_cli_spawned(argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout)


def run_cli_spawned(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: str | None = None,
                    timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m ctxstore.cli ARGV`` started afresh."""
    proc = subprocess.run([sys.executable, "-m", "ctxstore.cli", *argv], cwd=cwd,
                          input=None if stdin is None else stdin.encode(),
                          stdin=subprocess.DEVNULL if stdin is None else None,
                          capture_output=True, env=env, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


class ForkServer:
    """The client of one ``_forkserver.py`` process (started on first use, ended at exit)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ctx-forkserver-", dir=scratch_parent()))
        self.path = self.dir / "sock"
        self.env = child_env()
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_forkserver.py")),
                                      str(self.path)], cwd=self.dir, env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not self.path.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the fork server did not start (exit {self.proc.poll()})")
            time.sleep(0.02)
        self.names = itertools.count()

    def starts_like(self, env: dict[str, str]) -> bool:
        """Whether a fresh interpreter in ``env`` would start as the server did (path, I/O)."""
        def startup(e: dict[str, str]) -> dict[str, str]:
            return {k: v for k, v in e.items() if k.startswith(("PYTHON", "LC_", "LANG"))}

        return startup(env) == startup(self.env)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, argv: list[str], *, cwd: Path, env: dict[str, str], stdin: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Like ``run_cli_spawned``, in a child forked from the server."""
        import socket

        out = self.dir / f"{os.getpid()}-{threading.get_ident()}-{next(self.names)}"
        outs = (Path(f"{out}.out"), Path(f"{out}.err"), Path(f"{out}.in"))
        if stdin is not None:
            outs[2].write_bytes(stdin.encode())
        cmd = [sys.executable, "-m", "ctxstore.cli", *argv]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(self.path))
            conn.sendall(json.dumps({"argv": argv, "env": env, "cwd": str(cwd),
                                     "stdin": None if stdin is None else str(outs[2]),
                                     "stdout": str(outs[0]), "stderr": str(outs[1])}).encode() + b"\n")
            reader = conn.makefile("rb")
            pid = json.loads(reader.readline())["pid"]
            try:
                status = json.loads(reader.readline())["status"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(cmd, timeout) from None
        try:
            stdout, stderr = (p.read_bytes().decode("utf-8", "replace") for p in outs[:2])
        finally:
            for p in outs:
                p.unlink(missing_ok=True)
        return subprocess.CompletedProcess(cmd, status, stdout, stderr)


_SERVER: list[ForkServer] = []
_SERVER_LOCK = threading.Lock()


def _forkserver_client() -> ForkServer:
    with _SERVER_LOCK:
        if not _SERVER or _SERVER[0].proc.poll() is not None:
            _SERVER[:] = [ForkServer()]
            atexit.register(_SERVER[0].close)
        return _SERVER[0]


def run_python(code: str, *, fault: str | None = None, cwd: Path | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a Python snippet in a child (with the shim on its path)."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env=child_env(fault), timeout=timeout)


def read_trace(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def done_ops(trace: list[dict]) -> list[dict]:
    """Operations that ran to completion (no KILL marker, no stdout, no error)."""
    return [r for r in trace if r["op"] not in ("KILL", "stdout") and "errno" not in r]


def pointer_renames(trace: list[dict]) -> list[str]:
    """Pointers whose rename completed, in order."""
    return [_POINTER_OF_FILE[r["dst"]] for r in done_ops(trace)
            if r["op"] == "replace" and r.get("dst") in _POINTER_OF_FILE]


# -- store inspection (in-process) ---------------------------------------------------------------

def pointer_bytes(ctx: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for name in POINTERS:
        p = ctx / POINTER_FILES[name]
        out[name] = p.read_bytes() if p.is_file() else None
    return out


def verify_errors(ctx: Path) -> list[str]:
    """Lines of every non-warning problem of ``verify_store`` (empty = ok)."""
    rep = verify_store(open_store(ctx))
    return [p.line() for p in rep.problems if p.severity != "warning"]


def state(ctx: Path) -> KnowledgeState:
    return replay(open_store(ctx))


def node_text(store: Store, rec: NodeRecord) -> str:
    if rec.content_blob:
        return store.read_blob(ObjectId(rec.content_blob)).decode("utf-8")
    return rec.content or ""


def nodes_with_text(ctx: Path) -> dict[str, tuple[str, str]]:
    """Live nodes: id -> (type, full content)."""
    store = open_store(ctx)
    st = replay(store)
    return {nid: (rec.type, node_text(store, rec)) for nid, rec in st.nodes.items()}


def ledger_problems(ctx: Path, ledger: dict[str, str]) -> list[str]:
    """Every acknowledged node (id -> content) is there, with identical content."""
    nodes = nodes_with_text(ctx)
    out = []
    for nid, text in ledger.items():
        if nid not in nodes:
            out.append(f"acknowledged node {nid} lost")
        elif nodes[nid][1] != text:
            out.append(f"acknowledged node {nid} has different content")
    return out


def stage_kind(ctx: Path) -> str | None:
    """'work' if STAGE names a work commit, 'commit' if a canonical commit, None if absent."""
    store = open_store(ctx)
    ptr = store.read_stage()
    if ptr is None:
        return None
    obj = store.read_typed(ptr.heads[0])
    return "work" if isinstance(obj, WorkCommit) else "commit" if isinstance(obj, Commit) else "?"


@dataclass
class PointFailures:
    """Failures of many crash points, reported together."""

    items: list[str] = field(default_factory=list)

    def add(self, where: str, problems: list[str]) -> None:
        if problems:
            self.items.append(f"{where}: " + "; ".join(problems))

    def assert_none(self, total: int) -> None:
        if self.items:
            shown = "\n  ".join(self.items[:15])
            raise AssertionError(f"{len(self.items)} of {total} crash points failed:\n  {shown}")


# -- templates ------------------------------------------------------------------------------------

@dataclass
class Template:
    work: Path                    # the directory holding .ctx
    ledger: dict[str, str]        # every acknowledged node: id -> content
    committed: dict[str, str]     # the nodes in HEAD's history
    digest: str = ""
    pointers: dict[str, bytes | None] = field(default_factory=dict)
    stage: str | None = None

    def seal(self) -> Template:
        ctx = self.work / ".ctx"
        self.digest = state(ctx).digest()
        self.pointers = pointer_bytes(ctx)
        self.stage = stage_kind(ctx)
        return self

    def seal_damaged(self) -> Template:
        """Like ``seal`` for a store whose STAGE is damaged on purpose (no replay)."""
        self.pointers = pointer_bytes(self.work / ".ctx")
        self.stage = "damaged"
        return self


def _snapshot(src: Path, dst: Path) -> Path:
    copy_store(src, dst)
    return dst


def build_templates(root: Path) -> dict[str, Template]:
    """Populated stores under ``root`` (built in-process, copied per crash point):

    * ``clean``: 7 committed nodes (one stored as a blob), nothing staged; the folded
      session's work commits are unreachable garbage;
    * ``garbage``: ``clean`` plus unreachable blobs and old leftover ``*.tmp`` files;
    * ``staged``: ``clean`` plus an open session (``stage start`` and 4 nodes);
    * ``garbled``: ``staged`` with STAGE overwritten by bytes that are not a pointer;
    * ``missing``: ``staged`` with the object of STAGE's tip deleted (its node is lost);
    * ``legacy``: ``staged`` in an older ctx's layout (committed ``.ctx/STAGE``).
    """
    base = root / "base"
    base.mkdir()
    ctx = base / ".ctx"
    init_store(ctx, git=False)
    store = open_store(ctx)
    ledger: dict[str, str] = {}

    def add(text: str, kind: str = "fact") -> str:
        # A session per write, closed at once: a template is copied with no index connection
        # open on it (an open one could checkpoint its WAL while a copy is read).
        with Session(store) as db:
            nid = add_node(db, kind, text, tags=["crash:template"]).node.id
        ledger[nid] = text
        return nid

    for i in range(6):
        add(f"committed fact number {i}: the service retries {i} times")
    add("a committed decision stored as a blob: " + "xyz" * 2000, "decision")
    commit_stage(store, "template commit")
    committed = dict(ledger)
    out: dict[str, Template] = {}
    # clean: nothing staged; the folded session's work commits are now garbage
    out["clean"] = Template(_snapshot(base, root / "clean"), dict(ledger), dict(committed)).seal()

    # garbage: clean + unreachable blobs + leftover temp files with old mtimes
    gwork = _snapshot(base, root / "garbage")
    gstore = open_store(gwork / ".ctx")
    with gstore.transaction() as tx:
        for i in range(5):
            tx.put_blob(f"unreachable garbage blob {i}".encode())
    old = time.time() - 7200
    objects = gwork / ".ctx" / "objects"
    shard = next(p for p in sorted(objects.iterdir()) if p.is_dir())
    for tmp in (shard / ("0" * 64 + ".deadbeef0001.tmp"), gwork / ".ctx" / "STAGE.deadbeef0002.tmp"):
        tmp.write_bytes(b"half-written")
        os.utime(tmp, (old, old))
    out["garbage"] = Template(gwork, dict(ledger), dict(committed)).seal()

    # staged: an open session (session_start + 4 nodes) on top of the commit
    start_session(store, "template task")
    last = ""
    for i in range(4):
        last = add(f"staged observation {i}: the cache is cold after deploy", "observation")
    out["staged"] = Template(_snapshot(base, root / "staged"), dict(ledger), dict(committed)).seal()

    # garbled: STAGE holds bytes that are not a pointer
    gw = _snapshot(base, root / "garbled")
    (gw / ".ctx" / POINTER_FILES["STAGE"]).write_bytes(b"this is not a pointer\n")
    out["garbled"] = Template(gw, dict(ledger), dict(committed)).seal_damaged()

    # missing: the object of STAGE's tip work commit is gone (its node is lost)
    mw = _snapshot(base, root / "missing")
    mctx = mw / ".ctx"
    tip = open_store(mctx).read_stage().single
    for path in open_store(mctx).objects.paths_for(tip):
        path.unlink()
    lost_ledger = {k: v for k, v in ledger.items() if k != last}
    out["missing"] = Template(mw, lost_ledger, dict(committed)).seal_damaged()

    # legacy: ``staged`` in the layout of an older ctx (its committed .ctx/STAGE names the
    # staged work; every object in objects/; no local/STAGE): ``ctx upgrade`` folds it
    lw = _snapshot(root / "staged", root / "legacy")
    lctx = lw / ".ctx"
    staging = lctx / "local" / "work" / "objects"
    for path in staging.rglob("*"):
        if path.is_file():
            dest = lctx / "objects" / path.relative_to(staging)
            dest.parent.mkdir(exist_ok=True)
            shutil.copyfile(path, dest)
    shutil.rmtree(staging)
    (lctx / POINTER_FILES["STAGE"]).rename(lctx / "STAGE")
    out["legacy"] = Template(lw, dict(ledger), dict(committed)).seal()
    return out
