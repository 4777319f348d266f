"""`ctx debug secrets` finds what a store holds; `ctx purge` removes it from the ctx history,
and a Git merge with a clone that still has the old history neither brings it back into the
state nor loses other knowledge."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import zstandard
from conftest import run_ctx
from secret_tokens import TOKENS

from ctxstore.replay import replay
from ctxstore.repo import open_store

pytestmark = pytest.mark.git

GH = next(t for t in TOKENS if t.name == "github-classic-pat")
AWS = next(t for t in TOKENS if t.name == "aws-access-key-id")


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=repo,
                          capture_output=True, text=True, check=check)


def ctx(work: Path, *args: str, code: int = 0, stdin: str | None = None):
    res = run_ctx(["--ctx-dir", str(work / ".ctx"), *args], cwd=work, stdin=stdin, timeout=120)
    assert res.returncode == code, (args, res.returncode, res.stdout, res.stderr)
    return res


def reachable_text(ctx_dir: Path) -> str:
    """Every object the pointers reach, decompressed, as one text."""
    store = open_store(ctx_dir)
    from ctxstore.verify import _pointer_roots, walk_reachable

    ids = walk_reachable(store, _pointer_roots(store, []))
    dctx = zstandard.ZstdDecompressor()
    out = []
    for oid in ids:
        for path in store.objects.paths_for(oid):
            out.append(dctx.decompress(path.read_bytes()).decode("utf-8", "replace"))
    return "\n".join(out)


def state_text(work: Path) -> str:
    """What the state shows: every node (with its history), by the CLI and by replay."""
    listed = json.loads(ctx(work, "--format", "json", "list", "--limit", "1000").stdout)["nodes"]
    shown = [ctx(work, "--format", "json", "show", n["id"], "--history").stdout for n in listed]
    state = replay(open_store(work / ".ctx")).to_json()
    return json.dumps(listed) + "\n".join(shown) + json.dumps(state)


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose committed ctx history holds a token in a node (stored on purpose)."""
    work = tmp_path / "origin"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    ctx(work, "init")
    ctx(work, "add", "--type", "fact", "the API is rate limited to 100 requests a minute")
    sid = ctx(work, "add", "--type", "fact", f"deploy uses\n{GH.text}", "--allow-secret").stdout.strip()
    ctx(work, "update", sid, "--summary", "how the deploy authenticates")
    ctx(work, "commit", "-m", "first")
    ctx(work, "add", "note", "the staging server moved to eu-west-1")
    ctx(work, "commit", "-m", "second")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "code and memory")
    return work, sid


def test_debug_secrets_names_node_file_and_commit(origin: tuple[Path, str], tmp_path: Path) -> None:
    work, sid = origin
    (work / "app.py").write_text(f"import os\n{AWS.text}\n")
    ctx(work, "add", "file", "app.py")  # redacted on the way in: not a finding
    res = ctx(work, "--format", "json", "debug", "secrets", code=1)
    found = json.loads(res.stdout)["findings"]
    objects = [f for f in found if f["place"] == "object"]
    assert objects and {f["rule"] for f in objects} == {"github-pat"}
    assert {f["node"] for f in objects} == {sid}
    assert all(f["commit"] and f["object"] for f in objects)
    assert not [f for f in found if f["file"] == "app.py"]
    text = ctx(work, "debug", "secrets", code=1).stdout
    assert "github-pat: object, object " in text and f"node {sid}" in text
    assert GH.secret not in res.stdout + text


def test_purge_removes_the_token_from_every_reachable_object(origin: tuple[Path, str]) -> None:
    work, sid = origin
    before = state_text(work)
    assert GH.secret in reachable_text(work / ".ctx")
    res = ctx(work, "--format", "json", "purge", sid, "--yes")
    report = json.loads(res.stdout)
    assert report["versions"] and report["old_paths"] and report["git"]
    assert GH.secret not in reachable_text(work / ".ctx")
    assert ctx(work, "debug", "secrets").stdout.startswith("no secret found")
    after = state_text(work)
    assert GH.secret not in after and "[REDACTED:github-pat]" in after
    # the other knowledge is as it was
    for text in ("rate limited to 100 requests", "eu-west-1", "how the deploy authenticates"):
        assert text in before and text in after
    ctx(work, "debug", "verify")
    ctx(work, "gc", "--aggressive")
    ctx(work, "debug", "verify")
    assert all(not (work / p).exists() for p in report["old_paths"])
    ctx(work, "rebuild", "--full")
    assert GH.secret not in state_text(work)


def test_purge_refuses_without_yes_off_a_terminal_and_when_nothing_is_found(
        origin: tuple[Path, str]) -> None:
    work, _ = origin
    fact = json.loads(ctx(work, "--format", "json", "list").stdout)["nodes"][-1]["id"]
    res = ctx(work, "purge", fact, code=1)
    assert res.stderr.startswith("ctx: error[E011]: ctx purge rewrites history")
    res = ctx(work, "purge", fact, "--yes", code=1)
    assert res.stderr.startswith("ctx: error[E018]: nothing to purge")
    res = ctx(work, "purge", "zzzz", "--yes", code=1)
    assert res.stderr.startswith("ctx: error[E011]: 'zzzz' names no node and no object")


def test_purge_whole_replaces_the_content(origin: tuple[Path, str]) -> None:
    work, sid = origin
    ctx(work, "purge", sid, "--whole", "--yes")
    shown = json.loads(ctx(work, "--format", "json", "show", sid).stdout)
    assert shown["content"] == "[PURGED]"


def test_purge_whole_on_a_run_snapshot_removes_its_output_and_texts(
        origin: tuple[Path, str]) -> None:
    """``--whole`` on a typed object (a stored run) was read as a redaction and refused with
    "give --whole": the snapshot's texts and the output blob it names are now [PURGED]."""
    work, _ = origin
    output = "FAILED tests/test_pay.py::test_x - AssertionError: payroll-db.corp.example refused\n"
    run = json.loads(ctx(work, "--format", "json", "add", "command", "--stdin", "--name", "pytest",
                         "--exit-code", "1", stdin=output).stdout)
    ctx(work, "commit", "-m", "a failing run")
    assert "payroll-db.corp.example" in reachable_text(work / ".ctx")
    res = ctx(work, "purge", run["snapshot"][:12], "--yes", code=1)  # no secret to redact
    assert "give --whole" in res.stderr
    ctx(work, "purge", run["snapshot"][:12], "--whole", "--yes")
    assert "payroll-db.corp.example" not in reachable_text(work / ".ctx")
    shown = json.loads(ctx(work, "--format", "json", "diagnostics").stdout)
    assert [d["message"] for d in shown["diagnostics"]] == ["[PURGED]"]
    again = ctx(work, "purge", run["snapshot"][:12], "--whole", "--yes", code=1)
    assert again.stderr.startswith("ctx: error[E018]: nothing to purge") and "--whole" not in again.stderr


def test_git_merge_with_a_clone_holding_the_old_history(origin: tuple[Path, str],
                                                        tmp_path: Path) -> None:
    work, sid = origin
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(work), str(other))
    ctx(other, "init")  # registers the merge driver in the clone (it changes nothing else)
    # Here: purge, gc, commit. There: new knowledge on top of the old history.
    ctx(work, "purge", sid, "--yes")
    ctx(work, "gc", "--aggressive")
    git(work, "add", "-A", ".ctx")
    git(work, "commit", "-qm", "ctx purge")
    ctx(other, "add", "--type", "decision", "retry uploads three times with jitter")
    ctx(other, "update", sid, "--summary", "deploy auth, revised elsewhere")
    ctx(other, "commit", "-m", "work elsewhere")
    git(other, "add", "-A", ".ctx")
    git(other, "commit", "-qm", "more memory")
    # Each side merges the other.
    for here, there in ((work, other), (other, work)):
        git(here, "pull", "-q", "--no-rebase", "--no-edit", str(there), "main")
        state = state_text(here)
        assert GH.secret not in state, here.name
        for text in ("rate limited to 100 requests", "eu-west-1",
                     "retry uploads three times with jitter", "[REDACTED:github-pat]"):
            assert text in state, (here.name, text)
        # The other clone's edit of the purged node was built on the purged version (its
        # content came along): it is purged with it (docs/security.md).
        assert "deploy auth, revised elsewhere" not in state
        ctx(here, "debug", "verify")
        ctx(here, "rebuild", "--full")  # writes the merge commit of the two heads
        assert GH.secret not in state_text(here)
        ctx(here, "commit", "-m", "after the merge", "--allow-empty")
        assert GH.secret not in state_text(here)


def test_doctor_reports_a_secret_and_passes_once_it_is_purged(origin: tuple[Path, str]) -> None:
    work, sid = origin

    def secrets_check() -> dict:
        res = run_ctx(["--format", "json", "doctor"], cwd=work)
        return next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "secrets")

    check = secrets_check()
    assert check["ok"] is False and "github-pat" in check["detail"] and "ctx purge" in check["fix"]
    assert GH.secret not in json.dumps(check)
    ctx(work, "purge", sid, "--yes")
    ctx(work, "rebuild", "--full")
    assert secrets_check()["ok"] is True
