"""Random two-branch Git histories of .ctx/ (RELIABILITY GM-11, spec 002 success criterion 4).

Each history starts from a committed base; two clones then work at the same time (their
operations interleave in real time, as two developers' would): adds, updates, deletes, links,
unlinks, tags, untags, views, notes, tasks and decisions, and hand edits of the narrative
Markdown, folded with `ctx commit` at random points, Git commits at random points, and some
work left staged (STAGE moved, not folded: it stays in its clone's ``.ctx/local`` and never
reaches Git). One side is then merged into the other with `git merge`, once with plain Git (no
driver: a fresh clone) and once with the `ctx merge-ref` driver as `ctx init` registers it.

The oracle is computed here, not by the replay under test: every record reachable from each
side's canonical ref (what Git carries) is read from the objects, and per key the record with
the greatest ``(stamp, version id)`` wins, tombstones included. The merged store's export must
equal it, both while the pointers still hold several heads and after `ctx rebuild`; every
record either side had must be in the merged history (except staged steps the other side
folded away after superseding them); verify must pass; the next write must replace multi-head
pointers by a merge commit; and `ctx status` must report exactly the nodes both sides changed
as concurrent edits (never more; fewer only in the limitation that ctxstore/index/heads.py
documents).

Normal suite: 20 histories. `CTX_MERGE_HISTORIES=200 python3 -m pytest tests/storage/test_git_merge.py`
runs 200 (marked slow). Ctx operations run in-process (CliRunner); only git is a subprocess.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import invoke, without_autolink

from ctxstore.model import ChangeBatch, Commit, WorkCommit
from ctxstore.model.knowledge import (
    EdgeRecord,
    NodeRecord,
    ViewRecord,
    record_key,
    record_stamp,
    version_id,
)
from ctxstore.objects import ObjectId
from ctxstore.repo import open_store

pytestmark = pytest.mark.git

HISTORIES = int(os.environ.get("CTX_MERGE_HISTORIES", "20"))
NODE_TYPES = ("fact", "decision", "observation", "task", "pattern")
EDGE_TYPES = ("DEPENDS_ON", "RELATES_TO", "DERIVED_FROM")
WORDS = ("retry", "cache", "sqlite", "merge", "lock", "index", "budget", "hook", "clock")


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {res.stdout}{res.stderr}")
    return res


class Side:
    """One clone of the project and the ctx commands run in it (in-process)."""

    def __init__(self, repo: Path, runner: CliRunner, label: str, log: list[str]) -> None:
        self.repo = repo
        self.runner = runner
        self.label = label
        self.ctx_dir = repo / ".ctx"
        self.log = log  # shared by every side of one history, for failure reports
        tasks = repo / ".ctx" / "narrative" / "tasks"
        self.base_tasks = {p.name for p in tasks.glob("*.md")} if tasks.is_dir() else set()

    def ctx(self, *args: str) -> str:
        res = invoke(self.runner, self.ctx_dir, *args)
        if "export" not in args:
            self.log.append(f"{self.label}: ctx {' '.join(args)} -> {res.exit_code}")
        assert res.exit_code == 0, f"ctx {' '.join(args)} in {self.label}: {res.output}"
        return res.stdout

    def json(self, *args: str) -> dict:
        return json.loads(self.ctx("--format", "json", *args))

    def export(self) -> dict:
        return self.json("export")

    def git_commit(self, message: str) -> None:
        git(self.repo, "add", "-A")
        if git(self.repo, "diff", "--cached", "--quiet", check=False).returncode:
            git(self.repo, "commit", "-qm", message)
        self.log.append(f"{self.label}: git commit")


# -- random operations --------------------------------------------------------------------------

def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) + f" {rng.randint(0, 999)}"


def random_op(rng: random.Random, side: Side, counter: list[int]) -> None:
    """Run one random operation on ``side``, chosen among those its state allows."""
    doc = side.export()
    nodes = [n["id"] for n in doc["nodes"]]
    edges = [(e["from"], e["to"], e["type"]) for e in doc["edges"]]
    views = [v["name"] for v in doc["views"]]
    tagged = [(n["id"], t) for n in doc["nodes"] for t in n["tags"]]
    choices = ["add", "add", "commit", "git"]
    if nodes:
        choices += ["update", "update", "delete", "tag"]
    if len(nodes) >= 2:
        choices += ["link", "link"]
    if edges:
        choices.append("unlink")
    if tagged:
        choices.append("untag")
    choices += ["view"] + (["view_update", "view_delete"] if views else [])
    choices += ["note", "task", "decision", "hand_edit", "hand_edit", "hand_add"]
    op = rng.choice(choices)
    counter[0] += 1
    if op in ("note", "task", "decision", "hand_edit", "hand_add"):
        narrative_op(rng, side, op, f"{side.label}{counter[0]}")
    if op == "add":
        tags = [f"topic:{rng.choice(WORDS)}"] if rng.random() < 0.5 else []
        side.ctx("add", "--type", rng.choice(NODE_TYPES), *[a for t in tags for a in ("--tag", t)],
                 _text(rng))
    elif op == "update":
        side.ctx("update", rng.choice(nodes), "--content", _text(rng))
    elif op == "delete":
        side.ctx("delete", rng.choice(nodes))
    elif op == "tag":
        side.ctx("tag", rng.choice(nodes), f"topic:{rng.choice(WORDS)}")
    elif op == "untag":
        node, tag = rng.choice(tagged)
        side.ctx("untag", node, tag)
    elif op == "link":
        a, b = rng.sample(nodes, 2)
        side.ctx("link", a, b, "--type", rng.choice(EDGE_TYPES))
    elif op == "unlink":
        a, b, label = rng.choice(edges)
        side.ctx("unlink", a, b, "--type", label)
    elif op == "view":
        side.ctx("view", "create", f"v{rng.randint(0, 3)}-{side.label}-{counter[0]}", "--query",
                 f"type:{rng.choice(NODE_TYPES)}", "--budget", str(rng.randint(100, 9000)))
    elif op == "view_update":
        side.ctx("view", "update", rng.choice(views), "--budget", str(rng.randint(100, 9000)))
    elif op == "view_delete":
        side.ctx("view", "delete", rng.choice(views))
    elif op == "commit":
        side.ctx("commit", "-m", f"{side.label} work {counter[0]}")
    elif op == "git":
        side.git_commit(f"{side.label} git {counter[0]}")


MARKER = re.compile(r"<!-- ctx:id=([0-9A-Z]{26}) -->")


def narrative_op(rng: random.Random, side: Side, op: str, token: str) -> None:
    """`ctx add note|task|decision`, or a person editing the narrative Markdown: a line
    added to a marked entry, or a decision section written by hand (no marker). Task
    files are not merged by union, so a side edits only the task files it created."""
    narrative = side.ctx_dir / "narrative"
    if op == "note":
        side.ctx("add", "note", f"note {token} {_text(rng)}")
    elif op in ("task", "decision"):
        side.ctx("add", op, f"{op} {token}", "--body", _text(rng))
    elif op == "hand_add":
        path = narrative / "decisions.md"
        text = path.read_text() if path.exists() else "# Decisions\n"
        path.write_text(text + f"\n## Hand decision {token}\n\nwritten by hand {_text(rng)}\n")
        side.log.append(f"{side.label}: hand-written section {token} in decisions.md")
    else:
        files = sorted(p for p in narrative.rglob("*.md") if MARKER.search(p.read_text())
                       and (p.parent.name != "tasks" or p.name not in side.base_tasks))
        if not files:
            return
        path = rng.choice(files)
        lines = path.read_text().split("\n")
        at = rng.choice([i for i, line in enumerate(lines) if MARKER.search(line)])
        end = next((j for j in range(at + 1, len(lines))
                    if "ctx:end=" in lines[j] or lines[j].startswith("#")), len(lines))
        while end > at + 1 and not lines[end - 1].strip():
            end -= 1  # before the blank lines that close the entry
        lines.insert(max(end, at + 2), f"edited by hand {token}")
        path.write_text("\n".join(lines))
        side.log.append(f"{side.label}: hand edit {token} in {path.relative_to(side.ctx_dir)}")


def check_narrative(merged: Side) -> None:
    """GM-09: no markers, every id marker once, and a commit after the merge creates no
    duplicate node (entries are recognised by marker, or by file and heading)."""
    narrative = merged.ctx_dir / "narrative"
    seen: dict[str, int] = {}
    for path in narrative.rglob("*.md"):
        text = path.read_text()
        assert "<<<<<<<" not in text and ">>>>>>>" not in text, path
        for node_id in MARKER.findall(text):
            seen[node_id] = seen.get(node_id, 0) + 1
    assert all(n == 1 for n in seen.values()), {k: n for k, n in seen.items() if n > 1}
    before = {n["id"] for n in merged.export()["nodes"]}
    merged.ctx("commit", "-m", "after the merge")
    nodes = merged.export()["nodes"]
    keys = [(n["metadata"].get("narrative_path"), n["metadata"]["narrative_key"])
            for n in nodes if n["metadata"].get("narrative_key")]
    assert len(keys) == len(set(keys)), "a hand-written entry became two nodes"
    new = [n for n in nodes if n["id"] not in before]
    # New nodes come from unmarked entries, or from marked entries of a session still staged
    # in the clone that wrote them (its Markdown reached Git, its records did not): they are
    # ingested under the marker's id, so that clone's later fold is a version of the same node.
    assert all(n["metadata"].get("narrative_key") or n["id"] in seen for n in new), new
    assert merged.json("debug", "verify")["problems"] == []


# -- the oracle ---------------------------------------------------------------------------------

@dataclass
class Records:
    """Every knowledge record reachable from a clone's pointers, by key and version, and
    which of them only staged work commits carry (not yet folded into refs/main)."""

    by_key: dict[tuple[str, ...], dict[bytes, object]] = field(default_factory=dict)
    staged_only: set[tuple[tuple[str, ...], bytes]] = field(default_factory=set)

    def versions(self) -> set[tuple[tuple[str, ...], bytes]]:
        return {(k, v) for k, vs in self.by_key.items() for v in vs}


def reachable_records(ctx_dir: Path, *, staged: bool = True) -> Records:
    """Read the objects directly: commits from every head of refs/main (and of STAGE when
    ``staged``), their change batches, their records (no replay, no index)."""
    store = open_store(ctx_dir)
    heads = list(store.read_head().heads)
    stage = store.read_stage() if staged else None
    heads += list(stage.heads) if stage else []
    out = Records()
    canonical: set[tuple[tuple[str, ...], bytes]] = set()
    for _, obj in store.iter_history(heads):
        assert isinstance(obj, (Commit, WorkCommit))
        for bid in obj.change_batches:
            for rec in store.read_typed(ObjectId(bid), ChangeBatch).records:
                out.by_key.setdefault(record_key(rec), {})[version_id(rec)] = rec
                if isinstance(obj, Commit):
                    canonical.add((record_key(rec), version_id(rec)))
    out.staged_only = out.versions() - canonical
    return out


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S") \
        + f".{ms % 1000:03d}Z"


def winners(*sides: Records) -> dict[tuple[str, ...], tuple[bytes, object]]:
    """Per key, the record with the greatest (stamp, version id) over all sides."""
    best: dict[tuple[str, ...], tuple[tuple[int, bytes], object]] = {}
    for recs in sides:
        for key, versions in recs.by_key.items():
            for vid, rec in versions.items():
                order = (record_stamp(rec), vid)  # type: ignore[arg-type]
                if key not in best or order > best[key][0]:
                    best[key] = (order, rec)
    return {k: (order[1], rec) for k, (order, rec) in best.items()}


def expected_export(won: dict[tuple[str, ...], tuple[bytes, object]]) -> dict:
    """The normalised export the merged store must produce."""
    nodes = {}
    for _, rec in won.values():
        if isinstance(rec, NodeRecord):
            assert rec.content is not None  # the test writes short content only
            nodes[rec.id] = {"type": rec.type, "content": rec.content, "tags": sorted(rec.tags),
                             "status": rec.status, "summary": rec.summary,
                             "superseded_by": rec.superseded_by, "metadata": rec.metadata,
                             "updated_at": _iso(rec.updated_at)}
    edges = sorted((rec.from_ref[1], rec.to_ref[1], rec.label) for _, rec in won.values()
                   if isinstance(rec, EdgeRecord) and rec.from_ref[1] in nodes
                   and rec.to_ref[1] in nodes)
    views = {rec.name: {"query": rec.query, "budget": rec.budget} for _, rec in won.values()
             if isinstance(rec, ViewRecord)}
    return {"nodes": nodes, "edges": edges, "views": views}


def normalise(doc: dict) -> dict:
    """An export document in the shape of ``expected_export``."""
    return {
        "nodes": {n["id"]: {"type": n["type"], "content": n["content"], "tags": sorted(n["tags"]),
                            "status": n["status"], "summary": n["summary"],
                            "superseded_by": n["superseded_by"], "metadata": n["metadata"],
                            "updated_at": n["updated_at"]} for n in doc["nodes"]},
        "edges": sorted((e["from"], e["to"], e["type"]) for e in doc["edges"]),
        "views": {v["name"]: {"query": v["query"], "budget": v["budget"]} for v in doc["views"]},
    }


def concurrent_nodes(base: Records, a: Records, b: Records,
                     won: dict[tuple[str, ...], tuple[bytes, object]]) -> dict[str, dict]:
    """Nodes both sides changed after the fork: {id: {"kept", "other"}} (version hex)."""
    out: dict[str, dict] = {}
    for key in set(a.by_key) & set(b.by_key):
        if key[0] != "node":
            continue
        new_a = {v: r for v, r in a.by_key[key].items() if (key, v) not in base.versions()}
        new_b = {v: r for v, r in b.by_key[key].items() if (key, v) not in base.versions()}
        if not new_a or not new_b:
            continue
        tips = [max(new, key=lambda v: (record_stamp(new[v]), v))  # type: ignore[arg-type]
                for new in (new_a, new_b)]
        kept = won[key][0]
        assert kept in tips
        other = tips[1] if kept == tips[0] else tips[0]
        out[key[1]] = {"kept": kept.hex(), "other": other.hex()}
    return out


def shared_session_folded(origin: Path, a: Side, b: Side) -> bool:
    """The base left a session staged, and a side folded that session."""
    base_store = open_store(origin / ".ctx")
    stage = base_store.read_stage()
    assert stage is not None
    base = base_store.read_typed(stage.single)
    if not isinstance(base, WorkCommit):
        return False

    def folded(side: Side) -> bool:
        store = open_store(side.ctx_dir)
        return any(isinstance(c, Commit) and c.session_id == base.session_id
                   for _, c in store.iter_history(store.read_head().heads))
    return folded(a) or folded(b)


# -- one history --------------------------------------------------------------------------------

def ops_tick() -> None:
    """Let the clock move 2 ms between operations (stamps are milliseconds)."""
    start = time.monotonic()
    while time.monotonic() - start < 0.002:
        pass


def clone_sides(root: Path, origin: Path, runner: CliRunner, log: list[str]) -> tuple[Side, Side]:
    """Clones "a" and "b" of ``origin`` under ``root``: the two developers."""
    for label in ("a", "b"):
        git(root, "clone", "-q", str(origin), label)
    return Side(root / "a", runner, "a", log), Side(root / "b", runner, "b", log)


def build_history(seed: int, root: Path, runner: CliRunner, log: list[str]
                  ) -> tuple[Path, Side, Side]:
    rng = random.Random(seed)
    origin = root / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    base = Side(origin, runner, "base", log)
    base.ctx("init", "--no-git")
    # The independent replay models what each command writes; automatic RELATES_TO links
    # (spec 003, on by default) are tested in tests/lifecycle/test_autolink.py.
    without_autolink(open_store(origin / ".ctx"))
    counter = [0]
    for _ in range(rng.randint(2, 5)):
        base.ctx("add", "--type", rng.choice(NODE_TYPES), _text(rng))
    ids = [n["id"] for n in base.export()["nodes"]]
    base.ctx("link", ids[0], ids[1], "--type", "DEPENDS_ON")
    base.ctx("view", "create", "base-view", "--query", "type:fact", "--budget", "500")
    base.ctx("add", "note", f"base note {_text(rng)}")
    base.ctx("add", "task", "base task", "--body", _text(rng))
    base.ctx("add", "decision", "base decision", "--body", _text(rng))
    if rng.random() < 0.7:
        base.ctx("commit", "-m", "base")
    base.git_commit("base")
    a, b = clone_sides(root, origin, runner, log)
    steps = [a] * rng.randint(1, 25) + [b] * rng.randint(1, 25)  # GM-11: 1-25 each
    rng.shuffle(steps)  # the two clones work at the same time
    for side in steps:
        ops_tick()
        random_op(rng, side, counter)
    for side in (a, b):
        if rng.random() < 0.4:
            side.ctx("commit", "-m", f"{side.label} final")
        side.git_commit(f"{side.label} final")  # else STAGE stays moved, not folded
        assert side.json("status")["concurrent_edits"] == []  # one linear history
    return origin, a, b


def merge_clone(root: Path, a: Side, b: Side, mode: str, runner: CliRunner) -> tuple[Side, str]:
    """A fresh clone of side a, with the driver registered or not, merging side b."""
    target = root / f"merge-{mode}"
    git(root, "clone", "-q", str(a.repo), target.name)
    merged = Side(target, runner, f"merge-{mode}", a.log)
    if mode == "driver":
        merged.ctx("init")  # in a clone: registers the driver for this clone only
        attr = git(target, "check-attr", "merge", ".ctx/refs/main", ".ctx/STAGE").stdout
        assert attr.count("merge: ctx-ref") == 2, attr
    else:
        assert "ctx-ref" not in git(target, "config", "--list").stdout
    merged.export()  # an index synced to side a: the merge is then applied incrementally
    git(target, "fetch", "-q", str(b.repo), "main")
    res = git(target, "merge", "--no-edit", "FETCH_HEAD", check=False)
    return merged, res.stdout + res.stderr if res.returncode else ""


def check_merge(mode: str, root: Path, runner: CliRunner, base_recs: Records,
                a: Side, b: Side, shared_fold: bool) -> None:
    # Staged work is per clone (.ctx/local): Git carries each side's canonical history only.
    recs_a, recs_b = reachable_records(a.ctx_dir, staged=False), reachable_records(b.ctx_dir, staged=False)
    won = winners(recs_a, recs_b)
    expected = expected_export(won)
    concurrent = concurrent_nodes(base_recs, recs_a, recs_b, won)
    merged, conflict = merge_clone(root, a, b, mode, runner)
    assert not conflict, f"git merge needed a manual step: {conflict}"
    status = git(merged.repo, "status", "--porcelain").stdout
    assert "UU" not in status and "AA" not in status, status
    assert b"<<<<<<<" not in (merged.ctx_dir / "refs" / "main").read_bytes()
    assert not (merged.ctx_dir / "STAGE").exists() and not (merged.ctx_dir / "local" / "STAGE").exists()
    store = open_store(merged.ctx_dir)
    heads_before = store.read_head().heads
    if mode == "plain":
        # Readers see the union while the pointers still hold several heads.
        assert normalise(merged.export()) == expected
        # The next write replaces multi-head pointers by merge commits.
        merged.ctx("add", "--type", "fact", "written after the merge")
        assert_resolved(merged, heads_before)
        doc = normalise(merged.export())
        added = [n for n, v in doc["nodes"].items() if v["content"] == "written after the merge"]
        assert len(added) == 1
        del doc["nodes"][added[0]]
        assert doc == expected
        incremental = merged.json("status")["concurrent_edits"]
    rebuilt = merged.json("rebuild")
    assert rebuilt["merged_heads"] == (mode == "driver" and len(heads_before) > 1)
    assert_resolved(merged, heads_before)
    doc = normalise(merged.export())
    if mode == "plain":
        del doc["nodes"][added[0]]
    assert doc == expected
    # Nothing is lost: every record either side had is in the merged history, except
    # staged steps of a session that the other side folded after superseding them (a
    # fold keeps the newest version of each key, by design).
    missing = (recs_a.versions() | recs_b.versions()) - reachable_records(merged.ctx_dir).versions()
    for key, vid in missing:
        rec = (recs_a.by_key.get(key, {}) | recs_b.by_key.get(key, {}))[vid]
        staged = (key, vid) in recs_a.staged_only | recs_b.staged_only
        superseded = (record_stamp(rec), vid) < (record_stamp(won[key][1]), won[key][0])  # type: ignore[arg-type]
        assert staged and superseded, f"record {key} {vid.hex()} is not in the merged history"
    verify = merged.json("debug", "verify")
    assert verify["ok"] and verify["problems"] == [], verify
    listed = merged.json("status")["concurrent_edits"]
    if mode == "plain":
        assert listed == incremental, "the incremental index and a rebuilt one agree"
    reported = {c["id"]: {"kept": c["kept"], "other": c["other"]} for c in listed}
    # A node the base had only staged (its records stayed in the base's clone) can be created
    # on both sides from its Markdown entry, which did reach Git: both first versions, and a
    # first version precedes all others (ctxstore/index/heads.py), so that is not reported
    # unless both sides edited it further. Whatever is reported for it names the winner.
    base_nodes = {k[1] for k in base_recs.by_key if k[0] == "node"}
    cocreated = {k for k in set(reported) | set(concurrent) if k not in base_nodes}
    for k in cocreated & set(reported):
        assert reported[k]["kept"] == concurrent.get(k, reported[k])["kept"], (k, reported, concurrent)
    reported = {k: v for k, v in reported.items() if k not in cocreated}
    concurrent = {k: v for k, v in concurrent.items() if k not in cocreated}
    if shared_fold:
        # Documented limitation (ctxstore/index/heads.py): a staged session continued on
        # both branches and folded on one hides steps, so some edits on both go unreported.
        assert all(concurrent.get(k) == v for k, v in reported.items()), (reported, concurrent)
    else:
        assert reported == concurrent
    if mode == "driver":
        check_narrative(merged)
    merged.git_commit("record the ctx merge")
    assert git(merged.repo, "status", "--porcelain").stdout == ""


def assert_resolved(merged: Side, heads_before: tuple[bytes, ...]) -> None:
    """Single-head pointers; when both sides had moved refs/main, a merge commit whose
    parents are exactly both sides."""
    store = open_store(merged.ctx_dir)
    head, stage = store.read_head(), store.read_stage()
    assert not head.conflicted and (stage is None or not stage.conflicted)
    if len(heads_before) > 1:
        parents = set(store.read_typed(head.single, Commit).parents)
        assert parents == set(heads_before), "the merge commit's parents are both sides"


def _seeds() -> list:
    slow = [pytest.mark.slow] if HISTORIES > 20 else []
    return [pytest.param(seed, marks=slow) for seed in range(HISTORIES)]


@pytest.mark.parametrize("seed", _seeds())
def test_random_two_branch_histories_merge_without_manual_step(seed: int, tmp_path: Path) -> None:
    runner, log = CliRunner(), []
    try:
        origin, a, b = build_history(seed, tmp_path, runner, log)
        base_recs = reachable_records(origin / ".ctx", staged=False)
        for mode in ("plain", "driver"):
            log.append(f"-- merge, {mode}")
            check_merge(mode, tmp_path, runner, base_recs, a, b,
                        shared_session_folded(origin, a, b))
    except AssertionError as exc:
        trail = "\n".join(log)
        raise AssertionError(f"history seed {seed} failed: {exc}\n{trail}") from exc


# -- targeted merges ----------------------------------------------------------------------------

def _two_clones(tmp_path: Path, runner: CliRunner) -> tuple[Side, Side, Side, str]:
    """origin with one committed node, and two clones of it; returns the node id too."""
    log: list[str] = []
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    base = Side(origin, runner, "base", log)
    base.ctx("init", "--no-git")
    node = base.ctx("add", "--type", "fact", "shared fact").strip()
    base.ctx("commit", "-m", "base")
    base.git_commit("base")
    a, b = clone_sides(tmp_path, origin, runner, log)
    return base, a, b, node


def _pull(side: Side, other: Side) -> None:
    git(side.repo, "fetch", "-q", str(other.repo), "main")
    res = git(side.repo, "merge", "--no-edit", "FETCH_HEAD", check=False)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("style", ["merge", "diff3", "zdiff3"])
def test_git_conflict_markers_resolved_by_rebuild(tmp_path: Path, style: str) -> None:
    """Pointers merged as text (markers, any conflict style): readers see both sides, and
    `ctx rebuild` writes the merge commit whose parents are exactly both sides (GM-01, GM-06)."""
    runner = CliRunner()
    _, a, b, _ = _two_clones(tmp_path, runner)
    a.ctx("add", "--type", "fact", "from a")
    a.ctx("commit", "-m", "a")
    a.git_commit("a")
    b.ctx("add", "--type", "fact", "from b")
    b.ctx("commit", "-m", "b")
    b.git_commit("b")
    ours = open_store(a.ctx_dir).read_head().single
    theirs = open_store(b.ctx_dir).read_head().single
    base_head = open_store(tmp_path / "origin" / ".ctx").read_head().single
    (a.repo / ".git" / "info" / "attributes").write_text(
        "/.ctx/refs/** merge=text\n/.ctx/STAGE merge=text\n")
    git(a.repo, "config", "merge.conflictStyle", style)
    git(a.repo, "fetch", "-q", str(b.repo), "main")
    assert git(a.repo, "merge", "--no-edit", "FETCH_HEAD", check=False).returncode != 0
    raw = (a.ctx_dir / "refs" / "main").read_text()
    assert "<<<<<<<" in raw and (style == "merge" or "|||||||" in raw)
    contents = {n["content"] for n in a.export()["nodes"]}
    assert contents == {"shared fact", "from a", "from b"}
    out = json.loads(a.ctx("--format", "json", "rebuild"))
    assert out["merged_heads"] is True and out["nodes"] == 3
    store = open_store(a.ctx_dir)
    head = store.read_head()
    assert not head.conflicted and b"<<<<<<<" not in (a.ctx_dir / "refs" / "main").read_bytes()
    merge = store.read_typed(head.single, Commit)
    assert set(merge.parents) == {ours, theirs} and base_head not in merge.parents
    stage = store.read_stage()
    assert stage is not None and not stage.conflicted
    assert {n["content"] for n in a.export()["nodes"]} == contents
    assert a.json("debug", "verify")["problems"] == []
    again = json.loads(a.ctx("--format", "json", "rebuild"))  # idempotent: no second merge
    assert again["merged_heads"] is False and open_store(a.ctx_dir).read_head().single == head.single
    git(a.repo, "add", "-A")
    git(a.repo, "commit", "-qm", "resolved by ctx rebuild")
    assert git(a.repo, "status", "--porcelain").stdout == ""


@pytest.mark.parametrize("fast_forward", [True, False], ids=["fast-forward", "merge"])
def test_rebuild_after_pull_brings_a_synced_index_to_the_merged_state(tmp_path: Path,
                                                                      fast_forward: bool) -> None:
    """A clone whose index is synced to its own branch pulls the other branch: the next
    command (and `ctx rebuild`) shows exactly the merged state."""
    runner = CliRunner()
    _, a, b, node = _two_clones(tmp_path, runner)
    if not fast_forward:
        a.ctx("update", node, "--content", "edited on a")
        a.ctx("add", "--type", "decision", "only on a")
        a.git_commit("a")
    a.export()  # the index is now synced to a's own branch
    b.ctx("add", "--type", "task", "only on b")
    b.ctx("tag", node, "topic:pulled")
    b.ctx("commit", "-m", "b")
    b.git_commit("b")
    expected = expected_export(winners(reachable_records(a.ctx_dir), reachable_records(b.ctx_dir)))
    _pull(a, b)
    assert normalise(a.export()) == expected  # the next command catches up by itself
    a.ctx("rebuild")
    assert normalise(a.export()) == expected
    (a.ctx_dir / "index" / "index.sqlite").unlink()
    assert normalise(a.export()) == expected  # and a deleted index is rebuilt the same


def test_concurrent_edit_reported_until_the_node_is_edited_again(tmp_path: Path) -> None:
    """GM-03: both branches edit one node; the newer edit wins, the other stays in the
    history, and `ctx status` reports the pair (text and JSON) until the next edit."""
    runner = CliRunner()
    _, a, b, node = _two_clones(tmp_path, runner)
    a.ctx("update", node, "--content", "edited on a")
    a.ctx("update", node, "--content", "edited on a again")  # two edits: prev names a folded step
    a.ctx("commit", "-m", "a")
    a.git_commit("a")
    ops_tick()
    b.ctx("update", node, "--content", "edited on b")
    b.ctx("commit", "-m", "b")
    b.git_commit("b")
    _pull(a, b)
    shown = a.json("show", node, "--history")
    assert shown["content"] == "edited on b"
    versions = {h["record"]["content"]: h["version"] for h in shown["history"]}
    assert set(versions) >= {"shared fact", "edited on a again", "edited on b"}
    st = a.json("status")
    assert st["concurrent_edits"] == [{"id": node, "kept": versions["edited on b"],
                                       "other": versions["edited on a again"], "deleted": False}]
    text = a.ctx("status")
    assert "Concurrent edits: 1" in text
    assert f"  {node}: kept {versions['edited on b'][:12]}, other " \
           f"{versions['edited on a again'][:12]}" in text
    a.ctx("rebuild")
    assert a.json("status")["concurrent_edits"] == st["concurrent_edits"]
    # a later edit on the merged branch descends from both: nothing left to report
    a.ctx("update", node, "--content", "settled after the merge")
    assert a.json("status")["concurrent_edits"] == []
    assert "Concurrent edits" not in a.ctx("status")
    a.ctx("rebuild")
    assert a.json("status")["concurrent_edits"] == []


def test_edit_against_delete_is_reported_and_same_in_both_directions(tmp_path: Path) -> None:
    """GM-05: one branch deletes, the other edits later: the edit wins (the newer key),
    the same whichever branch merges the other; status names the deletion as the other."""
    runner = CliRunner()
    _, a, b, node = _two_clones(tmp_path, runner)
    a.ctx("delete", node)
    a.ctx("commit", "-m", "a")  # staged work stays in its clone: only a fold reaches Git
    a.git_commit("a")
    ops_tick()
    b.ctx("update", node, "--content", "edited after the delete")
    b.ctx("commit", "-m", "b")
    b.git_commit("b")
    results = []
    for first, second in ((a, b), (b, a)):
        target = tmp_path / f"m-{first.label}"
        git(tmp_path, "clone", "-q", str(first.repo), target.name)
        merged = Side(target, runner, target.name, first.log)
        _pull(merged, second)
        doc = normalise(merged.export())
        st = merged.json("status")["concurrent_edits"]
        results.append((doc, st))
        assert doc["nodes"][node]["content"] == "edited after the delete"
        assert len(st) == 1 and st[0]["id"] == node and st[0]["deleted"] is False
        kinds = {h["version"]: h["kind"] for h in merged.json("show", node, "--history")["history"]}
        assert kinds[st[0]["other"]] == "node_removed"
    assert results[0] == results[1]


def test_init_in_a_fresh_clone_registers_the_driver_only(tmp_path: Path) -> None:
    """`ctx init` in a clone (the store is committed, the driver is clone-local) registers
    the driver and changes no file of the store; a second run refuses (E013)."""
    runner = CliRunner()
    _, a, _, _ = _two_clones(tmp_path, runner)
    before = {p: p.read_bytes() for p in a.ctx_dir.rglob("*")
              if p.is_file() and p.relative_to(a.ctx_dir).parts[0] not in ("index", "local")}
    out = a.ctx("init")
    assert "merge driver" in out
    attrs = git(a.repo, "check-attr", "merge", ".ctx/refs/main", ".ctx/STAGE").stdout
    assert attrs.count("merge: ctx-ref") == 2
    assert git(a.repo, "config", "merge.ctx-ref.driver").stdout.strip().endswith(
        "merge-ref %O %A %B")
    after = {p: p.read_bytes() for p in before}
    assert after == before and git(a.repo, "status", "--porcelain").stdout == ""
    # the registered command runs here, as Git will run it (both sides moved: sorted heads)
    driver = git(a.repo, "config", "merge.ctx-ref.driver").stdout.strip()
    heads = sorted(["e" * 64, "d" * 64])
    for name, text in (("O", "c" * 64), ("A", heads[1]), ("B", heads[0])):
        (tmp_path / name).write_text(text + "\n")
    cmd = driver.replace("%O", str(tmp_path / "O")).replace("%A", str(tmp_path / "A")) \
        .replace("%B", str(tmp_path / "B"))
    assert subprocess.run(cmd, shell=True, cwd=a.repo).returncode == 0
    assert (tmp_path / "A").read_text() == f"{heads[0]}\n{heads[1]}\n"
    res = invoke(runner, a.ctx_dir, "init")
    assert res.exit_code == 1 and res.stderr.startswith("ctx: error[E013]: ")
