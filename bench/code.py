"""Code ingestion benchmark: whole ``ctx index`` processes beside the parse floor and ctags.

Two trees, each copied into a fresh temporary Git repository: the CPython standard
library of this interpreter (its ``.py`` files, about 1,800) and a Rust tree (the ripgrep
checkout of the eval data, or ``~/.cargo/registry/src``). For each, in the same run and
interleaved round by round:

- ``ctx index`` of the whole tree into a new store (whole process; the deletion of the
  previous round's store is flushed to disk first);
- the parse floor: one process that reads every file and parses it (``ast.parse`` for
  Python, tree-sitter for Rust), nothing else;
- ``ctags -R`` (universal-ctags) of the tree;
- ``ctx index`` after one file changed (a different file each round).

Each figure is the median wall time and the median CPU time (user + system of the
process and its children, e.g. ``git``): on a shared, loaded machine the CPU ratio is the
steadier one. The load average is printed before and after.

Goals (issue 13): full index <= 2x the parse floor; one-file re-index <= 150 ms.

Usage:
    python bench/code.py              # 3 rounds, medians
    python bench/code.py --rounds 5
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

FLOOR = {
    ".py": "import ast, sys\n"
           "for p in sys.argv[1:]:\n"
           "    try:\n"
           "        ast.parse(open(p, 'rb').read())\n"
           "    except (SyntaxError, ValueError):\n"
           "        pass\n",
    ".rs": "import sys, tree_sitter, tree_sitter_rust\n"
           "parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_rust.language()))\n"
           "for p in sys.argv[1:]:\n"
           "    parser.parse(open(p, 'rb').read())\n",
}


def ctx_cmd() -> list[str]:
    # -P: the working directory is not put on sys.path, as with the installed `ctx` script.
    # Without it, `python -m` run inside a copy of the standard library imports the copy's
    # modules (compiled from source every time) instead of the interpreter's.
    return [sys.executable, "-P", "-m", "ctxstore.cli"]


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``cmd``; (wall ms, CPU ms of it and its children)."""
    cpu, start = _child_cpu(), time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True)
    took = (time.perf_counter() - start) * 1000
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed: {res.stderr.decode()[-500:]}")
    return took, (_child_cpu() - cpu) * 1000


def copy_tree(src: Path, dest: Path, suffix: str) -> list[Path]:
    files = []
    for path in sorted(src.rglob(f"*{suffix}")):
        rel = path.relative_to(src)
        if "site-packages" in rel.parts or path.is_symlink() or not path.is_file():
            continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out)
        files.append(out)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    return files


def rust_source() -> Path | None:
    ripgrep = Path(__file__).resolve().parents[2] / "shared" / "eval" / "data" / "ripgrep-base"
    if ripgrep.is_dir():
        return ripgrep
    found = glob.glob(os.path.expanduser("~/.cargo/registry/src/*/"))
    return Path(found[0]) if found else None


Row = tuple[str, str, float, float]


def bench_tree(name: str, src: Path, suffix: str, rounds: int, work: Path) -> list[Row]:
    tree = work / name
    files = copy_tree(src, tree, suffix)
    rows: dict[str, list[tuple[float, float]]] = {
        "ctx index (full)": [], "parse floor": [], "ctags -R": [],
        "ctx index (1 file changed)": []}
    floor = [sys.executable, "-P", "-c", FLOOR[suffix], *map(str, files)]
    for i in range(rounds):
        shutil.rmtree(tree / ".ctx", ignore_errors=True)
        run([*ctx_cmd(), "init", "--no-git"], tree)
        # Flush the deletion of the last round's store first: while the kernel is still
        # writing it back, creating files and folders costs 3-4x as much on this kind of
        # machine, and the run would pay for the benchmark's own clean-up.
        os.sync()
        rows["ctx index (full)"].append(run([*ctx_cmd(), "index"], tree))
        rows["parse floor"].append(run(floor, tree))
        if shutil.which("ctags"):
            rows["ctags -R"].append(run(["ctags", "-R", "-f", str(work / "tags"), "--exclude=.ctx",
                                         "--exclude=.git", "."], tree))
        time.sleep(2.1)  # let the first run's modification times settle (the stat cache)
        run([*ctx_cmd(), "index"], tree)
        victim = files[(i * 97) % len(files)]
        with victim.open("a") as fh:
            fh.write("\n# changed\n" if suffix == ".py" else "\n// changed\n")
        rows["ctx index (1 file changed)"].append(run([*ctx_cmd(), "index"], tree))
    return [(name, what, statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for what, v in rows.items() if v] + [(name, "files", float(len(files)), 0.0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [("cpython-stdlib", Path(sysconfig.get_paths()["stdlib"]), ".py")]
    rust = rust_source()
    if rust is not None:
        trees.append(("rust:" + rust.name, rust, ".rs"))
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="ctx-bench-code-") as tmp:
        results: list[Row] = []
        for name, src, suffix in trees:
            results += bench_tree(name.replace("/", "_"), src, suffix, args.rounds, Path(tmp))
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"{'tree':<28} {'what':<28} {'wall':>12} {'CPU':>12}")
    for name, what, wall, cpu in results:
        if what == "files":
            print(f"{name:<28} {what:<28} {int(wall):>12}")
        else:
            print(f"{name:<28} {what:<28} {wall:>9,.0f} ms {cpu:>9,.0f} ms")
    for name in dict.fromkeys(r[0] for r in results):
        walls = {w: v for n, w, v, _ in results if n == name}
        cpus = {w: c for n, w, _, c in results if n == name}
        print(f"{name}: full index = {walls['ctx index (full)'] / walls['parse floor']:.2f}x the "
              f"parse floor by wall time, {cpus['ctx index (full)'] / cpus['parse floor']:.2f}x by "
              f"CPU (goal <= 2x); one-file re-index {walls['ctx index (1 file changed)']:.0f} ms "
              f"wall, {cpus['ctx index (1 file changed)']:.0f} ms CPU (goal <= 150 ms)")


if __name__ == "__main__":
    main()
