"""Object-store ingest benchmark: ctx durable ingest vs ``git add -A``, and ctx read-back.

Generates N deterministic, source-like files of ~4 KB (Python and Rust looking text that
compresses about 3x with zstd-3, like real code) into a temp directory once, then runs
several interleaved rounds. Each round measures, on a fresh store / fresh repository:

  (a) ctx durable ingest: read every file and ``tx.put_blob(data)`` inside ONE
      ``store.transaction()``; the time includes reading the sources and the transaction's
      single durability barrier (syncfs) at the end;
  (b) ``git add -A`` in a fresh ``git init`` repository whose work tree holds the same
      files (hard links made beforehand, untimed); git defaults, so loose objects are
      *not* fsynced (core.fsync default is committed,-loose-object);
  (c) ctx read + verify: ``store.objects.read(oid)`` for every id (open, read, decompress,
      BLAKE3 verify, envelope check).

plus, for reference, the CPU floor of (a): read + envelope + BLAKE3 + zstd-3, no write.

The page cache cannot be dropped without root, so every figure is warm-cache. Dirty pages
from earlier steps are flushed with ``os.sync()`` (untimed) before each timed step, so one
step's barrier never pays for another step's writes.

Note on file creation: both ctx and git create one file per object, so both are bound
by the kernel's create cost. On ext4 mounted without a journal, a create skips every
inode freed in the last 60 s (300 s while its inode-table block is dirty) by a linear
scan, so right after a large deletion (e.g. the cleanup of a previous run) creates can
cost ~1 ms instead of ~20 us. The header prints a probe of that cost; if it is flagged
SLOW, wait five minutes and run again. This script deletes nothing until it ends.

Usage:
    python bench/objects.py                 # 10,000 files x 5 rounds
    python bench/objects.py --quick         # 1,000 files x 2 rounds
    python bench/objects.py --profile       # also cProfile one ctx ingest
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import blake3
import zstandard

from ctxstore.ids import ObjectId
from ctxstore.init import init_store
from ctxstore.objects import KIND_BLOB, canonical_bytes
from ctxstore.repo import Store, open_store

DEFAULT_SEED = 20261122
FILES_PER_DIR = 100
SLOW_CREATE_US = 100
WORDS_PER_FILE, VERBS_PER_FILE, CWORDS_PER_FILE = 10, 5, 18

# -- corpus ---------------------------------------------------------------------------------
# A small closed vocabulary, as real code has: identifiers repeat within and across files,
# which is what gives ~3x zstd ratios on 4 KB chunks. Random literals and names keep every
# file distinct (no deduplication).
_WORDS = (
    "buffer cache client config context cursor data entry error event file frame handle "
    "header index item key layout limit lock manager message node object offset options "
    "packet parser path payload pointer queue reader record request response result root "
    "schema session shard size slot snapshot source state status store stream table task "
    "token tree value version view worker writer batch chunk commit digest graph hash "
    "journal ledger merge pack query range scope segment signal target timer txn"
).split()
_VERBS = (
    "apply build check close collect compute decode emit encode ensure fetch find flush "
    "handle init insert load lookup merge open parse push read refresh register remove "
    "render reset resolve scan send split store sync update validate visit write"
).split()
_PY_TYPES = ("int", "str", "bytes", "bool", "float", "list[str]", "dict[str, int]",
             "Path", "None", "Optional[int]", "tuple[int, int]", "Iterator[bytes]")
_RS_TYPES = ("u8", "u32", "u64", "usize", "i64", "bool", "String", "&str", "Vec<u8>",
             "Option<usize>", "Result<(), Error>", "&[u8]", "HashMap<String, u64>", "PathBuf")
_COMMENT_WORDS = (
    "the a an this that is are be when if for of to in on with without before after must "
    "never always only once each every returns raises keeps holds writes reads caller "
    "lock durable cache entry value buffer slow path fast path invariant retry error "
    "because so otherwise note see below above order first last empty full stale fresh"
).split()


_NUMBERS = (0, 1, 2, 3, 4, 8, 10, 16, 32, 64, 100, 128, 255, 256, 512, 1000, 1024, 4096, 65536)


class _FileRng(random.Random):
    """One file's RNG with the few names that file is about.

    A real module uses a handful of concepts over and over; drawing from a per-file
    subset of the vocabulary gives 4 KB chunks the ~3x zstd ratio real code has.
    """

    def __init__(self, seed: int, words: int, verbs: int, cwords: int) -> None:
        super().__init__(seed)
        self.words = self.sample(_WORDS, words)
        self.verbs = self.sample(_VERBS, verbs)
        self.cwords = self.sample(_COMMENT_WORDS, cwords)
        self.py_types = self.sample(_PY_TYPES, 5)
        self.rs_types = self.sample(_RS_TYPES, 5)

    def word(self) -> str:
        return self.choice(self.words)

    def verb(self) -> str:
        return self.choice(self.verbs)

    def cword(self) -> str:
        return self.choice(self.cwords)

    def num(self) -> int:
        # Mostly the usual constants; now and then an odd one.
        return self.choice(_NUMBERS) if self.random() < 0.8 else self.randint(0, 9999)


def _name(rng: _FileRng, parts: int = 2) -> str:
    return "_".join([rng.verb()] + [rng.word() for _ in range(parts - 1)])


def _camel(rng: _FileRng) -> str:
    return "".join(rng.word().capitalize() for _ in range(rng.randint(1, 3)))


def _sentence(rng: _FileRng, lo: int = 5, hi: int = 12) -> str:
    words = [rng.cword() for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def _py_function(rng: _FileRng, indent: str) -> list[str]:
    args = [rng.word() for _ in range(rng.randint(0, 3))]
    sig = ", ".join(["self"] * bool(indent) + [f"{a}: {rng.choice(rng.py_types)}" for a in args])
    out = [f"{indent}def {_name(rng, rng.randint(2, 3))}({sig}) -> {rng.choice(rng.py_types)}:",
           f'{indent}    """{_sentence(rng)}"""']
    for _ in range(rng.randint(2, 7)):
        var, other = rng.word(), rng.word()
        kind = rng.random()
        if kind < 0.25:
            out.append(f"{indent}    {var} = self.{other}.get({rng.word()!r}, "
                       f"{rng.num()})")
        elif kind < 0.45:
            out.append(f"{indent}    if {var} is None or len({var}) > {rng.num()}:")
            out.append(f"{indent}        raise ValueError(f\"{_sentence(rng, 3, 6)} {{{var}!r}}\")")
        elif kind < 0.6:
            out.append(f"{indent}    for {var} in {other}:")
            out.append(f"{indent}        self.{_name(rng)}({var}, {rng.word()})")
        elif kind < 0.7:
            out.append(f"{indent}    # {_sentence(rng, 6, 14)}")
        else:
            out.append(f"{indent}    {var} = {_name(rng)}({other}, "
                       f"{rng.word()}={rng.num():#x})")
    out.append(f"{indent}    return {rng.word()}")
    out.append("")
    return out


def _python_file(rng: _FileRng, target: int) -> str:
    lines = [f'"""{_sentence(rng, 8, 16)}', "", _sentence(rng, 10, 20), '"""', "",
             "from __future__ import annotations", ""]
    for _ in range(rng.randint(2, 5)):
        lines.append(f"from {rng.word()}.{rng.word()} import "
                     f"{_camel(rng)}, {_name(rng)}")
    lines += ["", f"{rng.word().upper()}_{rng.word().upper()} = "
                  f"{rng.randint(1, 1 << 20)}", ""]
    while sum(len(x) + 1 for x in lines) < target:
        if rng.random() < 0.4:
            lines += ["", f"class {_camel(rng)}({_camel(rng)}):", f'    """{_sentence(rng)}"""', ""]
            for _ in range(rng.randint(1, 3)):
                lines += _py_function(rng, "    ")
        else:
            lines += [""] + _py_function(rng, "")
    return "\n".join(lines)


def _rs_function(rng: _FileRng, indent: str) -> list[str]:
    args = [f"{rng.word()}: {rng.choice(rng.rs_types)}" for _ in range(rng.randint(0, 3))]
    if indent:
        args.insert(0, rng.choice(("&self", "&mut self")))
    out = [f"{indent}/// {_sentence(rng)}",
           f"{indent}pub fn {_name(rng, rng.randint(2, 3))}({', '.join(args)}) -> "
           f"{rng.choice(rng.rs_types)} {{"]
    for _ in range(rng.randint(2, 7)):
        var, other = rng.word(), rng.word()
        kind = rng.random()
        if kind < 0.25:
            out.append(f"{indent}    let {var} = self.{other}.get(&{rng.num()})?;")
        elif kind < 0.45:
            out.append(f"{indent}    if {var}.len() > {rng.num()} {{")
            variant = _camel(rng)
            msg = _sentence(rng, 3, 6)
            out.append(f"{indent}        return Err(Error::{variant}(\"{msg}\"));")
            out.append(f"{indent}    }}")
        elif kind < 0.6:
            out.append(f"{indent}    for {var} in {other}.iter() {{")
            out.append(f"{indent}        self.{_name(rng)}({var}, {rng.word()});")
            out.append(f"{indent}    }}")
        elif kind < 0.7:
            out.append(f"{indent}    // {_sentence(rng, 6, 14)}")
        else:
            out.append(f"{indent}    let mut {var} = {_name(rng)}(&{other}, "
                       f"{rng.num():#x});")
    out.append(f"{indent}    {rng.word()}")
    out.append(f"{indent}}}")
    out.append("")
    return out


def _rust_file(rng: _FileRng, target: int) -> str:
    lines = [f"//! {_sentence(rng, 8, 16)}", f"//! {_sentence(rng, 8, 16)}", ""]
    for _ in range(rng.randint(2, 5)):
        lines.append(f"use crate::{rng.word()}::{{{_camel(rng)}, {_name(rng)}}};")
    lines += ["", f"const {rng.word().upper()}_{rng.word().upper()}: usize = "
                  f"{rng.randint(1, 1 << 20)};", ""]
    while sum(len(x) + 1 for x in lines) < target:
        if rng.random() < 0.4:
            name = _camel(rng)
            lines += ["#[derive(Debug, Clone)]", f"pub struct {name} {{"]
            lines += [f"    {rng.word()}: {rng.choice(rng.rs_types)},"
                      for _ in range(rng.randint(2, 5))]
            lines += ["}", "", f"impl {name} {{"]
            for _ in range(rng.randint(1, 3)):
                lines += _rs_function(rng, "    ")
            lines += ["}", ""]
        else:
            lines += _rs_function(rng, "")
    return "\n".join(lines)


def generate_corpus(root: Path, count: int, seed: int) -> list[str]:
    """Write ``count`` source-like files of ~4 KB under ``root``; return their paths."""
    master = random.Random(seed)
    paths = []
    for i in range(count):
        rng = _FileRng(master.getrandbits(64), words=WORDS_PER_FILE, verbs=VERBS_PER_FILE,
                       cwords=CWORDS_PER_FILE)
        rust = rng.random() < 0.4
        target = rng.randint(3500, 4600)
        text = (_rust_file if rust else _python_file)(rng, target)
        data = text.encode()[:target]
        data = data[: data.rfind(b"\n") + 1] or data
        folder = root / f"pkg_{i // FILES_PER_DIR:03d}"
        if i % FILES_PER_DIR == 0:
            folder.mkdir(parents=True)
        path = folder / f"mod_{i:05d}.{'rs' if rust else 'py'}"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


def corpus_stats(paths: list[str]) -> tuple[int, float]:
    """Return (total bytes, zstd-3 ratio compressing each file on its own)."""
    cctx = zstandard.ZstdCompressor(level=3)
    raw = comp = 0
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        raw += len(data)
        comp += len(cctx.compress(data))
    return raw, raw / comp


# -- measured steps -------------------------------------------------------------------------
def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def new_store(folder: Path) -> Store:
    """A fresh store at ``folder/.ctx`` (untimed setup)."""
    folder.mkdir(parents=True)
    init_store(folder / ".ctx", git=False)
    return open_store(folder / ".ctx")


def ctx_ingest(store: Store, paths: list[str]) -> tuple[float, float, list[ObjectId]]:
    """Ingest every file in one transaction; return (total s, barrier+commit s, ids)."""
    os.sync()
    t0 = time.perf_counter()
    with store.transaction() as tx:
        ids = [tx.put_blob(_read(p)) for p in paths]
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    if len(tx.written) != len(paths):
        raise SystemExit(f"expected {len(paths)} new objects, wrote {len(tx.written)}")
    return t2 - t0, t2 - t1, ids


def ctx_read_verify(store: Store, ids: list[ObjectId]) -> float:
    """Read, decompress and verify every object; return seconds."""
    read = store.objects.read
    t0 = time.perf_counter()
    for oid in ids:
        read(oid)
    return time.perf_counter() - t0


def cpu_floor(paths: list[str], level: int) -> float:
    """Read + envelope + BLAKE3 + zstd, no write: the CPU work (a) cannot avoid."""
    cctx = zstandard.ZstdCompressor(level=level, write_content_size=True)
    t0 = time.perf_counter()
    for p in paths:
        canon = canonical_bytes(KIND_BLOB, _read(p))
        blake3.blake3(canon).digest()
        cctx.compress(canon)
    return time.perf_counter() - t0


def _git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # Git's defaults, not this machine's configuration.
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               LC_ALL="C")
    return env


def git_prepare(folder: Path, src: Path, paths: list[str], env: dict[str, str]) -> None:
    """``git init`` a work tree at ``folder`` holding hard links to the corpus (untimed)."""
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True, env=env)
    made: set[str] = set()
    for p in paths:
        rel = os.path.relpath(p, src)
        sub = os.path.dirname(rel)
        if sub not in made:
            os.makedirs(folder / sub, exist_ok=True)
            made.add(sub)
        try:
            os.link(p, folder / rel)
        except OSError:  # another filesystem: copy instead
            shutil.copyfile(p, folder / rel)


def git_add(folder: Path, env: dict[str, str]) -> float:
    """Time ``git add -A`` in ``folder``; return seconds."""
    os.sync()
    t0 = time.perf_counter()
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True, env=env)
    return time.perf_counter() - t0


def create_probe(folder: Path, count: int = 256) -> float:
    """Median microseconds to create (and close) one empty file in ``folder``.

    The files are kept until the end of the run (see the note on deletions).
    """
    folder.mkdir()
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        os.close(os.open(folder / f"p{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


# -- driver ---------------------------------------------------------------------------------
def _fmt_rate(v: float) -> str:
    return f"{v:,.0f}"


def _summary(label: str, values: list[float], unit: str, fmt: Callable[[float], str]) -> str:
    return (f"{label:<44} {fmt(statistics.median(values)):>10} {fmt(min(values)):>10} "
            f"{fmt(max(values)):>10}  {unit}")


def _versions() -> list[str]:
    try:
        git = subprocess.run(["git", "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        git = "git: not found"
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return [
        f"machine:    {platform.machine()} {platform.system()} {platform.release()}, "
        f"os.cpu_count()={os.cpu_count()}, usable CPUs={usable}",
        f"python:     {platform.python_version()} ({platform.python_implementation()})",
        f"zstandard:  {zstandard.__version__} (libzstd {zstandard.ZSTD_VERSION[0]}."
        f"{zstandard.ZSTD_VERSION[1]}.{zstandard.ZSTD_VERSION[2]}, backend {zstandard.backend})",
        f"blake3:     {blake3.__version__}",
        f"git:        {git}",
    ]


def profile_ingest(base: Path, paths: list[str], top: int) -> None:
    """cProfile one ctx ingest and print where the time goes."""
    store = new_store(base / "profile")
    os.sync()
    prof = cProfile.Profile()
    prof.enable()
    with store.transaction() as tx:
        for p in paths:
            tx.put_blob(_read(p))
    prof.disable()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).strip_dirs().sort_stats(key).print_stats(top)
        text = out.getvalue()
        print(f"\n== cProfile of one ctx ingest ({len(paths):,} files), by {key} ==")
        print(text[text.find("   ncalls"):].rstrip())


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000, help="number of files (default 10000)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--quick", action="store_true", help="1,000 files x 2 rounds")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="corpus RNG seed")
    ap.add_argument("--dir", type=Path, default=None,
                    help="parent of the temp directory (default: the system temp dir); "
                         "put it on the filesystem you care about")
    ap.add_argument("--profile", action="store_true",
                    help="after the rounds, cProfile one ctx ingest and print the top functions")
    ap.add_argument("--profile-top", type=int, default=25, help="rows per profile listing")
    args = ap.parse_args(argv)
    if args.quick:
        args.files, args.rounds = 1_000, 2
    if args.files < 1 or args.rounds < 1:
        ap.error("--files and --rounds must be at least 1")

    have_git = shutil.which("git") is not None
    print("ctx object-store ingest benchmark (bench/objects.py)")
    for line in _versions():
        print(line)

    base = Path(tempfile.mkdtemp(prefix="ctx-bench-objects-", dir=args.dir))
    try:
        src = base / "src"
        t0 = time.perf_counter()
        paths = generate_corpus(src, args.files, args.seed)
        total, ratio = corpus_stats(paths)
        print(f"temp dir:   {base}")
        print(f"corpus:     {len(paths):,} files, {total / 1e6:.1f} MB, mean "
              f"{total / len(paths):,.0f} B/file, zstd-3 ratio {ratio:.2f}x per file "
              f"(seed {args.seed}, generated in {time.perf_counter() - t0:.1f} s)")
        probe = create_probe(base / "probe")
        print(f"create:     {probe:,.0f} us per empty-file create here (median of 256)"
              + ("  <-- SLOW: see the note in --help" if probe > SLOW_CREATE_US else ""))
        print(f"rounds:     {args.rounds} (interleaved; warm page cache: dropping it needs root)")
        print()

        res: dict[str, list[float]] = {k: [] for k in
                                       ("ingest", "barrier", "git", "read", "floor", "ratio")}
        n = len(paths)
        home = base / "home"
        home.mkdir()
        env = _git_env(home)
        for r in range(args.rounds):
            rdir = base / f"round{r}"
            store = new_store(rdir / "ctx")
            if have_git:
                git_prepare(rdir / "git", src, paths, env)

            def run_ctx(store: Store = store) -> None:
                secs, barrier, ids = ctx_ingest(store, paths)
                res["ingest"].append(n / secs)
                res["barrier"].append(barrier * 1000)
                res["read"].append(n / ctx_read_verify(store, ids))

            def run_git(rdir: Path = rdir) -> None:
                if have_git:
                    res["git"].append(n / git_add(rdir / "git", env))

            # Alternate the order so slow drift (thermal, neighbours) hits both sides.
            steps = (run_ctx, run_git) if r % 2 == 0 else (run_git, run_ctx)
            for step in steps:
                step()
            res["floor"].append(n / cpu_floor(paths, store.objects.staging.compression_level))
            line = (f"round {r + 1}/{args.rounds}: ctx ingest {_fmt_rate(res['ingest'][-1])}/s "
                    f"(barrier+commit {res['barrier'][-1]:.0f} ms), ")
            if have_git:
                res["ratio"].append(res["ingest"][-1] / res["git"][-1])
                line += (f"git add -A {_fmt_rate(res['git'][-1])}/s, "
                         f"ratio {res['ratio'][-1]:.2f}x, ")
            line += (f"ctx read+verify {_fmt_rate(res['read'][-1])}/s, "
                     f"CPU floor {_fmt_rate(res['floor'][-1])}/s")
            print(line, flush=True)
            # Nothing is deleted until the end: on ext4 without a journal, every create
            # scans past inodes freed in the last 60-300 s (fs/ext4/ialloc.c
            # recently_deleted), so deleting a round here would slow the next one.

        print()
        print(f"{'figure (' + format(n, ',') + ' objects, ' + str(args.rounds) + ' rounds)':<44} "
              f"{'median':>10} {'min':>10} {'max':>10}  unit")
        print(_summary("(a) ctx durable ingest (read+put+barrier)", res["ingest"],
                       "objects/s", _fmt_rate))
        if have_git:
            print(_summary("(b) git add -A (git defaults, no fsync)", res["git"],
                           "objects/s", _fmt_rate))
        print(_summary("(c) ctx read + verify", res["read"], "objects/s", _fmt_rate))
        print(_summary("    ctx barrier + commit, part of (a)", res["barrier"], "ms",
                       lambda v: f"{v:,.0f}"))
        print(_summary("    CPU floor of (a): read+BLAKE3+zstd, no write", res["floor"],
                       "objects/s", _fmt_rate))
        if have_git:
            print(_summary("ratio (a)/(b), per round", res["ratio"], "x",
                           lambda v: f"{v:.2f}x"))
            med = statistics.median(res["ratio"])
            verdict = "meets" if med >= 1.5 else "misses"
            print(f"\ngoal: durable ctx ingest >= 1.5x git add -A throughput -> {verdict} "
                  f"(median of per-round ratios {med:.3f}x)")
        else:
            print("\ngit not found: (b) and the ratio were skipped")

        if args.profile:
            profile_ingest(base, paths, args.profile_top)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
