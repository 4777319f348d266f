"""clock: the hybrid logical clock (a new version never stamps before its predecessor) and the
clamp of future stamps on import."""

from __future__ import annotations

import json
import time

from conftest import invoke, session_of
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.clock import clamp_future, next_stamp, now_ms
from ctxstore.index import open_index
from ctxstore.index.read import find_node
from ctxstore.knowledge.exchange import import_document
from ctxstore.model.knowledge import NodeRecord
from ctxstore.staging import stage_records

stamps = st.integers(0, (1 << 62))
HOUR_MS = 3_600_000


@given(stamps, stamps)
def test_next_stamp_is_never_before_prev_nor_the_wall_clock(prev: int, wall: int) -> None:
    stamp = next_stamp(prev, now=wall)
    assert stamp > prev
    assert stamp >= wall
    assert stamp == max(wall, prev + 1)


def test_next_stamp_without_prev_is_the_wall_clock() -> None:
    assert next_stamp(None, now=1234) == 1234
    before = time.time_ns() // 1_000_000
    stamp = next_stamp()
    assert before <= stamp <= time.time_ns() // 1_000_000


def test_next_stamp_on_a_clock_running_behind_still_moves_forward() -> None:
    future = now_ms() + HOUR_MS
    first = next_stamp(future)
    assert first == future + 1
    assert next_stamp(first) == future + 2


@given(stamps, stamps)
def test_clamp_future_never_returns_a_stamp_after_now(stamp: int, wall: int) -> None:
    clamped = clamp_future(stamp, now=wall)
    assert clamped <= wall
    assert clamped == stamp or stamp > wall


def _future_node(store, node_id: str, stamp: int) -> None:
    """A version stamped in the future, as a clone whose clock runs ahead would merge in."""
    rec = NodeRecord(id=node_id, type="fact", content="written ahead", content_blob=None,
                     summary=None, tags=(), metadata={}, status="active", superseded_by=None,
                     created_at=stamp, updated_at=stamp, author=None, prev=None)
    stage_records(store, [rec], message="from a fast clock")


def test_cli_edit_of_a_node_stamped_in_the_future_wins_over_it(store, runner) -> None:
    node_id, future = "01HQ0000000000000000000001", now_ms() + HOUR_MS
    _future_node(store, node_id, future)
    r = invoke(runner, store, "update", node_id, "--content", "edited later")
    assert (r.exit_code, r.stderr) == (0, ""), r.output
    r = invoke(runner, store, "tag", node_id, "project:x")
    assert r.exit_code == 0, r.output
    node = find_node(open_index(store), node_id)
    assert node is not None
    assert (node.content, node.tags) == ("edited later", ["project:x"])
    assert node.updated_at == future + 2  # two edits, each one past its predecessor
    r = invoke(runner, store, "show", node_id)
    assert r.exit_code == 0 and r.stdout.rstrip().endswith("edited later")


def test_cli_delete_of_a_node_stamped_in_the_future_removes_it(store, runner) -> None:
    node_id = "01HQ0000000000000000000002"
    _future_node(store, node_id, now_ms() + HOUR_MS)
    r = invoke(runner, store, "delete", node_id)
    assert r.exit_code == 0, r.output
    assert find_node(open_index(store), node_id) is None


def test_import_clamps_future_stamps_through_the_clock(store) -> None:
    doc = {"version": 1, "format": "ctx-export", "nodes": [{
        "id": "01HQ0000000000000000000003", "type": "fact", "content": "from the future",
        "created_at": "2999-01-01T00:00:00.000Z", "updated_at": "2999-01-01T00:00:00.000Z"}],
        "edges": [], "views": []}
    before = now_ms()
    import_document(session_of(store), json.dumps(doc), merge=False)
    node = find_node(open_index(store), "01HQ0000000000000000000003")
    assert node is not None
    assert before <= node.updated_at <= now_ms()
    assert node.created_at == node.updated_at
