"""The store handle: discovery, opening, the writer lock, transactions and history.

A ``Transaction`` is the only way objects become reachable: it writes objects (temp +
rename, no fsync), then issues one durability barrier for all of them, then moves
pointers by compare-and-swap under the lock. So no pointer ever names an object that
is not durable, and a transaction of N objects pays one barrier, not N fsyncs.

New objects land in this clone's staging area (``.ctx/local/work/objects``, never
committed). A transaction that moves a canonical ref (``refs/*``) first *promotes* what
the new commit reaches to the committed area (``.ctx/objects``), inside the same
barrier: Git sees canonical commits and what they name, never the per-write work of a
session, and no committed object refers to one that exists only in a clone's staging
area (docs/git.md, "Where objects live").

A writer refuses a store of an older layout whose committed ``.ctx/STAGE`` names staged
work (``UpgradeRequired``): folding that work is the explicit ``ctx upgrade``, never a side
effect of the first write. This package imports nothing above the storage layer.

Its modules: ``store`` (the ``Store`` handle, ``open_store``), ``transaction``
(``Transaction``) and ``caps`` (how large a commit or a change batch may be). The names below
are re-exported for the rest of the library.
"""

from __future__ import annotations

from ctxstore.clock import now_ms  # re-exported: the clock owns the wall clock
from ctxstore.discovery import CTX_DIRNAME, STORE_DIRS, STORE_FILES, check_layout, discover_store
from ctxstore.repo.cache import OBJECT_CACHE_SIZE, ObjectCache
from ctxstore.repo.caps import MAX_BATCH_BYTES, MAX_COMMIT_BYTES, typed_cap
from ctxstore.repo.store import (
    MAIN_REF,
    STAGE_RECOVER_HINT,
    STAGE_TYPES,
    STAGING_OBJECTS,
    Store,
    open_store,
    pointer_target_missing,
    type_name,
)
from ctxstore.repo.transaction import Transaction

__all__ = [
    "CTX_DIRNAME",
    "MAIN_REF",
    "STAGE_TYPES",
    "type_name",
    "Store",
    "ObjectCache",
    "OBJECT_CACHE_SIZE",
    "Transaction",
    "STORE_DIRS",
    "STORE_FILES",
    "check_layout",
    "discover_store",
    "open_store",
    "now_ms",
    "STAGE_RECOVER_HINT",
    "STAGING_OBJECTS",
    "pointer_target_missing",
    "MAX_BATCH_BYTES",
    "MAX_COMMIT_BYTES",
    "typed_cap",
]
