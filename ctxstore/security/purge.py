"""Find secrets already in a store, and purge content from the ctx history.

``find_secrets`` scans what a store holds — every object reachable from any pointer
(refs and STAGE: commits, change batches, node content, file blobs, command output,
narrative snapshots), the narrative Markdown, and the per-clone state under ``local/`` and
``index/`` — and names each finding by rule, object, node, file and commit.

``purge`` removes content from the history. Objects are immutable and named by their
hash, and commits name them, so the commits that reach the content are rewritten: the
content is replaced (redacted, or ``[PURGED]`` with ``whole``), and every object that
names a replaced one is written again with the new id, up to the commits and the pointers
(new ids; the old objects become unreachable and ``ctx gc`` deletes them). A ``purge``
record (``model.knowledge.PurgeRecord``) in a commit on top names the versions replaced:
replay and the index never apply them again, so a Git merge with a clone that still has
the old history cannot bring them back into the state (docs/security.md). Git's own
history still holds the old object files: ``PurgeReport.old_paths`` lists them for a Git
history rewrite.

This module reads and writes through ``repo`` only (a transaction: objects, one barrier,
pointers by compare-and-swap); it never prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore import fsio, refs
from ctxstore.errors import CtxError, InvalidInput, NothingToDo, ObjectNotFound, StorageIOError
from ctxstore.ids import ObjectId, new_ulid
from ctxstore.index.read import read_node
from ctxstore.model import ChangeBatch, Commit, TypedObject, WorkCommit, decode_typed
from ctxstore.model.build import CommandRunRecord, DiagnosticsSnapshot
from ctxstore.model.code import FileRecord, FileVersion
from ctxstore.model.knowledge import (
    NodeRecord,
    PurgeRecord,
    record_from_wire,
    record_to_wire,
    version_id,
)
from ctxstore.model.references import iter_references
from ctxstore.narrative.snapshot import MAX_NARRATIVE_BYTES, iter_narrative_files
from ctxstore.objects import KIND_BLOB, KIND_TYPED
from ctxstore.records import dataclass
from ctxstore.repo import STAGE_TYPES, Store
from ctxstore.security.consent import policy_for
from ctxstore.security.secrets import Finding, Scanner, apply_redactions
from ctxstore.verify import iter_pointer_names

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["PURGED", "StoreFinding", "SecretsReport", "PurgeReport", "find_secrets", "purge",
           "redact_narrative_files"]

PURGED = "[PURGED]"
_LOCAL_FILE_BYTES = 1 << 30  # local state files larger than this are scanned in part

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class StoreFinding:
    """One secret in a store, named by where it is (the secret itself is never kept).

    Attributes:
        rule: The rule that found it.
        place: ``object`` (reachable from a pointer), ``narrative`` (Markdown on disk) or
            ``local`` (per-clone state: ``local/``, ``index/``).
        line: Its line in the text scanned (0 in a database file).
        object: The object holding it (hex), for ``object``.
        kind: ``blob`` or the typed object's type.
        node: The knowledge node whose content it is, if any.
        file: The file: a repository path (an indexed file), ``narrative/...`` or a local
            file under ``.ctx/``; ``command NAME`` for a command's output.
        commit: The oldest commit of the history that reaches it (hex).
        field: Which field of a typed object (``content``, ``metadata 'token'``).
    """

    rule: str
    place: str
    line: int
    object: str | None = None
    kind: str | None = None
    node: str | None = None
    file: str | None = None
    commit: str | None = None
    field: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON-ready map."""
        return {"rule": self.rule, "place": self.place, "line": self.line, "object": self.object,
                "kind": self.kind, "node": self.node, "file": self.file, "commit": self.commit,
                "field": self.field}


@dataclass
class SecretsReport:
    """What ``find_secrets`` found."""

    findings: list[StoreFinding] = field(default_factory=list)
    objects: int = 0
    files: int = 0


# -- pointers and the walk --------------------------------------------------------------------------


def _pointers(store: Store) -> list[tuple[str, refs.Pointer]]:
    """Every pointer that names something (refs/* and STAGE), as read now."""
    out = []
    for name in iter_pointer_names(store):
        if name == "HEAD":
            continue
        ptr = refs.read_pointer(store.root, name)
        if ptr is not None:
            out.append((name, ptr))
    return out


def _read(store: Store, oid: bytes) -> tuple[int, bytes, TypedObject | None] | None:
    try:
        stored = store.objects.read(ObjectId(oid))
    except ObjectNotFound:
        return None  # an aborted session's steps from another clone; verify reports the rest
    obj = decode_typed(stored.payload, oid=oid) if stored.kind == KIND_TYPED else None
    return stored.kind, stored.payload, obj


def _post_order(store: Store, roots: Sequence[bytes]) -> Iterator[tuple[bytes, int, bytes,
                                                                   TypedObject | None]]:
    """Every object reachable from ``roots``, each after every object it names (iteratively)."""
    done: set[bytes] = set()
    stack: list[tuple[bytes, bool]] = [(r, False) for r in roots]
    loaded: dict[bytes, tuple[int, bytes, TypedObject | None] | None] = {}
    while stack:
        oid, expanded = stack.pop()
        if oid in done:
            continue
        if oid not in loaded:
            loaded[oid] = _read(store, oid)
        got = loaded[oid]
        if got is None:
            done.add(oid)
            continue
        if expanded or got[2] is None:
            done.add(oid)
            del loaded[oid]
            yield oid, got[0], got[1], got[2]
            continue
        stack.append((oid, True))
        stack.extend((ref, False) for ref, _ in iter_references(got[2]) if ref not in done)


@dataclass
class _Places:
    """Who each object belongs to: the oldest commit reaching it, its node or file."""

    commit: dict[bytes, bytes] = field(default_factory=dict)
    node: dict[bytes, str] = field(default_factory=dict)
    file: dict[bytes, str] = field(default_factory=dict)


def _places(store: Store, heads: Sequence[bytes]) -> _Places:
    places = _Places()
    history = list(store.iter_history([ObjectId(h) for h in heads], follow_base=True))
    for oid, obj in reversed(history):  # oldest first: a blob is named by the commit adding it
        stack = [ref for ref, _ in iter_references(obj)]
        while stack:
            ref = stack.pop()
            if ref in places.commit:
                continue
            got = _read(store, ref)
            if got is None or isinstance(got[2], (Commit, WorkCommit)):
                continue
            places.commit[ref] = oid
            child = got[2]
            if isinstance(child, ChangeBatch):
                for rec in child.records:
                    if isinstance(rec, NodeRecord) and rec.content_blob:
                        places.node[rec.content_blob] = rec.id
                    elif isinstance(rec, FileRecord):
                        places.file[rec.version] = places.file[rec.blob] = rec.path
                    elif isinstance(rec, CommandRunRecord):
                        places.file[rec.snapshot] = f"command {rec.name}"
            elif isinstance(child, FileVersion):
                places.file[child.blob_id] = child.path
            elif isinstance(child, DiagnosticsSnapshot):
                places.file[child.output_blob] = f"command {child.name}"
            if child is not None:
                stack.extend(r for r, _ in iter_references(child))
        if isinstance(obj, (Commit, WorkCommit)):
            for nref in obj.narrative_refs:
                places.file.setdefault(nref.blob_id, f"narrative/{nref.path}")
    return places


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string of a wire value with its field path (ids and other bytes are skipped)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where} {key!r}" if where else str(key))


# -- find ---------------------------------------------------------------------------------------------


def find_secrets(store: Store, *, progress: Progress | None = None) -> SecretsReport:
    """Scan the whole store for secrets (the store's policy's rules).

    Args:
        store: The store.
        progress: Called with (objects scanned, objects to scan).

    Returns:
        Every finding, objects first (in walk order), then narrative, then local files.

    Raises:
        CtxError: (E001-E005) if a pointer or the history is damaged.
    """
    scanner = policy_for(store).scanner()
    report = SecretsReport()
    pointers = _pointers(store)
    heads = [h for _, ptr in pointers for h in ptr.heads]
    places = _places(store, heads)
    objects = list(_post_order(store, heads))
    for n, (oid, kind, payload, obj) in enumerate(objects, 1):
        report.objects += 1
        owner = places.commit.get(oid) or (oid if isinstance(obj, (Commit, WorkCommit)) else None)
        base: dict[str, Any] = {"place": "object", "object": oid.hex(),
                                "commit": owner.hex() if owner else None}
        if kind == KIND_BLOB:
            for f in scanner.scan(payload.decode("utf-8", "replace")):
                report.findings.append(StoreFinding(
                    f.rule, line=f.line, kind="blob", node=places.node.get(oid),
                    file=places.file.get(oid), **base))
        elif isinstance(obj, ChangeBatch):
            for rec in obj.records:
                node = getattr(rec, "id", None) if isinstance(rec, NodeRecord) else None
                path = getattr(rec, "path", None)
                for where, text in _strings(record_to_wire(rec), ""):
                    for f in scanner.scan(text):
                        report.findings.append(StoreFinding(
                            f.rule, line=f.line, kind=f"change_batch {rec.KIND}", node=node,
                            file=path, field=where, **base))
        elif obj is not None:
            for where, text in _strings(obj.to_wire(), ""):
                for f in scanner.scan(text):
                    report.findings.append(StoreFinding(
                        f.rule, line=f.line, kind=type(obj).TYPE, file=places.file.get(oid),
                        field=where, **base))
        if progress is not None:
            progress(n, len(objects))
    for rel, path in iter_narrative_files(store):
        report.files += 1
        for f in scanner.scan(_text_of(path, MAX_NARRATIVE_BYTES) or ""):
            report.findings.append(StoreFinding(f.rule, "narrative", f.line,
                                                file=f"narrative/{rel}"))
    for path in _local_files(store):
        report.files += 1
        sqlite = path.name.startswith(("memory.sqlite", "state.sqlite", "index.sqlite"))
        for f in scanner.scan(_text_of(path, _LOCAL_FILE_BYTES) or ""):
            report.findings.append(StoreFinding(f.rule, "local", 0 if sqlite else f.line,
                                                file=path.relative_to(store.root).as_posix()))
    return report


def _text_of(path: Path, limit: int) -> str | None:
    try:
        return fsio.read_regular(path, limit).decode("utf-8", "replace")
    except (OSError, CtxError):
        return None


def _local_files(store: Store) -> list[Path]:
    """Per-clone files that may hold text: ``local/`` (not its objects) and ``index/``."""
    out = []
    for top in ("local", "index"):
        base = store.root / top
        if not base.is_dir() or base.is_symlink():
            continue
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(store.root).as_posix()
            if rel.startswith("local/work/objects/") or path.is_symlink() or not path.is_file():
                continue
            out.append(path)
    return out


# -- purge --------------------------------------------------------------------------------------------


@dataclass
class PurgeReport:
    """What ``purge`` did.

    Attributes:
        commit: The purge commit now at the head of HEAD's ref (hex).
        rewritten: Old object id -> new object id, for every object written again (hex).
        versions: The record versions replaced (hex): the purge record names them.
        nodes: The nodes whose versions were scrubbed.
        old_paths: Files under ``.ctx/objects/`` that held the purged content (blobs,
            change batches): Git's history keeps them until it is rewritten.
        narrative: Narrative files redacted in place (``narrative/...``).
    """

    commit: str = ""
    rewritten: dict[str, str] = field(default_factory=dict)
    versions: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    old_paths: list[str] = field(default_factory=list)
    narrative: list[str] = field(default_factory=list)


class _Rewrite:
    """The bottom-up rewrite of one purge: object id mapping and the scrubbing of content."""

    def __init__(self, store: Store, scanner: Scanner, nodes: set[str], blobs: set[bytes],
                 typed: set[bytes], whole: bool, tx: Any) -> None:
        self.store, self.scanner, self.tx = store, scanner, tx
        self.nodes, self.blobs, self.typed, self.whole = nodes, blobs, typed, whole
        self.ids: dict[bytes, bytes] = {}
        self.versions: dict[bytes, bytes] = {}
        self.scrubbed: set[bytes] = set()

    def text(self, value: str) -> str:
        return self.scanner.redact(value)[0]

    def map_ids(self, value: Any) -> Any:
        if isinstance(value, bytes):
            return self.ids.get(value, value)
        if isinstance(value, list):
            return [self.map_ids(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.map_ids(v) for v in value)
        if isinstance(value, dict):
            return {k: self.map_ids(v) for k, v in value.items()}
        return value

    def scrub_strings(self, value: Any) -> Any:
        return _map_strings(value, self.text)

    def blob(self, oid: bytes, payload: bytes) -> None:
        if oid not in self.blobs:
            return
        if self.whole:
            data = (PURGED + "\n").encode()
        else:
            try:
                data = self.text(payload.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                data = (PURGED + "\n").encode()
        if data != payload:
            self.ids[oid] = self.tx.put_blob(data)
            self.scrubbed.add(oid)

    def record(self, rec: Any) -> Any:
        wire = record_to_wire(rec)
        new = self.map_ids(wire)
        prev = wire.get("prev")
        if prev is not None and prev in self.versions:
            # A later version names its replacement: it is written again too (replay drops
            # whatever was built on a purged version: replay.purged_descendants).
            new["prev"] = self.versions[prev]
        if isinstance(rec, NodeRecord) and rec.id in self.nodes:
            if self.whole:
                new.update(content=PURGED, content_blob=None, summary=None)
            else:
                for key in ("content", "summary"):
                    if isinstance(new.get(key), str):
                        new[key] = self.text(new[key])
            new["metadata"] = self.scrub_strings(new["metadata"])
        if new == wire:
            return rec
        again = record_from_wire(new, "purge")
        self.versions[version_id(rec)] = version_id(again)
        return again

    def typed_object(self, oid: bytes, obj: TypedObject) -> None:
        if isinstance(obj, ChangeBatch):
            records = tuple(self.record(r) for r in obj.records)
            if records == obj.records:
                return
            new_obj: TypedObject = ChangeBatch(created_at=obj.created_at, author=obj.author,
                                               records=records)
        else:
            wire = obj.to_wire()
            new = self.map_ids(wire)
            if oid in self.typed:
                new = _map_strings(new, lambda _: PURGED) if self.whole else self.scrub_strings(new)
            if isinstance(obj, Commit) and len(new["parents"]) > 1:
                new["parents"] = sorted(new["parents"])  # a merge's parents are sorted
            if new == wire:
                return
            try:
                new_obj = type(obj).from_wire(new, f"purge of {oid.hex()}")
            except CtxError as exc:  # its texts are its structure (a tree's names)
                raise InvalidInput(f"{oid.hex()[:12]} cannot be purged whole: {exc.message}",
                                   hint="purge the blobs or nodes it names instead") from exc
        if oid in self.typed or isinstance(obj, ChangeBatch):
            self.scrubbed.add(oid)
        self.ids[oid] = self.tx.put(new_obj)


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (a wire form: lists, tuples, dicts) with ``change`` applied to every text."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_strings(v, change) for v in value)
    if isinstance(value, dict):
        return {k: _map_strings(v, change) for k, v in value.items()}
    return value


def _named_ids(value: Any) -> Iterator[bytes]:
    """The object ids a typed object's wire form names."""
    if isinstance(value, bytes):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _named_ids(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _named_ids(v)


def _resolve(db: Session, targets: list[str]) -> tuple[set[str], set[bytes]]:
    """Node ids and object ids named by ``targets`` (node ids or prefixes, object ids or prefixes).

    Raises:
        InvalidInput: (E011) for a target that names neither.
    """
    nodes: set[str] = set()
    objects: set[bytes] = set()
    conn = db.index()
    for target in targets:
        try:
            nodes.add(read_node(conn, target).id)
            continue
        except CtxError:
            pass
        try:
            objects.add(bytes(db.store.objects.resolve_prefix(target.lower())))
        except CtxError as exc:
            raise InvalidInput(f"{target!r} names no node and no object",
                               hint="`ctx debug secrets` names what holds a secret") from exc
    return nodes, objects


def purge(db: Session, targets: list[str], *, whole: bool = False, message: str | None = None,
          now: Callable[[], float] | None = None) -> PurgeReport:
    """Remove the content of nodes or objects from the ctx history (see the module docstring).

    Args:
        db: The open session (its index names the nodes; the next ``db.index()`` follows
            the rewritten history).
        targets: Node ids (every version of the node is scrubbed) or object ids (a blob:
            its text; a typed object: every text in it), full or unique prefixes.
        whole: Replace the whole content by ``[PURGED]`` instead of redacting what the
            scanner finds.
        message: The purge commit's message.
        now: The clock (seconds).

    Returns:
        What was rewritten.

    Raises:
        InvalidInput: (E011) for a target that names nothing.
        NothingToDo: (E018) when nothing would change (the scanner finds no secret in the
            targets: name the content with ``whole``).
        StagingConflict, LockConflict, StorageIOError: if the store cannot be written; a
            pointer that moved meanwhile leaves the store as it was.
    """
    clock = now or time.time
    store = db.store
    scanner = policy_for(store).scanner()
    report = PurgeReport()
    with store.lock():
        node_ids, object_ids = _resolve(db, targets)
        pointers = _pointers(store)
        heads = [h for _, ptr in pointers for h in ptr.heads]
        with store.transaction() as tx:
            objects = list(_post_order(store, heads))
            blobs = {oid for oid in object_ids if _kind(store, oid) == KIND_BLOB}
            for oid, _, _, obj in objects:  # a node's large content lives in a blob
                if isinstance(obj, ChangeBatch):
                    blobs.update(r.content_blob for r in obj.records
                                 if isinstance(r, NodeRecord) and r.id in node_ids and r.content_blob)
                elif whole and oid in object_ids and obj is not None:
                    # the whole of a typed object is its texts and the blobs it names (a run's
                    # output is a blob its diagnostics snapshot names)
                    blobs.update(b for b in _named_ids(obj.to_wire()) if _kind(store, b) == KIND_BLOB)
            rw = _Rewrite(store, scanner, node_ids, blobs, object_ids - blobs, whole, tx)
            for oid, kind, payload, obj in objects:
                if kind == KIND_BLOB:
                    rw.blob(oid, payload)
                elif obj is not None:
                    rw.typed_object(oid, obj)
            if not rw.scrubbed and whole:
                raise NothingToDo("nothing to purge: the content of " + ", ".join(targets)
                                  + " is [PURGED] already, or not in the history of any ref")
            if not rw.scrubbed:
                raise NothingToDo("nothing to purge: the scanner finds no secret in "
                                  + ", ".join(targets),
                                  hint="give --whole to remove the content all the same")
            stamp = int(clock() * 1000)
            # Every object written again is named (commits included): gc deletes the old
            # ones whatever else would keep them (a replaced commit's narrative snapshots).
            record = PurgeRecord(id=new_ulid(), versions=tuple(sorted(ObjectId(v) for v in rw.versions)),
                                 objects=tuple(sorted(ObjectId(o) for o in rw.ids)), at=stamp)
            batch = tx.put(ChangeBatch(created_at=stamp, author=None, records=(record,)))
            head_name = store.head_ref()
            head_ptr = dict(pointers).get(head_name)
            if head_ptr is None:
                raise NothingToDo(f"{head_name} names no commit: nothing to purge")
            parents = tuple(sorted(ObjectId(rw.ids.get(h, h)) for h in head_ptr.heads))
            first = store.read_typed(ObjectId(parents[0]), Commit)
            text = message or f"ctx purge: {len(rw.versions)} record versions, " \
                              f"{len(rw.scrubbed)} objects scrubbed"
            commit = tx.put(Commit(parents=parents, timestamp_unix=int(clock()), message=text,
                                   root_tree=first.root_tree if len(parents) == 1 else None,
                                   change_batches=(batch,)))
            old_heads = set(head_ptr.heads)
            for name, ptr in pointers:
                if ptr.conflicted and name != head_name:
                    raise InvalidInput(f"{name} holds {len(ptr.heads)} heads from a Git merge",
                                       hint="run `ctx rebuild` (it merges them), then purge")
                if name == head_name:
                    tx.move_pointer(name, commit, expected=ptr)
                elif name == "STAGE":
                    head = ptr.single
                    new = commit if head in old_heads else ObjectId(rw.ids.get(head, head))
                    if new != head:
                        tx.move_pointer(name, new, expected=ptr, expect_type=STAGE_TYPES)
                elif ptr.single in rw.ids:
                    tx.move_pointer(name, ObjectId(rw.ids[ptr.single]), expected=ptr)
        report.commit = commit.hex()
        report.rewritten = {k.hex(): v.hex() for k, v in rw.ids.items()}
        report.versions = sorted(v.hex() for v in rw.versions)
        report.nodes = sorted(node_ids)
        # The objects that held the content (not the commits and trees that only named
        # them): what Git's history keeps of it.
        report.old_paths = sorted(f".ctx/objects/{k.hex()[:2]}/{k.hex()}" for k in rw.scrubbed
                                  if store.objects.is_canonical(ObjectId(k)))
        if not whole:
            report.narrative = [f"narrative/{rel}" for rel, _ in redact_narrative_files(store, scanner)]
    return report


def _kind(store: Store, oid: bytes) -> int | None:
    try:
        return store.objects.read(ObjectId(oid)).kind
    except ObjectNotFound:
        return None


def redact_narrative_files(store: Store, scanner: Scanner) -> list[tuple[str, list[Finding]]]:
    """Redact secrets in place in every narrative file; the files rewritten and what was found.

    The caller holds the store lock.

    Raises:
        StorageIOError: if a file cannot be rewritten.
    """
    changed = []
    for rel, path in iter_narrative_files(store):
        text = _text_of(path, MAX_NARRATIVE_BYTES)
        if text is None:
            continue
        findings = scanner.scan(text)
        if not findings:
            continue
        try:
            with fsio.open_dir(store.root) as root:
                root.replace_atomic(path, apply_redactions(text, findings).encode("utf-8"))
        except OSError as exc:
            raise StorageIOError(str(path), op="write", error=exc) from None
        changed.append((rel, findings))
    return changed

