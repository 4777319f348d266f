"""Relevant context in the hooks (issue 14 item 3): session start, prompt-submit, compaction.

Real hook processes against a real store; the injected text is what Claude Code would get.
"""

from __future__ import annotations

import re

import pytest

from ctxstore.knowledge.tasks import set_current_task
from ctxstore.repo import Store
from tests.claude.test_hooks import context, ctx, hook, payload

TOPICS = {
    "wal": "The index runs SQLite in WAL mode so readers never wait for the writer",
    "retry": "Uploads retry with exponential backoff and jitter to avoid retry storms",
    "lock": "The writer lock is a POSIX lock on .ctx/lock and dies with its process",
}


def _config(store: Store, key: str, value: str) -> None:
    path = store.root / "config.toml"
    text, n = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", path.read_text())
    assert n == 1, key
    path.write_text(text)


def _add_topics(store: Store) -> dict[str, str]:
    return {k: ctx(store, "add", "--type", "fact", v).split()[0] for k, v in TOPICS.items()}


def _prompt(store: Store, text: str, session: str = "s1") -> dict:
    return hook("prompt-submit", payload(store, session, prompt=text))


def test_session_start_shows_a_fresh_decision_and_the_active_task(store: Store) -> None:
    ctx(store, "add", "decision", "Ship the hooks without networkx")
    ctx(store, "add", "--type", "fact", "--tag", "tier:reference", "Reference fact stays.")
    got = context(hook("session-start", payload(store, source="startup")))
    assert "Ship the hooks without networkx" in got  # no tier tag needed
    assert "Reference fact stays." in got

    # The active task's nodes come too, also when nothing counts as recent.
    _config(store, "narrative_days", "0")
    ctx(store, "add", "--type", "fact", "--tag", "task:auth", "Tokens expire after an hour.")
    set_current_task(store.root, "auth")
    got = context(hook("session-start", payload(store, "s2", source="startup")))
    assert "Current ctx task: auth" in got and "Tokens expire after an hour." in got
    assert "Ship the hooks without networkx" not in got  # narrative_days = 0: nothing recent


@pytest.mark.slow
def test_prompt_submit_injects_relevant_memory_once(store: Store) -> None:
    ids = _add_topics(store)
    hook("session-start", payload(store, source="startup"))
    got = context(_prompt(store, "Why do uploads cause retry storms after an outage?"))
    assert 'kind="relevant memory"' in got and TOPICS["retry"] in got
    assert TOPICS["wal"] not in got and TOPICS["lock"] not in got
    assert f"[fact:{ids['retry'][:8]}" in got
    # Already seen in this session: not injected again; another session gets it.
    assert context(_prompt(store, "retry storms and exponential backoff again")) == ""
    assert TOPICS["retry"] in context(_prompt(store, "uploads retry storms", session="s2"))


@pytest.mark.slow
def test_memory_left_out_of_a_full_frame_comes_with_a_later_prompt(store: Store) -> None:
    # Each fact is ~600 characters of emoji, which the frame spells as [U+1F600] (9 each):
    # the prompt's budget admits them all, the frame's 9,000 characters only a few.
    for n in range(1, 7):
        ctx(store, "add", "--type", "fact", f"Emoji note {n} about walrus otter beaver mink. "
            + "\N{GRINNING FACE}" * 300)
    hook("session-start", payload(store, source="startup"))
    _config(store, "prompt_budget", "8000")
    seen: list[str] = []
    for k in range(6):
        got = context(_prompt(store, f"walrus otter beaver mink, round {k}"))
        shown = re.findall(r"Emoji note (\d) about", got)
        if not shown:
            break
        assert len(got) < 10_000
        assert not set(shown) & set(seen)  # nothing twice in one session
        seen += shown
    # every note reached the model, over several prompts, none marked shown unseen
    assert sorted(seen) == [str(n) for n in range(1, 7)]
    assert len(seen) > 1 and k > 1


@pytest.mark.slow
def test_prompt_submit_skips_what_scores_below_the_threshold(store: Store) -> None:
    _add_topics(store)
    hook("session-start", payload(store, source="startup"))
    assert context(_prompt(store, "please write a haiku about autumn leaves")) == ""
    assert context(_prompt(store, "a lock picking tutorial")) == ""  # one shared word is no reason
    # Two of four terms: relevance 0.5, the default threshold; a higher one skips it.
    half = "do readers wait during nightly backups?"
    assert TOPICS["wal"] in context(_prompt(store, half, session="s2"))
    _config(store, "prompt_threshold", "0.9")
    assert context(_prompt(store, half, session="s3")) == ""
    assert TOPICS["wal"] in context(_prompt(store, "readers wait for the writer", session="s3"))


def test_prompt_submit_off_switch_and_budget(store: Store) -> None:
    _add_topics(store)
    hook("session-start", payload(store, source="startup"))
    _config(store, "prompt_context", "false")
    assert context(_prompt(store, "writer lock readers WAL retry storms uploads")) == ""
    _config(store, "prompt_context", "true")
    _config(store, "prompt_budget", "25")  # room for one item of these, not three
    got = context(_prompt(store, "writer lock readers WAL process uploads retry"))
    assert sum(t in got for t in TOPICS.values()) == 1


def test_prompt_submit_that_cannot_search_reports_and_still_delivers(store: Store) -> None:
    _add_topics(store)
    hook("session-start", payload(store, source="startup"))
    _config(store, "prompt_budget", "-1")  # out of range: the config cannot be read
    out = _prompt(store, "readers wait for the writer in WAL mode")
    assert "relevant memory not searched" in out.get("systemMessage", "")
    assert "Traceback" not in str(out)


@pytest.mark.slow
def test_compaction_reinjects_what_the_recent_prompts_needed(store: Store) -> None:
    _add_topics(store)
    hook("session-start", payload(store, source="startup"))
    assert TOPICS["wal"] in context(_prompt(store, "do readers wait for the writer in WAL mode?"))
    hook("pre-compact", payload(store))
    got = context(hook("session-start", payload(store, source="compact")))
    assert "injected again after the conversation was compacted" in got
    assert 'kind="memory relevant to the recent prompts"' in got and TOPICS["wal"] in got
    # Shown again now, so the next prompt on the topic does not repeat it.
    assert TOPICS["wal"] not in context(_prompt(store, "WAL readers and the writer"))
    # A resumed session keeps what it was shown; a new one (startup) starts afresh.
    hook("session-start", payload(store, source="resume"))
    assert context(_prompt(store, "WAL readers writer")) == ""
    hook("session-start", payload(store, source="startup"))
    assert TOPICS["wal"] in context(_prompt(store, "WAL readers writer"))


def test_relevant_context_pools_sources_and_survives_a_failing_one(store: Store) -> None:
    from ctxstore.packs.session import Item, node_source, relevant_context
    from ctxstore.session import Session

    ids = _add_topics(store)

    def turns(session: Session, prompt: str, limit: int) -> list[Item]:
        return [Item("turn:7", "transcript", "- [turn] we argued about retries\n", 0.9, 9, "x")]

    def broken(session: Session, prompt: str, limit: int) -> list[Item]:
        raise RuntimeError("boom")

    problems: list[str] = []
    sources = [node_source, turns, broken]
    with Session.open(store.root) as db:
        items = relevant_context(db, "uploads retry storms backoff", 1000, [], sources=sources,
                                 problems=problems)
        assert [i.key for i in items] == [ids["retry"], "turn:7"]
        assert items[0].why == "matched: uploads, retry, storms, backoff"
        assert problems == ["context source broken failed: RuntimeError: boom"]
        # Seen keys are left out; the budget holds only what fits.
        assert [i.key for i in relevant_context(db, "uploads retry storms backoff", 1000,
                                                [ids["retry"]], sources=sources)] == ["turn:7"]
        assert [i.key for i in relevant_context(db, "uploads retry storms backoff", 9, [],
                                                sources=sources)] == ["turn:7"]


def test_session_start_of_an_empty_store_injects_no_empty_frame(store: Store) -> None:
    assert hook("session-start", payload(store, "e1", source="startup")) == {}
    ctx(store, "add", "--type", "fact", "--tag", "tier:reference", "Reference fact stays.")
    assert "Reference fact stays." in context(hook("session-start",
                                                    payload(store, "e2", source="startup")))


def test_prompt_submit_without_a_session_start_still_injects_relevant_memory(store: Store) -> None:
    # A clone where SessionStart never ran (or failed): no hook state yet.
    _add_topics(store)
    assert not (store.root / "local" / "state.sqlite").exists()
    assert context(_prompt(store, "ok go")) == ""  # no topic: nothing created
    assert not (store.root / "local" / "state.sqlite").exists()
    got = context(_prompt(store, "Why do uploads cause retry storms after an outage?"))
    assert TOPICS["retry"] in got
    assert context(_prompt(store, "retry storms and exponential backoff again")) == ""  # once
