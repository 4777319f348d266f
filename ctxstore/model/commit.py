"""History records: canonical commits, work commits, trees and narrative refs.

Field lists follow spec 002 §7.1 (Rust structs as msgpack maps) with the additions
DESIGN §5 needs: ``change_batches`` (knowledge records) on both kinds of commit,
``session_id`` on a canonical commit that folded a staging session, and
``aborted_work`` on the commit that records an aborted session (kept reachable for
``gc`` but never replayed). Timestamps: ``timestamp_unix`` in seconds (spec),
``created_at`` of a work commit in milliseconds.

A ``commit`` v2 (``CommitV2``, written since the code index became per clone) names the code
its knowledge was made against by the code's own Git ids instead of a copy of it: spec 002
§7.1.2's ``root_tree`` is ``git_tree`` (the Git tree id of the work tree's ``HEAD``) and
``rust_snapshot`` is ``git_commit`` (that Git commit's id), both hexadecimal as Git writes
them (40 digits, or 64 in a SHA-256 repository), nil outside Git or before a first Git
commit. It also names the Cargo and diagnostics snapshots current when it was made
(``cargo_snapshots``, ``diagnostics_snapshots``: one per workspace and per command name,
sorted). It keeps v1's fields, so every reader of a ``Commit`` reads both; in v2
``root_tree``, ``code_snapshot``, ``cargo_snapshot`` and ``diagnostics_snapshot`` are
always nil (v1 meanings: a ``tree`` object copying the ingested files, and single
snapshots).
"""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from ctxstore.ids import ObjectId, is_git_id
from ctxstore.model._schema import ListOf, OneOf, Opt, Record, SchemaError
from ctxstore.model.registry import typed
from ctxstore.records import dataclass

__all__ = ["NarrativeRef", "TreeEntry", "Tree", "Commit", "CommitV2", "WorkCommit", "STEP_KINDS",
           "StepKind", "EntryKind", "is_git_id"]

StepKind = Literal["session_start", "file_read", "file_write", "command_run", "note", "plan",
                   "compact", "change", "merge", "recover"]
STEP_KINDS = frozenset(get_args(StepKind))
EntryKind = Literal["blob", "tree"]


@dataclass(frozen=True, slots=True)
class NarrativeRef(Record):
    """A snapshot of one narrative Markdown file (path relative to narrative/)."""

    path: str
    stream: str
    role: str
    blob_id: ObjectId

    FIELDS: ClassVar = {"path": "str", "stream": "str", "role": "str", "blob_id": "oid"}


@dataclass(frozen=True, slots=True)
class TreeEntry(Record):
    """One name in a tree: a blob or a sub-tree."""

    name: str
    kind: EntryKind
    id: ObjectId

    FIELDS: ClassVar = {"name": "str", "kind": OneOf(frozenset(get_args(EntryKind))), "id": "oid"}

    def check(self, where: str) -> None:
        """Refuse an empty name, a name with ``/``, ``.`` and ``..``.

        Raises:
            SchemaError: if the name is one of these; ``where`` names the entry.
        """
        if not self.name or "/" in self.name or self.name in (".", ".."):
            raise SchemaError(f"{where}.name: invalid entry name {self.name!r}")


@typed("tree", 1)
@dataclass(frozen=True, slots=True)
class Tree(Record):
    """A snapshot of a file hierarchy; entries sorted by name, names unique."""

    entries: tuple[TreeEntry, ...]

    FIELDS: ClassVar = {"entries": ListOf(TreeEntry)}

    def check(self, where: str) -> None:
        """Refuse entries that are not sorted by name or share a name.

        Raises:
            SchemaError: if the names are unsorted or repeated; ``where`` names the tree.
        """
        names = [e.name for e in self.entries]
        if names != sorted(set(names)):
            raise SchemaError(f"{where}.entries: names must be sorted and unique")


@typed("commit", 1)
@dataclass(frozen=True, slots=True)
class Commit(Record):
    """A canonical commit on refs/main."""

    parents: tuple[ObjectId, ...]
    timestamp_unix: int
    message: str
    root_tree: ObjectId | None = None
    change_batches: tuple[ObjectId, ...] = ()
    edge_batches: tuple[ObjectId, ...] = ()
    narrative_refs: tuple[NarrativeRef, ...] = ()
    cargo_snapshot: ObjectId | None = None
    code_snapshot: ObjectId | None = None
    diagnostics_snapshot: ObjectId | None = None
    session_id: str | None = None
    aborted_work: ObjectId | None = None

    FIELDS: ClassVar = {
        "parents": ListOf("oid"),
        "timestamp_unix": "int",
        "message": "str",
        "root_tree": Opt("oid"),
        "change_batches": ListOf("oid"),
        "edge_batches": ListOf("oid"),
        "narrative_refs": ListOf(NarrativeRef),
        "cargo_snapshot": Opt("oid"),
        "code_snapshot": Opt("oid"),
        "diagnostics_snapshot": Opt("oid"),
        "session_id": Opt("str"),
        "aborted_work": Opt("oid"),
    }

    @property
    def is_fold(self) -> bool:
        """Whether this commit folded a staging session into history (``ctx commit``, amends included).

        A commit recording an aborted session is not a fold.
        """
        return bool(self.session_id) and self.aborted_work is None


@typed("commit", 2)
@dataclass(frozen=True, slots=True)
class CommitV2(Commit):
    """A canonical commit that names its code by Git ids (see the module docstring).

    ``CommitV2`` is a ``Commit``: walkers and readers take both versions alike.
    """

    git_commit: str | None = None
    git_tree: str | None = None
    cargo_snapshots: tuple[ObjectId, ...] = ()
    diagnostics_snapshots: tuple[ObjectId, ...] = ()

    FIELDS: ClassVar = {
        **Commit.FIELDS,
        "git_commit": Opt("str"),
        "git_tree": Opt("str"),
        "cargo_snapshots": ListOf("oid"),
        "diagnostics_snapshots": ListOf("oid"),
    }

    def check(self, where: str) -> None:
        """Refuse Git ids that are not Git ids, v1-only fields, and unsorted snapshot lists.

        Raises:
            SchemaError: naming the field; ``where`` names the commit.
        """
        for name in ("git_commit", "git_tree"):
            value = getattr(self, name)
            if value is not None and not is_git_id(value):
                raise SchemaError(f"{where}.{name}: not a Git object id")
        for name in ("root_tree", "code_snapshot", "cargo_snapshot", "diagnostics_snapshot"):
            if getattr(self, name) is not None:
                raise SchemaError(f"{where}.{name}: is a commit v1 field (nil in v2)")
        for name in ("cargo_snapshots", "diagnostics_snapshots"):
            ids = getattr(self, name)
            if list(ids) != sorted(set(ids)):
                raise SchemaError(f"{where}.{name}: ids must be sorted and unique")


@typed("work_commit", 1)
@dataclass(frozen=True, slots=True)
class WorkCommit(Record):
    """A staging step: one durable, visible mutation before compaction."""

    parents: tuple[ObjectId, ...]
    base: ObjectId
    session_id: str
    created_at: int
    step_kind: StepKind
    message: str = ""
    change_batches: tuple[ObjectId, ...] = ()
    payload: tuple[ObjectId, ...] = ()
    narrative_refs: tuple[NarrativeRef, ...] = ()

    FIELDS: ClassVar = {
        "parents": ListOf("oid"),
        "base": "oid",
        "session_id": "str",
        "created_at": "int",
        "step_kind": OneOf(STEP_KINDS),
        "message": "str",
        "change_batches": ListOf("oid"),
        "payload": ListOf("oid"),
        "narrative_refs": ListOf(NarrativeRef),
    }
