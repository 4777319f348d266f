"""Running a tool bounded, and storing a command's run (``ctx add command``).

``run_bounded`` runs a program with a timeout and an output cap: standard output and
error merged, the head kept up to the cap and a tail after it, the child's whole process
group killed at the timeout, standard input closed. ``cargo metadata`` and ``ctx add
command -- CMD`` both run through it. ``record_command`` parses an output
(``code.diagnostics``), bounds what is kept (``[ingestion]``: bytes and log lines), and
stages the ``diagnostics`` snapshot, its output blob and a ``command_run`` record in one
work commit; each span's enclosing symbol is resolved then, from the index as it stands
under the lock (``index.build.enclosing_item``), and stored on the span. The environment
of the child is a parameter: only ``cli/`` reads ``os.environ``. It must not print or run
SQL.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.code.diagnostics import TOOLS, detect_tool, parse_output, relative_spans
from ctxstore.errors import InvalidInput
from ctxstore.ids import ObjectId
from ctxstore.index.build import (
    CommandRunRow,
    DiagnosticRow,
    command_run_history,
    enclosing_item,
    find_winner,
)
from ctxstore.index.build import command_runs as _command_runs
from ctxstore.index.build import latest_diagnostics as _latest_rows
from ctxstore.index.runs import run_status, summarize_diagnostics
from ctxstore.model.build import CommandRunRecord, Diagnostic, DiagnosticsSnapshot
from ctxstore.records import dataclass
from ctxstore.security.guard import guard, policy
from ctxstore.session import Session
from ctxstore.staging import StageResult, check_text, stage_records

if TYPE_CHECKING:
    import sqlite3

__all__ = ["RunResult", "Captured", "CommandRun", "run_bounded", "read_bounded", "record_command",
           "bound_output",
           "latest_diagnostics", "latest_runs", "PastRun", "run_history", "run_status",
           "diagnostics_summary",
           "CommandNotStarted", "DEFAULT_TIMEOUT", "CAPTURE_HEAD_BYTES", "CAPTURE_TAIL_BYTES"]

DEFAULT_TIMEOUT = 600.0
# What a run keeps of its output for parsing: the head up to here, then the last bytes.
CAPTURE_HEAD_BYTES = 16 << 20
CAPTURE_TAIL_BYTES = 1 << 20
_MAX_NAME_CHARS = 200


class CommandNotStarted(InvalidInput):
    """The program could not be started (not found, not executable)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a bounded run gave.

    Attributes:
        exit_code: The exit status (a signal N gives ``128 + N``, as shells say), None
            after a timeout.
        output: Standard output and error as captured (head, then tail when cut).
        total_bytes: How many bytes the program wrote.
        timed_out: Whether the timeout ended it.
        seconds: How long it ran.
    """

    exit_code: int | None
    output: bytes
    total_bytes: int
    timed_out: bool
    seconds: float

    @property
    def cut(self) -> bool:
        """Whether the middle of the output was dropped."""
        return self.total_bytes > len(self.output)


def run_bounded(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float,
                head_bytes: int = CAPTURE_HEAD_BYTES,
                tail_bytes: int = CAPTURE_TAIL_BYTES) -> RunResult:
    """Run ``argv`` in ``cwd`` with ``env``; capture stdout and stderr merged, bounded.

    The child gets no standard input and its own process group, so a timeout ends
    everything it started.

    Args:
        argv: The program and its arguments.
        cwd: The working directory.
        env: The complete environment of the child.
        timeout: Seconds before the process group is killed.
        head_bytes: Keep this many bytes from the start.
        tail_bytes: And this many from the end when there were more.

    Returns:
        The exit status, the output and whether it was cut or timed out.

    Raises:
        CommandNotStarted: (E011) if the program cannot be started.
    """
    started = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    except OSError as exc:
        raise CommandNotStarted(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    assert proc.stdout is not None
    got = read_bounded(proc.stdout.fileno(), timeout=timeout, head_bytes=head_bytes,
                       tail_bytes=tail_bytes)
    if got.timed_out:
        _kill_group(proc)
    proc.stdout.close()
    code = proc.wait()
    exit_code = None if got.timed_out else (128 - code if code < 0 else code)
    return RunResult(exit_code, got.data, got.total_bytes, got.timed_out,
                     time.monotonic() - started)


@dataclass(frozen=True, slots=True)
class Captured:
    """What ``read_bounded`` read: the head and tail kept, the size, whether time ran out."""

    data: bytes
    total_bytes: int
    timed_out: bool


def read_bounded(fd: int, *, timeout: float, head_bytes: int = CAPTURE_HEAD_BYTES,
                 tail_bytes: int = CAPTURE_TAIL_BYTES) -> Captured:
    """Read ``fd`` to its end or until ``timeout``, keeping the head and the tail.

    Args:
        fd: A readable descriptor (a pipe, a FIFO, a file).
        timeout: Seconds to wait for the end.
        head_bytes: Keep this many bytes from the start.
        tail_bytes: And this many from the end when there were more.

    Returns:
        The bytes kept, how many were read, and whether the end never came.
    """
    deadline = time.monotonic() + timeout
    head, tail = bytearray(), bytearray()
    total = 0
    with selectors.DefaultSelector() as sel:
        try:
            sel.register(fd, selectors.EVENT_READ)
        except PermissionError:  # a regular file cannot be polled (epoll): always readable
            pass
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return Captured(bytes(head + tail), total, True)
            if sel.get_map() and not sel.select(min(left, 1.0)):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return Captured(bytes(head + tail), total, False)
            total += len(chunk)
            room = max(head_bytes - len(head), 0)
            head += chunk[:room]
            if room < len(chunk):
                tail += chunk[room:]
                del tail[:max(0, len(tail) - tail_bytes)]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group of the child we started, only
    except ProcessLookupError:
        pass


def bound_output(data: bytes, *, max_bytes: int, max_lines: int) -> tuple[bytes, list[str]]:
    """What of an output is stored: at most ``max_bytes`` and ``max_lines`` lines, head and tail.

    The first half and the last half are kept (a build's errors come first, a test
    run's summary last), joined by one marker line.

    Args:
        data: The output.
        max_bytes: Bytes kept at most (``[ingestion] max_bytes_per_step``).
        max_lines: Lines kept at most (``[ingestion] max_log_lines``).

    Returns:
        The bytes to store and a note for each limit that cut.
    """
    notes: list[str] = []
    lines = data.splitlines(keepends=True)
    if len(lines) > max_lines:
        half = max_lines // 2
        dropped = len(lines) - 2 * half
        data = b"".join([*lines[:half], b"[ctx: %d lines omitted]\n" % dropped,
                         *lines[len(lines) - half:]])
        notes.append(f"output cut to {max_lines} lines ({len(lines)} written)")
    if len(data) > max_bytes:
        half = max_bytes // 2
        notes.append(f"output cut to {max_bytes} bytes ({len(data)} kept after the line limit)")
        data = data[:half] + b"\n[ctx: %d bytes omitted]\n" % (len(data) - 2 * half) \
            + data[len(data) - half:]
    return data, notes


def _with_items(conn: sqlite3.Connection, diags: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The diagnostics with each span's ``item``: its enclosing indexed symbol, now."""
    return tuple(replace(d, spans=tuple(
        replace(s, item=enclosing_item(conn, s.path, s.start_line)) if s.start_line > 0 else s
        for s in d.spans)) for d in diags)


@dataclass(frozen=True, slots=True)
class CommandRun:
    """What ``record_command`` stored."""

    snapshot: DiagnosticsSnapshot
    snapshot_id: bytes
    staged: StageResult
    replaced: bool


def record_command(db: Session, name: str, output: bytes, *, argv: Sequence[str] = (),
                   exit_code: int | None = None, tool: str | None = None,
                   total_bytes: int | None = None, cwd: Path | None = None,
                   notes: Sequence[str] = ()) -> CommandRun:
    """Parse and stage one run of a named command; it replaces the previous run of that name.

    Today's narrative log gets one line naming the run (spec 002 A.5 step 8). Secrets in the
    output, the command line and the name are redacted (``[security] commands``).

    Args:
        db: The open session.
        name: The command's name (``cargo test``): the key the newest run is kept under.
        output: What it printed (stdout and stderr), as captured.
        argv: The command line, when ctx ran it.
        exit_code: Its exit status, when known.
        tool: The tool whose parser to use (``TOOLS``); detected when None.
        total_bytes: How many bytes it wrote, when more than ``output`` holds.
        cwd: Where it ran, for relative span paths (the repository root when None).
        notes: What was cut or went wrong before (a timeout), stored with the run.

    Returns:
        The snapshot, its id and the work commit.

    Raises:
        InvalidInput: (E011) for an empty or over-long name, or an unknown tool.
        LockConflict, StagingConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    name = name.strip()
    if not name or len(name) > _MAX_NAME_CHARS or "\n" in name:
        raise InvalidInput(f"--name must be one line of 1 to {_MAX_NAME_CHARS} characters")
    check_text(name, "--name")
    if tool is not None and tool not in TOOLS:
        raise InvalidInput(f"unknown tool {tool!r}", hint="one of " + ", ".join(TOOLS))
    # Automatic capture: secrets in the output and the command line are redacted before
    # anything is parsed or stored, so diagnostics, the output blob and the log line are
    # free of them (docs/security.md).
    pol = policy(store)
    text = output.decode("utf-8", "replace")
    clean = guard(store, "commands", text, what="the output", policy_=pol)
    if clean is not text:
        text, output = clean, clean.encode("utf-8")
    argv = [guard(store, "commands", arg, what="the command line", policy_=pol) for arg in argv]
    name = guard(store, "commands", name, what="--name", policy_=pol)
    chosen = tool or detect_tool(argv, name, text)
    parsed = parse_output(text, chosen)
    root = store.worktree.absolute().as_posix()
    diags = relative_spans(parsed.diagnostics, root=root,
                           cwd=(cwd or store.worktree).absolute().as_posix())
    config = store.config
    kept, cut = bound_output(output, max_bytes=int(config.get("ingestion", "max_bytes_per_step")),
                             max_lines=int(config.get("ingestion", "max_log_lines")))
    with store.transaction() as tx:  # holds the lock: the run replaced is read under it
        conn = db.index()
        prev = find_winner(conn, ("command_run", name))
        before = _previous_run(db, conn, name, prev)  # for the log's pass/fail transition
        diags = _with_items(conn, diags)
        stamp = next_stamp(prev[0] if prev else None)
        blob = tx.put_blob(kept)
        snap = DiagnosticsSnapshot(
            tool=chosen, timestamp=stamp, name=name, argv=tuple(argv), exit_code=exit_code,
            output_blob=blob, output_bytes=len(output) if total_bytes is None else total_bytes,
            diagnostics=diags, notes=(*notes, *parsed.notes, *cut))
        snap_id = tx.put(snap)
        rec = CommandRunRecord(name=name, snapshot=snap_id, tool=chosen, exit_code=exit_code,
                               updated_at=stamp, prev=ObjectId(prev[1]) if prev else None)
        staged = stage_records(store, [rec], message=f"command {name}", step_kind="command_run",
                               tx=tx)
        from ctxstore.narrative.entries import log_event

        log_event(store, "command-run", f"Ran {name}: exit "
                  f"{'unknown' if exit_code is None else exit_code}, {len(diags)} diagnostics; "
                  + _transition(name, before, exit_code, diags),
                  staged.session_id)  # before the transaction moves STAGE
    return CommandRun(snap, snap_id, staged, prev is not None)


def latest_diagnostics(session: Session, paths: Iterable[str] | None = None, *,
                       name: str | None = None, limit: int = 200) -> list[DiagnosticRow]:
    """The diagnostics of the latest run of every named command, errors first.

    What a failing command reported stays visible to later reads (``ctx diagnostics``,
    prompt packs) until a newer run of the same name replaces it.

    Args:
        session: The open session (its index is brought up to date).
        paths: Only diagnostics whose first span is in one of these repository-relative files.
        name: Only this command's.
        limit: At most this many.

    Returns:
        The rows, errors before warnings, newest run first.
    """
    return _latest_rows(session.index(), paths, name=name, limit=limit)


def latest_runs(session: Session, name: str | None = None) -> list[CommandRunRow]:
    """The latest run of every stored command (or of ``name``), newest first.

    Args:
        session: The open session (its index is brought up to date).
        name: Only this command's.

    Returns:
        The runs (``ctx diagnostics`` lists them with their diagnostics).
    """
    return _command_runs(session.index(), name)


def diagnostics_summary(diags: Sequence[Diagnostic], *, files: int = 3) -> str:
    """``3 errors in calc.py``, ``1 error, 2 warnings in a.py, b.py``, or ``no diagnostics``.

    Args:
        diags: A run's diagnostics.
        files: Name at most this many files (then ``and N more``).

    Returns:
        One short phrase (``index.runs.summarize_diagnostics``, which search shows too).
    """
    return summarize_diagnostics(((d.severity, d.spans[0].path if d.spans else None)
                                  for d in diags), files=files)


def _outcome(exit_code: int | None, diags: Sequence[Diagnostic]) -> str:
    status = run_status(exit_code)
    return status if status == "passed" else f"{status} ({diagnostics_summary(diags)})"


def _transition(name: str, before: PastRun | None, exit_code: int | None,
                diags: Sequence[Diagnostic]) -> str:
    """The log's word on a run: ``pytest: failed (3 errors in x.py) → passed`` when it changed."""
    now = _outcome(exit_code, diags)
    if before is None or run_status(before.exit_code) == run_status(exit_code):
        return f"{name}: {now}"
    return f"{name}: {_outcome(before.exit_code, before.diagnostics)} → {now}"


@dataclass(frozen=True, slots=True)
class PastRun:
    """One stored run of a command (``run_history``).

    Attributes:
        name: The command's name.
        run_at: When it was stored (ms since the epoch).
        exit_code: Its exit status, None when unknown (a timeout, ``--stdin`` without one).
        tool: The parser used.
        snapshot: The ``diagnostics`` snapshot's object id.
        diagnostics: What was parsed from its output.
        argv: The command line, when ctx ran it.
    """

    name: str
    run_at: int
    exit_code: int | None
    tool: str
    snapshot: bytes
    diagnostics: tuple[Diagnostic, ...]
    argv: tuple[str, ...]

    @property
    def status(self) -> str:
        """``passed``, ``failed`` or ``unknown`` (``run_status``)."""
        return run_status(self.exit_code)


def _run_record(name: str, wire: bytes) -> CommandRunRecord:
    from ctxstore.errors import IndexCorrupt
    from ctxstore.model import codec
    from ctxstore.model.knowledge import record_from_wire

    rec = record_from_wire(codec.decode(wire), "index")
    if not isinstance(rec, CommandRunRecord):
        raise IndexCorrupt(f"the index holds a {rec.KIND} record under command run {name!r}")
    return rec


def _past_run(db: Session, name: str, stamp: int, wire: bytes,
              rec: CommandRunRecord | None = None) -> PastRun:
    rec = rec or _run_record(name, wire)
    snap = db.store.read_typed(ObjectId(rec.snapshot), DiagnosticsSnapshot)
    return PastRun(rec.name, stamp, rec.exit_code, rec.tool, bytes(rec.snapshot),
                   tuple(snap.diagnostics), tuple(snap.argv))


def _previous_run(db: Session, conn: sqlite3.Connection, name: str,
                  prev: tuple[int, bytes] | None) -> PastRun | None:
    """The run of ``name`` the new one replaces (its winner before), or None."""
    if prev is None:
        return None
    rows = command_run_history(conn, name, limit=1)
    return _past_run(db, *rows[0]) if rows else None


def run_history(session: Session, name: str | None = None, *, limit: int = 50,
                failing_only: bool = False) -> list[PastRun]:
    """Every stored run of every command (or of ``name``), newest first.

    A new run of a name replaces the last one for ``ctx diagnostics`` and a pack's file
    diagnostics, but each run stays in the store and the index: a command that failed
    before it passed is remembered (``ctx diagnostics --history``, packs).

    Args:
        session: The open session (its index is brought up to date).
        name: Only this command's runs.
        limit: At most this many runs looked at (each returned reads its snapshot).
        failing_only: Only the runs that did not pass (their snapshots alone are read).

    Returns:
        The runs, newest first.

    Raises:
        IndexCorrupt: (E007) if a version under a command run's key is not one.
        ObjectMissing, ObjectCorrupt: if a run's snapshot is gone or damaged.
    """
    out = []
    for name_, stamp, wire in command_run_history(session.index(), name, limit=limit):
        rec = _run_record(name_, wire)
        if not (failing_only and run_status(rec.exit_code) == "passed"):
            out.append(_past_run(session, name_, stamp, wire, rec))
    return out
