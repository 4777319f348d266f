"""Provenance: every node records where it came from (spec 003 Phase 4; docs/format.md).

Through the installed CLI and the Stop hook, in real Git work trees: the kind of source, the
Claude Code session, the branch, the work tree's HEAD commit and the repo-relative files in
play, shown by ``ctx show`` (text and JSON).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx, session_of

from ctxstore.knowledge.nodes.provenance import MAX_FILES, Origin, provenance_for, relative_files
from ctxstore.knowledge.remember import remember
from ctxstore.repo import open_store

SESSION = "4d5611e5-7c1a-4b7e-9d61-0f8a2b3c4d5e"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com",
                           "-c", "user.name=t", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def ctx(repo: Path, *args: str, stdin: str | None = None) -> str:
    res = run_ctx(list(args), cwd=repo, stdin=stdin)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """A Git work tree with one commit (src/cache.py, README.md) and a ctx store."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "cache.py").write_text("TTL = 300\n")
    (git_repo / "README.md").write_text("# demo\n")
    git(git_repo, "add", "src", "README.md")
    git(git_repo, "commit", "-q", "-m", "first")
    ctx(git_repo, "init")
    return git_repo


def shown(repo: Path, node_id: str) -> dict:
    return json.loads(ctx(repo, "show", node_id, "--format", "json"))


def added(repo: Path, text: str, node_type: str = "fact") -> str:
    return ctx(repo, "add", "--type", node_type, text).strip()


def test_provenance_ctx_add_records_explicit_branch_commit_and_named_files(repo: Path) -> None:
    node_id = added(repo, "Keep src/cache.py's TTL at 300 s; see ./README.md", "decision")
    doc = shown(repo, node_id)
    head = git(repo, "rev-parse", "HEAD")
    assert doc["provenance"] == {"source": "explicit", "session": None, "branch": "main",
                                 "commit": head, "files": ["src/cache.py", "README.md"],
                                 "git": "branch"}
    # canonical: it is the node's metadata, committed and reviewed with it
    assert doc["metadata"]["provenance"] == {k: v for k, v in doc["provenance"].items() if k != "git"}
    text = ctx(repo, "show", node_id)
    assert f"from:    explicit, branch main at {head[:8]}, files src/cache.py, README.md\n" in text
    assert "meta:    provenance" not in text


def test_provenance_names_no_path_outside_the_repository(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x")
    node_id = added(repo, f"compare {outside} with ../elsewhere.py and src/missing.py")
    prov = shown(repo, node_id)["provenance"]
    assert prov["files"] == []
    assert str(tmp_path) not in json.dumps(shown(repo, node_id)["metadata"]["provenance"])


def test_provenance_follows_the_commit_a_later_write_was_made_at(repo: Path) -> None:
    first = added(repo, "before the change")
    (repo / "src" / "cache.py").write_text("TTL = 60\n")
    git(repo, "commit", "-q", "-am", "shorter ttl")
    second = added(repo, "after the change")
    one, two = shown(repo, first)["provenance"], shown(repo, second)["provenance"]
    assert two["commit"] == git(repo, "rev-parse", "HEAD") != one["commit"]
    assert one["commit"] == git(repo, "rev-parse", "HEAD~1")


def test_provenance_in_a_detached_head_has_a_commit_and_no_branch(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    node_id = added(repo, "written on a detached HEAD")
    prov = shown(repo, node_id)["provenance"]
    head = git(repo, "rev-parse", "HEAD")
    assert (prov["branch"], prov["commit"], prov["git"]) == (None, head, "detached")
    assert f"from:    explicit, detached HEAD at {head[:8]}\n" in ctx(repo, "show", node_id)


def test_provenance_outside_git_has_no_branch_or_commit_and_says_so(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.md").write_text("x")
    ctx(plain, "init", "--no-git")
    node_id = added(plain, "no Git here; see notes.md")
    prov = shown(plain, node_id)["provenance"]
    assert prov == {"source": "explicit", "session": None, "branch": None, "commit": None,
                    "files": ["notes.md"], "git": "none"}
    assert "from:    explicit, no Git commit, files notes.md\n" in ctx(plain, "show", node_id)


def test_provenance_before_the_first_git_commit_has_none(git_repo: Path) -> None:
    ctx(git_repo, "init")
    prov = shown(git_repo, added(git_repo, "an unborn branch"))["provenance"]
    assert (prov["branch"], prov["commit"], prov["git"]) == (None, None, "none")


def test_provenance_redacts_a_secret_in_the_branch_name(repo: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    git(repo, "checkout", "-q", "-b", token)
    node_id = added(repo, "written on a branch named like a token")
    doc = shown(repo, node_id)
    assert token not in json.dumps(doc)
    assert doc["provenance"]["branch"].startswith("[REDACTED:")


def test_provenance_of_a_stop_hook_decision_names_session_branch_commit_and_files(
        repo: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    lines = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "shorten the ttl"}},
        {"type": "assistant", "uuid": "a1", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/etc/hostname"}},
            {"type": "tool_use", "id": "t2", "name": "Edit",
             "input": {"file_path": str(repo / "src" / "cache.py"), "old_string": "300",
                       "new_string": "60"}}]}},
        {"type": "user", "uuid": "u2", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "ok"}]}},
        {"type": "assistant", "uuid": "a2", "message": {"id": "m2", "role": "assistant", "content": [
            {"type": "text", "text": 'Done. <ctx:remember type="decision" tags="tier:reference">'
                                     "Cache entries expire after one minute</ctx:remember>"}]}},
    ]
    transcript.write_text("".join(json.dumps({"isSidechain": False, **x}) + "\n" for x in lines))
    payload = {"session_id": SESSION, "cwd": str(repo), "hook_event_name": "Stop",
               "transcript_path": str(transcript)}
    res = run_ctx(["hook", "stop"], cwd=repo, stdin=json.dumps(payload))
    assert res.returncode == 0 and json.loads(res.stdout) is not None, res.stderr
    found = json.loads(ctx(repo, "list", "--format", "json"))["nodes"]
    (node,) = [n for n in found if n["content"] == "Cache entries expire after one minute"]
    assert node["type"] == "decision"
    assert shown(repo, node["id"])["provenance"] == {
        "source": "conversation", "session": SESSION, "branch": "main",
        "commit": git(repo, "rev-parse", "HEAD"), "files": ["src/cache.py"], "git": "branch"}


def test_provenance_of_an_mcp_write_and_a_promotion_names_its_source(repo: Path) -> None:
    db = session_of(open_store(repo / ".ctx"))
    res = remember(db, "via MCP", session="mcp-1", hook_key="mcp:1", source="mcp")
    assert res.node is not None
    assert res.node.metadata["provenance"]["source"] == "mcp"  # type: ignore[index]
    assert res.node.metadata["provenance"]["session"] == "mcp-1"  # type: ignore[index]


def test_provenance_files_are_bounded_and_repo_relative(repo: Path) -> None:
    for i in range(MAX_FILES + 3):
        (repo / f"f{i}.py").write_text("x")
    touched = [str(repo / f"f{i}.py") for i in range(MAX_FILES + 3)]
    assert relative_files(repo, ["/etc/hostname", *touched]) == tuple(f"f{i}.py" for i in range(MAX_FILES))
    prov = provenance_for(repo, Origin("conversation", "s", ("f7.py",)), "see f6.py and f6.py")
    assert prov["files"] == ["f6.py", "f7.py"]


def test_provenance_never_follows_a_symlink_out_of_the_repository(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("x")
    (repo / "link.txt").symlink_to(tmp_path / "secret.txt")
    assert relative_files(repo, ["link.txt", "src/../../secret.txt", "src/cache.py"]) == ("src/cache.py",)


def test_provenance_in_packs_recall_and_the_node_page(repo: Path) -> None:
    from ctxstore.browse.node import read_node_page

    node_id = added(repo, "Session cache lives in SQLite, see src/cache.py", "decision")
    head = git(repo, "rev-parse", "HEAD")
    pack = json.loads(ctx(repo, "pack", "session cache sqlite", "--format", "json"))
    (item,) = [i for i in pack["retrieved"] if i["object_id"] == node_id]
    assert item["provenance"] == {"source": "explicit", "session": None, "branch": "main",
                                  "commit": head, "files": ["src/cache.py"], "git": "branch"}
    text = ctx(repo, "pack", "session cache sqlite", "--format", "text")
    assert f"       from: explicit, branch main at {head[:8]}\n" in text
    markdown = ctx(repo, "pack", "session cache sqlite", "--format", "markdown")
    assert f"From: explicit, branch main at {head[:8]}\n" in markdown
    recalled = json.loads(ctx(repo, "recall", "session cache", "--format", "json"))
    assert recalled["nodes"][0]["provenance"]["commit"] == head
    page = read_node_page(session_of(open_store(repo / ".ctx")), node_id)
    assert page.provenance == (("source", "explicit"), ("session", "none"),  # type: ignore[union-attr]
                               ("git", f"branch main at commit {head}"), ("files", "src/cache.py"))
    assert "provenance" not in dict(page.metadata)  # type: ignore[union-attr]


def test_provenance_of_a_recalled_node_in_the_stop_hook(repo: Path) -> None:
    added(repo, "Retries use exponential backoff", "decision")
    head = git(repo, "rev-parse", "HEAD")
    payload = {"session_id": SESSION, "cwd": str(repo), "hook_event_name": "Stop"}
    res = run_ctx(["hook", "stop", "--response", '<ctx:recall query="exponential backoff"/>'],
                  cwd=repo, stdin=json.dumps(payload))
    assert res.returncode == 0, res.stderr
    prompt = {"session_id": SESSION, "cwd": str(repo), "hook_event_name": "UserPromptSubmit",
              "prompt": "go on"}
    out = json.loads(run_ctx(["hook", "prompt-submit"], cwd=repo, stdin=json.dumps(prompt)).stdout)
    shown_ = out["hookSpecificOutput"]["additionalContext"]
    assert "Retries use exponential backoff" in shown_
    assert f"  - From: explicit, branch main at {head[:8]}\n" in shown_
