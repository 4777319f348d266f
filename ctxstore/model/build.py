"""Build records: Cargo workspace snapshots and command diagnostics (spec 002 §7.2.2, §7.2.4).

Two typed objects and the two change-batch records that point at them:

- ``cargo_snapshot`` (``CargoMetadataSnapshot``): the packages of a Cargo workspace with
  their targets, and the resolved dependency edges (dep kind, optional, features), as
  ``cargo metadata`` reported them. A ``cargo`` record, keyed by the workspace root, names
  the newest snapshot: last writer wins, so a new snapshot replaces the old.
- ``diagnostics`` (``DiagnosticsSnapshot``): one run of a named command: the tool, when,
  the argv, the exit code, the (bounded) output as a blob, and the parsed diagnostics. A
  ``command_run`` record, keyed by the command's name, names the newest run; earlier runs
  stay in the record's history (the index's ``versions``).

Where the spec stores a diagnostic's message and related text as blobs, these records hold
them inline, bounded (``code.diagnostics``): they are short, and a blob per message would
cost an object per line of compiler output. It must not do I/O or import above ``model``.
"""

from __future__ import annotations

from typing import ClassVar

import blake3

from ctxstore.ids import ObjectId
from ctxstore.model._schema import ListOf, Opt, Record, SchemaError
from ctxstore.model.registry import typed
from ctxstore.records import dataclass

__all__ = [
    "CargoTarget",
    "CargoPackage",
    "CargoDependency",
    "CargoMetadataSnapshot",
    "DiagnosticSpan",
    "Diagnostic",
    "DiagnosticsSnapshot",
    "CargoRecord",
    "CommandRunRecord",
    "BuildRecord",
    "target_id",
    "TARGET_KINDS",
    "DEP_KINDS",
    "SEVERITIES",
]

# spec 002 §7.2.2 TargetKind in snake_case, plus Cargo's build scripts (``custom-build``).
TARGET_KINDS = ("lib", "bin", "test", "bench", "example", "proc_macro", "custom_build")
DEP_KINDS = ("normal", "dev", "build")
# spec 002 §7.2.4 Severity, plus ``note`` and ``help`` that compilers print on their own.
SEVERITIES = ("error", "warning", "info", "hint", "note", "help")


def target_id(package_id: str, name: str, kind: str) -> ObjectId:
    """The id of a Cargo target: BLAKE3 of (package id, target name, kind) (spec §7.2.2).

    Args:
        package_id: Cargo's package id string.
        name: The target's name.
        kind: The target's kind (``TARGET_KINDS``).

    Returns:
        32 raw bytes, the same for the same target on every machine.
    """
    return ObjectId(blake3.blake3("\x1f".join((package_id, name, kind)).encode()).digest())


@dataclass(frozen=True, slots=True)
class CargoTarget(Record):
    """A target of a package: a library, binary, test, bench, example or build script."""

    target_id: ObjectId
    name: str
    kind: str
    src_path: str
    crate_types: tuple[str, ...]

    FIELDS: ClassVar = {"target_id": "oid", "name": "str", "kind": "str", "src_path": "str",
                        "crate_types": ListOf("str")}


@dataclass(frozen=True, slots=True)
class CargoPackage(Record):
    """A package of the resolve graph (workspace members and dependencies alike)."""

    package_id: str
    name: str
    version: str
    manifest_path: str
    edition: str
    member: bool
    targets: tuple[CargoTarget, ...]

    FIELDS: ClassVar = {"package_id": "str", "name": "str", "version": "str",
                        "manifest_path": "str", "edition": "str", "member": "bool",
                        "targets": ListOf(CargoTarget)}


@dataclass(frozen=True, slots=True)
class CargoDependency(Record):
    """A resolved dependency edge between two packages.

    ``rename`` is the name the dependent uses when it renamed the dependency
    (``foo = { package = "bar" }``), None otherwise.
    """

    from_package_id: str
    to_package_id: str
    dep_kind: str
    optional: bool
    features_enabled: tuple[str, ...]
    rename: str | None

    FIELDS: ClassVar = {"from_package_id": "str", "to_package_id": "str", "dep_kind": "str",
                        "optional": "bool", "features_enabled": ListOf("str"),
                        "rename": Opt("str")}


@typed("cargo_snapshot", 1)
@dataclass(frozen=True, slots=True)
class CargoMetadataSnapshot(Record):
    """What ``cargo metadata`` said about one workspace (paths relative to the repository when inside it)."""

    workspace_root: str
    manifest_path: str
    created_at: int
    packages: tuple[CargoPackage, ...]
    resolve: tuple[CargoDependency, ...]

    FIELDS: ClassVar = {"workspace_root": "str", "manifest_path": "str", "created_at": "int",
                        "packages": ListOf(CargoPackage), "resolve": ListOf(CargoDependency)}


@dataclass(frozen=True, slots=True)
class DiagnosticSpan(Record):
    """Where a diagnostic points: a path and 1-based lines and columns (0: not known).

    Byte offsets are set when the tool reports them (rustc's JSON does). ``item`` is the
    qualified name of the innermost indexed symbol (not a module) whose lines held
    ``start_line`` when the run was recorded, None when none did: resolved once, so the
    run's edges to it do not depend on the order the index applies objects in.
    """

    path: str
    start_line: int
    start_col: int
    end_line: int
    end_col: int
    start_byte: int | None
    end_byte: int | None
    label: str | None
    primary: bool
    item: str | None = None

    FIELDS: ClassVar = {"path": "str", "start_line": "int", "start_col": "int",
                        "end_line": "int", "end_col": "int", "start_byte": Opt("int"),
                        "end_byte": Opt("int"), "label": Opt("str"), "primary": "bool",
                        "item": Opt("str")}


@dataclass(frozen=True, slots=True)
class Diagnostic(Record):
    """One message of a tool: severity, code, text, spans, and related notes."""

    severity: str
    code: str | None
    message: str
    spans: tuple[DiagnosticSpan, ...]
    related: tuple[str, ...]

    FIELDS: ClassVar = {"severity": "str", "code": Opt("str"), "message": "str",
                        "spans": ListOf(DiagnosticSpan), "related": ListOf("str")}


@typed("diagnostics", 1)
@dataclass(frozen=True, slots=True)
class DiagnosticsSnapshot(Record):
    """One run of a named command and the diagnostics parsed from its output.

    ``output_blob`` holds the output as stored (bounded; ``notes`` say what was cut),
    ``output_bytes`` the size of the output as the command wrote it.
    """

    tool: str
    timestamp: int
    name: str
    argv: tuple[str, ...]
    exit_code: int | None
    output_blob: ObjectId
    output_bytes: int
    diagnostics: tuple[Diagnostic, ...]
    notes: tuple[str, ...]

    FIELDS: ClassVar = {"tool": "str", "timestamp": "int", "name": "str", "argv": ListOf("str"),
                        "exit_code": Opt("int"), "output_blob": "oid", "output_bytes": "int",
                        "diagnostics": ListOf(Diagnostic), "notes": ListOf("str")}


def _nonempty(where: str, name: str, value: str) -> None:
    if not value:
        raise SchemaError(f"{where}.{name}: must not be empty")


@dataclass(frozen=True, slots=True)
class CargoRecord(Record):
    """The newest Cargo snapshot of a workspace (replay key: the workspace root)."""

    workspace_root: str
    snapshot: ObjectId
    manifest_path: str
    updated_at: int
    prev: ObjectId | None

    KIND: ClassVar = "cargo"
    FIELDS: ClassVar = {"workspace_root": "str", "snapshot": "oid", "manifest_path": "str",
                        "updated_at": "int", "prev": Opt("oid")}

    def check(self, where: str) -> None:
        """Refuse an empty workspace root.

        Raises:
            SchemaError: if it is empty; ``where`` names the record.
        """
        _nonempty(where, "workspace_root", self.workspace_root)

    def replay_key(self) -> tuple[str, ...]:
        """The key records of this kind compete for."""
        return ("cargo", self.workspace_root)


@dataclass(frozen=True, slots=True)
class CommandRunRecord(Record):
    """The newest run of a named command (replay key: the name)."""

    name: str
    snapshot: ObjectId
    tool: str
    exit_code: int | None
    updated_at: int
    prev: ObjectId | None

    KIND: ClassVar = "command_run"
    FIELDS: ClassVar = {"name": "str", "snapshot": "oid", "tool": "str",
                        "exit_code": Opt("int"), "updated_at": "int", "prev": Opt("oid")}

    def check(self, where: str) -> None:
        """Refuse an empty name.

        Raises:
            SchemaError: if it is empty; ``where`` names the record.
        """
        _nonempty(where, "name", self.name)

    def replay_key(self) -> tuple[str, ...]:
        """The key records of this kind compete for."""
        return ("command_run", self.name)


BuildRecord = CargoRecord | CommandRunRecord
