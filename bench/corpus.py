"""A large work tree built from real code, for the benchmarks that need one (issue 30 item 5).

``write_real_tree(root, files)`` copies, in this order, until ``files`` files are there:

1. the development set's three base trees (``<eval>/data/{werkzeug,starlette,ripgrep}-base``,
   every file: sources, tests, docs, configuration), each under its own name;
2. the ``.py`` files of this interpreter's standard library directory
   (``sysconfig.get_paths()["stdlib"]``) under ``lib/``, its ``site-packages`` included
   (third-party libraries installed there: real code too), sorted by path, ``__pycache__``
   left out.

Nothing is generated, so the symbol and relation density is what users have. Only when the
two sources together hold fewer than ``files`` files is the standard library copied again
(``lib1/``, ``lib2/``, ...), which the summary line says.

The tasks returned are the set's first two commit messages of each repository and two short
texts (``bench/pack.py`` times them).
"""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

__all__ = ["EVAL_DIR", "NAMES", "stdlib_sources", "write_real_tree", "tree_bytes"]

EVAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "eval"
NAMES = ("werkzeug", "starlette", "ripgrep")


def stdlib_sources() -> tuple[Path, list[Path]]:
    """The standard library directory and its ``.py`` files (site-packages too), sorted."""
    base = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in base.rglob("*.py")
                   if "__pycache__" not in p.parts and p.is_file() and not p.is_symlink())
    return base, files


def write_real_tree(root: Path, files: int, eval_dir: Path = EVAL_DIR,
                    *, with_devset: bool = True) -> dict[str, str]:
    """Fill ``root`` with ``files`` real files (see the module docstring).

    Args:
        root: An empty (or missing) directory.
        files: How many files to copy.
        eval_dir: The development set (its ``data/*-base`` trees and ``localize-*.jsonl``).
        with_devset: Start with the development set's trees (when ``eval_dir`` has them).

    Returns:
        Task name -> task text.
    """
    root.mkdir(parents=True, exist_ok=True)
    tasks: dict[str, str] = {}
    count = 0
    for name in NAMES if with_devset else ():
        base = eval_dir / "data" / f"{name}-base"
        if not base.is_dir() or count >= files:
            continue
        for src in sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()):
            if count >= files:
                break
            dst = root / name / src.relative_to(base)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            count += 1
        with open(eval_dir / "data" / f"localize-{name}.jsonl", encoding="utf-8") as f:
            for i, line in zip(range(2), f, strict=False):
                tasks[f"{name} commit {i + 1}"] = json.loads(line)["query"]
    base, sources = stdlib_sources()
    copy = 0
    while count < files and sources:
        folder = "lib" if copy == 0 else f"lib{copy}"
        for src in sources:
            if count >= files:
                break
            dst = root / folder / src.relative_to(base)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            count += 1
        copy += 1
    tasks["two words"] = "retry timeout"
    tasks["a question"] = "where do we parse the cookie header before sending the response?"
    return tasks


def tree_bytes(root: Path) -> tuple[int, int]:
    """(files, bytes) of the work tree below ``root``, ``.ctx/`` and ``.git/`` left out."""
    n = size = 0
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if rel[0] in (".ctx", ".git") or not path.is_file() or path.is_symlink():
            continue
        n += 1
        size += path.stat().st_size
    return n, size
