"""``ctx llm``: send a prompt pack to a local LLM server and keep what it says (spec 002 §14).

``client`` speaks HTTP (llama.cpp ``/completion``, OpenAI ``/v1/chat/completions``),
``prompt`` composes the prompt from a pack (§14.2), ``respond`` finds what the answer
mentions and commits it (§14.3), ``cache`` reuses llama.cpp's prompt cache (§14.4),
``ask`` runs one call end to end. Nothing here reads the environment or prints.
"""

from __future__ import annotations

__all__: list[str] = []
