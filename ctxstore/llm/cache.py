"""llama.cpp prompt-cache reuse across ``ctx llm`` calls (spec 002 §14.4).

Owns the per-clone record of what each server's slot holds, in
``.ctx/local/llm_state.json`` (never committed: ``local/`` is ignored), and the plan of a
call from it. Every llama.cpp request asks for ``cache_prompt`` on a fixed slot
(``id_slot``), so the server keeps the prompt's KV cache between calls. When the server
has slots (``/props`` reports ``total_slots``) the slot is also saved to a file after each
answer (``POST /slots/{id}?action=save``; the server writes it in its ``--slot-save-path``),
and restored before the next call whose prompt starts with the same prefix (§14.4 steps
2-3); after another prompt the file is left alone and the slot starts fresh (step 4). A
server that refuses slot actions is remembered, and not asked again.

The record is a cache: when it is missing, damaged or unreadable, ctx starts fresh. It is
written through ``fsio`` only after an answer, never after a failure.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from ctxstore import fsio
from ctxstore.errors import LlmUnavailable, StorageIOError, UnsafePath
from ctxstore.llm.client import LlmClient
from ctxstore.model.codec import JsonValue
from ctxstore.records import dataclass

__all__ = ["STATE_FILE", "SlotState", "load_state", "plan_extra", "restore_slot", "save_slot",
           "session_file_name", "slots_supported", "store_state"]

STATE_FILE = "llm_state.json"
_MAX_STATE_BYTES = 1 << 20
_SLOT = 0  # one slot per clone: ctx asks one question at a time


@dataclass(frozen=True, slots=True)
class SlotState:
    """What ctx last left in a server's slot (spec §14.4 ``LlmSessionState``).

    Attributes:
        slot: The slot id used.
        session_file: The file name the slot was saved as, or None.
        cached_prefix_hash: The prefix hash of the prompt it holds (``Prompt.prefix_hash``).
        cached_token_count: The prompt tokens the server reported for it.
        slot_actions: False once the server refused a slot save or restore.
    """

    slot: int = _SLOT
    session_file: str | None = None
    cached_prefix_hash: str | None = None
    cached_token_count: int = 0
    slot_actions: bool = True


def _path(store_root: Path) -> Path:
    return store_root / "local" / STATE_FILE


def read_member(path: Path, limit: int, member: str) -> dict[str, JsonValue]:
    """The object ``member`` of the JSON file ``path`` under ``.ctx/local`` (a cache's state).

    Empty when the file is missing, larger than ``limit``, not a regular file, damaged or not
    of that shape: a cache starts fresh rather than fail.
    """
    try:
        raw = fsio.read_regular(path, limit)
        data = json.loads(raw) if len(raw) <= limit else None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError, UnsafePath):
        return {}
    found = data.get(member) if isinstance(data, dict) else None
    return found if isinstance(found, dict) else {}


def _read_all(store_root: Path) -> dict[str, JsonValue]:
    return read_member(_path(store_root), _MAX_STATE_BYTES, "servers")


def load_state(store_root: Path, url: str) -> SlotState:
    """The record for server ``url`` (a fresh one when there is none or it is damaged).

    Args:
        store_root: The store's ``.ctx`` directory.
        url: The server's base URL.

    Returns:
        The slot state.
    """
    entry = _read_all(store_root).get(url)
    if not isinstance(entry, dict):
        return SlotState()
    slot, tokens = entry.get("slot"), entry.get("cached_token_count")
    name, prefix = entry.get("session_file"), entry.get("cached_prefix_hash")
    return SlotState(slot=slot if isinstance(slot, int) and 0 <= slot < 1024 else _SLOT,
                     session_file=name if isinstance(name, str) and _safe_name(name) else None,
                     cached_prefix_hash=prefix if isinstance(prefix, str) else None,
                     cached_token_count=tokens if isinstance(tokens, int) else 0,
                     slot_actions=entry.get("slot_actions") is not False)


def store_state(store_root: Path, url: str, state: SlotState) -> None:
    """Record ``state`` for server ``url`` (atomically; other servers' records kept).

    Raises:
        StorageIOError: (E017) if it cannot be written.
        UnsafePath: (E020) if ``.ctx/local`` is not a real directory (or the record is a
            link), even one swapped in while it is written.
    """
    servers = _read_all(store_root)
    servers[url] = {"slot": state.slot, "session_file": state.session_file,
                    "cached_prefix_hash": state.cached_prefix_hash,
                    "cached_token_count": state.cached_token_count,
                    "slot_actions": state.slot_actions}
    path = _path(store_root)
    data = json.dumps({"version": 1, "servers": servers}, indent=1, sort_keys=True).encode()
    try:
        # By descriptor (PS-10): a ``local/`` swapped for a link is refused, never followed.
        with fsio.open_dir(store_root) as store_dir:
            store_dir.replace_atomic(path, data + b"\n")
    except OSError as exc:
        raise StorageIOError(str(path), op="write", error=exc) from None


def _safe_name(name: str) -> bool:
    """A plain file name (the server joins it to its slot directory)."""
    return bool(name) and len(name) < 200 and all(c.isalnum() or c in "-_." for c in name) \
        and not name.startswith(".")


def session_file_name(store_root: Path, slot: int) -> str:
    """The slot file name for this clone: stable, and distinct per store and slot."""
    digest = hashlib.sha256(str(store_root.resolve()).encode()).hexdigest()[:16]
    return f"ctx-{digest}-slot{slot}.bin"


def slots_supported(props: dict[str, JsonValue] | None) -> bool:
    """Whether llama.cpp's ``/props`` says the server has slots."""
    total = props.get("total_slots") if props else None
    return isinstance(total, int) and not isinstance(total, bool) and total > 0


def plan_extra(state: SlotState, *, slots: bool) -> dict[str, JsonValue]:
    """The cache fields of a llama.cpp ``/completion`` request.

    Args:
        state: What the slot last held.
        slots: Whether the server has slots (then the same slot is asked for every time).

    Returns:
        ``cache_prompt`` always, ``id_slot`` with slots.
    """
    extra: dict[str, JsonValue] = {"cache_prompt": True}
    if slots:
        extra["id_slot"] = state.slot
    return extra


def _slot_action(client: LlmClient, state: SlotState, action: str, name: str) -> bool:
    """``POST /slots/{id}?action=...``; False when the server refuses (no save path, old server)."""
    try:
        client.request("POST", f"/slots/{state.slot}?action={action}", {"filename": name})
    except LlmUnavailable as exc:
        if exc.detail.startswith(("HTTP ", "reply from")):
            return False
        raise
    return True


def restore_slot(client: LlmClient, state: SlotState, prefix_hash: str) -> tuple[SlotState, bool]:
    """Restore the saved slot before a call whose prompt prefix matches (§14.4 steps 2-3).

    Args:
        client: The server's client.
        state: What the slot last held.
        prefix_hash: The prefix hash of the prompt about to be sent.

    Returns:
        The state (without its file if the server refused) and whether it was restored.

    Raises:
        LlmUnavailable: (E022) if the server cannot be reached.
    """
    if not (state.slot_actions and state.session_file and state.cached_prefix_hash == prefix_hash):
        return state, False
    if _slot_action(client, state, "restore", state.session_file):
        return state, True
    # The file may be gone (a server restarted with another --slot-save-path): start fresh;
    # whether the server has slot actions at all is learnt from the save after the answer.
    return replace(state, session_file=None), False


def save_slot(client: LlmClient, state: SlotState, store_root: Path, prefix_hash: str,
              tokens: int) -> SlotState:
    """Save the slot after an answer and return the state to record (§14.4 step 1).

    Args:
        client: The server's client.
        state: The state before the call.
        store_root: The store's ``.ctx`` directory (names the slot file).
        prefix_hash: The prefix hash of the prompt just answered.
        tokens: The prompt tokens the server reported (or estimated).

    Returns:
        The new state: the prompt's prefix, and the file when the save worked.

    Raises:
        LlmUnavailable: (E022) if the server cannot be reached.
    """
    name = session_file_name(store_root, state.slot)
    saved = state.slot_actions and _slot_action(client, state, "save", name)
    return replace(state, session_file=name if saved else None, cached_prefix_hash=prefix_hash,
                   cached_token_count=tokens, slot_actions=state.slot_actions and saved)
