"""``ctx init``: the ``.ctx/`` layout, config, first commit, Git glue (spec 002 §13.2.1, DESIGN §2).

``init`` creates the layout, config.toml with every default, ``.gitignore`` and
``.gitattributes``, narrative/README.md from its template, and an initial commit with
an empty tree. Inside a Git work tree it also registers the pointer merge driver and
stages ``.ctx/`` (unless ``git=False``). In a clone, where the store is committed but
the driver registration (clone-local) is not, it only registers the driver. ``force``
re-initialises an existing store's layout files; it never deletes objects or history.

Where: ``default_ctx_dir`` puts the store at the root of the Git work tree the command
runs in (the documented place: every clone and every hook finds it there), unless told
``here``. ``template`` picks a configuration template (spec 002 §13.2.1 ``--template``):
a built-in name of ``CONFIG_TEMPLATES`` or a ``config.toml`` (or a store holding one) to
copy the settings of. Narrative templates are another thing: ``narrative_templates/``.
"""

from __future__ import annotations

import json
import re
from dataclasses import field
from pathlib import Path
from typing import Any

from ctxstore import fsio, refs
from ctxstore import git as git_mod
from ctxstore.clock import now_ms
from ctxstore.config import DEFAULTS, load_config, render_default_config
from ctxstore.errors import CtxError, InvalidInput, StoreExists, UnsafePath
from ctxstore.model import Commit, Tree
from ctxstore.objects import ObjectId
from ctxstore.records import dataclass
from ctxstore.repo import MAIN_REF, STAGE_TYPES, STORE_DIRS, check_layout, open_store
from ctxstore.templates import render_template

__all__ = ["InitResult", "init_store", "CONFIG_TEMPLATES", "default_ctx_dir",
           "template_settings"]

# Configuration templates of `ctx init --template NAME`: (settings that differ from the
# defaults, one line saying what it is for). Only keys that have an effect.
CONFIG_TEMPLATES: dict[str, tuple[dict[str, dict[str, Any]], str]] = {
    "default": ({}, "ctx's defaults"),
    "solo": ({"gc": {"keep_days": 1}},
             "one person, one clone: `ctx gc` reclaims unreachable objects after a day"),
    "team": ({"gc": {"keep_days": 30}, "lock": {"timeout_seconds": 30.0}},
             "shared through Git: unreachable objects kept 30 days (a teammate's merge may "
             "still need them), writers wait up to 30 s for the lock"),
    "large": ({"storage": {"compression_level": 9}, "retrieval": {"default_budget": 120000}},
              "a big project: smaller objects (zstd level 9), larger default context budget"),
}


@dataclass
class InitResult:
    """What ``init_store`` created."""

    ctx_dir: Path
    commit: ObjectId | None
    reinitialized: bool
    git_toplevel: Path | None = None
    git_actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    template: str | None = None


def default_ctx_dir(cwd: Path, *, here: bool = False) -> Path:
    """Where ``ctx init`` puts the store when no ``--ctx-dir`` is given.

    Inside a Git work tree: the nearest existing ``.ctx`` between ``cwd`` and the work tree's
    root (a committed store, e.g. in a fresh clone), else ``<root>/.ctx``: the documented
    place, found from anywhere in the repository and by every hook. Outside Git, or with
    ``here``: ``cwd/.ctx``.

    Args:
        cwd: The directory the command runs in.
        here: Put the store in ``cwd`` even inside a Git work tree (``ctx init --here``).

    Returns:
        The ``.ctx`` directory to create (or register).
    """
    cwd = cwd.resolve()
    if here:
        return cwd / ".ctx"
    top = git_mod.find_git_toplevel(cwd)
    if top is None or (top != cwd and top not in cwd.parents):
        return cwd / ".ctx"
    for folder in (cwd, *cwd.parents):
        if (folder / ".ctx").is_dir():
            return folder / ".ctx"
        if folder == top:
            break
    return top / ".ctx"


def template_settings(template: str) -> dict[str, dict[str, Any]]:
    """The settings of a configuration template that differ from the defaults.

    Args:
        template: A name of ``CONFIG_TEMPLATES``, or the path of a ``config.toml`` (or of a
            directory holding one, such as another project's ``.ctx``) to copy settings from.

    Returns:
        ``{section: {key: value}}``, without ``[repo]`` (a new store has its own id).

    Raises:
        InvalidInput: (E011) an unknown name that is no file either.
        ConfigInvalid: (E015) the file is not valid TOML or holds a bad value.
        UnsupportedStoreVersion: (E014) the file was written by a newer ctx.
    """
    if template in CONFIG_TEMPLATES:
        return CONFIG_TEMPLATES[template][0]
    path = Path(template).expanduser()
    if path.is_dir():
        path = path / "config.toml"
    if not path.is_file():
        names = ", ".join(CONFIG_TEMPLATES)
        raise InvalidInput(f"unknown template {template!r} (built-in: {names}; or the path of "
                           "a config.toml)")
    values = load_config(path).values
    return {section: {key: value for key, value in table.items() if value != DEFAULTS[section][key]}
            for section, table in values.items() if section != "repo"}


def _toml(value: Any) -> str:
    """A TOML literal of a config value (bool, number, string or list of strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # JSON's escapes are TOML's; TOML also wants DEL escaped.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def _with_settings(text: str, settings: dict[str, dict[str, Any]], template: str) -> str:
    """config.toml ``text`` with each setting's line replaced (or added to its table)."""
    lines = text.rstrip("\n").split("\n")
    for section, table in settings.items():
        for key, value in table.items():
            line = f"{key} = {_toml(value)}"
            start = next((i for i, t in enumerate(lines) if t.strip() == f"[{section}]"), None)
            if start is None:
                lines += ["", f"[{section}]", line]
                continue
            end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")),
                       len(lines))
            found = next((i for i in range(start + 1, end)
                          if re.match(rf"{re.escape(key)}\s*=", lines[i])), None)
            if found is not None:
                lines[found] = line
            else:
                while end > start + 1 and not lines[end - 1].strip():
                    end -= 1
                lines.insert(end, line)
    name = template if template in CONFIG_TEMPLATES else "copied from a config.toml"
    return f"# Template: {name}\n" + "\n".join(lines) + "\n"


def _write_if(ctx_dir: Path, rel: str, data: str, *, overwrite: bool) -> bool:
    """Write ``ctx_dir/rel`` unless it exists (or with ``overwrite``), through directory descriptors.

    ``fsio.Dir.replace_atomic`` refuses a link on the way (E020) even one swapped in
    while this runs: ``init --force`` on a clone never writes out of its store.
    """
    path = ctx_dir / rel
    if path.exists() and not overwrite:
        return False
    with fsio.open_dir(ctx_dir) as store_dir:
        store_dir.replace_atomic(path, data.encode("utf-8"))
    return True


def init_store(ctx_dir: Path, *, force: bool = False, git: bool = True,
               ctx_command: str = "ctx", template: str | None = None) -> InitResult:
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
        template: A configuration template (``template_settings``) for config.toml; with
            ``force`` an existing config.toml is rewritten from it.

    Returns:
        What was done; for an existing store in a Git clone without the merge driver,
        only the driver registration (``commit`` None).

    Raises:
        StoreExists: if a store is there, ``force`` is not set and there is no driver
            to register (or a ``template`` was asked for).
        InvalidInput, ConfigInvalid: for an unknown or invalid ``template`` (nothing written).
        StorageIOError: if the layout cannot be written.
        UnsafePath: (E020) if an entry of an existing store is a symlink or of the wrong
            kind (``repo.check_layout``).
    """
    if ctx_dir.is_dir():
        check_layout(ctx_dir)  # E020: a committed link or special file is never written through
    ctx_dir = ctx_dir.resolve() if ctx_dir.exists() else ctx_dir.parent.resolve() / ctx_dir.name
    # A crash inside an earlier init can leave HEAD without refs/main: finish that one.
    existed = (ctx_dir / "HEAD").exists() and (ctx_dir / MAIN_REF).exists()
    settings = template_settings(template) if template is not None else None  # before any write
    if existed and not force:
        if template is not None:
            raise StoreExists(f"a ctx store already exists at {ctx_dir}",
                              hint="use `ctx init --force --template ...` to rewrite its "
                                   "config.toml from the template")
        return _register_clone(ctx_dir, git=git, ctx_command=ctx_command)
    _create_layout(ctx_dir)
    result = InitResult(ctx_dir, None, existed, template=template)
    _write_layout_files(ctx_dir, force=force, settings=settings, template=template)
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
    """``ctx_dir`` and its ``STORE_DIRS``, each new directory's entry made durable."""
    created = [p for p in (ctx_dir, *ctx_dir.parents) if not p.exists()]
    fsio.ensure_dir(ctx_dir)
    for folder in created:  # a new directory's entry is durable once its parent is fsynced
        fsio.fsync_dir(folder.parent)
    parents: dict[Path, None] = {}
    for sub in STORE_DIRS:  # parents first: "local" comes before "local/work"
        folder = ctx_dir / sub
        if not folder.exists():
            fsio.ensure_dir(folder)
            parents[folder.parent] = None
    for parent in parents:
        fsio.fsync_dir(parent)


def _write_layout_files(ctx_dir: Path, *, force: bool,
                        settings: dict[str, dict[str, Any]] | None = None,
                        template: str | None = None) -> None:
    """Write config.toml, .gitignore, .gitattributes and narrative/README.md, then HEAD.

    config.toml holds every default, with a template's ``settings`` in place of theirs. Each
    file only if missing, or with ``force`` rewritten, the README excepted.
    """
    project = ctx_dir.parent.name or "project"
    config = render_default_config(project)
    if settings is not None and template is not None:
        config = _with_settings(config, settings, template)
    _write_if(ctx_dir, "config.toml", config, overwrite=force)
    _write_if(ctx_dir, ".gitignore", git_mod.GITIGNORE, overwrite=force)
    _write_if(ctx_dir, ".gitattributes", git_mod.GITATTRIBUTES, overwrite=force)
    _write_if(ctx_dir, "narrative/README.md",
              render_template("README.md", project=project), overwrite=False)
    if not (ctx_dir / "HEAD").exists():
        # HEAD is written last but one: a store "exists" once HEAD does, and
        # refs/main is created by the initial commit right after.
        with fsio.open_dir(ctx_dir) as store_dir:
            store_dir.replace_atomic("HEAD", f"ref: {MAIN_REF}\n".encode())


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
            if store.read_stage() is None:
                tx.move_pointer("STAGE", commit, expected=None, expect_type=STAGE_TYPES)
        else:
            tx.promote(commit)  # refs/main is written below, outside the compare-and-swap
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
