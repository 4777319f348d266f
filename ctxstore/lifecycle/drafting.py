"""Consolidation drafts by an LLM (spec 003: "merge if redundant, preserve unique details").

With ``[llm]`` configured, ``ctx consolidate --apply ID`` asks the server (``ctxstore.llm``)
for the merged text of each proposal before anything is written: every request is made
first, so a server that fails or is slow leaves the store as it was. Without a server the
mechanical draft of ``lifecycle.consolidate`` is used, unchanged. Which server, and whether
a cloned repository may choose it, is ``llm.client.resolve_server`` (docs/llm.md); this
module only builds the prompt and reads the answer. No SQL, no printing, no writes.
"""

from __future__ import annotations

import sqlite3

from ctxstore.errors import LlmUnavailable
from ctxstore.index.read import find_node
from ctxstore.lifecycle.consolidate import Proposal
from ctxstore.llm.ask import Settings
from ctxstore.llm.client import LlmClient
from ctxstore.records import dataclass

__all__ = ["SYSTEM", "Drafts", "draft_prompt", "llm_drafts"]

SYSTEM = ("You merge redundant project memories into one memory. Keep every unique detail "
          "(names, numbers, reasons, caveats); drop repetition. Answer with the merged memory "
          "text only: no preamble, no heading, no list of sources.\n\n")
# One source's text in the prompt is cut here: a draft needs the gist, not megabytes.
_SOURCE_CHARS = 8_000


@dataclass(frozen=True, slots=True)
class Drafts:
    """Merged texts an LLM wrote.

    Attributes:
        texts: The merged text by full proposal id.
        model: The model that answered (as the server names it).
        requests: ``(method, path)`` of every request sent.
    """

    texts: dict[str, str]
    model: str
    requests: tuple[tuple[str, str], ...]


def draft_prompt(proposal: Proposal, sources: list[tuple[str, str]]) -> str:
    """The prompt asking for one proposal's merged text.

    Args:
        proposal: The proposal.
        sources: ``(node id, content)`` of its members, oldest first.

    Returns:
        The prompt (after the system prefix).
    """
    parts = [f"## Memories to merge ({len(sources)} {proposal.type} nodes)\n"]
    for i, (node_id, text) in enumerate(sources, 1):
        body = text.strip()[:_SOURCE_CHARS]
        parts.append(f"### Memory {i} ({node_id})\n\n{body}\n")
    parts.append("## Merged memory\n")
    return "\n".join(parts)


def llm_drafts(conn: sqlite3.Connection, proposals: list[Proposal], settings: Settings) -> Drafts:
    """Ask the server for the merged text of each proposal, one request per proposal.

    Args:
        conn: A synced index connection (the members' text is read from it).
        proposals: The proposals to draft.
        settings: The server and how to call it (``llm.ask.Settings``; ``budget`` unused).

    Returns:
        The drafts.

    Raises:
        LlmUnavailable: (E022) if the server is down, slow, answers badly or with no text.
        ConfigInvalid: (E015) for an unknown ``[llm] protocol``.
    """
    client = LlmClient(settings.url, settings.timeout, settings.max_reply_bytes)
    protocol, _ = client.detect(settings.protocol)
    texts: dict[str, str] = {}
    model = settings.model
    for p in proposals:
        nodes = [n for m in p.members if (n := find_node(conn, m)) is not None]
        nodes.sort(key=lambda n: (n.created_at, n.id))
        done = client.complete(protocol, system=SYSTEM,
                               prompt=draft_prompt(p, [(n.id, n.content) for n in nodes]),
                               model=settings.model, max_tokens=settings.max_tokens,
                               temperature=settings.temperature)
        if not done.text.strip():
            raise LlmUnavailable(settings.url, "answered with empty text",
                                 hint="pass --content TEXT to write the merged text yourself")
        texts[p.id] = done.text.strip()
        model = done.model
    return Drafts(texts, model, tuple(client.requests))
