"""Git growth benchmark: how many files of ``.ctx/`` Git tracks per write and per fold.

Issue 17 item 5: ``ctx add`` writes a work commit and a change batch (two object files)
per write, and ``ctx commit`` folds the session into one canonical commit, but the work
objects stay in ``.ctx/objects/`` and ``git add .ctx`` tracks them all. The target is that
the files Git sees grow with canonical commits, not with individual writes: O(1) files per
``ctx commit`` (the commit, its curated change batch and the blobs and narrative snapshots
it references), whatever the number of writes it folded.

One run, in a fresh Git repository (``ctx init``, committed): ``--rounds`` times, ``--writes``
``ctx add --type fact`` (in-process through click, as the tests run the CLI), then
``ctx commit -m``, ``git add -A .ctx`` and ``git commit``. After each round it counts:

- ``tracked``: files under ``.ctx/`` in Git's index, and of them the object files by type
  (``work_commit``, ``change_batch``, ``commit``, ``blob``);
- ``canonical``: the objects reachable from ``HEAD``'s ref alone (commit parents, change
  batches, blobs, narrative snapshots: what Git would have to track if work objects stayed
  out of it; the target);
- ``history``: distinct ``.ctx/objects`` paths in any Git commit so far (files Git keeps
  forever, whatever a later ``ctx gc`` deletes).

At the end it runs ``ctx gc --aggressive`` (today's only remedy) and commits again: the
tracked count drops, the history count does not.

``--index F`` (issue 30) measures the code index instead: a Git repository of F real files
(``bench/corpus.py``: the development set's trees and the standard library), committed, then
``ctx index`` + a decision naming one file + ``ctx commit`` + ``git add -A .ctx``, then ten
files changed and the same again. It prints the files ``git add`` staged under ``.ctx/`` each
time and their object types. The target: a handful each time, however large the tree (the
code index is per clone, ``.ctx/index/code.sqlite``, ignored by Git).

Usage:
    python bench/git_growth.py              # 1,000 writes x 3 rounds (about 1-2 minutes)
    python bench/git_growth.py --quick      # 100 writes x 2 rounds
    python bench/git_growth.py --writes 1500 --rounds 1
    python bench/git_growth.py --index 5000 # index + commit of a 5,000-file tree
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from ctxstore.cli import cli
from ctxstore.errors import CtxError
from ctxstore.model import decode_typed
from ctxstore.objects import KIND_TYPED, ObjectId
from ctxstore.repo import open_store
from ctxstore.verify import walk_reachable


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo``; return its stdout (raises on failure)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout


def ctx(runner: CliRunner, ctx_dir: Path, *args: str) -> str:
    """Run one ctx command in-process; return its stdout (exits on failure)."""
    res = runner.invoke(cli, ["--ctx-dir", str(ctx_dir), *args])
    if res.exit_code != 0:
        sys.exit(f"ctx {' '.join(args)} failed ({res.exit_code}): {res.output}{res.stderr}")
    return res.stdout


def object_kind(ctx_dir: Path, hexid: str) -> str:
    """``blob`` or the typed object's type name (``?`` if unreadable)."""
    store = open_store(ctx_dir)
    try:
        stored = store.objects.read(ObjectId(bytes.fromhex(hexid)))
    except CtxError:
        return "?"
    if stored.kind != KIND_TYPED:
        return "blob"
    return str(type(decode_typed(stored.payload)).TYPE)


def tracked(repo: Path) -> tuple[int, Counter[str], set[str]]:
    """Files under .ctx/ in Git's index, object files by type, and the object ids."""
    files = [f for f in git(repo, "ls-files", "--", ".ctx").splitlines() if f]
    ids = {Path(f).name for f in files if f.startswith(".ctx/objects/")}
    kinds = Counter(object_kind(repo / ".ctx", h) for h in ids)
    return len(files), kinds, ids


def canonical_objects(ctx_dir: Path) -> int:
    """Objects reachable from HEAD's ref alone (no STAGE): the target's tracked objects."""
    from ctxstore.model import Commit

    store = open_store(ctx_dir)
    roots = [(bytes(h), Commit, "bench") for h in store.read_head().heads]
    return len(walk_reachable(store, roots))


def history_objects(repo: Path) -> int:
    """Distinct .ctx/objects paths in any Git commit: what Git keeps forever."""
    out = git(repo, "log", "--all", "--name-only", "--format=", "--", ".ctx/objects")
    return len({line for line in out.splitlines() if line})


def run(writes: int, rounds: int) -> None:
    """Build the history and print one line per round, then the gc figures."""
    runner = CliRunner()
    with tempfile.TemporaryDirectory(prefix="ctx-git-growth-") as tmp:
        repo = Path(tmp)
        git(repo, "init", "-q", "-b", "main")
        ctx_dir = repo / ".ctx"
        old = os.getcwd()
        os.chdir(repo)  # `ctx init` finds the Git work tree from here
        try:
            ctx(runner, ctx_dir, "init")
        finally:
            os.chdir(old)
        git(repo, "add", "-A", ".ctx")
        git(repo, "commit", "-qm", "ctx init")
        base_files, _, _ = tracked(repo)
        print(f"git growth: {writes:,} writes per round, {rounds} rounds "
              f"(`ctx init` committed: {base_files} files under .ctx/)")
        print(f"{'round':>5} {'writes':>7} {'tracked':>8} {'objects':>8} {'work_commit':>11} "
              f"{'change_batch':>12} {'commit':>6} {'blob':>5} {'canonical':>9} "
              f"{'history':>8} {'files/fold':>10} {'s':>6}")
        prev_files = base_files
        for r in range(1, rounds + 1):
            start = time.perf_counter()
            for i in range(writes):
                ctx(runner, ctx_dir, "add", "--type", "fact", f"round {r} fact {i}: retries "
                    f"time out after {i % 60} s on host-{i % 17}")
            ctx(runner, ctx_dir, "commit", "-m", f"round {r}")
            git(repo, "add", "-A", ".ctx")
            git(repo, "commit", "-qm", f"round {r}")
            secs = time.perf_counter() - start
            files, kinds, ids = tracked(repo)
            print(f"{r:>5} {writes * r:>7,} {files:>8,} {len(ids):>8,} "
                  f"{kinds['work_commit']:>11,} {kinds['change_batch']:>12,} "
                  f"{kinds['commit']:>6,} {kinds['blob']:>5,} {canonical_objects(ctx_dir):>9,} "
                  f"{history_objects(repo):>8,} {files - prev_files:>10,} {secs:>6.1f}")
            prev_files = files
        ctx(runner, ctx_dir, "gc", "--aggressive")
        git(repo, "add", "-A", ".ctx")
        git(repo, "commit", "--allow-empty", "-qm", "ctx gc --aggressive")  # may change nothing
        files, _kinds, ids = tracked(repo)
        staged_left = sum(1 for p in (ctx_dir / "local" / "work" / "objects").rglob("*")
                          if p.is_file())
        print(f"after `ctx gc --aggressive` + git commit: tracked {files:,} files "
              f"({len(ids):,} objects); Git history holds {history_objects(repo):,} "
              f"object files; {staged_left:,} files left in the ignored staging area")
        print("target: tracked objects = canonical (O(1) new files per `ctx commit`, "
              "independent of the number of writes)")


def staged_under_ctx(repo: Path) -> list[str]:
    """Paths under .ctx/ that ``git add -A .ctx`` staged (new or changed)."""
    git(repo, "add", "-A", ".ctx")
    out = git(repo, "diff", "--cached", "--name-only", "--", ".ctx")
    return [line for line in out.splitlines() if line]


def run_index(files: int) -> None:
    """``ctx index`` + ``ctx commit`` on a tree of ``files`` real files, twice; files Git sees."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus import tree_bytes, write_real_tree

    runner = CliRunner()
    with tempfile.TemporaryDirectory(prefix="ctx-git-growth-index-") as tmp:
        repo = Path(tmp)
        write_real_tree(repo, files)
        n_files, n_bytes = tree_bytes(repo)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "the project")
        old = os.getcwd()
        os.chdir(repo)  # `ctx init` finds the Git work tree here; paths are relative to it
        try:
            ctx(runner, repo / ".ctx", "init")
            git(repo, "add", "-A", ".ctx")
            git(repo, "commit", "-qm", "ctx init")
            print(f"git growth with the code index: {n_files:,} files, {n_bytes / 1e6:.1f} MB")
            print(f"{'step':44} {'s':>6} {'files staged':>13}  object types")
            py = sorted(p for p in repo.rglob("*.py") if ".ctx" not in p.parts
                        and ".git" not in p.parts)
            for step in (1, 2):
                start = time.perf_counter()
                if step == 2:
                    for i, path in enumerate(py[:: max(1, len(py) // 10)][:10]):
                        with path.open("a") as fh:
                            fh.write(f"\n\ndef _growth_{i}():\n    return {i}\n")
                ctx(runner, repo / ".ctx", "index")
                named = py[step].relative_to(repo).as_posix()
                ctx(runner, repo / ".ctx", "add", "decision", f"step {step}: keep `{named}` small")
                ctx(runner, repo / ".ctx", "commit", "-m", f"step {step}")
                secs = time.perf_counter() - start
                staged = staged_under_ctx(repo)
                kinds = Counter(object_kind(repo / ".ctx", Path(f).name) for f in staged
                                if f.startswith(".ctx/objects/"))
                what = ("first ctx index + decision + ctx commit" if step == 1 else
                        "10 files changed: ctx index + decision + ctx commit")
                print(f"{what:44} {secs:>6.1f} {len(staged):>13,}  "
                      f"{', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}")
                git(repo, "commit", "-qm", f"ctx step {step}")
            code = sum(p.stat().st_size for p in (repo / ".ctx" / "index").glob("code.sqlite*"))
            print(f"this clone's code index (ignored by Git): {code / 1e6:.1f} MB; "
                  f"Git history holds {history_objects(repo):,} .ctx object files")
            print("target: a handful of files per canonical commit, whatever the tree's size")
        finally:
            os.chdir(old)


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=1000, help="ctx add per round (default 1000)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of writes + ctx commit + git commit (default 3)")
    ap.add_argument("--quick", action="store_true", help="100 writes x 2 rounds")
    ap.add_argument("--index", type=int, default=0, metavar="FILES",
                    help="measure ctx index + ctx commit on a tree of FILES real files instead")
    args = ap.parse_args(argv)
    if args.index:
        run_index(args.index)
        return
    if args.quick:
        args.writes, args.rounds = 100, 2
    run(args.writes, args.rounds)


if __name__ == "__main__":
    main()
