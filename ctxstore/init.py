"""``ctx init``: the ``.ctx/`` layout, config, first commit, Git glue (spec 002 §13.2.1, DESIGN §2).

``init`` creates the layout, config.toml with every default, ``.gitignore`` and
``.gitattributes``, narrative/README.md from its template, and an initial commit with
an empty tree. Inside a Git work tree it also registers the pointer merge driver and
stages ``.ctx/`` (unless ``git=False``). In a clone, where the store is committed but
the driver registration (clone-local) is not, it only registers the driver. ``force``
re-initialises an existing store's layout files; it never deletes objects or history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ctxstore import fsio, refs
from ctxstore import git as git_mod
from ctxstore.config import render_default_config
from ctxstore.errors import CtxError, StoreExists, UnsafePath
from ctxstore.model import Commit, Tree
from ctxstore.narrative.markdown import render_template
from ctxstore.objects import ObjectId
from ctxstore.repo import MAIN_REF, STAGE_TYPES, check_layout, now_ms, open_store

__all__ = ["InitResult", "init_store", "LAYOUT_DIRS"]

LAYOUT_DIRS = ("objects", "refs", "narrative", "narrative/log", "narrative/tasks", "index",
               "DERIVED", "local")


@dataclass
class InitResult:
    """What ``init_store`` created."""

    ctx_dir: Path
    commit: ObjectId | None
    reinitialized: bool
    git_toplevel: Path | None = None
    git_actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _write_if(path: Path, data: str, *, overwrite: bool) -> bool:
    if path.exists() and not overwrite:
        return False
    fsio.replace_atomic(path, data.encode("utf-8"))
    return True


def init_store(ctx_dir: Path, *, force: bool = False, git: bool = True,
               ctx_command: str = "ctx") -> InitResult:
    """Create (or with ``force`` re-initialise) a store at ``ctx_dir``.

    Phases: check an existing store (in a fresh clone only register the merge driver),
    create the layout, write config.toml and the other layout files, make the first
    commit, then register the Git glue (merge driver, ``git add``).

    Args:
        ctx_dir: The ``.ctx`` directory to create.
        force: Re-initialise an existing store: rewrite config.toml, .gitignore and
            .gitattributes, and start a new history if refs/main is unreadable.
        git: Register the merge driver and ``git add`` the store inside a Git work tree.
        ctx_command: The command Git should run for the merge driver.

    Returns:
        What was done; for an existing store in a Git clone without the merge driver,
        only the driver registration (``commit`` None).

    Raises:
        StoreExists: if a store is there, ``force`` is not set and there is no driver
            to register.
        StorageIOError: if the layout cannot be written.
        UnsafePath: (E020) if an entry of an existing store is a symlink or of the wrong
            kind (``repo.check_layout``).
    """
    if ctx_dir.is_dir():
        check_layout(ctx_dir)  # E020: a committed link or special file is never written through
    ctx_dir = ctx_dir.resolve() if ctx_dir.exists() else ctx_dir.parent.resolve() / ctx_dir.name
    # A crash inside an earlier init can leave HEAD without refs/main: finish that one.
    existed = (ctx_dir / "HEAD").exists() and (ctx_dir / MAIN_REF).exists()
    if existed and not force:
        return _register_clone(ctx_dir, git=git, ctx_command=ctx_command)
    _create_layout(ctx_dir)
    result = InitResult(ctx_dir, None, existed)
    _write_layout_files(ctx_dir, force=force)
    _first_commit(ctx_dir, result)
    if git:
        _git_glue(ctx_dir, result, ctx_command)
    return result


def _register_clone(ctx_dir: Path, *, git: bool, ctx_command: str) -> InitResult:
    """``ctx init`` where the store exists: register the merge driver only.

    A fresh clone has the committed store but not the clone-local driver registration
    (.git/config and .git/info/attributes are never cloned): `ctx init` there registers
    the driver and touches nothing else.

    Raises:
        StoreExists: if there is no driver to register.
    """
    top = git_mod.find_git_toplevel(ctx_dir.parent) if git else None
    actions = git_mod.register_driver(ctx_dir, top, ctx_command) if top is not None else []
    if actions:
        return InitResult(ctx_dir, None, True, top, actions,
                          notes=["the store already exists: only the merge driver was "
                                 "registered for this clone"])
    raise StoreExists(f"a ctx store already exists at {ctx_dir}",
                      hint="use `ctx init --force` to re-initialise its layout files")


def _create_layout(ctx_dir: Path) -> None:
    """``ctx_dir`` and its ``LAYOUT_DIRS``, each new directory's entry made durable."""
    created = [p for p in (ctx_dir, *ctx_dir.parents) if not p.exists()]
    fsio.ensure_dir(ctx_dir)
    for folder in created:  # a new directory's entry is durable once its parent is fsynced
        fsio.fsync_dir(folder.parent)
    for sub in LAYOUT_DIRS:
        fsio.ensure_dir(ctx_dir / sub)


def _write_layout_files(ctx_dir: Path, *, force: bool) -> None:
    """Write config.toml, .gitignore, .gitattributes and narrative/README.md, then HEAD.

    config.toml holds every default. Each file only if missing, or with ``force`` rewritten, the
    README excepted.
    """
    project = ctx_dir.parent.name or "project"
    _write_if(ctx_dir / "config.toml", render_default_config(project), overwrite=force)
    _write_if(ctx_dir / ".gitignore", git_mod.GITIGNORE, overwrite=force)
    _write_if(ctx_dir / ".gitattributes", git_mod.GITATTRIBUTES, overwrite=force)
    _write_if(ctx_dir / "narrative" / "README.md",
              render_template("README.md", project=project), overwrite=False)
    if not (ctx_dir / "HEAD").exists():
        # HEAD is written last but one: a store "exists" once HEAD does, and
        # refs/main is created by the initial commit right after.
        fsio.replace_atomic(ctx_dir / "HEAD", f"ref: {MAIN_REF}\n".encode())


def _first_commit(ctx_dir: Path, result: InitResult) -> None:
    """The initial commit (an empty tree) unless refs/main names one.

    An unreadable refs/main is replaced by a new history, noted in ``result``.

    Raises:
        UnsafePath: if refs/main is a link or special file (never replaced).
    """
    store = open_store(ctx_dir)
    try:
        main = refs.read_pointer(ctx_dir, MAIN_REF)
        broken = None
    except UnsafePath:
        raise  # a link or special file is refused, never replaced by a new history
    except CtxError as exc:
        main, broken = None, exc
    if main is not None:
        return
    with store.transaction() as tx:
        tree = tx.put(Tree(entries=()))
        commit = tx.put(Commit(parents=(), timestamp_unix=now_ms() // 1000,
                               message="Initialize ctx store", root_tree=tree))
        if broken is None:
            tx.move_pointer(MAIN_REF, commit, expected=None)
            if not (ctx_dir / "STAGE").exists():
                tx.move_pointer("STAGE", commit, expected=None, expect_type=STAGE_TYPES)
    if broken is not None:
        try:
            old = fsio.read_regular(ctx_dir / MAIN_REF, 200)[:200]
        except (OSError, CtxError):
            old = b""
        refs.write_pointer(ctx_dir, MAIN_REF, commit)
        result.notes.append(f"{MAIN_REF} was unreadable ({broken.message}); old content "
                            f"{old!r} replaced by a new history")
    result.commit = commit


def _git_glue(ctx_dir: Path, result: InitResult, ctx_command: str) -> None:
    """Inside a Git work tree: register the merge driver and ``git add`` the store."""
    top = git_mod.find_git_toplevel(ctx_dir.parent)
    if top is not None:
        result.git_toplevel = top
        result.git_actions = git_mod.register_driver(ctx_dir, top, ctx_command)
        if git_mod.git_add(top, ctx_dir):
            result.git_actions.append("git add .ctx")
