"""The incrementally maintained index always equals a fresh rebuild and the replay."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import session_of
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.errors import CtxError
from ctxstore.index import open_index
from ctxstore.init import init_store
from ctxstore.knowledge.edges import link_nodes, unlink_nodes
from ctxstore.knowledge.nodes import add_node, delete_node, supersede_node, tag_node, untag_node, update_node
from ctxstore.replay import replay
from ctxstore.repo import open_store
from ctxstore.staging import abort_session, commit_stage, start_session

OPS = st.lists(st.tuples(
    st.sampled_from(["add", "add", "update", "tag", "untag", "link", "unlink", "delete",
                     "supersede", "commit", "start", "abort", "amend"]),
    st.integers(0, 7), st.integers(0, 7), st.sampled_from(["alpha", "beta", "gamma"])),
    min_size=1, max_size=25)


def dump(conn) -> dict:
    return {
        "nodes": conn.execute("SELECT id, type, content, summary, status, superseded_by, "
                              "created_at, updated_at, metadata, tokens, version FROM nodes "
                              "ORDER BY id").fetchall(),
        "tags": conn.execute("SELECT node_id, tag FROM tags ORDER BY 1, 2").fetchall(),
        "edges": conn.execute("SELECT from_key, to_key, label, version FROM edges "
                              "ORDER BY 1, 2, 3").fetchall(),
        "views": conn.execute("SELECT name, query, budget FROM views ORDER BY 1").fetchall(),
        "fts": conn.execute("SELECT n.id FROM nodes_fts f JOIN nodes n ON n.rowid = f.rowid "
                            "WHERE nodes_fts MATCH 'alpha' ORDER BY 1").fetchall(),
    }


@settings(max_examples=25)
@given(OPS)
@pytest.mark.slow
def test_index_incremental_equals_rebuild_and_replay(ops) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / ".ctx"
        init_store(root, git=False)
        store = open_store(root)
        ids: list[str] = []
        for op, i, j, word in ops:
            pick = lambda k: ids[k % len(ids)] if ids else "0000"  # noqa: E731
            try:
                if op == "add":
                    ids.append(add_node(session_of(store), "fact", f"{word} fact {len(ids)}",
                                        tags=[f"tier:{['pinned', 'working'][i % 2]}"]).node.id)
                elif op == "update":
                    update_node(session_of(store), pick(i), content=f"{word} updated {i}")
                elif op == "tag":
                    tag_node(session_of(store), pick(i), [f"t:{word}"])
                elif op == "untag":
                    untag_node(session_of(store), pick(i), [f"t:{word}", "tier:pinned"])
                elif op == "link":
                    link_nodes(session_of(store), pick(i), pick(j), "DEPENDS_ON")
                elif op == "unlink":
                    unlink_nodes(session_of(store), pick(i), pick(j))
                elif op == "delete":
                    delete_node(session_of(store), pick(i), cascade=bool(j % 2))
                elif op == "supersede":
                    supersede_node(session_of(store), pick(i), pick(j))
                elif op == "commit":
                    commit_stage(store, f"c{i}")
                elif op == "amend":
                    commit_stage(store, None, amend=True)
                elif op == "start":
                    start_session(store, f"task {i}")
                elif op == "abort":
                    abort_session(store, "because")
            except CtxError:
                pass  # e.g. an id that was deleted, a second start: refused, nothing written
            # the incremental index is brought up to date by every read
            open_index(store).close()
        incremental = dump(open_index(store))
        fresh_root = Path(tmp) / "copy" / ".ctx"
        shutil.copytree(root, fresh_root, ignore=shutil.ignore_patterns("index"))
        fresh = dump(open_index(open_store(fresh_root)))
        assert incremental == fresh
        state = replay(store)
        assert [r[0] for r in incremental["nodes"]] == sorted(state.nodes)
        assert {r[0]: r[-1] for r in incremental["nodes"]} == \
            {k[1]: w.version for k, w in state.winners.items() if k[0] == "node" and k[1] in state.nodes}
