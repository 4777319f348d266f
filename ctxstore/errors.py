"""The ``CtxError`` tree: every failure the library reports, with its spec code.

Codes E001-E010 come from spec 002 appendix A.4; E011 and later are ctx's own and
are listed in ``docs/errors.md``. Errors carry data (ids, paths, pids) and render
as one line. This module imports nothing from ctxstore and never prints.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CtxError",
    "StoreCorrupt",
    "ObjectNotFound",
    "HashMismatch",
    "InvalidEnvelope",
    "DeserializationFailed",
    "RefNotFound",
    "LockConflict",
    "IndexBusy",
    "IndexCorrupt",
    "IndexNotReady",
    "StagingConflict",
    "CommitOrphan",
    "BudgetExceeded",
    "OutOfMemory",
    "InvalidInput",
    "StoreNotFound",
    "StoreExists",
    "UnsupportedStoreVersion",
    "ConfigInvalid",
    "AmbiguousPrefix",
    "StorageIOError",
    "NothingToDo",
    "NodeNotFound",
    "UnsafePath",
    "GcRefused",
    "LlmUnavailable",
    "MemoryDamaged",
    "EmbedUnavailable",
    "SecretRefused",
    "UpgradeRequired",
]


class CtxError(Exception):
    """Base of every error ctx reports.

    Attributes:
        code: The spec error code, e.g. ``"E001"``.
        exit_code: The process exit status the CLI uses for this error.
        hint: An optional suggestion for the user, shown after the message.
    """

    code: ClassVar[str] = "E000"
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text.replace("\n", " ")


class StoreCorrupt(CtxError):
    """Committed store data is damaged: the remedy is repair, not rebuild."""

    exit_code = 3


def _oid_text(oid: bytes | str | None) -> str:
    if oid is None:
        return "?"
    return oid.hex() if isinstance(oid, bytes) else oid


class ObjectNotFound(CtxError):
    """E001: a referenced object does not exist."""

    code = "E001"

    def __init__(self, oid: bytes | str, *, referenced_by: str | None = None,
                 hint: str | None = None) -> None:
        where = f" (referenced by {referenced_by})" if referenced_by else ""
        super().__init__(f"object {_oid_text(oid)} not found{where}", hint=hint)
        self.oid = oid
        self.referenced_by = referenced_by


class HashMismatch(StoreCorrupt):
    """E002: an object's content does not hash to its name."""

    code = "E002"

    def __init__(self, oid: bytes | str, *, path: str, actual: bytes | None = None) -> None:
        got = f", content hashes to {actual.hex()}" if actual is not None else ""
        super().__init__(
            f"object {_oid_text(oid)} is corrupt: content does not match its id{got} ({path})",
            hint="restore the file from Git (git checkout -- <path>) or a clone",
        )
        self.oid = oid
        self.path = path
        self.actual = actual


class InvalidEnvelope(StoreCorrupt):
    """E003: an object file is not a well-formed CTXO1 envelope in one zstd frame."""

    code = "E003"

    def __init__(self, oid: bytes | str | None, *, path: str, detail: str) -> None:
        super().__init__(
            f"object {_oid_text(oid)} is corrupt: {detail} ({path})",
            hint="restore the file from Git (git checkout -- <path>) or a clone",
        )
        self.oid = oid
        self.path = path
        self.detail = detail


class DeserializationFailed(StoreCorrupt):
    """E004: a typed object cannot be decoded (bad msgpack, schema, or unknown type)."""

    code = "E004"

    def __init__(self, oid: bytes | str | None, *, detail: str, unsupported: bool = False) -> None:
        super().__init__(
            f"object {_oid_text(oid)} cannot be decoded: {detail}",
            hint="upgrade ctxstore" if unsupported else None,
        )
        self.oid = oid
        self.detail = detail
        self.unsupported = unsupported


class RefNotFound(CtxError):
    """E005: a pointer file is missing or unparseable."""

    code = "E005"

    def __init__(self, ref: str, *, detail: str = "does not exist", hint: str | None = None) -> None:
        super().__init__(f"pointer {ref} {detail}", hint=hint)
        self.ref = ref
        self.detail = detail


class LockConflict(CtxError):
    """E006: another process holds the store's writer lock."""

    code = "E006"

    def __init__(self, path: str, *, pid: int | None, waited: float) -> None:
        holder = f"process {pid}" if pid else "another process"
        super().__init__(
            f"store is locked by {holder} ({path}); gave up after {waited:.1f}s",
            hint="retry when that command has finished",
        )
        self.path = path
        self.pid = pid
        self.waited = waited


class IndexBusy(CtxError):
    """E006: another process kept the index's write lock longer than a command waits for it."""

    code = "E006"

    def __init__(self, path: str, *, waited: float) -> None:
        super().__init__(
            f"index is busy: another ctx process is writing {path} (a rebuild or a catch-up); "
            f"gave up after {waited:.0f}s",
            hint="retry when that command has finished",
        )
        self.path = path
        self.waited = waited


class IndexCorrupt(CtxError):
    """E007: the derived index is damaged; ``ctx rebuild`` recreates it."""

    code = "E007"

    def __init__(self, detail: str, *, in_code_index: bool = False) -> None:
        if in_code_index:  # this clone's code.sqlite: `ctx index` makes it from the work tree
            super().__init__(f"the code index is corrupt: {detail}",
                             hint="run `ctx index`, which makes the code index again")
        else:
            super().__init__(f"index is corrupt: {detail}", hint="run `ctx rebuild --full`")
        self.in_code_index = in_code_index


class IndexNotReady(CtxError):
    """E024: the index needs a full build that this caller may not run or wait for.

    Raised where a full build would hold the caller up (a hook: ``open_index(rebuild=False)``),
    or when another process's build outlasts the wait. The caller answers without the index.

    Attributes:
        reason: ``missing`` (never built here), ``outdated`` (an older ctx's schema),
            ``partial`` (an interrupted build) or ``building`` (another process builds it).
        pid: The building process, when ``reason`` is ``building`` and its pid is known.
    """

    code = "E024"

    _TEXT: ClassVar[dict[str, tuple[str, str]]] = {
        "missing": ("the index has not been built in this copy of the store", "run `ctx rebuild`"),
        "outdated": ("the index was built by an older ctx", "run `ctx rebuild`"),
        "partial": ("the index is only partly built", "run `ctx rebuild` to finish it"),
        "building": ("the index is being rebuilt", "retry when that rebuild has finished"),
    }

    def __init__(self, reason: str, *, detail: str | None = None, pid: int | None = None) -> None:
        what, hint = self._TEXT.get(reason, self._TEXT["missing"])
        if reason == "building":
            what += f" by process {pid}" if pid else " by another process"
        super().__init__(what + (f" ({detail})" if detail else ""), hint=hint)
        self.reason = reason
        self.pid = pid

    def note(self) -> str:
        """The one-line note a hook shows: what is wrong and what to do, e.g. ``...; run `ctx rebuild```."""
        return f"{self.message}; {self.hint}"


class StagingConflict(CtxError):
    """E008: the staging state is inconsistent with the requested operation."""

    code = "E008"


class CommitOrphan(StoreCorrupt):
    """E009: a commit names a parent (or a work commit its base) that does not exist."""

    code = "E009"

    def __init__(self, oid: bytes | str, *, child: bytes | str | None = None,
                 hint: str | None = None) -> None:
        of = f"a parent of {_oid_text(child)}" if child is not None else "a parent in the history"
        super().__init__(
            f"commit {_oid_text(oid)} ({of}) is missing: the history is broken",
            hint=hint or "restore .ctx/objects from Git (`git checkout -- .ctx/objects`; after "
                         "a cherry-pick, from the branch it came from: `git checkout BRANCH -- "
                         ".ctx/objects`) or another clone; `ctx debug verify` lists what is "
                         "damaged")
        self.oid = oid
        self.child = child


class BudgetExceeded(CtxError):
    """E010: an operation exceeds a configured budget."""

    code = "E010"


class OutOfMemory(BudgetExceeded):
    """E010: the process ran out of memory (``MemoryError``); nothing was written.

    An object larger than the memory the process may use, for example. Built from what was
    being done, so the one line names it instead of an internal error.
    """

    def __init__(self, doing: str, *, hint: str | None = None) -> None:
        super().__init__(f"out of memory while {doing}",
                         hint=hint or "raise the process's memory limit, or lower "
                                      "[storage] max_object_bytes / [ingestion] limits")
        self.doing = doing


class InvalidInput(CtxError):
    """E011: a value given on the command line or to the library is not valid."""

    code = "E011"


class StoreNotFound(CtxError):
    """E012: no ctx store where one was expected."""

    code = "E012"


class StoreExists(CtxError):
    """E013: ``ctx init`` found a store already there."""

    code = "E013"


class UnsupportedStoreVersion(CtxError):
    """E014: the store was written by a newer major version of ctx."""

    code = "E014"


class ConfigInvalid(CtxError):
    """E015: config.toml cannot be read or holds an invalid value."""

    code = "E015"


class AmbiguousPrefix(CtxError):
    """E016: an abbreviated id matches more than one object or node."""

    code = "E016"

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:10]) + (" ..." if len(candidates) > 10 else "")
        super().__init__(f"prefix {prefix!r} is ambiguous: {shown}",
                         hint="give more characters")
        self.prefix = prefix
        self.candidates = candidates


class StorageIOError(CtxError):
    """E017: the operating system refused a read or write (disk full, I/O error...)."""

    code = "E017"

    def __init__(self, path: str, *, op: str, error: OSError) -> None:
        super().__init__(f"{op} failed for {path}: {error.strerror or error}")
        self.path = path
        self.op = op
        self.errno = error.errno


class NothingToDo(CtxError):
    """E018: the requested operation has nothing to act on (e.g. no staging session)."""

    code = "E018"


class NodeNotFound(CtxError):
    """E019: no live knowledge node (or view) has this id or name."""

    code = "E019"


class UnsafePath(CtxError):
    """E020: a path ctx would follow is a symbolic link, a special file or leads out of its directory.

    A hostile clone can commit such paths under ``.ctx/``.
    """

    code = "E020"

    def __init__(self, path: str, *, detail: str, hint: str | None = None) -> None:
        super().__init__(f"refusing {path}: {detail}",
                         hint=hint or "remove or replace it (it may come from a cloned "
                                      "repository); ctx never follows links out of its store")
        self.path = path
        self.detail = detail


class GcRefused(StoreCorrupt):
    """E021: ``ctx gc`` found errors in the store and deleted nothing."""

    code = "E021"


class LlmUnavailable(CtxError):
    """E022: the LLM server could not be used (refused, timed out, an HTTP error, a bad reply).

    Raised by ``ctxstore.llm.client`` before anything is written.
    """

    code = "E022"

    def __init__(self, url: str, detail: str, *, hint: str | None = None) -> None:
        super().__init__(f"LLM server {url}: {detail}", hint=hint)
        self.url = url
        self.detail = detail


class MemoryDamaged(StoreCorrupt):
    """E023: the transcript memory ``.ctx/local/memory.sqlite`` is damaged.

    It is a primary store (transcripts it holds may be gone from disk), so it is named, never
    wiped: move the file aside and run ``ctx memory backfill`` to rebuild what transcripts remain.
    """

    code = "E023"


class EmbedUnavailable(CtxError):
    """E027: vector search is configured but its engine cannot be loaded.

    The optional extra (``pip install 'ctxstore[embed]'``: NumPy, ``tokenizers`` and the
    ``wordllama`` wheel with its weights) is not installed, or its files are damaged. Nothing
    was written.
    """

    code = "E027"


class SecretRefused(CtxError):
    """E025: an explicit write holds a secret (a credential, a private key) and was refused.

    Nothing was written. The message names the rule and the line, never the secret; the
    user's ``--allow-secret`` writes it anyway (docs/security.md).
    """

    code = "E025"

    def __init__(self, what: str, rule: str, line: int, detail: str) -> None:
        super().__init__(f"{what} holds a secret ({detail}): nothing was written",
                         hint="remove it, or pass --allow-secret if it must be stored "
                              "(it will reach Git with .ctx/)")
        self.what = what
        self.rule = rule
        self.line = line


class UpgradeRequired(CtxError):
    """E026: the store is of an older layout that a write needs upgraded first (``ctx upgrade``).

    Raised when a writer takes the lock of a store whose committed ``.ctx/STAGE`` (the layout
    before ``local/STAGE``) names staged work: that work came through Git and is nobody's
    session here, so it is folded into one canonical commit by ``ctx upgrade`` (or
    ``ctx rebuild``), an explicit step, never silently by the first write. Nothing is written.

    Attributes:
        path: The legacy pointer file.
    """

    code = "E026"

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} (the layout of an older ctx) names staged work that must be "
                         "folded into one commit before this store is written to",
                         hint="run `ctx upgrade` once (it folds that work and changes nothing else)")
        self.path = path
