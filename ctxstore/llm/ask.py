"""One ``ctx llm`` call end to end: compose, detect, (restore), complete, (commit), (save).

Owns the order of a call so that a failure writes nothing: every request to the server
(slot restore, completion, slot save) comes before the first write; the answer is then
committed (``--commit``) and the prompt-cache record updated last. A failed slot save is
a note, not an error: the answer is already there.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from ctxstore.errors import LlmUnavailable
from ctxstore.llm import cache
from ctxstore.llm.client import Completion, LlmClient
from ctxstore.llm.prompt import Pack, Prompt, compose_prompt
from ctxstore.llm.respond import Committed, Mention, commit_response, find_mentions
from ctxstore.records import dataclass
from ctxstore.repo import Store

__all__ = ["Answer", "Settings", "ask"]


@dataclass(frozen=True, slots=True)
class Settings:
    """How to call the server (flags over ``[llm]`` config, resolved by the CLI).

    Attributes:
        url: The server's base URL.
        protocol: ``auto``, ``llama`` or ``openai``.
        model: The model name.
        max_tokens: The response token limit.
        temperature: The sampling temperature.
        timeout: Seconds per request.
        max_reply_bytes: The largest reply accepted.
        budget: The prompt's token budget.
    """

    url: str
    protocol: str
    model: str
    max_tokens: int
    temperature: float
    timeout: float
    max_reply_bytes: int
    budget: int


@dataclass(frozen=True, slots=True)
class Answer:
    """The outcome of one call.

    Attributes:
        completion: The server's answer.
        prompt: The prompt sent.
        mentions: The files and symbols the answer names.
        committed: What ``--commit`` wrote, or None.
        cache_restored: Whether a saved slot was restored before the call.
        cache_saved: Whether the slot was saved after it.
        requests: ``(method, path)`` of every request sent.
        notes: Items of the pack that could not be used, a failed slot save.
    """

    completion: Completion
    prompt: Prompt
    mentions: tuple[Mention, ...]
    committed: Committed | None
    cache_restored: bool = False
    cache_saved: bool = False
    requests: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())


def ask(store: Store, pack: Pack, settings: Settings, *, commit: bool,
        worktree: Path | None) -> Answer:
    """Send ``pack`` to the server and, with ``commit``, keep the answer.

    Args:
        store: The store (its ``local/`` keeps the prompt-cache record).
        pack: The prompt pack.
        settings: Where and how to ask.
        commit: Append the summary to the log and add the node, blob and edges.
        worktree: The repository whose files an answer may name (None: only the pack's).

    Returns:
        The answer.

    Raises:
        InvalidInput: if the task does not fit the budget.
        ConfigInvalid: for an unknown ``[llm] protocol``.
        LlmUnavailable: (E022) if the server fails; nothing is written then.
        LockConflict, StagingConflict, StorageIOError: if the answer cannot be committed.
    """
    prompt = compose_prompt(pack, settings.budget)
    client = LlmClient(settings.url, settings.timeout, settings.max_reply_bytes)
    protocol, props = client.detect(settings.protocol)
    notes = list(pack.notes)
    state: cache.SlotState | None = None  # the slot record to write, when the server has slots
    restored = saved = False
    extra = None
    if protocol == "llama":
        slots = cache.slots_supported(props)
        loaded = cache.load_state(store.root, settings.url)
        extra = cache.plan_extra(loaded, slots=slots)
        if slots:
            state, restored = cache.restore_slot(client, loaded, prompt.prefix_hash)
    completion = client.complete(protocol, system=prompt.system, prompt=prompt.body,
                                 model=settings.model, max_tokens=settings.max_tokens,
                                 temperature=settings.temperature, extra=extra)
    if state is not None:
        try:
            state = cache.save_slot(client, state, store.root, prompt.prefix_hash,
                                    completion.tokens_prompt or prompt.tokens)
            saved = state.session_file is not None
        except LlmUnavailable as exc:  # the answer is in hand; only the cache is lost
            notes.append(f"prompt cache not saved: {exc.detail}")
            state = None
    mentions = find_mentions(completion.text, pack, worktree)
    committed = None
    if commit:
        committed = commit_response(store, text=completion.text, pack=pack,
                                    model=completion.model, server=settings.url,
                                    mentions=mentions)
    if state is not None:
        cache.store_state(store.root, settings.url, state)
    return Answer(completion, prompt, tuple(mentions), committed, restored, saved,
                  tuple(client.requests), tuple(notes))

