"""Relevant context through the real Claude Code CLI (issue 14 item 3).

A decision added with ``ctx add decision`` reaches the next session without a tier tag, and
a prompt about a stored topic gets that memory injected by the UserPromptSubmit hook. The
assertions are on the requests the CLI sent to the (scripted) model.
"""

from __future__ import annotations

import pytest

from .conftest import ClaudeProject

# The real Claude Code CLI: seconds a turn, and an npm install on first use.
pytestmark = pytest.mark.slow


def test_a_decision_added_between_sessions_reaches_the_next_one(cc: ClaudeProject) -> None:
    first = cc.run("Hello.", ["Hi."])
    assert not first.seen("DECISION-NEXT-73")
    cc.ctx("add", "decision", "DECISION-NEXT-73 deploys never happen on Fridays")
    second = cc.run("What should I know before deploying?", ["Not on Fridays."])
    assert second.seen("DECISION-NEXT-73")
    assert second.count("DECISION-NEXT-73") == 1  # once: session start, not again on the prompt


def test_a_prompt_about_a_stored_topic_gets_that_memory(cc: ClaudeProject) -> None:
    # An untiered fact: no session start shows it, only relevance to the prompt does.
    cc.ctx("add", "--type", "fact",
           "RELEVANT-FACT-88 the billing service retries webhooks with exponential backoff")
    other = cc.run("Write a haiku about autumn.", ["Leaves fall."])
    assert not other.seen("RELEVANT-FACT-88")
    asked = cc.run("Why does the billing service retry webhooks so slowly?", ["Backoff."])
    assert asked.seen("RELEVANT-FACT-88")
    assert asked.seen('kind=\\"relevant memory\\"')
    again = cc.run("And the billing webhooks retries, once more?", ["Backoff."],
                   resume=asked.session_id)
    # Shown once in the session: only the replayed history of the earlier turn holds it.
    assert again.count("RELEVANT-FACT-88") <= 1
