"""Moved to ``ctxstore.knowledge.status`` (issue 12); this module re-exports it.

It keeps the callers not yet rewired working; the lead deletes it once they are.
"""

from __future__ import annotations

from ctxstore.knowledge.status import StoreStatus, store_status
from ctxstore.model.vocab import TIER_ORDER

__all__ = ["StoreStatus", "store_status", "TIER_ORDER"]
