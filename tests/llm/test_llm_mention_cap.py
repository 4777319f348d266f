"""``ctx llm --commit`` stops looking for mentions at the cap (issue 34 item 16).

An answer of megabytes of path-like tokens made every one of them a work-tree lookup
(resolve and stat): 8-9 s after the reply for 4 MiB. The scan now stops at the 64th file
found and looks up at most ``MAX_PATH_LOOKUPS`` distinct paths; the subprocess timeout is
the assertion, and the mentions are still the first 64 in order of appearance.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_ctx

from ctxstore.init import init_store
from ctxstore.llm.respond import MAX_MENTIONS
from tests.llm._llmserver import Behaviour, serve


def _run(tmp_path: Path, answer: str) -> dict:
    work = tmp_path / "w"
    (work / "src").mkdir(parents=True)
    init_store(work / ".ctx", git=False)
    for i in range(100):
        (work / "src" / f"real{i}.py").write_text(f"X = {i}\n")
    pack = tmp_path / "pack.json"
    pack.write_text(json.dumps({"task": "which files?"}))
    with serve(Behaviour(answer=answer)) as url:
        res = run_ctx(["--ctx-dir", str(work / ".ctx"), "llm", "--server", url, "--pack", str(pack),
                       "--commit", "--format", "json", "--timeout", "60"], cwd=work, timeout=6)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_llm_commit_of_megabytes_of_made_up_paths_is_bounded(tmp_path: Path) -> None:
    # ~3.4 MiB: 170,000 distinct paths that do not exist, then real files.
    fake = " ".join(f"lib/d{i}/m{i}.py" for i in range(170_000))
    doc = _run(tmp_path, f"{fake} src/real1.py src/real2.py")
    assert doc["committed"] is not None
    # Past the lookup cap: the real files at the end are not looked up.
    assert doc["mentions"] == []


def test_llm_commit_mentions_stop_at_the_cap_in_order(tmp_path: Path) -> None:
    real = " ".join(f"src/real{i}.py" for i in range(100))
    fake = " ".join(f"lib/d{i}/m{i}.py" for i in range(170_000))
    doc = _run(tmp_path, f"see {real} and {fake}")
    assert [m["key"] for m in doc["mentions"]] == [f"src/real{i}.py" for i in range(MAX_MENTIONS)]
    assert doc["committed"]["mentions"] == MAX_MENTIONS
