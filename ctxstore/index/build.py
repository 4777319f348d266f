"""Build rows of the index: Cargo packages, targets, crates, command runs and diagnostics.

Applied when a ``cargo`` or ``command_run`` record wins its key (``index.apply``): the rows
of that workspace or that command name are deleted and rebuilt from the snapshot the record
names, so a new snapshot replaces the old as a unit. Edges go to ``build_edges`` with
``path`` = ``cargo:<manifest path>`` or ``cmd:<name>`` (never a file's path, which file
ingestion replaces on its own): ``DependsOn`` package → package, ``TargetOf`` target →
package, ``CrateFromTarget`` crate → target, and ``References`` from each diagnostic
(``("diagnostic", "<name>#<n>")``) to the files its spans name and to the indexed symbols
(``("item", qualname)``) the spans fell inside when the run was recorded (``enclosing_item``,
stored on each span: applying only copies it, so the rows do not depend on whether the
files are applied before or after the run). Endpoint keys: a package is Cargo's package id,
a target the hex of its ``target_id``, a crate ``<package name>@<version>/<kind>/<crate
name>``. The SELECTs of these tables live here too. It must not print.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

from ctxstore.index.read import json_cell
from ctxstore.model.build import (
    CargoMetadataSnapshot,
    CargoPackage,
    CargoRecord,
    CargoTarget,
    CommandRunRecord,
    DiagnosticsSnapshot,
)
from ctxstore.model.knowledge import key_text
from ctxstore.objects import ObjectId
from ctxstore.records import dataclass
from ctxstore.repo import Store

__all__ = ["BUILD_TABLES", "BuildEdge", "DiagnosticRow", "CommandRunRow", "apply_build_record",
           "cargo_edges", "crate_key", "cargo_edge_path", "command_edge_path", "enclosing_item",
           "find_winner", "latest_diagnostics", "command_runs", "command_run_history",
           "cargo_packages"]

BUILD_TABLES = ("packages", "targets", "crates", "command_runs", "diagnostics", "build_edges")

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2, "hint": 3, "note": 4, "help": 5}


@dataclass(frozen=True, slots=True)
class BuildEdge:
    """An edge derived from a build snapshot, as ``build_edges`` stores it."""

    from_ref: tuple[str, str]
    to_ref: tuple[str, str]
    label: str
    evidence: dict[str, object]


@dataclass(frozen=True, slots=True)
class DiagnosticRow:
    """One diagnostic of the latest run of a command (its first span's place)."""

    id: str
    command: str
    tool: str
    severity: str
    code: str | None
    message: str
    path: str | None
    line: int | None
    col: int | None
    exit_code: int | None
    run_at: int


@dataclass(frozen=True, slots=True)
class CommandRunRow:
    """The latest run of a named command."""

    name: str
    tool: str
    exit_code: int | None
    run_at: int
    snapshot: bytes
    output_blob: bytes
    output_bytes: int
    diagnostics: int
    argv: list[str]
    notes: list[str]


def cargo_edge_path(manifest_path: str) -> str:
    """The ``build_edges.path`` of a workspace's edges."""
    return f"cargo:{manifest_path}"


def command_edge_path(name: str) -> str:
    """The ``build_edges.path`` of a command's diagnostic edges."""
    return f"cmd:{name}"


def crate_key(package: CargoPackage, target: CargoTarget) -> str:
    """The endpoint key of the crate a target compiles to.

    Args:
        package: The target's package.
        target: The target.

    Returns:
        ``<package name>@<version>/<kind>/<crate name>`` (``-`` in the name as ``_``).
    """
    return f"{package.name}@{package.version}/{target.kind}/{target.name.replace('-', '_')}"


def cargo_edges(snapshot: CargoMetadataSnapshot, snapshot_id: bytes) -> list[BuildEdge]:
    """The ``DependsOn``, ``TargetOf`` and ``CrateFromTarget`` edges of a snapshot.

    One ``DependsOn`` per package pair, its dep kinds (``normal``, ``dev``, ``build``),
    optional flag, features and rename in the evidence.

    Args:
        snapshot: The snapshot.
        snapshot_id: Its object id (the evidence's blob).

    Returns:
        The edges, evidence tool ``cargo``, confidence ``high``.
    """
    base: dict[str, object] = {"tool": "cargo", "confidence": "high", "blob": snapshot_id.hex()}
    edges: list[BuildEdge] = []
    pairs: dict[tuple[str, str], list[dict[str, object]]] = {}
    for dep in snapshot.resolve:
        pairs.setdefault((dep.from_package_id, dep.to_package_id), []).append(
            {"kind": dep.dep_kind, "optional": dep.optional,
             "features": list(dep.features_enabled), "rename": dep.rename})
    for (src, dst), kinds in pairs.items():
        edges.append(BuildEdge(("package", src), ("package", dst), "DependsOn",
                               {**base, "dep_kinds": kinds}))
    for pkg in snapshot.packages:
        for target in pkg.targets:
            tid = target.target_id.hex()
            edges.append(BuildEdge(("target", tid), ("package", pkg.package_id), "TargetOf",
                                   {**base, "kind": target.kind}))
            edges.append(BuildEdge(("crate", crate_key(pkg, target)), ("target", tid),
                                   "CrateFromTarget", dict(base)))
    return edges


def _insert_edges(conn: sqlite3.Connection, path: str, edges: Iterable[BuildEdge]) -> None:
    conn.executemany(
        "INSERT INTO build_edges(path, from_kind, from_key, to_kind, to_key, label, confidence,"
        " tool, evidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(path, *e.from_ref, *e.to_ref, e.label, str(e.evidence["confidence"]),
          str(e.evidence["tool"]), json.dumps(e.evidence, sort_keys=True)) for e in edges])


def apply_build_record(store: Store, conn: sqlite3.Connection,
                       rec: CargoRecord | CommandRunRecord) -> None:
    """Replace the rows of the record's workspace or command with its snapshot's.

    Args:
        store: The store (the snapshot is read).
        conn: The index connection (the caller's transaction).
        rec: The record that won its key.
    """
    if isinstance(rec, CargoRecord):
        _apply_cargo(store, conn, rec)
    else:
        _apply_command(store, conn, rec)


def _apply_cargo(store: Store, conn: sqlite3.Connection, rec: CargoRecord) -> None:
    snap = store.read_typed(ObjectId(rec.snapshot), CargoMetadataSnapshot)
    ws = rec.workspace_root
    for table in ("packages", "targets", "crates"):
        conn.execute(f"DELETE FROM {table} WHERE workspace = ?", (ws,))  # noqa: S608 - fixed names
    conn.execute("DELETE FROM build_edges WHERE path = ?", (cargo_edge_path(rec.manifest_path),))
    conn.executemany(
        "INSERT OR REPLACE INTO packages(workspace, package_id, name, version, manifest_path,"
        " edition, member) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(ws, p.package_id, p.name, p.version, p.manifest_path, p.edition, int(p.member))
         for p in snap.packages])
    conn.executemany(
        "INSERT OR REPLACE INTO targets(workspace, target_id, package_id, name, kind, src_path,"
        " crate_types) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(ws, t.target_id.hex(), p.package_id, t.name, t.kind, t.src_path,
          json.dumps(list(t.crate_types))) for p in snap.packages for t in p.targets])
    conn.executemany(
        "INSERT OR REPLACE INTO crates(workspace, crate_key, target_id, name) VALUES (?, ?, ?, ?)",
        [(ws, crate_key(p, t), t.target_id.hex(), t.name.replace("-", "_"))
         for p in snap.packages for t in p.targets])
    _insert_edges(conn, cargo_edge_path(rec.manifest_path), cargo_edges(snap, rec.snapshot))


def enclosing_item(conn: sqlite3.Connection, path: str, line: int) -> str | None:
    """The innermost indexed symbol of ``path`` (not a module) whose lines hold ``line``.

    Args:
        conn: The index connection (up to date: ``ctx add command`` resolves under the lock).
        path: A repository-relative file path.
        line: A 1-based line.

    Returns:
        Its qualified name (the shortest span wins, then the smallest name), or None.
    """
    row = conn.execute(
        "SELECT qualname FROM symbols WHERE path = ? AND start_line <= ? AND end_line >= ?"
        " AND kind != 'module' ORDER BY end_line - start_line, qualname LIMIT 1",
        (path, line, line)).fetchone()
    return str(row[0]) if row is not None else None


def _apply_command(store: Store, conn: sqlite3.Connection, rec: CommandRunRecord) -> None:
    snap = store.read_typed(ObjectId(rec.snapshot), DiagnosticsSnapshot)
    name = rec.name
    conn.execute("DELETE FROM diagnostics WHERE command = ?", (name,))
    conn.execute("DELETE FROM command_runs WHERE name = ?", (name,))
    edge_path = command_edge_path(name)
    conn.execute("DELETE FROM build_edges WHERE path = ?", (edge_path,))
    conn.execute(
        "INSERT INTO command_runs(name, tool, exit_code, run_at, snapshot, output_blob,"
        " output_bytes, diagnostics, argv, notes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (name, snap.tool, snap.exit_code, snap.timestamp, rec.snapshot, snap.output_blob,
         snap.output_bytes, len(snap.diagnostics), json.dumps(list(snap.argv)),
         json.dumps(list(snap.notes))))
    rows = []
    edges: list[BuildEdge] = []
    for n, diag in enumerate(snap.diagnostics, 1):
        did = f"{name}#{n}"
        first = diag.spans[0] if diag.spans else None
        rows.append((did, name, snap.tool, diag.severity, diag.code, diag.message,
                     first.path if first else None, first.start_line if first else None,
                     first.start_col if first else None, snap.exit_code, snap.timestamp))
        targets: dict[tuple[str, str], dict[str, object]] = {}
        for span in diag.spans:
            ev: dict[str, object] = {"tool": snap.tool, "confidence": "high",
                                     "blob": rec.snapshot.hex(),
                                     "lines": [span.start_line, span.end_line]}
            if span.start_byte is not None and span.end_byte is not None:
                ev["span"] = [span.start_byte, span.end_byte]
            targets.setdefault(("file", span.path), ev)
            if span.item is not None:
                targets.setdefault(("item", span.item), {**ev, "confidence": "medium"})
        edges.extend(BuildEdge(("diagnostic", did), to, "References", ev)
                     for to, ev in targets.items())
    conn.executemany(
        "INSERT OR REPLACE INTO diagnostics(id, command, tool, severity, code, message, path,"
        " line, col, exit_code, run_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    _insert_edges(conn, edge_path, edges)


# -- reads -----------------------------------------------------------------------------------------


def find_winner(conn: sqlite3.Connection, key: Sequence[str]) -> tuple[int, bytes] | None:
    """The stamp and version of the live record winning ``key``, or None.

    Args:
        conn: The index connection.
        key: The replay key (``("command_run", name)``, ``("cargo", root)``).

    Returns:
        ``(stamp, version id)``, or None when nothing holds the key.
    """
    row = conn.execute("SELECT stamp, version FROM winners WHERE key = ? AND live = 1",
                       (key_text(tuple(key)),)).fetchone()
    return (int(row[0]), bytes(row[1])) if row is not None else None


def latest_diagnostics(conn: sqlite3.Connection, paths: Iterable[str] | None = None, *,
                       name: str | None = None, limit: int = 200) -> list[DiagnosticRow]:
    """The diagnostics of the latest run of every command (or one), errors first.

    Args:
        conn: The index connection.
        paths: Only diagnostics whose first span is in one of these files.
        name: Only this command's.
        limit: At most this many.

    Returns:
        The rows, errors before warnings, newest run first, then in output order.
    """
    sql = ("SELECT id, command, tool, severity, code, message, path, line, col, exit_code,"
           " run_at FROM diagnostics")
    where: list[str] = []
    args: list[object] = []
    if name is not None:
        where.append("command = ?")
        args.append(name)
    if paths is not None:
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return []
        where.append(f"path IN ({', '.join('?' * len(wanted))})")
        args.extend(wanted)
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = [DiagnosticRow(*r) for r in conn.execute(sql, args).fetchall()]

    def order(r: DiagnosticRow) -> tuple[int, int, str, int]:
        return (_SEVERITY_ORDER.get(r.severity, 9), -r.run_at, r.command,
                int(r.id.rpartition("#")[2]))

    return sorted(rows, key=order)[:limit]


def command_runs(conn: sqlite3.Connection, name: str | None = None) -> list[CommandRunRow]:
    """The latest run of every named command (or of one), newest first.

    Args:
        conn: The index connection.
        name: Only this command.

    Returns:
        The runs.
    """
    sql = ("SELECT name, tool, exit_code, run_at, snapshot, output_blob, output_bytes,"
           " diagnostics, argv, notes FROM command_runs")
    rows = conn.execute(sql + (" WHERE name = ?" if name is not None else "")
                        + " ORDER BY run_at DESC, name", (name,) if name is not None else ())
    return [CommandRunRow(r[0], r[1], r[2], r[3], bytes(r[4]), bytes(r[5]), r[6], r[7],
                          json_cell(r[8], "command argv"), json_cell(r[9], "command notes"))
            for r in rows.fetchall()]


_RUN_KEYS = ("command_run\x1f", "command_run\x20")  # every key of a command's runs, in order


def command_run_history(conn: sqlite3.Connection, name: str | None = None, *,
                        limit: int = 100) -> list[tuple[str, int, bytes]]:
    """Every stored run of every command (or of one), newest first: each ``command_run`` version.

    A new run of a name replaces the previous one as the name's winner, but each version
    stays in ``versions`` (a purge takes its own out): the runs a command had.

    Args:
        conn: The index connection.
        name: Only this command's runs.
        limit: At most this many.

    Returns:
        ``(name, stamp, record)`` rows; ``record`` is the version's wire form (``codec``).
    """
    if name is not None:
        rows = conn.execute("SELECT key, stamp, record FROM versions WHERE key = ?"
                            " ORDER BY stamp DESC, version DESC LIMIT ?",
                            (key_text(("command_run", name)), limit))
    else:
        rows = conn.execute("SELECT key, stamp, record FROM versions WHERE key >= ? AND key < ?"
                            " ORDER BY stamp DESC, version DESC LIMIT ?", (*_RUN_KEYS, limit))
    return [(str(r[0]).partition("\x1f")[2], int(r[1]), bytes(r[2])) for r in rows.fetchall()]


def cargo_packages(conn: sqlite3.Connection, workspace: str) -> list[tuple[str, str, str, bool]]:
    """The packages of a workspace: (package id, name, version, member), members first.

    Args:
        conn: The index connection.
        workspace: The workspace root as stored (repository-relative, ``.`` for the root).

    Returns:
        The packages.
    """
    rows = conn.execute("SELECT package_id, name, version, member FROM packages WHERE"
                        " workspace = ? ORDER BY member DESC, name", (workspace,)).fetchall()
    return [(r[0], r[1], r[2], bool(r[3])) for r in rows]
