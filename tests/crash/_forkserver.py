"""A fork server for the crash sweeps: ``python -m ctxstore.cli`` without paying its start-up per point.

A kill-point sweep runs the same command hundreds of times, each in a fresh process killed
at one durable operation. Most of such a child's time goes to starting Python and importing
ctxstore, not to the command. This server (one process per test process, started on first
use) imports ctxstore once, then forks one real child per request. The child:

* has its own stdin (a file the caller names, else ``/dev/null``), stdout and stderr, working
  directory, environment (the caller's, ``CTX_FAULT`` included) and ``sys.argv``;
* arms the fault shim (``tests/_shim/sitecustomize.py``) with its own ``CTX_FAULT`` exactly
  as a fresh interpreter does at start-up: the shim wraps the already imported fsio
  primitives, and its operation count starts at 0;
* runs ``ctxstore.cli`` as ``__main__`` the way ``python -m`` does (``runpy``), so it ends
  as the CLI does (exit handlers, ``os._exit``) or dies by the shim's ``SIGKILL`` with no
  cleanup at all; the server reaps it and reports the exit status (``-9`` for a kill).

The server starts with the shim on ``PYTHONPATH`` and no ``CTX_FAULT``, so the shim is
imported and does nothing until a child arms it. ``tests/crash/test_fault_shim.py`` checks
that a forked child performs exactly the operations, in the same order, as a fresh process.

Protocol (one Unix-socket connection per child): the client sends one JSON line
``{"argv", "env", "cwd", "stdin", "stdout", "stderr"}``; the server answers ``{"pid": N}`` once the
child runs and ``{"status": S}`` (``subprocess`` convention) when it has ended.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys


def _preload() -> None:
    """Import every module of ctxstore (never ``__main__``), as the commands would on use.

    A submodule whose name is also a name of its package (``ctxstore.cli.gc`` and the ``gc``
    module imported by ``ctxstore.cli``) does not replace that name: in a fresh process the
    submodule is imported only once a command runs.
    """
    import importlib
    import pkgutil

    import ctxstore

    missing = object()
    for info in pkgutil.walk_packages(ctxstore.__path__, "ctxstore."):
        if info.name.endswith("__main__"):
            continue
        parent_name, _, leaf = info.name.rpartition(".")
        parent = sys.modules[parent_name]
        before = parent.__dict__.get(leaf, missing)
        module = importlib.import_module(info.name)
        if before is not missing and before is not module:
            setattr(parent, leaf, before)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _child(req: dict, listener: socket.socket, conn: socket.socket, wake: tuple[int, int]) -> None:
    """In the forked child: become the process ``python -m ctxstore.cli ARGV`` would be."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    listener.close()
    conn.close()
    for fd in wake:
        os.close(fd)
    stdin = os.open(req.get("stdin") or os.devnull, os.O_RDONLY)
    out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((stdin, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.path[0] = os.getcwd()  # what ``python -m`` puts first
    sys.argv = ["-m", *req["argv"]]
    import sitecustomize  # the fault shim, imported (and idle) since the server started

    sitecustomize.arm(os.environ.get("CTX_FAULT", ""), os.environ.get("CTX_FAULT_ROOT"))


def serve(path: str) -> bool:
    """Serve requests on the Unix socket ``path``; returns (True) only in a forked child."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wfd)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(rfd, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}
    parent = os.getppid()
    sys.stdout.flush()
    sys.stderr.flush()
    while True:
        events = sel.select(timeout=1.0)
        if os.getppid() != parent:  # the test process is gone: so is every reason to run
            for pid in waiting:
                os.kill(pid, signal.SIGKILL)
            os._exit(0)
        for key, _ in events:
            if key.fileobj is listener:
                conn, _ = listener.accept()
                req = json.loads(_read_line(conn))
                pid = os.fork()
                if pid == 0:
                    _child(req, listener, conn, (rfd, wfd))
                    return True
                waiting[pid] = conn
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            else:
                try:
                    while os.read(rfd, 4096):
                        pass
                except BlockingIOError:
                    pass
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is None:
                continue
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            try:
                conn.sendall(json.dumps({"status": code}).encode() + b"\n")
            except OSError:
                pass
            conn.close()


if __name__ == "__main__":
    _preload()
    if serve(sys.argv[1]):
        import runpy
        import types

        # A fresh __main__, as ``python -m`` would have, then the CLI's own __main__ in it.
        sys.modules["__main__"] = types.ModuleType("__main__")
        runpy._run_module_as_main("ctxstore.cli")  # type: ignore[attr-defined]
