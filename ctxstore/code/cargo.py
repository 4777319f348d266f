"""Cargo workspaces: ``cargo metadata`` into a ``cargo_snapshot`` (spec 002 §7.2.2, ``ctx add cargo``).

``parse_metadata`` turns the JSON of ``cargo metadata --format-version 1`` into a
``CargoMetadataSnapshot`` (pure: paths under the repository become relative to it);
``run_metadata`` runs cargo offline (``--offline`` and ``CARGO_NET_OFFLINE=true`` in the
environment it is given, a timeout, bounded output) in the manifest's directory, and with
``--locked``: a snapshot is a read, so cargo never writes ``Cargo.lock`` in the work tree. When
the lock file is missing or out of date, ``add_cargo`` snapshots ``--no-deps`` metadata (the
workspace's packages and their declared dependencies on each other) and says so;
``add_cargo`` stages the snapshot with a ``cargo`` record keyed by the workspace root, so a
new snapshot replaces the old. The edges (``DependsOn``, ``TargetOf``, ``CrateFromTarget``)
are derived from the snapshot by ``index.build`` when the record is applied. It must not
print, read ``os.environ`` or run SQL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ctxstore import fsio
from ctxstore.clock import next_stamp, now_ms
from ctxstore.code.runs import CommandNotStarted, run_bounded
from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.ids import ObjectId
from ctxstore.index.build import cargo_edges, find_winner
from ctxstore.model.build import (
    CargoDependency,
    CargoMetadataSnapshot,
    CargoPackage,
    CargoRecord,
    CargoTarget,
    target_id,
)
from ctxstore.records import dataclass
from ctxstore.staging import StageResult, stage_records

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["CargoAdded", "CargoFailed", "CargoLockUnusable", "parse_metadata", "run_metadata", "add_cargo",
           "METADATA_TIMEOUT", "MAX_METADATA_BYTES"]

METADATA_TIMEOUT = 120.0
# A workspace with thousands of dependencies writes a few MiB; more is not metadata.
MAX_METADATA_BYTES = 64 << 20

# Cargo's target kinds to spec 002 §7.2.2 TargetKind (library crate types are all ``lib``).
_KINDS = {"lib": "lib", "rlib": "lib", "dylib": "lib", "cdylib": "lib", "staticlib": "lib",
          "bin": "bin", "test": "test", "bench": "bench", "example": "example",
          "proc-macro": "proc_macro", "custom-build": "custom_build"}
_DEP_KINDS = {None: "normal", "normal": "normal", "dev": "dev", "build": "build"}


class CargoFailed(InvalidInput):
    """``cargo metadata`` failed, or what it (or ``--metadata``) gave is not its JSON."""


class CargoLockUnusable(CargoFailed):
    """``cargo metadata --locked`` refused: ``Cargo.lock`` is missing or out of date.

    Attributes:
        missing: True when there is no lock file (cargo would have created it), False when
            it is out of date (cargo would have updated it).
    """

    def __init__(self, message: str, *, missing: bool) -> None:
        """Record which of the two it is."""
        super().__init__(message, hint="run `cargo generate-lockfile` for the resolved graph")
        self.missing = missing


@dataclass(frozen=True, slots=True)
class CargoAdded:
    """What ``add_cargo`` stored."""

    snapshot: CargoMetadataSnapshot
    snapshot_id: bytes
    edges: int
    staged: StageResult
    replaced: bool
    # Why the snapshot holds no resolve graph when cargo was run: "missing" or "out of date"
    # (Cargo.lock), else None.
    lock_problem: str | None = None


def _rel(path: str, root: PurePosixPath) -> str:
    try:
        rel = PurePosixPath(path).relative_to(root).as_posix()
    except ValueError:
        return path
    return rel or "."


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise CargoFailed(f"cargo metadata: {where} is not a string")
    return value


def _target(pkg_id: str, raw: Any, root: PurePosixPath) -> CargoTarget:
    if not isinstance(raw, dict):
        raise CargoFailed("cargo metadata: a target is not an object")
    kinds = _list(raw.get("kind"))
    kind = next((_KINDS[k] for k in kinds if k in _KINDS), str(kinds[0]) if kinds else "lib")
    name = _str(raw.get("name"), "a target name")
    types = _list(raw.get("crate_types"))
    return CargoTarget(target_id=target_id(pkg_id, name, kind), name=name, kind=kind,
                       src_path=_rel(_str(raw.get("src_path"), "a target src_path"), root),
                       crate_types=tuple(str(t) for t in types))


def _declared(pkg: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """A package's declared dependencies by (extern crate name, kind)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for dep in pkg.get("dependencies") or ():
        if isinstance(dep, dict) and isinstance(dep.get("name"), str):
            extern = (dep.get("rename") or dep["name"]).replace("-", "_")
            out[(extern, _DEP_KINDS.get(dep.get("kind"), "normal"))] = dep
    return out


def _resolve(doc: dict[str, Any], packages: dict[str, dict[str, Any]]) -> list[CargoDependency]:
    resolve = doc.get("resolve")
    edges: list[CargoDependency] = []
    if not isinstance(resolve, dict):  # `--no-deps`: declared dependencies on known packages
        by_name = {p.get("name"): pid for pid, p in packages.items()}
        for pid, pkg in packages.items():
            for dep in pkg.get("dependencies") or ():
                if isinstance(dep, dict) and dep.get("name") in by_name:
                    edges.append(_edge(pid, by_name[dep["name"]],
                                       _DEP_KINDS.get(dep.get("kind"), "normal"), dep))
        return edges
    for node in resolve.get("nodes") or ():
        if not isinstance(node, dict) or not isinstance(node.get("id"), str):
            continue
        declared = _declared(packages.get(node["id"], {}))
        for dep in node.get("deps") or ():
            if not isinstance(dep, dict) or not isinstance(dep.get("pkg"), str):
                continue
            kinds = [k.get("kind") for k in dep.get("dep_kinds") or () if isinstance(k, dict)]
            for kind in dict.fromkeys(_DEP_KINDS.get(k, "normal") for k in kinds or [None]):
                decl = declared.get((str(dep.get("name", "")), kind), {})
                edges.append(_edge(node["id"], dep["pkg"], kind, decl))
    return edges


def _edge(src: str, dst: str, kind: str, decl: dict[str, Any]) -> CargoDependency:
    features = _list(decl.get("features"))
    rename = decl.get("rename")
    return CargoDependency(from_package_id=src, to_package_id=dst, dep_kind=kind,
                           optional=decl.get("optional") is True,
                           features_enabled=tuple(str(f) for f in features),
                           rename=rename if isinstance(rename, str) else None)


def parse_metadata(doc: Any, *, repo_root: str,
                   created_at: int | None = None) -> CargoMetadataSnapshot:
    """Build the snapshot of a ``cargo metadata --format-version 1`` document.

    Args:
        doc: The decoded JSON.
        repo_root: The repository root (absolute POSIX path): paths under it are stored
            relative to it (``.`` for the root itself), others as cargo wrote them.
        created_at: Milliseconds since the epoch (now when None).

    Returns:
        The snapshot: packages (workspace members marked) with their targets, and one
        dependency edge per (dependent, dependency, dep kind). Its manifest is the
        workspace's (``<workspace root>/Cargo.toml``), whichever member cargo was run on.

    Raises:
        CargoFailed: (E011) if the document is not cargo's metadata.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("packages"), list) \
            or not isinstance(doc.get("workspace_root"), str):
        raise CargoFailed("not the JSON of `cargo metadata --format-version 1`")
    if doc.get("version") not in (1, None):
        raise CargoFailed(f"cargo metadata format version {doc.get('version')!r} (ctx reads 1)")
    root = PurePosixPath(repo_root)
    members = set(doc.get("workspace_members") or ())
    raw_pkgs = {p["id"]: p for p in doc["packages"] if isinstance(p, dict)
                and isinstance(p.get("id"), str)}
    packages = tuple(
        CargoPackage(package_id=pid, name=_str(p.get("name"), "a package name"),
                     version=_str(p.get("version"), "a package version"),
                     manifest_path=_rel(_str(p.get("manifest_path"), "a manifest path"), root),
                     edition=str(p.get("edition") or ""), member=pid in members,
                     targets=tuple(_target(pid, t, root) for t in p.get("targets") or ()))
        for pid, p in sorted(raw_pkgs.items()))
    workspace = _rel(doc["workspace_root"], root)
    return CargoMetadataSnapshot(workspace_root=workspace,
                                 manifest_path=(PurePosixPath(workspace) / "Cargo.toml").as_posix(),
                                 created_at=now_ms() if created_at is None else created_at,
                                 packages=packages, resolve=tuple(_resolve(doc, raw_pkgs)))


def run_metadata(cargo: str, manifest: Path, *, env: Mapping[str, str],
                 timeout: float = METADATA_TIMEOUT, no_deps: bool = False) -> Any:
    """Run ``cargo metadata --format-version 1 --offline --locked`` for ``manifest``; its JSON.

    ``--locked`` keeps cargo from creating or updating ``Cargo.lock``: it refuses instead.

    Args:
        cargo: The cargo program (a path or a name on ``env``'s PATH).
        manifest: The ``Cargo.toml``.
        env: The environment of the child (``CARGO_NET_OFFLINE=true`` is added).
        timeout: Seconds before it is killed.
        no_deps: Add ``--no-deps``: the workspace's own packages, no resolve graph (cargo
            then needs no lock file).

    Returns:
        The decoded JSON.

    Raises:
        CargoLockUnusable: (E011) if the lock file is missing or out of date.
        CargoFailed: (E011) if cargo cannot run, fails, times out or prints no JSON.
    """
    # Absolute: cargo runs in the manifest's directory, where a relative path (the user's
    # `--manifest-path crates/core/Cargo.toml`) names nothing.
    manifest = manifest.absolute()
    argv = [cargo, "metadata", "--format-version", "1", "--offline", "--locked", "--quiet",
            *(["--no-deps"] if no_deps else []), "--manifest-path", str(manifest)]
    try:
        res = run_bounded(argv, cwd=manifest.parent, env={**env, "CARGO_NET_OFFLINE": "true"},
                          timeout=timeout, head_bytes=MAX_METADATA_BYTES, tail_bytes=0)
    except CommandNotStarted as exc:
        raise CargoFailed(exc.message, hint="install cargo, or pass --metadata FILE") from None
    if res.timed_out:
        raise CargoFailed(f"cargo metadata did not finish within {timeout:g} s")
    text = res.output.decode("utf-8", "replace")
    if res.exit_code != 0:
        # "error: cannot create|update the lock file PATH because --locked was passed ..."
        refusal = next((ln for ln in text.splitlines() if "--locked was passed" in ln), None)
        if refusal is not None:
            missing = "cannot create" in refusal
            raise CargoLockUnusable(f"Cargo.lock is {'missing' if missing else 'out of date'}",
                                    missing=missing)
        raise CargoFailed(f"cargo metadata failed (exit {res.exit_code}): "
                          f"{_error_line(text)[:300]}")
    if res.cut:
        raise CargoFailed(f"cargo metadata printed more than {MAX_METADATA_BYTES} bytes")
    # The JSON is one line; a warning cargo printed on stderr may come before it.
    line = next((ln for ln in reversed(text.splitlines()) if ln.startswith("{")), "")
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        raise CargoFailed("cargo metadata did not print JSON") from None


def _error_line(text: str) -> str:
    """Cargo's own error line of its output, with the place it names, on one line.

    Cargo prints ``error: WHAT``, then for a manifest it cannot parse `` --> FILE:LINE:COL``
    and a snippet with a caret: the last line is the caret, which says nothing alone.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for k, line in enumerate(lines):
        if line.startswith("error"):
            where = lines[k + 1] if k + 1 < len(lines) else ""
            return f"{line} (at {where[3:].strip()})" if where.startswith("-->") else line
    return lines[-1] if lines else "no output"


def read_metadata_file(path: Path) -> Any:
    """Read a recorded ``cargo metadata`` JSON file (``--metadata FILE``).

    Raises:
        CargoFailed: (E011) if it is missing, not a regular file, too large or not JSON.
    """
    try:
        data = fsio.read_regular(path.resolve(), MAX_METADATA_BYTES)
    except FileNotFoundError:
        raise CargoFailed(f"--metadata: no such file: {path}") from None
    except UnsafePath as exc:
        raise CargoFailed(f"--metadata: {path} {exc.detail}") from None
    except OSError as exc:
        raise CargoFailed(f"--metadata: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_METADATA_BYTES:
        raise CargoFailed(f"--metadata: {path} is larger than {MAX_METADATA_BYTES} bytes")
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise CargoFailed(f"--metadata: {path} is not JSON") from None


def add_cargo(db: Session, manifest: Path, *, metadata: Any | None = None,
              cargo: str = "cargo", env: Mapping[str, str] | None = None) -> CargoAdded:
    """Snapshot a Cargo workspace and stage it (``ctx add cargo``).

    Args:
        db: The open session.
        manifest: The workspace's (or package's) ``Cargo.toml``.
        metadata: Recorded ``cargo metadata`` JSON; cargo is run when None.
        cargo: The cargo program.
        env: The environment cargo runs with (only when it is run).

    Cargo never writes the work tree (``--locked``): without a usable ``Cargo.lock`` (none,
    or out of date) the snapshot is of ``--no-deps`` metadata, and ``lock_problem`` says why.

    Returns:
        The snapshot, its id, the number of edges it gives, the work commit, and why it has no
        resolve graph (``lock_problem``).

    Raises:
        CargoFailed: (E011) for a missing manifest, a cargo failure or bad metadata.
        LockConflict, StagingConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    lock_problem = None
    if metadata is None:
        if not manifest.is_file():
            raise CargoFailed(f"no Cargo.toml at {manifest}",
                              hint="pass --manifest-path PATH, or --metadata FILE")
        try:
            metadata = run_metadata(cargo, manifest, env=env or {})
        except CargoLockUnusable as exc:
            lock_problem = "missing" if exc.missing else "out of date"
            metadata = run_metadata(cargo, manifest, env=env or {}, no_deps=True)
    root = store.worktree.absolute().as_posix()
    snap = parse_metadata(metadata, repo_root=root)
    with store.transaction() as tx:  # holds the lock: the snapshot replaced is read under it
        conn = db.index()
        prev = find_winner(conn, ("cargo", snap.workspace_root))
        snap_id = tx.put(snap)
        rec = CargoRecord(workspace_root=snap.workspace_root, snapshot=snap_id,
                          manifest_path=snap.manifest_path,
                          updated_at=next_stamp(prev[0] if prev else None),
                          prev=ObjectId(prev[1]) if prev else None)
        staged = stage_records(store, [rec], message=f"cargo {snap.workspace_root}",
                               step_kind="change", tx=tx)
    return CargoAdded(snap, snap_id, len(cargo_edges(snap, snap_id)), staged, prev is not None,
                      lock_problem)
