"""HyDE (spec 004 §5.1): the LLM drafts a hypothetical answer, and its vector joins the query's.

Used by ``ctx memory search`` (turns and ideas) and ``ctx search`` (knowledge nodes, with
``[retrieval] vectors = "on"``), each when its vectors are on.

A question and the passage that answers it often share few words and little meaning ("what
injury did Evan suffer" against "twisted my knee"); a drafted answer is worded like the
passage. With ``[llm]`` configured (``llm.ask.choose_server``: not the built-in default) and
vectors on, ``ctx memory search`` asks the server once per query for a short passage
(``SYSTEM``, at most ``MAX_TOKENS``), embeds it with the query's model, and searches with the
sum of the two vectors at unit length (``HydeEmbedder``): the query's own meaning is kept, the
draft's is added. Drafts are kept in ``.ctx/local/hyde.json`` (per clone, never committed; at
most ``MAX_ENTRIES``, the oldest dropped), keyed by server, model and query, so a query asked
again sends nothing. A server that fails, is slow or answers no text costs nothing but the
wait: the plain query's vector is used and the failure is recorded (``Drafter.failures``) for
the command to show. The hooks never draft. No printing here, no environment read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore import fsio
from ctxstore.errors import LlmUnavailable, StorageIOError, UnsafePath
from ctxstore.llm.client import LlmClient

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ctxstore.config import Config
    from ctxstore.embed.engine import Embedder
    from ctxstore.llm.ask import Settings
    from ctxstore.llm.client import ServerChoice

__all__ = ["SYSTEM", "MAX_TOKENS", "MAX_SECONDS", "CACHE_FILE", "MAX_ENTRIES", "MAX_DRAFT_CHARS",
           "Drafter", "HydeEmbedder", "draft_prompt", "memory_drafter", "node_embedder"]

SYSTEM = ("You help search a record of past conversations. Write one short passage, as a person "
          "in such a conversation might have said it, that answers the question. Invent "
          "plausible details; no preamble, no caveats, one paragraph.\n\n")
MAX_TOKENS = 128
"""The longest draft asked for (tokens)."""
MAX_SECONDS = 30.0
"""The longest a draft is waited for (``[llm] timeout_seconds`` when shorter): a search that
waits longer is worse than a search without it."""
CACHE_FILE = "hyde.json"
MAX_ENTRIES = 512
"""Drafts kept in the cache file."""
MAX_DRAFT_CHARS = 2000
"""Characters of a draft that are kept and embedded."""
_MAX_CACHE_BYTES = 4 << 20


def memory_drafter(store_root: Path, config: Config, choice: ServerChoice, *,
                   total_budget: int, section: str = "memory") -> Drafter | None:
    """The drafter of a search when HyDE applies, else None.

    It applies when ``[section] vectors = "on"`` (``memory``: ``ctx memory search``;
    ``retrieval``: ``ctx search``'s nodes) and an LLM server is configured (``choice`` from
    ``llm.ask.choose_server``, not the built-in default).

    Raises:
        InvalidInput: if the ``[llm]`` settings leave no room for the draft (``call_settings``).
    """
    if config.get(section, "vectors") != "on" or choice.source == "default":
        return None
    from dataclasses import replace

    from ctxstore.llm.ask import call_settings

    settings = call_settings(config, choice.url, total_budget=total_budget, max_tokens=MAX_TOKENS)
    return Drafter(store_root, replace(settings, timeout=min(settings.timeout, MAX_SECONDS)))


def node_embedder(config: Config, drafter: Drafter) -> HydeEmbedder | None:
    """The query engine of ``ctx search``'s node vectors with HyDE (None: vectors off).

    Raises:
        EmbedUnavailable: (E027) vectors are on but the extra is not installed.
    """
    from ctxstore.search.node_vectors import node_engine

    engine = node_engine(config)
    return None if engine is None else HydeEmbedder(engine, drafter)


def draft_prompt(question: str) -> str:
    """The prompt (after ``SYSTEM``) asking for the passage that answers ``question``."""
    return f"Question: {question.strip()}\n\nPassage:"


class Drafter:
    """Hypothetical answers from the configured server, cached per clone.

    Attributes:
        drafts: The drafts used, in order (cached or asked for).
        notes: What went wrong after a draft was had (it could not be cached).
        failures: Why a draft could not be had, one line per failed query (empty: none).
        requests: ``(method, path)`` of every request sent.
    """

    def __init__(self, store_root: Path, settings: Settings) -> None:
        self.store_root = store_root
        self.settings = settings
        self.drafts: list[str] = []
        self.notes: list[str] = []
        self.failures: list[str] = []
        self.requests: list[tuple[str, str]] = []

    def _key(self, question: str) -> str:
        raw = "\0".join((self.settings.url, self.settings.model, question)).encode()
        return hashlib.sha256(raw).hexdigest()

    def draft(self, question: str) -> str | None:
        """The passage for ``question``: cached, else asked for; None when it cannot be had."""
        key = self._key(question)
        cached = _read(self.store_root).get(key)
        if isinstance(cached, str) and cached:
            self.drafts.append(cached)
            return cached
        s = self.settings
        client = LlmClient(s.url, s.timeout, s.max_reply_bytes)
        try:
            protocol, _ = client.detect(s.protocol)
            done = client.complete(protocol, system=SYSTEM, prompt=draft_prompt(question),
                                   model=s.model, max_tokens=min(s.max_tokens, MAX_TOKENS),
                                   temperature=0.0)
        except LlmUnavailable as exc:
            self.failures.append(str(exc))
            return None
        finally:
            self.requests.extend(client.requests)
        text = done.text.strip()[:MAX_DRAFT_CHARS]
        if not text:
            self.failures.append(f"the LLM server at {s.url} answered with empty text")
            return None
        try:
            _write(self.store_root, key, text)
        except (StorageIOError, UnsafePath) as exc:  # the draft is in hand; only the cache is lost
            self.notes.append(f"draft not cached: {exc}")
        self.drafts.append(text)
        return text


class HydeEmbedder:
    """An ``Embedder`` whose query vector is the query's plus its drafted answer's (unit length).

    Stored texts are embedded by the wrapped engine unchanged, so stored vectors are shared.
    """

    def __init__(self, inner: Embedder, drafter: Drafter) -> None:
        self.inner = inner
        self.drafter = drafter
        self.model_id = inner.model_id
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """As the wrapped engine."""
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The query's vector plus its draft's, at unit length (the query's alone without one)."""
        import numpy as np

        query = self.inner.embed_query(text)
        draft = self.drafter.draft(text)
        if not draft:
            return query
        joined = query + self.inner.embed([draft])[0]
        norm = float(np.linalg.norm(joined))
        return query if norm == 0 else (joined / norm).astype(np.float32)


def _path(store_root: Path) -> Path:
    return store_root / "local" / CACHE_FILE


def _read(store_root: Path) -> dict[str, object]:
    """The cached drafts (empty when missing, damaged or unsafe: a cache starts fresh)."""
    from ctxstore.llm.cache import read_member

    return dict(read_member(_path(store_root), _MAX_CACHE_BYTES, "drafts"))


def _write(store_root: Path, key: str, text: str) -> None:
    """Add a draft to the cache (atomically; the oldest dropped past ``MAX_ENTRIES``).

    Raises:
        StorageIOError: (E017) if it cannot be written.
        UnsafePath: (E020) if ``.ctx/local`` is not a real directory.
    """
    drafts = {k: v for k, v in _read(store_root).items() if isinstance(v, str) and k != key}
    drafts[key] = text
    kept = dict(list(drafts.items())[-MAX_ENTRIES:])
    path = _path(store_root)
    data = json.dumps({"version": 1, "drafts": kept}, indent=0).encode()
    try:
        with fsio.open_dir(store_root) as store_dir:
            store_dir.replace_atomic(path, data + b"\n")
    except OSError as exc:
        raise StorageIOError(str(path), op="write", error=exc) from None
