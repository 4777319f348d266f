"""Git integration: driver registration at init, and the ``merge-ref`` merge driver.

``.ctx/.gitattributes`` (committed) gives pointer files Git's built-in ``union``
merge, so a plain Git merge of two branches that both moved ``refs/main`` or
``STAGE`` never stops with a conflict: the pointer then holds both ids, one per line,
and ctx resolves that into a merge commit on its next write. Where ``ctx init`` ran,
``.git/info/attributes`` (local to the clone, and of higher precedence) routes those
files through ``ctx merge-ref`` instead, which merges them without Git's line logic
(no conflict markers whatever the attributes say, fast-forward when one side is
unchanged, a sorted multi-head pointer when both moved).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from ctxstore import fsio, refs
from ctxstore.errors import CtxError, InvalidInput
from ctxstore.objects import ObjectId

__all__ = ["DRIVER_NAME", "GITATTRIBUTES", "GITIGNORE", "find_git_toplevel", "register_driver",
           "git_add", "MergeOutcome", "merge_pointer_files"]

DRIVER_NAME = "ctx-ref"
GITATTRIBUTES = """\
# Written by `ctx init`. Objects are binary: no line-ending filter may touch them.
objects/** binary
# Pointers: never converted; a Git merge keeps both sides (ctx then merges them).
HEAD -text
refs/** -text merge=union
STAGE -text merge=union
# Append-only narrative merges by union.
narrative/log/** merge=union
narrative/decisions.md merge=union
"""
GITIGNORE = """\
# Derived and per-clone state: rebuilt by `ctx rebuild`, never committed.
index/
DERIVED/
local/
LOCK
*.tmp
"""
_BEGIN = "# >>> ctx merge driver >>>"
_END = "# <<< ctx merge driver <<<"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def find_git_toplevel(path: Path) -> Path | None:
    """The root of the Git work tree containing ``path``, or None."""
    try:
        res = _git(["rev-parse", "--show-toplevel"], path)
    except FileNotFoundError:
        return None
    if res.returncode != 0:
        return None
    return Path(res.stdout.strip()).resolve()


def register_driver(ctx_dir: Path, toplevel: Path, ctx_command: str) -> list[str]:
    """Set up the ``ctx-ref`` merge driver for this store's pointer files. Idempotent.

    The driver is defined in ``.git/config`` and the pointer files are routed to it in
    ``.git/info/attributes``.

    Returns:
        What was changed, one line each.
    """
    done: list[str] = []
    driver = f"{ctx_command} merge-ref %O %A %B"
    for key, value in ((f"merge.{DRIVER_NAME}.name", "ctx pointer merge"),
                       (f"merge.{DRIVER_NAME}.driver", driver)):
        cur = _git(["config", "--local", "--get", key], toplevel)
        if cur.stdout.strip() != value:
            _git(["config", "--local", key, value], toplevel)
            done.append(f"git config {key}")
    rel = ctx_dir.resolve().relative_to(toplevel).as_posix()
    block = "\n".join([_BEGIN, f"/{rel}/refs/** merge={DRIVER_NAME}",
                       f"/{rel}/STAGE merge={DRIVER_NAME}", _END]) + "\n"
    res = _git(["rev-parse", "--git-path", "info/attributes"], toplevel)
    attrs = (toplevel / res.stdout.strip()).resolve()
    text = attrs.read_text(encoding="utf-8") if attrs.is_file() else ""
    if block not in text:
        if _BEGIN in text and _END in text:
            head, rest = text.split(_BEGIN, 1)
            text = head + rest.split(_END, 1)[1].lstrip("\n")
        if text and not text.endswith("\n"):
            text += "\n"
        fsio.ensure_dir(attrs.parent)
        fsio.replace_atomic(attrs, (text + block).encode())
        done.append(f"{attrs.relative_to(toplevel)}: pointer files use {DRIVER_NAME}")
    return done


def git_add(toplevel: Path, ctx_dir: Path) -> bool:
    """Stage the store's committed files in Git (``git add .ctx``)."""
    return _git(["add", "--", str(ctx_dir.resolve())], toplevel).returncode == 0


@dataclass(frozen=True)
class MergeOutcome:
    """Result of merging two pointer versions."""

    heads: tuple[ObjectId, ...]
    how: str  # "same", "ours", "theirs", "both"


def merge_pointer_files(base: Path, ours: Path, theirs: Path) -> MergeOutcome:
    """Three-way merge of pointer files, as Git's ``%O %A %B``; writes the result to ``ours``.

    One side unchanged: the other side wins. Both moved: the result names every head of
    both sides, one per line, sorted (the same bytes on every clone), and ctx's next write
    replaces it by a merge commit whose parents are those heads. The driver deliberately
    writes no merge commit object itself: Git records the merge from its index, so an
    object created in the work tree during the merge would be missing from that Git
    commit while the pointer in it named the object.

    Raises:
        InvalidInput: if a side is not a pointer (Git then reports a conflict).
    """
    def read(path: Path) -> bytes:  # bounded, regular files only: never a FIFO or a device
        return fsio.read_regular(path, refs.MAX_POINTER_BYTES)

    try:
        o_ptr = refs.parse_pointer("base", read(base)) if base.stat().st_size else None
        a_ptr = refs.parse_pointer("ours", read(ours))
        b_ptr = refs.parse_pointer("theirs", read(theirs))
    except CtxError as exc:
        raise InvalidInput(f"merge-ref: {exc.message}") from None
    except OSError as exc:
        raise InvalidInput(f"merge-ref: cannot read {exc.filename}") from None
    if a_ptr.heads == b_ptr.heads:
        outcome = MergeOutcome(a_ptr.heads, "same")
    elif o_ptr is not None and o_ptr.heads == a_ptr.heads:
        outcome = MergeOutcome(b_ptr.heads, "theirs")
    elif o_ptr is not None and o_ptr.heads == b_ptr.heads:
        outcome = MergeOutcome(a_ptr.heads, "ours")
    else:
        outcome = MergeOutcome(tuple(sorted(set(a_ptr.heads) | set(b_ptr.heads))), "both")
    fsio.replace_atomic(ours, b"".join(refs.render_pointer(h) for h in outcome.heads))
    return outcome
