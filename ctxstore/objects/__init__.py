"""Content-addressed objects: ids, the CTXO1 envelope, and the object stores.

An object's canonical bytes are ``b"CTXO1" + kind + u64le(len(payload)) + payload``;
its id is the BLAKE3 hash of those bytes. ``ObjectStore`` is the protocol the rest of
the library programs against (write, read, exists, iter_ids, resolve_prefix); it has
two implementations, checked by one contract suite (``tests/contracts``):

- ``LooseObjectStore``: one zstd frame of the canonical bytes per file at
  ``objects/<2 hex>/<64 hex>``. Every read decompresses with a cap, rejects trailing
  bytes, re-hashes and checks the envelope, so corruption is always detected and named.
  Memory is bounded by what is declared before anything is allocated (a decompression
  bomb, RELIABILITY.md): the frame's content size and the envelope's length are checked
  against the cap of the read (the store's ``max_object_bytes``, or less: a commit is
  small), and an object over ``RETAIN_BYTES`` is hashed as it decompresses, in chunks,
  before its bytes are kept, so one that does not hash to its name never costs its size.
  File paths (``path_for``, ``iter_tmp_files``) exist only here: gc, verify and a
  transaction's durability barrier work on files, so they need the loose store.
- ``LayeredObjectStore``: the store's two loose areas read as one: the committed
  canonical objects (``.ctx/objects``) over this clone's staging objects
  (``.ctx/local/work/objects``, never committed). New objects go to the staging area;
  ``promote`` copies one to the canonical area when a canonical commit reaches it
  (``ctxstore.repo.Transaction``), so Git only ever sees what a canonical commit names.
- ``MemoryObjectStore``: a dict, for tests and scratch work; same ids, same errors,
  same size cap, no files.

Its modules: ``envelope`` (the canonical bytes, ids, ``StoredObject``), ``protocol``
(``ObjectStore`` and prefix resolution), ``loose``, ``layered`` and ``memory`` (the stores).
The names below are re-exported for the rest of the library.

This package stores bytes; it knows nothing of typed payloads (see ``ctxstore.model``)
or of pointers (see ``ctxstore.refs``), and it never imports a layer above it.
"""

from __future__ import annotations

from ctxstore.ids import ObjectId, parse_object_id
from ctxstore.objects.envelope import (
    DEFAULT_MAX_OBJECT_BYTES,
    ENVELOPE_MAGIC,
    HEADER_SIZE,
    KIND_BLOB,
    KIND_TYPED,
    RETAIN_BYTES,
    StoredObject,
    canonical_bytes,
    object_id_of,
    parse_envelope,
)
from ctxstore.objects.layered import LayeredObjectStore
from ctxstore.objects.loose import LooseObjectStore
from ctxstore.objects.memory import MemoryObjectStore
from ctxstore.objects.protocol import ObjectStore

__all__ = [
    "ObjectId",
    "ENVELOPE_MAGIC",
    "KIND_BLOB",
    "KIND_TYPED",
    "HEADER_SIZE",
    "DEFAULT_MAX_OBJECT_BYTES",
    "parse_object_id",
    "canonical_bytes",
    "object_id_of",
    "parse_envelope",
    "ObjectStore",
    "LooseObjectStore",
    "LayeredObjectStore",
    "MemoryObjectStore",
    "RETAIN_BYTES",
    "StoredObject",
]
