"""Moved to ``ctxstore.knowledge.views`` (issue 12); this module re-exports it.

It keeps the callers not yet rewired working; the lead deletes it once they are.
"""

from __future__ import annotations

from ctxstore.knowledge.views import (
    DEFAULT_BUDGET,
    DEFAULT_VIEW_NAME,
    DEFAULT_VIEW_QUERY,
    create_view,
    delete_view,
    get_view,
    list_views,
    update_view,
    validate_view_name,
)

__all__ = ["DEFAULT_VIEW_NAME", "DEFAULT_VIEW_QUERY", "DEFAULT_BUDGET", "validate_view_name",
           "get_view", "list_views", "create_view", "update_view", "delete_view"]
