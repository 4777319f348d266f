"""``ctx ui`` benchmark: each page's answer over real HTTP on 127.0.0.1, against a floor.

Builds, once, in a temp directory (or ``--work DIR``, kept and reused): a work tree holding
copies of the CPython standard library's ``.py`` files (``--files`` of them, 1,000 by default),
indexed with ``ctx index``, with ``--nodes`` knowledge nodes (decisions and notes naming files)
and a commit (which stores the SCC view). Then it starts the server in this process and times
each API answer as the browser asks for it, interleaved round by round with the floor: a GET
of ``data.js`` (the smallest answer: the HTTP round trip and the token check, no store work).

Usage:
    python bench/ui.py                    # 1,000 files, 200 nodes, 7 rounds
    python bench/ui.py --files 5000 --work /tmp/uibench
    python bench/ui.py --quick            # 200 files, 50 nodes, 3 rounds
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

from ctxstore.ui.server import UiServer

STDLIB = Path(os.__file__).parent
PAGES = [
    ("timeline", {}),
    ("graph", {}),
    ("graph", {"level": "all"}),
    ("node", {"ref": "file:lib/json/decoder.py"}),
    ("pack", {"task": "fix the timeout handling when the socket connection is retried"}),
    ("transcripts", {}),
]


def _ctx(work: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(work / ".ctx"),
                           *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def build(work: Path, files: int, nodes: int) -> None:
    """The work tree and its store, unless ``work`` already holds them."""
    if (work / ".ctx" / "HEAD").exists():
        return
    sources = sorted(p for p in STDLIB.rglob("*.py") if "test" not in p.parts
                     and "site-packages" not in p.parts)[:files]
    for src in sources:
        dst = work / "lib" / src.relative_to(STDLIB)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    subprocess.run([sys.executable, "-m", "ctxstore.cli", "init", "--no-git", "--here"], cwd=work,
                   check=True, capture_output=True)
    _ctx(work, "index")
    for i in range(nodes):
        target = sources[i % len(sources)].relative_to(STDLIB)
        kind = "decision" if i % 3 == 0 else "note"
        _ctx(work, "add", kind, f"Item {i}: keep lib/{target} small and its timeout explicit")
    _ctx(work, "commit", "-m", "bench: knowledge")


def _get(conn: http.client.HTTPConnection, path: str) -> float:
    start = time.perf_counter()
    conn.request("GET", path)
    res = conn.getresponse()
    res.read()
    assert res.status == 200, (path, res.status)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.files, args.nodes, args.rounds = 200, 50, 3
    work = args.work or Path(tempfile.mkdtemp(prefix="ctx-ui-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    build(work, args.files, args.nodes)
    print(f"store: {work} ({args.files} files, {args.nodes} nodes; built in "
          f"{time.perf_counter() - started:.1f} s)")
    ui = UiServer.start(work / ".ctx")
    thread = threading.Thread(target=ui.serve_forever, daemon=True)
    thread.start()
    host, port = ui.address
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        paths = [(f"{name} {params or ''}".strip(), f"/{ui.token}/api/{name}?{urlencode(params)}")
                 for name, params in PAGES]
        floor_path = f"/{ui.token}/data.js"
        times: dict[str, list[float]] = {label: [] for label, _ in paths}
        floor: list[float] = []
        for _label, path in paths:  # warm: the first answer also loads the modules it needs
            _get(conn, path)
        for _ in range(args.rounds):
            for label, path in paths:
                floor.append(_get(conn, floor_path))
                times[label].append(_get(conn, path))
        base = statistics.median(floor)
        print(f"floor (GET data.js): median {base:.2f} ms")
        for label, values in times.items():
            med = statistics.median(values)
            print(f"{label:<60} median {med:8.1f} ms  ({med / base:7.0f}x the floor)")
    finally:
        conn.close()
        ui.shutdown()
        thread.join(10)
        ui.close()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
