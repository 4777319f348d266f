"""Git integration: driver registration at init, and the ``merge-ref`` merge driver.

``.ctx/.gitattributes`` (committed) gives pointer files Git's built-in ``union``
merge, so a plain Git merge of two branches that both moved ``refs/main`` or
``STAGE`` never stops with a conflict: the pointer then holds both ids, one per line,
and ctx resolves that into a merge commit on its next write. Where ``ctx init`` ran,
``.git/info/attributes`` (local to the clone, and of higher precedence) routes those
files through ``ctx merge-ref`` instead, which merges them without Git's line logic
(no conflict markers whatever the attributes say, fast-forward when one side is
unchanged, a sorted multi-head pointer when both moved).

The driver registration is clone-local, so a fresh clone lacks it: ``driver_warning``
says so once per clone (after the first command that succeeds on the store; remembered
in ``.ctx/local/``). ``stage_in_git`` is the ``git add .ctx``
that ``ctx init`` and ``ctx commit`` both do when Git tracks the store (docs/git.md).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore import fsio, refs
from ctxstore.errors import CtxError, InvalidInput
from ctxstore.ids import ObjectId, is_git_id
from ctxstore.records import dataclass

if TYPE_CHECKING:
    import subprocess

__all__ = ["DRIVER_NAME", "GITATTRIBUTES", "GITIGNORE", "find_git_toplevel", "in_git_work_tree",
           "register_driver", "git_add", "MergeOutcome", "merge_pointer_files", "is_tracked",
           "driver_registered", "driver_warning", "stage_in_git", "DRIVER_WARNED", "UNTRACKED",
           "head_ids", "head_position", "read_head_position", "branch_history", "index_file", "IndexFile"]

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
# Under .ctx/local/ (per clone, never committed): this clone was told the driver is missing.
DRIVER_WARNED = "merge-driver-warned"
# In local/: the store was not tracked by Git as of the index stamp it holds.
UNTRACKED = "git-untracked"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    import subprocess  # here: every command imports this module for its one-time notice

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


def head_ids(worktree: Path) -> tuple[str | None, str | None]:
    """The Git commit and tree ids of ``HEAD`` in the work tree at ``worktree``.

    Returns:
        ``(commit id, tree id)`` as Git writes them; ``(None, None)`` outside Git, before a
        first commit, or when Git cannot be run.
    """
    try:
        res = _git(["rev-parse", "HEAD", "HEAD^{tree}"], worktree)
    except (FileNotFoundError, OSError):
        return None, None
    lines = res.stdout.split()
    if res.returncode != 0 or len(lines) != 2 or not all(is_git_id(x) for x in lines):
        return None, None
    return lines[0], lines[1]


def head_position(worktree: Path) -> tuple[str | None, str | None]:
    """The branch checked out in the work tree at ``worktree`` and its ``HEAD`` commit.

    One ``git rev-parse``. A detached ``HEAD`` has its commit and no branch; before a first
    commit, outside Git, or when Git cannot be run, neither is known.

    Returns:
        ``(branch, commit id)``: the short branch name (``main``, ``feature/x``) or None,
        and the commit id as Git writes it or None.
    """
    if not in_git_work_tree(worktree):  # no process outside a work tree (the user store ~/.ctx)
        return None, None
    try:
        res = _git(["rev-parse", "HEAD", "--symbolic-full-name", "HEAD"], worktree)
    except (FileNotFoundError, OSError):
        return None, None
    lines = res.stdout.split()
    if res.returncode != 0 or len(lines) != 2 or not is_git_id(lines[0]):
        return None, None
    ref = lines[1]
    return (ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None), lines[0]


_MAX_REF_FILE = 4096
_MAX_PACKED_REFS = 64 << 20


def _git_dirs(dot_git: Path) -> tuple[Path, Path] | None:
    """The work tree's own Git directory (its ``HEAD``) and the common one (its refs).

    ``.git`` is a directory in a clone; in a linked worktree or a submodule it is a file
    ``gitdir: <path>``, and that directory's ``commondir`` names where the refs live.
    """
    try:
        if os.path.isdir(dot_git) and not os.path.islink(dot_git):
            own = dot_git
        else:
            text = fsio.read_regular(dot_git, _MAX_REF_FILE).decode("utf-8", "strict").strip()
            if not text.startswith("gitdir:"):
                return None
            own = dot_git.parent / text.removeprefix("gitdir:").strip()
        try:
            common = fsio.read_regular(own / "commondir", _MAX_REF_FILE).decode().strip()
        except FileNotFoundError:
            return own, own
        return own, own / common
    except (OSError, CtxError, UnicodeDecodeError, ValueError):
        return None


@dataclass(frozen=True)
class IndexFile:
    """Where the Git index of a work tree is, as ``index_file`` found it.

    Attributes:
        path: The index file (``.git/index``, or a linked worktree's own).
        split: Git splits it (``git update-index --split-index``): a copy elsewhere is not
            the whole index, since it names shared files beside it.
        untracked_cache: What the repository's own configuration says of
            ``core.untrackedCache`` (None: nothing; the text otherwise, e.g. ``false``).
    """

    path: Path
    split: bool
    untracked_cache: str | None


def index_file(worktree: Path) -> IndexFile | None:
    """The Git index of the work tree holding ``worktree``, found on disk (no process).

    ``.git`` is followed as ``read_head_position`` follows it (a linked worktree's or a
    submodule's ``gitdir:`` file included). None outside a work tree, or when ``.git`` or
    the repository's configuration cannot be read.
    """
    dot_git = _dot_git(worktree)
    dirs = _git_dirs(dot_git) if dot_git is not None else None
    if dirs is None:
        return None
    split = False
    for folder in dict.fromkeys(dirs):
        try:
            split = split or any(n.startswith("sharedindex.") for n in os.listdir(folder))
        except OSError:
            return None
    text = _git_config_text(dirs[1])
    if text is None:
        return None
    setting = None
    for line in text.splitlines():  # a plain scan: any mention of the key counts
        key, _, value = line.partition("=")
        if key.strip().lower() == "untrackedcache":
            setting = value.strip().lower() or "true"
    return IndexFile(dirs[0] / "index", split, setting)


def _ref_commit(common: Path, ref: str) -> str | None:
    """The commit ``ref`` (``refs/heads/x``) names: its loose file, else ``packed-refs``."""
    parts = ref.split("/")
    if not ref.startswith("refs/") or any(p in ("", ".", "..") for p in parts):
        return None
    try:
        value = fsio.read_regular(common / ref, _MAX_REF_FILE).decode().strip()
        return value if is_git_id(value) else None
    except FileNotFoundError:
        pass
    except (OSError, CtxError, UnicodeDecodeError):
        return None
    return _packed_ref(common / "packed-refs", ref)


def _packed_ref(path: Path, ref: str) -> str | None:
    """The commit ``ref``'s line in ``packed-refs`` names, read line by line up to that line.

    Git sorts the file by name, so a branch (``refs/heads/``) is met before the remotes and
    tags that make a large file large; at most ``_MAX_PACKED_REFS`` bytes are read.
    """
    suffix = b" " + ref.encode()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        read = 0
        for line in handle:
            read += len(line)
            if read > _MAX_PACKED_REFS:
                return None
            line = line.rstrip(b"\r\n")
            if line.endswith(suffix):
                value = line[:-len(suffix)].decode("ascii", "replace")
                return value if is_git_id(value) else None
    return None


def read_head_position(worktree: Path) -> tuple[str | None, str | None]:
    """``head_position`` read from the files under ``.git``, without starting a process.

    For the paths that run on every turn (transcript memory in the Stop hook): ``HEAD`` and
    the branch's ref file (or its line in ``packed-refs``) are a few small reads. Where those
    files do not answer (a ref store of another format, an unreadable file), Git is asked
    (``head_position``); outside a work tree neither is known.

    Returns:
        ``(branch, commit id)`` as ``head_position`` returns them.
    """
    dot_git = _dot_git(worktree)
    if dot_git is None:
        return None, None
    dirs = _git_dirs(dot_git)
    if dirs is None:
        return head_position(worktree)
    own, common = dirs
    try:
        head = fsio.read_regular(own / "HEAD", _MAX_REF_FILE).decode().strip()
    except (OSError, CtxError, UnicodeDecodeError):
        return head_position(worktree)
    if is_git_id(head):
        return None, head
    if not head.startswith("ref: "):
        return head_position(worktree)
    ref = head.removeprefix("ref: ").strip()
    commit = _ref_commit(common, ref)
    if commit is None and os.path.isdir(common / "reftable"):  # refs kept another way: Git knows
        return head_position(worktree)
    if commit is None:  # a branch before its first commit (as head_position says it)
        return None, None
    return (ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None), commit


def branch_history(worktree: Path, branch: str, limit: int = 20_000) -> list[tuple[int, str]]:
    """The commits of ``branch`` (first parents, newest first) with their committer times.

    One ``git log``; ``[]`` outside Git, for a branch the clone does not have, or a name
    that is not a plain branch name.

    Args:
        worktree: The work tree.
        branch: The short branch name (``main``).
        limit: The most commits read.

    Returns:
        ``(seconds since the epoch, commit id)``, newest first.
    """
    if (not branch or branch.startswith(("-", "/")) or ".." in branch or len(branch) > 255
            or any(c.isspace() or c in "~^:?*[\\\x7f" or ord(c) < 32 for c in branch)
            or not in_git_work_tree(worktree)):
        return []
    try:
        res = _git(["log", "--first-parent", f"--max-count={limit}", "--format=%ct %H",
                    f"refs/heads/{branch}", "--"], worktree)
    except (FileNotFoundError, OSError):
        return []
    if res.returncode != 0:
        return []
    out: list[tuple[int, str]] = []
    for line in res.stdout.splitlines():
        when, _, commit = line.partition(" ")
        if when.isdigit() and is_git_id(commit):
            out.append((int(when), commit))
    return out


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


def is_tracked(toplevel: Path, ctx_dir: Path) -> bool:
    """True if Git tracks the store (its ``HEAD`` is in Git's index).

    A store made with ``ctx init --no-git`` inside a work tree is not, until someone adds it.
    """
    head = ctx_dir.resolve() / "HEAD"
    try:
        res = _git(["ls-files", "--error-unmatch", "--", str(head)], toplevel)
    except FileNotFoundError:
        return False
    return res.returncode == 0


def driver_registered(ctx_dir: Path, toplevel: Path) -> bool:
    """True if this clone routes the store's pointer files to the ``ctx-ref`` merge driver.

    Both halves of ``register_driver`` are looked at: the driver in ``.git/config`` and the
    attribute block for this store in ``.git/info/attributes``.
    """
    if not _git(["config", "--local", "--get", f"merge.{DRIVER_NAME}.driver"],
                toplevel).stdout.strip():
        return False
    res = _git(["rev-parse", "--git-path", "info/attributes"], toplevel)
    attrs = (toplevel / res.stdout.strip()).resolve()
    try:
        text = attrs.read_text(encoding="utf-8") if attrs.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return False
    rel = ctx_dir.resolve().relative_to(toplevel).as_posix()
    return f"/{rel}/STAGE merge={DRIVER_NAME}" in text


def in_git_work_tree(folder: Path) -> bool:
    """Whether ``folder`` or a directory above it holds ``.git`` (a clone, a worktree or a submodule).

    Looked up on disk (``_dot_git``), so a missing ``git`` binary cannot make a clone look like
    the user's own directory; a ``.git`` that is a dangling link counts too.
    """
    return _dot_git(folder) is not None


def _dot_git(start: Path) -> Path | None:
    """The ``.git`` entry of the work tree holding ``start``; None outside a work tree."""
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if os.path.lexists(dot_git):
            return dot_git
    return None


def _git_config_text(dot_git: Path) -> str | None:
    """The text of ``.git/config``, read directly; None when it cannot be read."""
    try:
        return fsio.read_regular(dot_git / "config", 1 << 20).decode("utf-8", "replace")
    except (OSError, CtxError):
        return None


def _index_stamp(dot_git: Path) -> bytes:
    """What changes whenever Git's index does (size, mtime, inode of ``.git/index``)."""
    try:
        st = os.stat(dot_git / "index")
    except OSError:
        return b"no index\n"
    return f"untracked while .git/index is {st.st_size} {st.st_mtime_ns} {st.st_ino}\n".encode()


def _remember(ctx_dir: Path, name: str, text: bytes) -> None:
    marker = ctx_dir / "local" / name
    try:
        # By descriptor: a committed (or swapped-in) local/ link is never written through.
        with fsio.open_dir(ctx_dir) as store_dir:
            store_dir.replace_atomic(marker, text)
    except (OSError, CtxError):
        pass  # not remembered: the question is asked again next time, which is harmless


def driver_warning(ctx_dir: Path) -> str | None:
    """The one-time warning of a clone whose merge driver is not registered, or None.

    Said once per clone: the warning is remembered in ``local/`` (``DRIVER_WARNED``, never
    committed). A clone where the driver is registered is recognised from ``.git/config``
    read directly, and a store outside Git from finding no ``.git``: no Git process then.
    Only an unregistered clone asks Git whether it tracks the store, since a store made with
    ``--no-git`` is left alone; the answer "not tracked" is remembered (``UNTRACKED``)
    with the size, time and inode of Git's index, so the next commands ask again only
    after something was staged.

    Args:
        ctx_dir: The store's ``.ctx`` directory.

    Returns:
        The warning (without the ``ctx: warning:`` prefix), or None.
    """
    local = ctx_dir / "local"
    if os.path.lexists(local / DRIVER_WARNED):
        return None
    dot_git = _dot_git(ctx_dir.resolve().parent)
    if dot_git is None:
        return None
    # A ``.git`` file (a linked work tree, a submodule) is not read directly: Git is asked.
    plain = dot_git if dot_git.is_dir() and not dot_git.is_symlink() else None
    text = _git_config_text(plain) if plain else None
    if text is not None and f'[merge "{DRIVER_NAME}"]' in text:
        return None
    stamp = _index_stamp(plain) if plain else None
    if stamp is not None:
        try:
            if fsio.read_regular(local / UNTRACKED, 4096) == stamp:
                return None
        except (OSError, CtxError):
            pass
    top = find_git_toplevel(ctx_dir.parent)
    if top is None:
        return None
    if not is_tracked(top, ctx_dir):
        if stamp is not None:
            _remember(ctx_dir, UNTRACKED, stamp)
        return None
    if driver_registered(ctx_dir, top):
        return None
    _remember(ctx_dir, DRIVER_WARNED, b"warned: the merge driver is not registered in this clone\n")
    return (f"the ctx merge driver is not registered in this clone, so a Git merge of "
            f"{ctx_dir.name}/ pointers falls back to a plain union; run `ctx init` once in "
            f"{top} to register it (it changes nothing else)")


def stage_in_git(ctx_dir: Path) -> bool:
    """``git add .ctx`` after a ctx commit, as ``ctx init`` does, if Git tracks the store.

    Returns:
        True if the store was staged in Git; False outside a work tree, for a store Git does
        not track (``ctx init --no-git``), or when ``git add`` failed.
    """
    top = find_git_toplevel(ctx_dir.parent)
    if top is None or not is_tracked(top, ctx_dir):
        return False
    return git_add(top, ctx_dir)


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
