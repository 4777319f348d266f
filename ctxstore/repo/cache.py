"""``ObjectCache``: the decoded objects a ``Store`` keeps, least recently used first out."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxstore.model import TypedObject

__all__ = ["OBJECT_CACHE_SIZE", "ObjectCache"]

# Decoded objects a Store keeps: enough for the commit chain and records of a large sync,
# bounded so that a long-lived process (an MCP server) does not grow with the store.
OBJECT_CACHE_SIZE = 4096


class ObjectCache:
    """A least-recently-used map of object id to decoded object, holding at most ``capacity`` entries.

    Objects are immutable, so an entry is never stale.
    """

    def __init__(self, capacity: int) -> None:
        """Args: capacity: The most entries kept (at least 1)."""
        self.capacity = max(1, capacity)
        self._items: OrderedDict[bytes, TypedObject] = OrderedDict()

    def get(self, oid: bytes) -> TypedObject | None:
        """The cached object (now the most recently used), or None."""
        obj = self._items.get(oid)
        if obj is not None:
            self._items.move_to_end(oid)
        return obj

    def __setitem__(self, oid: bytes, obj: TypedObject) -> None:
        self._items[oid] = obj
        self._items.move_to_end(oid)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def __contains__(self, oid: object) -> bool:
        return oid in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Forget every entry."""
        self._items.clear()
