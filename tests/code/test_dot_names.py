"""A file named only ``.py`` (``.rs``, ...) is a dot file with no suffix, not a Python file.

ctx classifies a path by its suffix as ``pathlib.PurePosixPath(path).suffix`` does (and as
``mimetypes`` and Python's import system treat such a name): ``.py`` has none. Such a file is
indexed as text, with no language and no symbols; a glob ``*.py`` still matches it, as in Git.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from _ingestlib import ctx_json, make_work, query, write

from ctxstore.code.languages import extractor_for, path_suffix


def test_dot_names_are_indexed_as_text_without_a_language(tmp_path) -> None:
    root = tmp_path / "work"
    ctx_dir = make_work(root)
    write(root, {"pkg/.py": "def hidden():\n    return 1\n", "pkg/.rs": "fn hidden() {}\n",
                 "pkg/a.py": "def shown():\n    return 1\n", "pkg/.x.py": "def dotted():\n    pass\n"})
    doc = ctx_json(ctx_dir, "index")
    assert doc["written"] == ["pkg/.py", "pkg/.rs", "pkg/.x.py", "pkg/a.py"]
    assert query(ctx_dir, "SELECT path, language FROM files ORDER BY path") == [
        ("pkg/.py", None), ("pkg/.rs", None), ("pkg/.x.py", "python"), ("pkg/a.py", "python")]
    assert query(ctx_dir, "SELECT path, name FROM symbols WHERE kind = 'function' ORDER BY 1") == [
        ("pkg/.x.py", "dotted"), ("pkg/a.py", "shown")]


def test_dot_names_are_ignored_by_a_glob_that_matches_them(tmp_path) -> None:
    root = tmp_path / "work"
    ctx_dir = make_work(root)
    config = ctx_dir / "config.toml"
    config.write_text(config.read_text().replace('ignore_globs = [', 'ignore_globs = ["*.py", ', 1))
    write(root, {"pkg/.py": "x = 1\n", "pkg/a.txt": "text\n"})
    assert ctx_json(ctx_dir, "index")["written"] == ["pkg/a.txt"]


def test_dot_names_have_no_suffix_as_pathlib_says() -> None:
    for name in (".py", "pkg/.py", ".rs", "a/.go", "x.", ".x.py", "a.py"):
        assert path_suffix(name) == PurePosixPath(name).suffix, name
    assert extractor_for("pkg/.py") is None and extractor_for("pkg/.rs") is None
    assert extractor_for("pkg/.x.py") is not None
