"""The ``root_tree`` of a commit: a hierarchical snapshot of the ingested files.

A fold (``ctx commit``) that carries ``file`` or ``file_removed`` records writes the tree
of every file ingested as of that commit: one ``tree`` object per directory, leaves the
blob ids of the files' content (the ``file_version`` objects are reachable from the
change batches). The file set is the parent commit's tree with the fold's records
applied; when the parent is a merge (whose tree may hold one side only) it is the replay
of every reachable ``file`` record instead. The commit use case (``history.commit``) hands
``fold_tree`` to ``staging.commit_stage``, which knows nothing of code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ctxstore.errors import ObjectNotFound
from ctxstore.ids import ObjectId
from ctxstore.model.code import FileRecord, FileRemoved
from ctxstore.model.commit import Commit, Tree, TreeEntry
from ctxstore.model.knowledge import KnowledgeRecord

if TYPE_CHECKING:
    from ctxstore.repo import Store, Transaction

__all__ = ["write_tree", "fold_root_tree", "fold_tree", "touches_files", "tree_files"]


def touches_files(records: Iterable[KnowledgeRecord]) -> bool:
    """Whether a fold's records change the ingested file set."""
    return any(isinstance(r, (FileRecord, FileRemoved)) for r in records)


def write_tree(tx: Transaction, files: Mapping[str, bytes]) -> ObjectId | None:
    """Write the trees of ``files`` (path -> blob id); return the root's id (None: no files).

    Args:
        tx: The transaction the trees are written in.
        files: Repository-relative POSIX paths and the blob ids of their content.

    Returns:
        The root tree's id, or None when ``files`` is empty.
    """
    if not files:
        return None
    root: dict[str, object] = {}
    for path, blob in files.items():
        parts = [p for p in path.split("/") if p]
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):  # a file and a directory of one name: keep the file
                break
            node = child
        else:
            node.setdefault(parts[-1], blob)

    def put(node: dict[str, object]) -> ObjectId:
        entries = []
        for name in sorted(node):
            value = node[name]
            if isinstance(value, dict):
                entries.append(TreeEntry(name=name, kind="tree", id=put(value)))
            else:
                entries.append(TreeEntry(name=name, kind="blob", id=ObjectId(value)))  # type: ignore[arg-type]
        return tx.put(Tree(entries=tuple(entries)))

    return put(root)


def fold_root_tree(store: Store, tx: Transaction, base: Commit,
                   records: Iterable[KnowledgeRecord]) -> ObjectId | None:
    """The root tree of the files ingested once ``records`` fold onto ``base``, written in ``tx``.

    Args:
        store: The store (its lock is held by ``tx``).
        tx: The fold's transaction.
        base: The commit whose tree the fold starts from (the parent; an amended commit).
        records: The fold's records (only ``file`` and ``file_removed`` count).

    Returns:
        The root tree's id, or None when no file is ingested.
    """
    if len(base.parents) > 1:  # a merge: its tree may be one side's, so replay everything
        files = _replayed_files(store)
    else:
        try:
            files = tree_files(store, base.root_tree)
        except ObjectNotFound as exc:
            from ctxstore.prunedlist import read_pruned

            missing = exc.oid if isinstance(exc.oid, bytes) else bytes.fromhex(exc.oid)
            if missing not in read_pruned(store.root).ids:
                raise
            # `ctx gc` pruned the tree (derived): the ingested files are the replay's
            files = _replayed_files(store)
    for rec in records:
        if isinstance(rec, FileRecord):
            files[rec.path] = rec.blob
        elif isinstance(rec, FileRemoved):
            files.pop(rec.path, None)
    return write_tree(tx, files)


def _replayed_files(store: Store) -> dict[str, bytes]:
    """Every ingested file of the replayed state: path -> blob id."""
    from ctxstore.replay import replay

    return {w.record.path: bytes(w.record.blob) for w in replay(store).winners.values()
            if isinstance(w.record, FileRecord)}


def fold_tree(store: Store, tx: Transaction, base: Commit,
              records: Sequence[KnowledgeRecord]) -> ObjectId | None:
    """``staging.commit_stage``'s ``tree``: the new root tree, or None when no file changed.

    Args:
        store: The store (its lock is held by ``tx``).
        tx: The fold's transaction.
        base: The commit the fold starts from.
        records: The fold's curated records.

    Returns:
        ``fold_root_tree`` when ``records`` change the ingested files, else None (the base
        commit's tree stays).
    """
    return fold_root_tree(store, tx, base, records) if touches_files(records) else None


def tree_files(store: Store, root: ObjectId | None) -> dict[str, bytes]:
    """Every file of a root tree: path -> blob id (for checks and tests).

    Args:
        store: The store.
        root: The root tree's id (None: no files).

    Returns:
        The files, by path.
    """
    out: dict[str, bytes] = {}
    stack: list[tuple[str, bytes]] = [("", root)] if root is not None else []
    while stack:
        prefix, oid = stack.pop()
        for entry in store.read_typed(ObjectId(oid), Tree).entries:
            path = f"{prefix}{entry.name}"
            if entry.kind == "tree":
                stack.append((path + "/", entry.id))
            else:
                out[path] = entry.id
    return out
