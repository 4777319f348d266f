"""Narrative Markdown and its node killed between the two writes: the next commit reconciles them.

A child running the CLI with the fault shim is killed right after the Markdown is in place, after
the session summary is written, and before each durable operation of ``ctx add decision``; the
next commit leaves exactly one node per marked section, and a further commit is a no-op.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from _crashlib import ctx_child
from conftest import session_of

from ctxstore.history.commit import fold
from ctxstore.model import Commit
from ctxstore.narrative import markdown as nar
from ctxstore.narrative import snapshot
from ctxstore.narrative.entries import add_note
from ctxstore.objects import ObjectId
from ctxstore.repo import Store, open_store
from ctxstore.staging import start_session
from tests.narrative.test_narrative import commit, commit_with_edits, compact_session, live, ndir


def run_killed(ctx: Path, args: list[str], fault: str) -> subprocess.CompletedProcess[str]:
    """``ctx ARGS`` in a child with the fault shim (see tests/_shim/sitecustomize.py)."""
    return ctx_child(["--ctx-dir", str(ctx), *args], cwd=Path.cwd(), fault=fault)


@pytest.mark.crash
@pytest.mark.parametrize("kind", ["note", "decision", "task"])
def test_kill_after_markdown_write_is_reconciled_by_commit(store: Store, kind: str) -> None:
    fold(store, "base")
    args = ["add", kind, f"written before the {kind} node"]
    # the first rename of `ctx add <kind>` puts the Markdown in place; die right after it
    res = run_killed(store.root, args, "kill:replace:1:after")
    assert res.returncode == -signal.SIGKILL
    entries = [e for rel, p in snapshot.iter_narrative_files(store)
               for e in nar.parse_entries(rel, p.read_text()) if e.marker]
    assert len(entries) == 1 and entries[0].marker not in live(store)
    store = open_store(store.root)
    edits = commit(store, "after the crash")
    assert [(e.action, e.node_id) for e in edits] == [("added", entries[0].marker)]
    node_type, content, _ = live(store)[entries[0].marker]
    assert node_type == {"note": "observation", "decision": "decision", "task": "task"}[kind]
    assert f"written before the {kind} node" in content
    assert commit(store) == []  # idempotent: the marker names the node


@pytest.mark.crash
def test_kill_after_summary_write_then_rerun_compacts_once(store: Store) -> None:
    start_session(store, "Crashy session")
    n = add_note(session_of(store), "staged note")
    head = store.read_head().single
    log = ndir(store) / n.path
    res = run_killed(store.root, ["stage", "compact", "--message", "done"], "kill:replace:1:after")
    assert res.returncode == -signal.SIGKILL
    store = open_store(store.root)
    assert store.read_head().single == head  # the log was written, the commit was not
    assert log.read_text().count("ctx:session=") == 1
    out, _ = compact_session(store, "done")
    assert out.commit is not None and log.read_text().count("ctx:session=") == 1
    refs = {r.path: r.blob_id for r in store.read_typed(out.commit, Commit).narrative_refs}
    assert store.read_blob(ObjectId(refs[n.path])) == log.read_bytes()
    assert n.node.id in live(store)


TAIL_SLACK = 4  # durable operations of a new shard directory: mkdir, and its parent's fsync


@pytest.mark.crash
def test_kill_at_every_operation_of_add_decision(store: Store, tmp_path: Path) -> None:
    """Whatever operation `ctx add decision` dies at, the next commit leaves exactly as many
    decision nodes as marked sections in decisions.md (0 or 1), and a further commit is a
    no-op: the Markdown and the nodes never disagree after a commit."""
    fold(store, "base")
    template = store.root.parent
    args = ["add", "decision", "Probe", "--body", "written under fire"]
    probe = Path(shutil.copytree(template, tmp_path / "probe")) / ".ctx"
    assert run_killed(probe, args, f"count:{tmp_path / 'count'}").returncode == 0
    total = int((tmp_path / "count").read_text())
    assert total > 10
    failures = []
    for n in range(1, total + 1):
        ctx = Path(shutil.copytree(template, tmp_path / f"p{n}")) / ".ctx"
        code = run_killed(ctx, args, f"kill:*:{n}:before").returncode
        # A run may make a shard directory fewer than the counted one (object ids are new
        # each run, so two may share a shard): only the last few kill points can be missed.
        assert code == -signal.SIGKILL or (code == 0 and n > total - TAIL_SLACK), (n, code)
        crashed = open_store(ctx)
        commit_with_edits(crashed, "after the crash")
        dec = ctx / "narrative" / "decisions.md"
        marked = [e.marker for e in nar.parse_entries("decisions.md", dec.read_text())] \
            if dec.exists() else []
        nodes = [nid for nid, (t, text, _) in live(crashed).items() if t == "decision"]
        if sorted(marked) != sorted(nodes) or len(nodes) > 1:
            failures.append(f"kill before op {n}: markers {marked}, nodes {nodes}")
        elif commit_with_edits(crashed, "again")[1]:
            failures.append(f"kill before op {n}: second commit ingested again")
    assert not failures, failures
