"""The operations layer: every knowledge operation a front end offers, as a library call.

One module per concern: ``nodes`` (add, update, delete, tag, untag, supersede, summarize,
archive/forget), ``edges`` (link, unlink), ``views`` (saved views), ``tasks`` (task start
and end), ``remember`` (idempotent agent writes by hook key), ``exchange`` (export and
import), ``sources`` (a file ingested as a ``source`` node) and ``status`` (what a store
holds). Front ends (``cli/``, ``claude/``, later ``mcp/``) call one function each and keep
only parsing and rendering; no knowledge behaviour lives in an adapter.

The functions take a ``Store`` (the handle every front end has today) and explicit
arguments, and return result records. They must not run SQL (reads go through
``ctxstore.index`` and ``ctxstore.query``), print, read the environment, or know about
hook state (``claude/state/``). This package imports none of its modules eagerly, so
importing one (a hook imports ``nodes``) does not load the others.
"""

from __future__ import annotations

__all__: list[str] = []
