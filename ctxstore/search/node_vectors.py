"""Vectors of knowledge nodes: ``ctx search`` finds a node by meaning as well as by its words.

Optional (``[retrieval] vectors = "on"`` and the ``ctxstore[embed]`` extra); off, nothing here
is imported. Each live node's content and summary is embedded (``ctxstore.embed``) and kept
in ``.ctx/index/vectors.sqlite``: derived, per clone, never in ``.ctx/objects``, keyed by the
node id, the version (record id) it was embedded at and the model, so an edited node or a new
model is embedded again and a node that is gone loses its vector. A search first brings the
file up to date with the index (only what changed is embedded), then compares the query's
vector with every stored one (brute force, ``embed.vectors``). ``ctx rebuild`` deletes the
file and makes it again. The search itself (``search.search``) fuses the nearest nodes with
BM25's by reciprocal rank fusion.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.errors import IndexCorrupt
from ctxstore.search.ranked import run_select

if TYPE_CHECKING:
    from ctxstore.config import Config
    from ctxstore.embed.engine import Embedder

__all__ = ["VECTORS_FILE", "RRF_K", "fuse", "node_engine", "sync_node_vectors", "nearest_nodes",
           "rebuild_node_vectors"]

VECTORS_FILE = "vectors.sqlite"
RRF_K = 60
"""Reciprocal rank fusion's constant (``fuse``)."""
_BATCH = 256
_SCHEMA = ("CREATE TABLE IF NOT EXISTS node_vectors (node_id TEXT NOT NULL, model TEXT NOT NULL, "
           "version BLOB NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (node_id, model)) WITHOUT ROWID")


def node_engine(config: Config) -> Embedder | None:
    """The embedding engine when ``[retrieval] vectors = "on"``, else None (nothing imported).

    Raises:
        EmbedUnavailable: (E027) vectors are on but the extra is not installed.
    """
    if config.get("retrieval", "vectors") != "on":
        return None
    from ctxstore.embed.engine import load_embedder

    return load_embedder()


def _path(root: Path) -> Path:
    return root / "index" / VECTORS_FILE


def _open(root: Path) -> sqlite3.Connection:
    """The vectors file, made when missing; a damaged one is deleted and made again (derived).

    Raises:
        UnsafePath: (E020) the file or a companion is a link or not a regular file.
    """
    from ctxstore.sqlite import connect, is_damage

    path = _path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):
        try:
            conn = connect(path, busy_seconds=5.0)  # reads the header: damage shows here too
        except sqlite3.Error as exc:
            if attempt == 2 or not is_damage(exc):
                raise IndexCorrupt(f"{path}: {exc}") from None
            _delete(path)
            continue
        try:
            conn.execute(_SCHEMA)
            conn.execute("SELECT count(*) FROM node_vectors").fetchone()
            return conn
        except sqlite3.Error as exc:
            conn.close()
            if attempt == 2 or not is_damage(exc):
                raise IndexCorrupt(f"{path}: {exc}") from None
            _delete(path)
    raise AssertionError("unreachable")


def _delete(path: Path) -> None:
    """The vectors file and its companions removed (links themselves, never their targets)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def sync_node_vectors(root: Path, conn: sqlite3.Connection, engine: Embedder) -> int:
    """Embed the live nodes whose vector is missing or of an older version; drop the others.

    Args:
        root: The store's ``.ctx`` directory.
        conn: A current index connection.
        engine: The model.

    Returns:
        How many nodes were embedded.
    """
    from ctxstore.embed.vectors import to_blob

    live = {str(i): bytes(v) for i, v in run_select(conn, "SELECT id, version FROM nodes", ())}
    vec = _open(root)
    try:
        held = {str(i): bytes(v) for i, v in vec.execute(
            "SELECT node_id, version FROM node_vectors WHERE model = ?", (engine.model_id,))}
        todo = [i for i, version in live.items() if held.get(i) != version]
        gone = [i for i in held if i not in live]
        vec.execute("BEGIN IMMEDIATE")
        try:
            vec.executemany("DELETE FROM node_vectors WHERE node_id = ? AND model = ?",
                            [(i, engine.model_id) for i in gone])
            vec.execute("DELETE FROM node_vectors WHERE model != ?", (engine.model_id,))
            for start in range(0, len(todo), _BATCH):
                part = todo[start:start + _BATCH]
                rows = run_select(conn, "SELECT id, content, summary FROM nodes WHERE id IN "
                                        f"({','.join('?' * len(part))})", part)
                vectors = engine.embed([f"{s or ''}\n{c}".strip() for _, c, s in rows])
                vec.executemany("INSERT OR REPLACE INTO node_vectors VALUES (?, ?, ?, ?)",
                                [(str(i), engine.model_id, live[str(i)], to_blob(v))
                                 for (i, _, _), v in zip(rows, vectors, strict=True)])
            vec.execute("COMMIT")
        except BaseException:
            vec.execute("ROLLBACK")
            raise
        return len(todo)
    finally:
        vec.close()


def nearest_nodes(root: Path, conn: sqlite3.Connection, engine: Embedder, text: str,
                  limit: int) -> list[tuple[int, float]]:
    """``(node rowid, cosine)`` of the ``limit`` live nodes nearest to ``text``, best first.

    The vectors are synced with the index first (``sync_node_vectors``).
    """
    from ctxstore.embed.vectors import from_blobs, nearest

    sync_node_vectors(root, conn, engine)
    vector = engine.embed_query(text)
    if not vector.any():
        return []
    vec = _open(root)
    try:
        rows = [(str(i), bytes(b)) for i, b in vec.execute(
            "SELECT node_id, vec FROM node_vectors WHERE model = ?", (engine.model_id,))]
    finally:
        vec.close()
    found = nearest(from_blobs([b for _, b in rows], engine.dim), vector, limit)
    ids = [rows[i][0] for i, _ in found]
    rowid = {str(i): int(r) for i, r in run_select(
        conn, f"SELECT id, rowid FROM nodes WHERE id IN ({','.join('?' * len(ids))})", ids)}
    return [(rowid[rows[i][0]], score) for i, score in found if rows[i][0] in rowid]


def fuse(words: list[str], near: list[str], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion (spec 004 §5.1): ``(key, sum of 1 / (k + rank))``, best first.

    Args:
        words: Keys ranked by their words (BM25), best first.
        near: Keys ranked by meaning (vectors), best first.
        k: The damping constant (60, as the method's authors use).
    """
    score: dict[str, float] = {}
    for ranking in (words, near):
        for rank, key in enumerate(ranking):
            score[key] = score.get(key, 0.0) + 1.0 / (k + rank + 1)
    return sorted(score.items(), key=lambda pair: (-pair[1], words.index(pair[0])
                                                  if pair[0] in words else len(words)))


def rebuild_node_vectors(root: Path, conn: sqlite3.Connection, config: Config) -> int | None:
    """``ctx rebuild``: the vectors file deleted and made again; None when vectors are off.

    Raises:
        EmbedUnavailable: (E027) vectors are on but the extra is not installed.
    """
    engine = node_engine(config)
    _delete(_path(root))
    if engine is None:
        return None
    return sync_node_vectors(root, conn, engine)
