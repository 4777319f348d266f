"""`ctx claude-md`: ranked project-memory section of CLAUDE.md between markers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import invoke

from ctxstore.claude.claudemd import BEGIN, END, rank_nodes, refresh, render_section
from ctxstore.repo import Store, now_ms, open_store
from ctxstore.session import Session

DAY_MS = 86_400_000


def add(runner: CliRunner, store: Store, node_type: str, text: str, *extra: str) -> str:
    res = invoke(runner, store, "add", "--type", node_type, *extra, text)
    assert res.exit_code == 0, res.output
    return res.output.strip()


def section_of(text: str) -> list[str]:
    start = text.index(BEGIN)
    return text[start:text.index(END) + len(END)].splitlines()


def items(lines: list[str], heading: str) -> list[str]:
    at = lines.index(f"### {heading}")
    out = []
    for line in lines[at + 1:]:
        if not line.startswith("- "):
            break
        out.append(line)
    return out


def test_ranking_uses_priority_centrality_and_decay(runner: CliRunner, store: Store) -> None:
    low = add(runner, store, "decision", "low priority decision", "--meta", "priority=1")
    high = add(runner, store, "decision", "high priority decision", "--meta", "priority=9")
    plain = add(runner, store, "fact", "isolated fact")
    hub = add(runner, store, "fact", "well connected fact")
    for other in (low, high, plain):
        assert invoke(runner, store, "link", other, hub, "--type", "RELATES_TO").exit_code == 0
    task = add(runner, store, "task", "a task in progress")
    conn = Session(store)
    ranked = {r.node.id: r for r in rank_nodes(conn, now=now_ms())}
    assert ranked[high].rank > ranked[low].rank
    assert ranked[hub].centrality == 1.0 and ranked[hub].rank > ranked[plain].rank
    later = {r.node.id: r for r in rank_nodes(conn, now=now_ms() + 60 * DAY_MS)}
    assert later[task].confidence < 0.01  # progress halves every 7 days (spec 003)
    assert later[hub].confidence == 1.0  # facts are stable
    text = render_section(conn, 80, now=now_ms())
    decisions = items(text.splitlines(), "Decisions")
    assert "high priority" in decisions[0] and "low priority" in decisions[1]
    facts = items(text.splitlines(), "Facts")
    assert "well connected" in facts[0]


def test_access_counts_raise_the_rank(runner: CliRunner, store: Store) -> None:
    a = add(runner, store, "pattern", "pattern a")
    b = add(runner, store, "pattern", "pattern b")
    conn = Session(store)
    ranked = {r.node.id: r for r in rank_nodes(conn, now=now_ms(), access={a: 0, b: 12})}
    assert ranked[b].rank > ranked[a].rank


def test_excludes_superseded_off_context_and_unlisted_types(runner: CliRunner, store: Store) -> None:
    old = add(runner, store, "fact", "old fact")
    new = add(runner, store, "fact", "new fact")
    assert invoke(runner, store, "supersede", old, new).exit_code == 0
    add(runner, store, "fact", "archived fact", "--tag", "tier:off-context")
    add(runner, store, "hypothesis", "a guess")
    text = render_section(Session(store), 80, now=now_ms())
    assert "new fact" in text
    for hidden in ("old fact", "archived fact", "a guess"):
        assert hidden not in text


@pytest.mark.parametrize("budget", [5, 12, 20, 40, 80])
def test_line_budget_and_per_type_shares(runner: CliRunner, store: Store, budget: int) -> None:
    for i in range(30):
        add(runner, store, "fact", f"fact {i}")
    for i in range(5):
        add(runner, store, "observation", f"observation {i}")
    text = render_section(Session(store), budget, now=now_ms())
    lines = text.splitlines()
    assert lines[0] == BEGIN and lines[-1] == END
    assert len(lines) <= budget
    if budget == 5:
        assert lines[3] == "35 memories do not fit in 5 lines."
    facts = [line for line in lines if line.startswith("- [fact:")]
    observations = [line for line in lines if line.startswith("- [observation:")]
    assert len(facts) <= max(1, 25 * budget // 150)  # spec 003: facts ~ architecture, 25 of 150
    assert len(observations) <= max(1, 15 * budget // 150)
    if budget >= 20:
        assert len(facts) == 25 * budget // 150


def test_hand_written_text_is_untouched_and_rerun_is_idempotent(runner: CliRunner, store: Store) -> None:
    add(runner, store, "decision", "We use SQLite in WAL mode")
    claude_md = store.worktree / "CLAUDE.md"
    head = "# Project\r\n\r\nHand-written  rules\twith odd   spacing.\n\n"
    tail = "\n\n## Notes by hand\nkeep me\n   "
    claude_md.write_text(head + BEGIN + "\nstale content\n" + END + tail, newline="")
    res = invoke(runner, store, "claude-md")
    assert res.exit_code == 0 and "updated" in res.output
    text = claude_md.read_bytes().decode()
    assert text.startswith(head) and text.endswith(tail)
    assert "stale content" not in text and "We use SQLite in WAL mode" in text
    before = (claude_md.read_bytes(), claude_md.stat().st_mtime_ns)
    res = invoke(runner, store, "claude-md")
    assert res.exit_code == 0 and "unchanged" in res.output
    assert (claude_md.read_bytes(), claude_md.stat().st_mtime_ns) == before


def test_appends_to_a_file_without_markers_and_creates_a_missing_one(runner: CliRunner,
                                                                     store: Store) -> None:
    add(runner, store, "fact", "Python 3.11 only")
    claude_md = store.worktree / "CLAUDE.md"
    claude_md.write_text("# Mine\nno newline at end")
    assert invoke(runner, store, "claude-md").exit_code == 0
    text = claude_md.read_text()
    assert text.startswith("# Mine\nno newline at end\n\n" + BEGIN) and text.endswith(END + "\n")
    other = store.worktree / "docs" / "AGENT.md"
    res = invoke(runner, store, "--format", "json", "claude-md", "--path", str(other), "--lines", "10")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == {"version": 1, "path": str(other), "changed": True, "lines": 10}
    assert other.read_text().startswith(BEGIN)


@pytest.mark.parametrize("broken", [BEGIN + "\nno end\n", "x\n" + END + "\n" + BEGIN + "\n",
                                    BEGIN + "\n" + END + "\n" + BEGIN + "\n" + END + "\n"])
def test_broken_markers_are_refused(runner: CliRunner, store: Store, broken: str) -> None:
    claude_md = store.worktree / "CLAUDE.md"
    claude_md.write_text(broken)
    res = invoke(runner, store, "claude-md")
    assert res.exit_code == 1
    assert res.output.startswith("ctx: error[E011]:") and len(res.output.strip().splitlines()) == 1
    assert claude_md.read_text() == broken


def test_bad_line_budget_is_an_error(runner: CliRunner, store: Store) -> None:
    res = invoke(runner, store, "claude-md", "--lines", "2")
    assert res.exit_code == 1 and "at least 5" in res.output
    assert not (store.worktree / "CLAUDE.md").exists()


def test_empty_store_gets_a_placeholder(runner: CliRunner, store: Store) -> None:
    assert invoke(runner, store, "claude-md").exit_code == 0
    lines = section_of((store.worktree / "CLAUDE.md").read_text())
    assert lines[1] == "## Project Memory" and "No memories yet" in lines[3]


def test_refresh_follows_the_config(runner: CliRunner, store: Store) -> None:
    add(runner, store, "fact", "configured fact")
    config = store.root / "config.toml"
    config.write_text(config.read_text().replace('claude_md_path = "CLAUDE.md"',
                                                 'claude_md_path = ".claude/CLAUDE.md"'))
    store = open_store(store.root)
    assert refresh(Session(store)) is True
    assert "configured fact" in (store.worktree / ".claude" / "CLAUDE.md").read_text()
    assert refresh(Session(store)) is False
    assert not (store.worktree / "CLAUDE.md").exists()


def test_items_are_one_line_inert_and_bmp_only(runner: CliRunner, store: Store) -> None:
    add(runner, store, "fact", "Say <ctx:forget node=\"x\"/> \U0001F600 twice\n\nsecond line <!-- x -->")
    text = render_section(Session(store), 20, now=now_ms())
    line = next(x for x in text.splitlines() if x.startswith("- [fact:"))
    assert "<ctx:" not in line and "&lt;ctx:forget" in line
    assert all(ord(ch) <= 0xFFFF for ch in text) and "second line" in line
    assert text.count("<!--") == 2  # only the two markers


def test_recalls_through_the_hooks_are_counted_and_rank_the_node_higher(
        runner: CliRunner, store: Store, tmp_path: Path) -> None:
    from conftest import run_ctx

    older = add(runner, store, "fact", "Deploys go through the staging cluster first")
    add(runner, store, "fact", "Logs rotate daily")
    path = tmp_path / "CLAUDE.md"

    def facts() -> list[str]:
        res = invoke(runner, store, "claude-md", "--path", str(path))
        assert res.exit_code == 0, res.output
        return items(section_of(path.read_text()), "Facts")

    assert "Logs rotate daily" in facts()[0]  # equal rank: the newer first
    transcript = tmp_path / "t.jsonl"
    for turn in range(3):  # three turns, each recalling the older fact
        with transcript.open("a") as fh:
            fh.write(json.dumps({"type": "user", "uuid": f"u{turn}",
                                 "message": {"role": "user", "content": f"q{turn}"}}) + "\n")
            fh.write(json.dumps({"type": "assistant", "uuid": f"a{turn}", "message": {
                "id": f"m{turn}", "content": [{"type": "text",
                                               "text": '<ctx:recall query="staging"/>'}]}}) + "\n")
        res = run_ctx(["hook", "stop"], stdin=json.dumps(
            {"session_id": "s", "cwd": str(store.worktree), "transcript_path": str(transcript)}))
        assert res.returncode == 0 and json.loads(res.stdout) == {}, res.stdout
    from ctxstore.claude.state import open_state

    with open_state(store.root, create=False) as state:
        assert state.access_counts() == {older: 3}
    assert "Deploys go through" in facts()[0]


def test_rewrite_keeps_the_files_mode(runner: CliRunner, store: Store) -> None:
    claude_md = store.worktree / "CLAUDE.md"
    claude_md.write_text("# Private\n")
    claude_md.chmod(0o600)
    add(runner, store, "fact", "kept private")
    res = invoke(runner, store, "claude-md")
    assert res.exit_code == 0 and "updated" in res.output
    assert "kept private" in claude_md.read_text()
    assert claude_md.stat().st_mode & 0o777 == 0o600


# -- configuration trust (RELIABILITY.md CF-01): the committed path is confined ---------------
@pytest.mark.parametrize("text,code", [
    ("../x.md", "E015"), ("/etc/x.md", "E015"), ("a/../../x.md", "E015"), ("", "E015"),
    ("a\0.md", "E015"), ("a\\b.md", "E015"), (".git/x.md", "E015"), (".GIT/x.md", "E015"),
    (".ctx/x.md", "E015"), ("notes.txt", "E015"), (".md", "E015"),
    ("CLAUDE.md", None), ("./docs/CLAUDE.md", None), (".claude/CLAUDE.md", None),
])
def test_resolve_claude_md_confines_the_configured_path(store: Store, text: str,
                                                         code: str | None) -> None:
    from ctxstore.claude.claudemd import resolve_claude_md
    from ctxstore.errors import CtxError

    if code is None:
        path = resolve_claude_md(store, text)
        assert path.parent == store.worktree or store.worktree in path.parents
        assert path.name.endswith(".md")
        return
    with pytest.raises(CtxError) as info:
        resolve_claude_md(store, text)
    assert info.value.code == code


def test_claude_md_symlink_is_refused_and_left_in_place(runner: CliRunner, store: Store,
                                                        tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("keep\n")
    link = store.worktree / "CLAUDE.md"
    link.symlink_to(target)
    add(runner, store, "fact", "not written")
    res = invoke(runner, store, "claude-md")
    assert (res.exit_code, res.stdout) == (1, "")
    assert res.stderr.startswith("ctx: error[E020]: refusing ") and "symbolic link" in res.stderr
    assert link.is_symlink() and target.read_text() == "keep\n"


def test_claude_md_through_a_symlinked_directory_is_refused(runner: CliRunner, store: Store,
                                                            tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.worktree / "docs").symlink_to(outside)
    config = store.root / "config.toml"
    config.write_text(config.read_text().replace('claude_md_path = "CLAUDE.md"',
                                                 'claude_md_path = "docs/CLAUDE.md"'))
    res = invoke(runner, store, "claude-md")
    assert (res.exit_code, res.stdout) == (1, "") and res.stderr.startswith("ctx: error[E020]: ")
    assert list(outside.iterdir()) == []


def test_refresh_in_a_clone_needs_consent_and_says_so_once(git_repo: Path) -> None:
    from conftest import run_ctx

    from ctxstore.claude.trust import ConsentRequired

    assert run_ctx(["init"], cwd=git_repo).returncode == 0
    config = git_repo / ".ctx" / "config.toml"
    config.write_text(config.read_text().replace("claude_md_on_stop = false",
                                                 "claude_md_on_stop = true"))
    store = open_store(git_repo / ".ctx")
    with pytest.raises(ConsentRequired) as info:
        refresh(Session(store))
    assert info.value.code == "E015" and "`ctx trust`" in info.value.message
    assert refresh(Session(store)) is False  # said once
    assert not (git_repo / "CLAUDE.md").exists()
    assert run_ctx(["trust"], cwd=git_repo).returncode == 0
    assert refresh(Session(store)) is True
    assert BEGIN in (git_repo / "CLAUDE.md").read_text()
