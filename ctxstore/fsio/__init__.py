"""Durable file I/O: the only place that writes, renames, fsyncs or unlinks under ``.ctx/``.

Everything that must survive a crash goes through these primitives, so a test shim can
count them, kill the process between any two of them, or make any one of them fail
(see tests/_shim). The rules they implement:

* a new file is written to a temp file in the same directory, opened exclusively,
  and renamed into place, so readers never see a partial file;
* a pointer is fsynced before its rename and its directory after it;
* a batch of objects is made durable with one filesystem barrier (``sync_barrier``)
  instead of one fsync per file; pointers move only after that barrier;
* I/O below a trusted directory (the store, a project folder) goes through one handle,
  ``Dir`` (``open_dir``): each directory below the root is opened ``O_NOFOLLOW`` relative to
  its parent's descriptor, and the file is created, renamed, read or removed relative to the
  last one, so a directory swapped for a symlink between a check and the write is never
  followed (PS-10).

Its modules: ``core`` (the primitives the fault shim counts, bounded reads and the
containment checks, atomic writes by name), ``dirs`` (``Dir``, the directory handle),
``paths`` (writes by a path a user names, folders made, a file's mode) and ``locks`` (the
writer lock file). The package must not import anything from ctxstore except ``errors``; this module only
re-exports what they define.
"""

from __future__ import annotations

from ctxstore.fsio import core
from ctxstore.fsio.core import *  # noqa: F403  (core.__all__: one list of the primitives)
from ctxstore.fsio.core import StrPath
from ctxstore.fsio.dirs import Dir, open_dir
from ctxstore.fsio.locks import hold_lock, lock_is_held, read_lock_pid
from ctxstore.fsio.paths import ensure_dir, mode_of, write_output

# Everything ``core`` declares, and the rest of the package's names.
__all__ = [
    *core.__all__,
    "write_output",
    "mode_of",
    "ensure_dir",
    "hold_lock",
    "lock_is_held",
    "read_lock_pid",
    "Dir",
    "open_dir",
    "core",
    "StrPath",
]
