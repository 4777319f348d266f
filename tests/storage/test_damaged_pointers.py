"""Missing pointers (issue 11 item 10, RELIABILITY.md §2.5, HK-04).

* A deleted STAGE hides acknowledged staged nodes: ``ctx debug verify`` must find the staged
  work no pointer names, and ``ctx stage recover`` must re-attach it (lock + CAS).
* A ``.ctx/`` directory without HEAD is a damaged project store: every command and hook stops
  there with one clear error, and nothing falls back to (or writes) the user store ``~/.ctx``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx, stage_file, store_digest

from ctxstore.errors import RefNotFound, StoreNotFound
from ctxstore.init import init_store
from ctxstore.model import Commit
from ctxstore.model.knowledge import NodeRecord
from ctxstore.recover import find_unnamed_work, recover
from ctxstore.repo import discover_store, open_store
from ctxstore.staging import abort_session, commit_stage, stage_records
from ctxstore.verify import verify_store


def _node(nid: str, content: str, t: int) -> NodeRecord:
    return NodeRecord(id=nid, type="fact", content=content, content_blob=None, summary=None,
                      tags=(), metadata={}, status="active", superseded_by=None, created_at=1,
                      updated_at=t, author=None, prev=None)


def _ctx(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_ctx(["--ctx-dir", str(root), *args])


def _verify(root: Path) -> tuple[int, dict]:
    res = _ctx(root, "--format", "json", "debug", "verify")
    return res.returncode, json.loads(res.stdout)


def _listed(root: Path) -> set[str]:
    res = _ctx(root, "--format", "json", "list")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    rows = doc["nodes"] if isinstance(doc, dict) else doc
    return {r["content"] for r in rows}


def _add(root: Path, text: str) -> str:
    res = _ctx(root, "--format", "json", "add", "--type", "fact", text)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["id"]


# -- STAGE removed -----------------------------------------------------------------------------

def test_verify_reports_staged_work_when_stage_is_deleted(store) -> None:
    root = store.root
    _add(root, "acknowledged one")
    _add(root, "acknowledged two")
    stage_file(root).unlink()
    assert _listed(root) == set()  # the nodes are hidden ...
    code, doc = _verify(root)
    assert code == 3 and not doc["ok"]  # ... and verify no longer says "ok"
    (problem,) = [p for p in doc["problems"] if p["severity"] == "error"]
    assert problem["code"] == "E005" and problem["subject"] == "STAGE"
    assert "2 work commits" in problem["message"] and "ctx stage recover" in problem["message"]
    text = _ctx(root, "debug", "verify")
    assert text.returncode == 3 and "error E005 STAGE:" in text.stdout


@pytest.mark.slow
def test_stage_recover_repoints_a_deleted_stage_at_the_staged_chain(store) -> None:
    root = store.root
    _add(root, "acknowledged one")
    _add(root, "acknowledged two")
    tip = store.read_stage().single
    stage_file(root).unlink()
    res = _ctx(root, "stage", "recover")
    assert res.returncode == 0, res.stderr
    assert "STAGE repaired" in res.stdout and "2 work commits" in res.stdout
    assert open_store(root).read_stage().single == tip  # the chain itself, not a copy
    assert _listed(root) == {"acknowledged one", "acknowledged two"}
    assert _verify(root) == (0, {**_verify(root)[1], "problems": []})
    digest = store_digest(root)
    again = _ctx(root, "--format", "json", "stage", "recover")
    assert json.loads(again.stdout)["state"] == "clean" and store_digest(root) == digest
    assert _ctx(root, "commit", "-m", "after recovery").returncode == 0
    assert _listed(root) == {"acknowledged one", "acknowledged two"}
    assert _verify(root)[1]["problems"] == []


def test_stage_recover_adopts_the_newest_chain_of_several(store) -> None:
    stage_records(store, [_node("N1", "first session", 10)])
    stage_file(store.root).unlink()
    first = find_unnamed_work(store)
    assert [w.work_commits for w in first] == [1]
    stage_records(store, [_node("N2", "second session", 20)])  # a new session, STAGE recreated
    newest = store.read_stage().single
    stage_file(store.root).unlink()
    found = find_unnamed_work(store)
    assert [w.tip for w in found] == [newest, first[0].tip]  # newest first
    rep = recover(store)
    assert rep.state == "repaired"
    from ctxstore.replay import replay

    assert set(replay(store).nodes) == {"N1", "N2"}  # nothing left behind
    assert find_unnamed_work(store) == []
    assert verify_store(store).ok and recover(store).state == "clean"


@pytest.mark.slow
def test_verify_warns_and_recover_adopt_merges_when_a_new_session_replaced_stage(store) -> None:
    root = store.root
    _add(root, "before the loss")
    stage_file(root).unlink()
    _add(root, "after the loss")  # starts a new session: STAGE exists again
    assert _listed(root) == {"after the loss"}
    code, doc = _verify(root)
    assert code == 0 and doc["ok"]
    (warning,) = doc["problems"]
    assert (warning["severity"], warning["code"]) == ("warning", "W003")
    assert "ctx stage recover --adopt" in warning["message"]
    digest = store_digest(root)
    plain = _ctx(root, "stage", "recover")  # STAGE is intact: recover alone changes nothing
    assert plain.returncode == 0 and store_digest(root) == digest
    assert "--adopt" in plain.stdout
    res = _ctx(root, "stage", "recover", "--adopt")
    assert res.returncode == 0, res.stderr
    assert _listed(root) == {"before the loss", "after the loss"}
    assert _verify(root)[1]["problems"] == []
    assert _ctx(root, "commit", "-m", "both").returncode == 0
    assert _listed(root) == {"before the loss", "after the loss"}
    assert _verify(root)[1]["problems"] == []


def test_unnamed_work_has_no_false_positives_in_normal_use(store) -> None:
    stage_records(store, [_node("N1", "a", 10)])
    stage_records(store, [_node("N2", "b", 11)])
    commit_stage(store, "fold")  # the folded chain is unreachable now
    stage_records(store, [_node("N3", "c", 12)])
    abort_session(store, "no")
    stage_records(store, [_node("N4", "d", 13)])
    commit_stage(store, "one")
    commit_stage(store, "amended", amend=True)  # the amended commit is unreachable
    w = stage_records(store, [_node("N5", "e", 14)]).work_commit
    stage_records(store, [_node("N6", "f", 15)])
    os.unlink(store.objects.path_for(w))  # a damaged middle link: recover re-links copies
    store._cache.clear()
    assert recover(store).state == "repaired"
    assert find_unnamed_work(store) == []
    assert [p for p in verify_store(store).problems if p.code in ("W003", "E005")] == []
    commit_stage(store, "last")
    assert find_unnamed_work(store) == []


def test_unnamed_work_skips_chains_built_on_history_no_pointer_has(store) -> None:
    stage_records(store, [_node("N1", "a", 10)])
    assert len(find_unnamed_work(store)) == 0
    stage_file(store.root).unlink()
    assert len(find_unnamed_work(store)) == 1
    with store.transaction() as tx:  # a new history: the old base is no longer reachable
        other = tx.put(Commit(parents=(), timestamp_unix=1, message="another history"))
        tx.move_pointer("refs/main", other, expected=store.read_head())
    assert find_unnamed_work(store) == []


# -- HEAD removed ------------------------------------------------------------------------------

def _clone_without_head(tmp_path: Path) -> Path:
    """A project whose committed .ctx/ lost HEAD, arriving by a real `git clone`."""
    origin = tmp_path / "origin"
    origin.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    subprocess.run(["git", "-C", str(origin), "config", "commit.gpgsign", "false"], check=True)
    assert run_ctx(["init"], cwd=origin).returncode == 0
    assert run_ctx(["add", "--type", "fact", "project fact"], cwd=origin).returncode == 0
    assert run_ctx(["commit", "-m", "c"], cwd=origin).returncode == 0
    subprocess.run(["git", "-C", str(origin), "add", "-A", ".ctx"], check=True)
    subprocess.run(["git", "-C", str(origin), "commit", "-qm", "store"], check=True)
    subprocess.run(["git", "-C", str(origin), "rm", "-q", ".ctx/HEAD"], check=True)
    subprocess.run(["git", "-C", str(origin), "commit", "-qm", "lose HEAD"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    assert (clone / ".ctx").is_dir() and not (clone / ".ctx" / "HEAD").exists()
    (clone / "src").mkdir()
    return clone


def _user_store() -> Path:
    return Path(os.environ["HOME"]) / ".ctx"


# Every command family stops there; the everyday run (-m "not slow") keeps a read, a write and a
# commit of the sweep, each case a Git clone and two CLI processes.
_SWEPT = pytest.mark.slow


@pytest.mark.parametrize("args", [
    ["list"], pytest.param(["status"], marks=_SWEPT), ["add", "--type", "fact", "x"],
    pytest.param(["query", "type:fact"], marks=_SWEPT), pytest.param(["search", "fact"], marks=_SWEPT),
    ["commit", "-m", "m"], pytest.param(["stage", "status"], marks=_SWEPT),
    pytest.param(["debug", "verify"], marks=_SWEPT), pytest.param(["compose"], marks=_SWEPT),
    pytest.param(["log"], marks=_SWEPT),
])
def test_cli_stops_at_a_project_store_without_head(tmp_path: Path, args: list[str]) -> None:
    clone = _clone_without_head(tmp_path)
    before = store_digest(clone / ".ctx")
    for cwd in (clone, clone / "src"):
        res = run_ctx(args, cwd=cwd)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        assert res.stdout == ""
        line = res.stderr.strip()
        assert "\n" not in line and line.startswith("ctx: error[E005]:"), line
        assert str((clone / ".ctx").resolve()) in line and "ctx init --force" in line
    assert not _user_store().exists()  # never a silent switch to ~/.ctx
    assert store_digest(clone / ".ctx") == before


def test_cli_does_not_fall_back_to_an_existing_user_store(tmp_path: Path) -> None:
    clone = _clone_without_head(tmp_path)
    init_store(_user_store(), git=False)
    user_before = store_digest(_user_store())
    res = run_ctx(["add", "--type", "fact", "meant for the project"], cwd=clone / "src")
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E005]:")
    assert store_digest(_user_store()) == user_before


def test_empty_ctx_directory_is_not_a_reason_to_fall_back(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".ctx").mkdir(parents=True)
    res = run_ctx(["list"], cwd=project)
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E005]:")
    assert not _user_store().exists()
    assert run_ctx(["init", "--no-git"], cwd=project).returncode == 0  # init repairs it
    assert run_ctx(["list"], cwd=project).returncode == 0


def test_init_force_or_git_restores_a_store_without_head(tmp_path: Path) -> None:
    clone = _clone_without_head(tmp_path)
    assert run_ctx(["init", "--force", "--no-git"], cwd=clone).returncode == 0
    res = run_ctx(["--format", "json", "list"], cwd=clone)
    assert res.returncode == 0 and "project fact" in res.stdout


@pytest.mark.parametrize("event", ["session-start", pytest.param("prompt-submit", marks=_SWEPT), "stop",
                                   pytest.param("pre-compact", marks=_SWEPT),
                                   pytest.param("session-end", marks=_SWEPT)])
def test_hooks_report_a_project_store_without_head_and_write_nothing(tmp_path: Path,
                                                                     event: str) -> None:
    clone = _clone_without_head(tmp_path)
    init_store(_user_store(), git=False)
    user_before = store_digest(_user_store())
    before = store_digest(clone / ".ctx")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "<ctx:remember type=\"fact\">lost fact</ctx:remember>"}]}}) + "\n")
    payload = {"cwd": str(clone / "src"), "session_id": "s1", "hook_event_name": event,
               "transcript_path": str(transcript), "prompt": "hello",
               "last_assistant_message": "<ctx:remember type=\"fact\">lost fact</ctx:remember>"}
    res = run_ctx(["hook", event], stdin=json.dumps(payload))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert "E005" not in res.stdout or "HEAD" in out.get("systemMessage", "")
    assert "HEAD" in out["systemMessage"] and str((clone / ".ctx").resolve()) in out["systemMessage"]
    assert store_digest(_user_store()) == user_before  # the Stop hook never writes to ~/.ctx
    assert store_digest(clone / ".ctx") == before
    assert not (clone / ".ctx" / "local").exists() or not any((clone / ".ctx" / "local").iterdir())


def test_discover_store_policies(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "p"
    (project / "sub").mkdir(parents=True)
    with pytest.raises(StoreNotFound):
        discover_store(project / "sub", user_store=home / ".ctx")
    init_store(home / ".ctx", git=False)
    found = discover_store(project / "sub", user_store=home / ".ctx")
    assert found == home / ".ctx"
    (project / ".ctx").mkdir()
    with pytest.raises(RefNotFound) as info:
        discover_store(project / "sub", user_store=home / ".ctx")
    assert str(project / ".ctx") in info.value.message and info.value.code == "E005"
    shutil.rmtree(project / ".ctx")
    (project / ".ctx").write_text("not a directory")  # only a directory is a store
    assert discover_store(project / "sub", user_store=home / ".ctx") == home / ".ctx"
    (project / ".git").mkdir()
    with pytest.raises(StoreNotFound):  # hooks stop at the Git top level (HK-04)
        discover_store(project / "sub", user_store=home / ".ctx", stop_at_git=True)


def test_ctx_dir_naming_a_project_with_a_damaged_store_is_reported(tmp_path: Path) -> None:
    clone = _clone_without_head(tmp_path)
    res = run_ctx(["--ctx-dir", str(clone), "list"], cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E005]:")
    assert str((clone / ".ctx").resolve()) in res.stderr
    res = run_ctx(["hook", "session-start"], stdin="{}", cwd=tmp_path,
                  env={"CTX_DIR": str(clone)})
    assert res.returncode == 0 and "E005" not in res.stdout
    assert "damaged ctx store" in json.loads(res.stdout)["systemMessage"]


@pytest.mark.parametrize("index", ["current", "fresh"])
@pytest.mark.slow
def test_cli_names_the_pointer_that_names_a_missing_object(store, index: str) -> None:
    """refs/main naming an object this clone lacks (a teammate's bad commit): one line naming it.

    docs/git.md: "commands stop with E005 or E001 naming the file", whether the index had
    caught up before (an existing clone after a pull) or is built now (a fresh clone).
    """
    _add(store.root, "before the bad pointer")
    assert _ctx(store.root, "commit", "-m", "one").returncode == 0
    (store.root / "refs" / "main").write_text("cd" * 32 + "\n")
    if index == "fresh":
        shutil.rmtree(store.root / "index")
    for args in (["list"], ["status"], ["add", "--type", "fact", "x"]):
        res = _ctx(store.root, *args)
        assert res.returncode == 1, (args, res.stderr)
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("ctx: error[E001]: "), res.stderr
        assert f"object {'cd' * 32} not found (referenced by refs/main)" in res.stderr
        assert "git log -p -- .ctx/refs/main" in res.stderr
