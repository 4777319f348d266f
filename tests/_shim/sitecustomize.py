"""Fault shim for child processes (RELIABILITY.md §2.0 H3).

Put ``tests/_shim`` on a child's ``PYTHONPATH`` and set ``CTX_FAULT``; Python imports
this module at start-up. When ``ctxstore.fsio`` is imported, its durable-I/O primitives
(``open_excl``, ``write_all``, ``fsync_file``, ``fsync_dir``, ``replace``, ``link``,
``unlink``, ``mkdir``, ``rmdir``, ``sync_barrier``), defined in ``ctxstore.fsio.core`` and
re-exported by the package, are replaced by wrappers in both. The rest of
fsio (``replace_atomic``, ``write_new_file``, ``fsync_path``, ``ensure_dir``) calls them
by module-global name, and every other module calls ``fsio.<name>`` at call time, so
every durable operation passes through a wrapper. ``fsync_path`` is not wrapped itself
(it is counted once, as the ``fsync_file`` it calls). A primitive called with ``dir_fd=``
(a name in an open directory) is traced with the directory's path joined to the name, and
``fsync_dir`` of a descriptor with the directory's path.

``CTX_FAULT`` holds one or more specs separated by ``;``:

* ``count:<file>``: at exit, write the number of primitive operations to ``<file>``.
* ``kill:<glob>:<n>:<before|after>``: at the n-th operation (1-based) whose name matches
  ``<glob>`` (fnmatch), SIGKILL this process before or after the operation runs
  (no ``finally``, no ``atexit``: the same as ``kill -9``).
* ``err:<glob>:<n>:<errno>:<once|sticky>``: the n-th matching operation raises
  ``OSError(errno)`` instead of running (``sticky``: every later matching one too).
  ``errno`` is a number or a name such as ``EIO``.
* ``unsafe:replace_atomic``: harness self-test only. ``fsio.replace_atomic`` (and its
  directory-handle form ``fsio.Dir.replace_atomic``) becomes a deliberately unsafe in-place
  rewrite (unlink, create, write), so a kill between its steps leaves a missing or empty
  pointer. The crash tests must catch it.
* ``trace:<file>``: append one JSON line per operation (written with ``os.write`` on an
  ``O_APPEND`` descriptor, so it survives a SIGKILL): ``seq``, ``op``, ``path`` (relative
  to the store, see below), ``dst`` for renames/links, ``len`` and ``sha`` for writes,
  ``errno`` if it failed. Bytes written to stdout are traced as ``op: "stdout"``.

Paths are shown relative to ``CTX_FAULT_ROOT`` if set, else to the nearest enclosing
``.ctx`` directory, else absolute. Without ``CTX_FAULT`` this module does nothing.
"""

from __future__ import annotations

import os
import sys

_SPEC = os.environ.get("CTX_FAULT", "").strip()

# The module that defines the primitives, then the package that re-exports them.
_PATCHED_MODULES = ("ctxstore.fsio.core", "ctxstore.fsio")

_PRIMITIVES = ("open_excl", "write_all", "fsync_file", "fsync_dir", "replace", "link",
               "unlink", "mkdir", "rmdir", "sync_barrier")


class _State:
    seq = 0                      # operations so far (all names)
    count_file: str | None = None
    trace_fd: int | None = None
    kills: list[dict] = []       # {"glob", "n", "when", "seen"}
    errs: list[dict] = []        # {"glob", "n", "errno", "sticky", "seen", "armed"}
    root: str | None = os.environ.get("CTX_FAULT_ROOT") or None
    unsafe: list[str] = []


def _parse(spec: str) -> None:
    import errno as errno_mod

    for part in filter(None, (p.strip() for p in spec.split(";"))):
        mode, _, rest = part.partition(":")
        if mode == "count":
            _State.count_file = rest
        elif mode == "trace":
            _State.trace_fd = os.open(rest, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                                      0o644)
        elif mode == "kill":
            glob, n, when = rest.rsplit(":", 2)
            if when not in ("before", "after"):
                raise SystemExit(f"CTX_FAULT: bad kill timing {when!r}")
            _State.kills.append({"glob": glob, "n": int(n), "when": when, "seen": 0})
        elif mode == "err":
            glob, n, code, how = rest.rsplit(":", 3)
            num = int(code) if code.isdigit() else getattr(errno_mod, code)
            if how not in ("once", "sticky"):
                raise SystemExit(f"CTX_FAULT: bad err mode {how!r}")
            _State.errs.append({"glob": glob, "n": int(n), "errno": num,
                                "sticky": how == "sticky", "seen": 0, "fired": False})
        elif mode == "unsafe":
            if rest != "replace_atomic":
                raise SystemExit(f"CTX_FAULT: unknown unsafe target {rest!r}")
            _State.unsafe.append(rest)
        else:
            raise SystemExit(f"CTX_FAULT: unknown mode {mode!r}")


def _rel(path: object) -> str | None:
    if path is None:
        return None
    text = os.fspath(path) if not isinstance(path, int) else _fd_path(path)
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    text = os.path.abspath(text)
    if _State.root:
        root = os.path.abspath(_State.root)
        if text == root or text.startswith(root + os.sep):
            return os.path.relpath(text, root)
        return text
    marker = os.sep + ".ctx"
    idx = text.rfind(marker + os.sep)
    if idx >= 0:
        return text[idx + len(marker) + 1:]
    if text.endswith(marker):
        return "."
    return text


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _log(record: dict) -> None:
    if _State.trace_fd is None:
        return
    import json

    record = {"pid": os.getpid(), **record}
    os.write(_State.trace_fd, (json.dumps(record, sort_keys=True) + "\n").encode())


def _at(path: object, dir_fd: int | None) -> object:
    """``path`` as a full path: a name relative to an open directory ``dir_fd`` is joined to it."""
    if dir_fd is None or path is None or isinstance(path, int):
        return path
    folder = _fd_path(dir_fd)
    return os.path.join(folder, os.fspath(path)) if folder else path


def _describe(name: str, args: tuple, kwargs: dict) -> dict:
    """Trace fields for one call (paths, lengths); cheap unless tracing."""
    rec: dict = {"op": name}
    if _State.trace_fd is None:
        return rec
    dir_fd = kwargs.get("dir_fd")
    if name in ("write_all", "fsync_file"):
        rec["path"] = _rel(args[0]) if args else None
        if name == "write_all" and len(args) > 1:
            import hashlib

            data = bytes(args[1])
            rec["len"] = len(data)
            rec["sha"] = hashlib.sha256(data).hexdigest()[:16]
    elif name in ("replace", "link"):
        rec["path"] = _rel(_at(args[0], dir_fd))
        rec["dst"] = _rel(_at(args[1], dir_fd))
    elif args:
        rec["path"] = _rel(_at(args[0], dir_fd))
    return rec


def _kill_self() -> None:
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def _wrap(name: str, func):  # type: ignore[no-untyped-def]
    from fnmatch import fnmatchcase

    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        _State.seq += 1
        seq = _State.seq
        kill_after = False
        for k in _State.kills:
            if fnmatchcase(name, k["glob"]):
                k["seen"] += 1
                if k["seen"] == k["n"]:
                    if k["when"] == "before":
                        _log({"seq": seq, "op": "KILL", "before": name})
                        _kill_self()
                    kill_after = True
        rec = _describe(name, args, kwargs)
        rec["seq"] = seq
        for e in _State.errs:
            if fnmatchcase(name, e["glob"]):
                e["seen"] += 1
                if e["seen"] == e["n"] or (e["sticky"] and e["fired"]):
                    e["fired"] = True
                    code = e["errno"]
                    rec["errno"] = code
                    rec["injected"] = True
                    _log(rec)
                    target = None
                    if args:
                        target = _fd_path(args[0]) if isinstance(args[0], int) \
                            else os.fspath(_at(args[0], kwargs.get("dir_fd")))
                    raise OSError(code, os.strerror(code), target)
        try:
            result = func(*args, **kwargs)
        except OSError as exc:
            rec["errno"] = exc.errno
            _log(rec)
            if kill_after:
                _kill_self()
            raise
        except BaseException:
            _log(rec)
            if kill_after:
                _kill_self()
            raise
        _log(rec)
        if kill_after:
            _log({"seq": seq, "op": "KILL", "after": name})
            _kill_self()
        return result

    wrapper.__name__ = name
    wrapper.__wrapped__ = func  # type: ignore[attr-defined]
    wrapper.__ctx_fault_shim__ = True  # type: ignore[attr-defined]
    return wrapper


def _unsafe_replace_atomic(module):  # type: ignore[no-untyped-def]
    def replace_atomic(path, data, *, mode=0o644):  # type: ignore[no-untyped-def]
        try:
            module.unlink(path)
        except FileNotFoundError:
            pass
        fd = module.open_excl(path, mode)
        try:
            module.write_all(fd, data)
        finally:
            os.close(fd)

    return replace_atomic


def _unsafe_dir_replace_atomic(module):  # type: ignore[no-untyped-def]
    """The same unsafe rewrite for ``Dir.replace_atomic`` (a file below an open directory)."""
    def replace_atomic(self, rel, data, *, mode=0o644):  # type: ignore[no-untyped-def]
        dir_fd, name, _where = self._open_parent(rel, create=True)
        try:
            try:
                module.unlink(name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            fd = module.open_excl(name, mode, dir_fd=dir_fd)
            try:
                module.write_all(fd, data)
            finally:
                os.close(fd)
        finally:
            self._done(dir_fd)

    return replace_atomic


def _patch(module) -> None:  # type: ignore[no-untyped-def]
    """Wrap the primitives of ``ctxstore.fsio.core`` or of the package that re-exports them.

    The core is patched when it has run, before the package binds its names, so the package
    then holds the same wrappers (a wrapper is never wrapped twice): a call through the
    package (``fsio.replace``) and one inside it (``core.replace``) each pass one wrapper.
    """
    if "replace_atomic" in _State.unsafe:
        module.replace_atomic = _unsafe_replace_atomic(module)
        if hasattr(module, "Dir"):
            module.Dir.replace_atomic = _unsafe_dir_replace_atomic(module)
    for name in _PRIMITIVES:
        func = getattr(module, name, None)
        if func is None or getattr(func, "__ctx_fault_shim__", False):
            continue
        setattr(module, name, _wrap(name, func))


def _install_import_hook() -> None:
    import importlib.abc

    class _Loader(importlib.abc.Loader):
        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            self.inner = inner

        def create_module(self, spec):  # type: ignore[no-untyped-def]
            return self.inner.create_module(spec)

        def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
            self.inner.exec_module(module)
            _patch(module)

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
            if fullname not in _PATCHED_MODULES:
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None:
                        spec.loader = _Loader(spec.loader)
                    return spec
            return None

    sys.meta_path.insert(0, _Finder())


class _TracedStdout:
    """Raw writer for fd 1 that logs each write (the ACK) to the trace."""

    def __init__(self) -> None:
        import io

        class Raw(io.RawIOBase):
            def writable(self) -> bool:
                return True

            def fileno(self) -> int:
                return 1

            def isatty(self) -> bool:
                return False

            def write(self, b) -> int:  # type: ignore[no-untyped-def]
                n = os.write(1, bytes(b))
                # Not an operation of its own (kill/err indices count fsio calls only):
                # it carries the seq of the last operation before it.
                _log({"seq": _State.seq, "op": "stdout", "len": n})
                return n

        self.raw = Raw()


def _install(spec: str) -> None:
    _parse(spec)
    if _State.count_file is not None:
        import atexit

        def _write_count() -> None:
            with open(_State.count_file, "w") as fh:  # type: ignore[arg-type]
                fh.write(f"{_State.seq}\n")

        atexit.register(_write_count)
    if _State.trace_fd is not None:
        import io

        old = sys.stdout
        raw = _TracedStdout().raw
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw),
                                      encoding=getattr(old, "encoding", None) or "utf-8",
                                      errors=getattr(old, "errors", None) or "strict",
                                      line_buffering=True)
    mods = [sys.modules.get(name) for name in _PATCHED_MODULES]
    if mods[0] is not None:
        for mod in mods:
            _patch(mod)
    else:
        _install_import_hook()


def arm(spec: str, root: str | None) -> None:
    """Arm the shim in a process forked from one that imported it idle (``tests/crash/_forkserver.py``).

    The same as starting afresh with ``CTX_FAULT=spec`` and ``CTX_FAULT_ROOT=root``: the
    counters start at 0 and the already imported fsio primitives are wrapped.
    """
    _State.seq = 0
    _State.count_file = None
    _State.trace_fd = None
    _State.kills = []
    _State.errs = []
    _State.root = root or None
    _State.unsafe = []
    if spec.strip():
        _install(spec.strip())


if _SPEC:
    _install(_SPEC)
