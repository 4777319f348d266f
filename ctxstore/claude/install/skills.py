"""The skills ``ctx install`` writes: the ``ctx`` skill and the slash-command skills.

``ctx`` (``SKILL.md`` packaged beside ``ctxstore.claude``) teaches the agent the command
tags; ``/recall``, ``/remember``, ``/forget``, ``/consolidate``, ``/index-code``, ``/pin``
and the transcript-memory skills ``/memory-recall``, ``/memory-stats``, ``/memory-topics``,
``/memory-backfill`` (spec 004 §6) are packaged as ``ctxstore/claude/skills/<name>/SKILL.md``
and installed next to it (``.claude/skills/<name>/SKILL.md``, or ``skills/<name>/`` of the
plugin). Each file carries ``SKILL_MARKER``: a skill of the same name that the user wrote
(no marker) is left alone, and uninstall removes only files that still carry it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ctxstore.claude.install.plan import Plan

__all__ = ["SKILL_MARKER", "SKILL_NAMES", "plan_skills", "plan_unskills", "skill_files",
           "skill_text"]

SKILL_MARKER = "<!-- written by `ctx install`; `ctx uninstall` removes this file -->"
SKILL_NAMES = ("recall", "remember", "forget", "consolidate", "index-code", "pin",
               "memory-recall", "memory-stats", "memory-topics", "memory-backfill")


def skill_text() -> bytes:
    """The packaged ``ctx`` SKILL.md."""
    return resources.files("ctxstore.claude").joinpath("SKILL.md").read_bytes()


def skill_files() -> dict[str, bytes]:
    """The packaged slash-command skills: name -> SKILL.md bytes.

    Returns:
        One entry per name of ``SKILL_NAMES``.
    """
    root = resources.files("ctxstore.claude").joinpath("skills")
    return {name: root.joinpath(name, "SKILL.md").read_bytes() for name in SKILL_NAMES}


def plan_skills(plan: Plan, skills_dir: Path) -> None:
    """Plan writing every slash-command skill under ``skills_dir`` (``.claude/skills`` or a plugin's).

    A SKILL.md there without ``SKILL_MARKER`` is the user's own skill of that name and is
    kept as it is.

    Args:
        plan: The install plan (it checks every path).
        skills_dir: The folder holding one folder per skill.

    Raises:
        UnsafePath: (E020) if a path fails the plan's checks.
        InvalidInput: if a file there is too large.
    """
    for name, text in skill_files().items():
        path = skills_dir / name / "SKILL.md"
        old = plan.read(path)
        if old is not None and SKILL_MARKER.encode() not in old:
            continue  # someone's own /<name>: never replaced
        plan.add(path, text)


def plan_unskills(plan: Plan, skills_dir: Path, stop: Path) -> None:
    """Plan removing the skills ``plan_skills`` wrote (only files still carrying the marker).

    Args:
        plan: The uninstall plan.
        skills_dir: The folder holding one folder per skill.
        stop: The highest folder removed when left empty.

    Raises:
        UnsafePath: (E020) if a path fails the checks, or a file to delete is a link.
        InvalidInput: if a file there is too large.
    """
    for name in SKILL_NAMES:
        path = skills_dir / name / "SKILL.md"
        old = plan.read(path)
        if old is not None and SKILL_MARKER.encode() in old:
            plan.add(path, None)
            plan.prune_dirs.append((path.parent, stop))
