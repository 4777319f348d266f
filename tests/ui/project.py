"""A small project for ``ctx ui`` tests: a Python import cycle, knowledge, commits, transcripts.

``pkg/a.py`` imports ``pkg.b`` and ``pkg/b.py`` imports ``pkg.a`` (an import cycle the graph
must draw); ``pkg/c.py`` imports ``pkg.a`` only. A decision mentions ``pkg/a.py`` and is then
updated (two versions in its history); a task, a note and a fact; two canonical commits; a
transcript session indexed into transcript memory. Built with the real CLI, in-process.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ctxstore.cli import cli
from ctxstore.init import init_store
from tests.memory.memtx import conversation

FILES = {
    "pkg/__init__.py": "",
    "pkg/a.py": "from pkg import b\n\n\ndef alpha():\n    \"\"\"Read the session cache.\"\"\"\n"
                "    return b.beta() + 1\n",
    "pkg/b.py": "from pkg import a\n\n\ndef beta():\n    return 1\n\n\ndef gamma():\n"
                "    return a.alpha()\n",
    "pkg/c.py": "from pkg import a\n\n\ndef retry_loop(times):\n    for _ in range(times):\n"
                "        a.alpha()\n",
}


class Project:
    """The project's paths and the ids of what it holds."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.ctx = work / ".ctx"
        self.decision = ""
        self.task = ""
        self.note = ""
        self.fact = ""


def _run(runner: CliRunner, ctx: Path, *args: str) -> str:
    res = runner.invoke(cli, ["--ctx-dir", str(ctx), *args])
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.stdout.strip()


def make_project(root: Path) -> Project:
    """Build the project under ``root/repo``."""
    work = root / "repo"
    for rel, text in FILES.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    project = Project(work)
    init_store(project.ctx, git=False)
    runner = CliRunner()
    _run(runner, project.ctx, "index")
    project.decision = _run(runner, project.ctx, "add", "decision",
                            "Keep the session cache in pkg/a.py behind one function").split()[0]
    project.task = _run(runner, project.ctx, "add", "task",
                        "Fix the retry loop in pkg/c.py").split()[0]
    _run(runner, project.ctx, "commit", "-m", "first session: the cache decision")
    project.note = _run(runner, project.ctx, "add", "note",
                        "The retry loop calls alpha three times per request").split()[0]
    project.fact = _run(runner, project.ctx, "add", "--type", "fact",
                        "Python 3.11 is the oldest supported version").split()[0]
    _run(runner, project.ctx, "update", project.decision, "--content",
         "Keep the session cache in pkg/a.py behind one function, alpha()")
    _run(runner, project.ctx, "commit", "-m", "second session: notes")
    transcript = conversation().write(root / "transcripts" / "session.jsonl")
    _run(runner, project.ctx, "memory", "backfill", str(transcript))
    return project


def tree_digest(root: Path, *, skip: tuple[str, ...] = ("index",)) -> dict[str, bytes]:
    """Every file under the store ``root`` with its bytes, except the top folders in ``skip``.

    Stricter than ``store_digest``: ``local/`` (hook state, transcript memory) and ``DERIVED/``
    (the SCC view) count too. The derived index may be caught up by any reader, and a reader
    of a SQLite file in WAL mode may leave its (empty) write-ahead log and shared-memory files
    behind, which hold no data of the database.
    """
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in skip or not path.is_file() or rel.endswith(("-shm", "-wal")):
            continue
        out[rel] = path.read_bytes()
    return out
