"""A store as an older ctx left it: ``ctx index`` + ``ctx commit`` committed the code index.

Before the code index became per clone (commit 1da25b5), ``ctx index`` staged one ``file``
record per indexed file, each naming a ``file_version`` (the file's symbols and relations)
and the file's content blob, and ``ctx commit`` folded them into a commit v1 whose
``root_tree`` held one ``tree`` per directory (``code.tree.write_tree``). ``old_index_commit``
writes exactly those objects, the way that path did, on top of a store's current head.
"""

from __future__ import annotations

from pathlib import Path

from ctxstore.clock import next_stamp, now_ms
from ctxstore.code.tree import write_tree
from ctxstore.ids import ObjectId
from ctxstore.model import Commit
from ctxstore.model.code import CodeSymbol, FileRecord, FileVersion
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord, version_id
from ctxstore.repo import STAGE_TYPES, open_store
from ctxstore.staging import resolve_main, resolve_stage


def old_index_commit(ctx_dir: Path, files: dict[str, bytes], *, message: str = "index",
                     mentions: dict[str, str] | None = None,
                     prev: dict[str, tuple[ObjectId, int]] | None = None
                     ) -> dict[str, tuple[ObjectId, ObjectId, ObjectId, int]]:
    """Commit ``files`` as an older ctx's ``ctx index`` + ``ctx commit`` did (a commit v1).

    Args:
        ctx_dir: The store.
        files: Path -> content, the files indexed.
        message: The commit message.
        mentions: Node id -> path: a ``Mentions`` edge made against the indexed content
            (its evidence names the file's blob, as ``code.relate`` writes it).
        prev: Path -> (record version, stamp) of the previous ``file`` record of a path.

    Returns:
        Path -> (the record's version id, the ``file_version`` id, the blob id, its stamp);
        ``"__commit__"`` and ``"__tree__"`` hold the commit and its root tree in slot 0.
    """
    store = open_store(ctx_dir)
    records: list[KnowledgeRecord] = []
    out: dict[str, tuple[ObjectId, ObjectId, ObjectId, int]] = {}
    with store.transaction() as tx:
        head, head_ptr = resolve_main(store, tx)
        _, stage_ptr = resolve_stage(store, tx, head)
        blobs: dict[str, bytes] = {}
        for path, data in sorted(files.items()):
            blob = tx.put_blob(data)
            name = Path(path).stem
            sym = CodeSymbol(f"{name}.f", "f", "function", None, None, "def f()", 0, len(data),
                             1, 1, ())
            version = tx.put(FileVersion.make(
                path=path, blob_id=blob, language="python", byte_count=len(data),
                line_count=data.count(b"\n"), complete=True, note=None, symbols=(sym,),
                relations=()))
            before = (prev or {}).get(path)
            stamp = next_stamp(before[1] if before else None)
            rec = FileRecord(path=path, version=version, blob=blob, updated_at=stamp,
                             prev=before[0] if before else None)
            records.append(rec)
            out[path] = (ObjectId(version_id(rec)), version, blob, stamp)
            blobs[path] = bytes(blob)
        for node_id, path in (mentions or {}).items():
            now = now_ms()
            records.append(EdgeRecord(from_ref=("node", node_id), to_ref=("file", path),
                                      label="Mentions", weight=None, metadata={},
                                      evidence={"tool": "ctx", "confidence": "high",
                                                "blob": out[path][2].hex()},
                                      created_at=now, updated_at=now, prev=None))
        batches = tx.put_records(records, created_at=now_ms(), author=None)
        parent = store.read_typed(head, Commit)
        tree = write_tree(tx, blobs)
        commit = tx.put(Commit(parents=(head,), timestamp_unix=max(now_ms() // 1000,
                                                                    parent.timestamp_unix),
                               message=message, root_tree=tree, change_batches=tuple(batches)))
        tx.move_pointer(store.head_ref(), commit, expected=head_ptr)
        tx.move_pointer("STAGE", commit, expected=stage_ptr, expect_type=STAGE_TYPES)
    zero = ObjectId(b"\0" * 32)
    out["__commit__"] = (commit, zero, zero, 0)
    out["__tree__"] = (ObjectId(tree) if tree else zero, zero, zero, 0)
    return out
