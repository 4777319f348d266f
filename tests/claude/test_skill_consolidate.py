"""The ``/consolidate`` skill tells the agent that with ``[llm]`` configured ``ctx consolidate``
drafts the merged text itself (issue 16 item 2, docs/lifecycle.md "LLM drafts"), in the skill
``ctx install`` writes and in the plugin's copy, naming only options and commands that exist."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import run_ctx


def _installed(tmp_path: Path) -> list[str]:
    work = tmp_path / "p"
    work.mkdir()
    assert run_ctx(["init"], cwd=work).returncode == 0
    res = run_ctx(["install"], cwd=work)
    assert res.returncode == 0, res.stderr
    plugin = tmp_path / "plug"
    res = run_ctx(["install", "--plugin", str(plugin)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return [(work / ".claude" / "skills" / "consolidate" / "SKILL.md").read_text(),
            (plugin / "skills" / "consolidate" / "SKILL.md").read_text()]


def test_skill_consolidate_explains_llm_drafting(tmp_path: Path) -> None:
    project, plugin = _installed(tmp_path)
    assert project == plugin
    body = project.split("\n---\n", 1)[1]
    for needle in ("[llm] server_url", "CTX_LLM_SERVER", "drafts the merged\ntext itself",
                   "drafted_by", "llm:<model>", "--no-llm", "E022", "without\n`--content`"):
        assert needle in body, needle


def test_skill_consolidate_names_only_real_options_and_allowed_commands(tmp_path: Path) -> None:
    text = _installed(tmp_path)[0]
    front, body = text.split("\n---\n", 1)
    body = re.sub(r"<!--.*?-->", "", body, flags=re.S)  # the install marker names ctx install
    allowed = set(re.findall(r"Bash\(ctx (\w+) \*\)", front))
    used = set(re.findall(r"`ctx (\w+)", body))
    assert used and used <= allowed, used - allowed
    help_text = run_ctx(["consolidate", "--help"]).stdout
    for option in set(re.findall(r"(--[a-z][a-z-]+)", body)):
        assert option in help_text or option == "--format", option
