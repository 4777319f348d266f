"""One ``ctx llm`` call end to end: compose, detect, (restore), complete, (save), then keep.

Owns the order of a call so that a failure writes nothing and a generated answer is never
lost: ``ask`` makes every request to the server (slot restore, completion, slot save)
before any write, and writes only the prompt-cache record in ``local/``; the caller can
show the answer before ``settle`` resolves what it mentions and, with ``--commit``, keeps
it (where a held lock or a full disk can still fail). A failed slot save is a note, not an
error: the answer is already there.
"""

from __future__ import annotations

import math
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.config import Config, load_config
from ctxstore.errors import InvalidInput, LlmUnavailable
from ctxstore.git import in_git_work_tree
from ctxstore.knowledge.scopes import user_store_path
from ctxstore.llm import cache
from ctxstore.llm.client import (
    Completion,
    LlmClient,
    ServerChoice,
    resolve_server,
    served_model,
    server_context,
)
from ctxstore.llm.prompt import Pack, Prompt, compose_prompt
from ctxstore.llm.respond import Committed, Mention, commit_response, find_mentions, resolve_mentions
from ctxstore.records import dataclass
from ctxstore.repo import Store

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["Answer", "Settings", "ask", "choose_server", "call_settings", "settle"]

# Fewer prompt tokens than this beside the answer is no prompt: the task and the instructions
# alone take more.
_MIN_PROMPT_TOKENS = 256


@dataclass(frozen=True, slots=True)
class Settings:
    """How to call the server (flags over ``[llm]`` config: ``call_settings``).

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
        mentions: The files and symbols the answer names (after ``settle``, under their
            indexed keys).
        pack: The pack the prompt came from.
        committed: What ``--commit`` wrote, or None.
        cache_restored: Whether a saved slot was restored before the call.
        cache_saved: Whether the slot was saved after it.
        requests: ``(method, path)`` of every request sent.
        notes: Items of the pack that could not be used, a failed slot save.
    """

    completion: Completion
    prompt: Prompt
    mentions: tuple[Mention, ...]
    pack: Pack
    committed: Committed | None
    cache_restored: bool = False
    cache_saved: bool = False
    requests: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())


def choose_server(store: Store, *, flag: str | None, env_server: str | None, home: Path,
                  user_store: bool) -> ServerChoice:
    """The server a call from ``store`` goes to (``client.resolve_server``'s order).

    The project's ``[llm] server_url`` counts as the user's own when the store is the user
    store or lies outside any Git work tree. The user store's config.toml is read only when
    neither ``flag`` nor ``env_server`` decides (a broken one cannot stop ``--server``).

    Args:
        store: The store in use.
        flag: ``--server``, if given.
        env_server: ``CTX_LLM_SERVER``, if set and not empty.
        home: The user's home directory (the user store is ``home/.ctx``).
        user_store: True when ``store`` is the user store itself.

    Returns:
        The URL and its source.

    Raises:
        InvalidInput: if the chosen value is not an http(s) URL.
        ConfigInvalid: (E015) if a cloned repository's config names a remote server.
    """
    user = None
    if flag is None and not (env_server or user_store):
        user = str(load_config(user_store_path(home) / "config.toml").get("llm", "server_url"))
    own = user_store or not in_git_work_tree(store.worktree)
    return resolve_server(flag=flag, env=env_server, project=str(store.config.get("llm", "server_url")),
                          project_is_own=own, user=user)


def call_settings(config: Config, url: str, *, total_budget: int, model: str | None = None,
                  max_tokens: int | None = None, temperature: float | None = None,
                  timeout: float | None = None) -> Settings:
    """The settings of a call: each given value, else the store's ``[llm]`` configuration.

    Args:
        config: The store's configuration.
        url: The server (``choose_server``).
        total_budget: Tokens for prompt and response together; the prompt gets what the
            response's ``max_tokens`` leaves (at least 1).
        model: The model name.
        max_tokens: The response token limit.
        temperature: The sampling temperature.
        timeout: Seconds per request.

    Returns:
        The settings.

    Raises:
        InvalidInput: if the temperature or the timeout is not a finite number (JSON has
            no NaN, and a NaN deadline never comes), or if the budget leaves fewer than
            ``_MIN_PROMPT_TOKENS`` for the prompt beside the answer.
    """
    for name, value in (("temperature", temperature), ("timeout", timeout)):
        if value is not None and not math.isfinite(value):
            raise InvalidInput(f"--{name}: {value!r} is not a finite number")
    tokens = max_tokens if max_tokens is not None else int(config.get("llm", "max_response_tokens"))
    if total_budget - tokens < _MIN_PROMPT_TOKENS:
        raise InvalidInput(f"a budget of {total_budget} tokens leaves no room for a prompt beside "
                           f"{tokens} tokens for the answer",
                           hint="raise --budget (or CTX_DEFAULT_BUDGET) or lower --max-tokens")
    return Settings(url=url, protocol=str(config.get("llm", "protocol")),
                    model=model or str(config.get("llm", "model")), max_tokens=tokens,
                    temperature=temperature if temperature is not None
                    else float(config.get("llm", "temperature")),
                    timeout=timeout if timeout is not None
                    else float(config.get("llm", "timeout_seconds")),
                    max_reply_bytes=int(config.get("llm", "max_reply_bytes")),
                    budget=max(1, total_budget - tokens))


def ask(store: Store, pack: Pack, settings: Settings, *, worktree: Path | None) -> Answer:
    """Send ``pack`` to the server and return its answer; nothing committed changes.

    Only the prompt-cache record in ``local/`` is written, after the answer has arrived.

    Args:
        store: The store (its ``local/`` keeps the prompt-cache record).
        pack: The prompt pack.
        settings: Where and how to ask.
        worktree: The repository whose files an answer may name (None: only the pack's).

    Returns:
        The answer; its mentions are as the pack names them until ``settle``.

    Raises:
        InvalidInput: if the task does not fit the budget (the prompt's, or what the server's
            reported context leaves beside the answer).
        ConfigInvalid: for an unknown ``[llm] protocol``.
        LlmUnavailable: (E022) if the server fails or answers no text; nothing is written
            then.
    """
    client = LlmClient(settings.url, settings.timeout, settings.max_reply_bytes)
    protocol, props = client.detect(settings.protocol)
    notes = list(pack.notes)
    budget = settings.budget
    context = server_context(props)
    if context is not None and context - settings.max_tokens < budget:
        # The server cannot take more than its context: prompt and answer must fit in it.
        room = context - settings.max_tokens
        if room < _MIN_PROMPT_TOKENS:
            raise InvalidInput(f"the server's context of {context} tokens leaves no room for a "
                               f"prompt beside {settings.max_tokens} tokens for the answer",
                               hint="lower --max-tokens (or [llm] max_response_tokens)")
        budget = room
    prompt = compose_prompt(pack, budget)
    if budget < settings.budget and prompt.skipped:
        notes.append(f"{len(prompt.skipped)} items left out: the server's context is {context} "
                     f"tokens, {settings.max_tokens} of them kept for the answer")
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
                                 temperature=settings.temperature, extra=extra,
                                 served_model=served_model(props))
    if not completion.text.strip():  # nothing to print or keep: a failure like a bad reply
        path = "/completion" if protocol == "llama" else "/v1/chat/completions"
        raise LlmUnavailable(settings.url, f"reply from {path} has no text (an empty answer)",
                             hint="check the model and the prompt, or raise --max-tokens")
    if state is not None:
        try:
            state = cache.save_slot(client, state, store.root, prompt.prefix_hash,
                                    completion.tokens_prompt or prompt.tokens)
            saved = state.session_file is not None
        except LlmUnavailable as exc:  # the answer is in hand; only the cache is lost
            notes.append(f"prompt cache not saved: {exc.detail}")
            state = None
    # The slot record is local and true whatever becomes of the answer, so it is written
    # now, before the commit that a held lock or a full disk may still refuse.
    if state is not None:
        cache.store_state(store.root, settings.url, state)
    mentions = find_mentions(completion.text, pack, worktree)
    return Answer(completion, prompt, tuple(mentions), pack, None, restored, saved,
                  tuple(client.requests), tuple(notes))


def settle(db: Session, answer: Answer, server: str, *, commit: bool) -> Answer:
    """Resolve what ``answer`` mentions and, with ``commit``, keep it (§14.3).

    Called after the answer has been shown, so a failure here never loses it.

    Args:
        db: The open session.
        answer: What ``ask`` returned.
        server: The server URL (recorded with the answer).
        commit: Append the summary to the log and add the node, blob and edges.

    Returns:
        ``answer`` with its mentions under their indexed keys, and what was committed.

    Raises:
        IndexCorrupt, UnsafePath: if the code index cannot be opened.
        InvalidInput: if the narrative log cannot be appended to.
        LockConflict, StagingConflict, StorageIOError: if the answer cannot be committed.
    """
    mentions = resolve_mentions(db, list(answer.mentions))
    committed = None
    if commit:
        c = answer.completion
        committed = commit_response(db, text=c.text, pack=answer.pack, model=c.model,
                                    server=server, mentions=mentions)
    return replace(answer, mentions=tuple(mentions), committed=committed)
