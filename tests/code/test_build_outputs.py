"""Build outputs at any depth are not indexed by default (issue 32 item 7).

``target/`` of a sub-crate, ``node_modules/`` of a sub-package, ``dist/`` and ``build/``
folders, and virtualenvs (a folder holding ``pyvenv.cfg``, whatever its name) are left out of
``ctx index`` wherever they lie, also in a store whose ``config.toml`` still spells the older
default ``ignore_globs`` (which matched only a root ``target/``). ``[ingestion]
index_build_outputs = true`` indexes them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _ingestlib import ctx_json, make_work, write

from ctxstore.code.walk import build_output

SOURCES = {
    "src/ok.py": "ok = 1\n",
    "src/build.py": "def build():\n    return 1\n",  # a file named build is source
    "src/target.rs": "fn t() {}\n",
    "lib/venv/__init__.py": "v = 1\n",  # the standard library's venv package: no pyvenv.cfg
}
OUTPUTS = {
    "crates/core/target/debug/build/out.rs": "fn generated() {}\n",
    "target/release/x.rs": "fn x() {}\n",
    "web/app/node_modules/left-pad/index.js": "module.exports = 1;\n",
    "web/dist/bundle.js": "var a = 1;\n",
    "tools/build/lib/gen.py": "g = 1\n",
    "pkg/__pycache__/m.txt": "cached\n",
    "env/pyvenv.cfg": "home = /usr/bin\n",
    "env/lib/python3.11/site-packages/dep.py": "d = 1\n",
    "sub/.venv/lib/x.py": "x = 1\n",
    "ctxstore.egg-info/PKG-INFO": "Name: x\n",
}


@pytest.mark.parametrize("use_git", [True, False], ids=["git", "plain"])
def test_index_leaves_out_build_outputs_at_any_depth(tmp_path: Path, use_git: bool) -> None:
    ctx_dir = make_work(tmp_path / "w", use_git=use_git)
    write(ctx_dir.parent, {**SOURCES, **OUTPUTS})
    doc = ctx_json(ctx_dir, "index")
    assert sorted(doc["written"]) == sorted(SOURCES), doc["written"]


def test_older_default_ignore_globs_still_leave_them_out(tmp_path: Path) -> None:
    """A store made by an older ctx spells ``target/**`` (a root target/ only) in its config."""
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    config = ctx_dir / "config.toml"
    text = re.sub(r"(?m)^index_build_outputs = .*\n", "", config.read_text())
    assert 'ignore_globs = ["target/**", ".git/**", "node_modules/**"]' in text
    config.write_text(text)
    write(ctx_dir.parent, {**SOURCES, **OUTPUTS})
    assert sorted(ctx_json(ctx_dir, "index")["written"]) == sorted(SOURCES)


def test_index_build_outputs_true_indexes_them(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    config = ctx_dir / "config.toml"
    config.write_text(config.read_text().replace("index_build_outputs = false",
                                                 "index_build_outputs = true"))
    write(ctx_dir.parent, {**SOURCES, **OUTPUTS})
    # ignore_globs still applies: its default "target/**" is the root target/ only
    assert sorted(ctx_json(ctx_dir, "index")["written"]) == sorted(
        p for p in {**SOURCES, **OUTPUTS} if not p.startswith("target/"))


def test_build_output_names_folders_not_files(tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert build_output(tmp_path, "a/b/target/x.rs")
    assert build_output(tmp_path, "env/lib/a.py")
    assert build_output(tmp_path, "x.egg-info/PKG-INFO")
    assert not build_output(tmp_path, "src/build.py")
    assert not build_output(tmp_path, "src/target")
    assert not build_output(tmp_path, "distribution/a.py")
    assert not build_output(tmp_path, "lib/venv/__init__.py")


def test_build_output_folders_are_told_as_their_globs_say(tmp_path: Path) -> None:
    """The folder names are compared as strings (no glob compiled per run): the same answer
    as matching ``BUILD_OUTPUT_GLOBS`` for every path over names that are, contain or end
    with an output name."""
    import itertools

    from ctxstore.code.walk import BUILD_OUTPUT_GLOBS, GlobSet, build_output

    globs = GlobSet(BUILD_OUTPUT_GLOBS)
    names = ["target", "xtarget", "targets", "a.egg-info", ".egg-info", "egg-info", "dist",
             "node_modules", "build", "src", "__pycache__", ".venv", "venv", ".eggs", "b\nuild"]
    for depth in (1, 2, 3):
        for parts in itertools.product(names, repeat=depth):
            path = "/".join([*parts, "f.py"])
            assert build_output(tmp_path, path) == globs.any(path), path
    assert build_output(tmp_path, "pkg/target/f.py") and not build_output(tmp_path, "f.py")
