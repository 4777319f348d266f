"""The suite runs as a new user would: no test depends on the user's own Git configuration.

tests/conftest.py scrubs the environment when it is imported, so a fixture of any scope runs Git
with a fixed identity and reads neither ``~/.gitconfig`` (identity, ``init.defaultBranch``,
signing, ``core.hooksPath``) nor ``/etc/gitconfig``. The module-scoped fixture below runs before
any function-scoped fixture, as test_containment.py's template repository does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.git


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture(scope="module")
def module_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A repository committed to at module scope, and the Git configuration seen there."""
    repo = tmp_path_factory.mktemp("module-git") / "repo"
    repo.mkdir()
    outside = _git("config", "--list", "--show-origin", cwd=repo.parent)
    _git("init", "-q", "-b", "main", cwd=repo)
    (repo / "a.txt").write_text("a\n")
    _git("add", "a.txt", cwd=repo)
    _git("commit", "-q", "-m", "first", cwd=repo)
    return repo, outside


def test_a_module_scoped_fixture_commits_with_the_suite_identity(
        module_repo: tuple[Path, str]) -> None:
    repo, _ = module_repo
    author = _git("log", "-1", "--format=%an <%ae>|%cn <%ce>", cwd=repo).strip()
    assert author == "t <t@example.invalid>|t <t@example.invalid>"


def test_no_global_or_system_git_configuration_reaches_any_fixture(
        module_repo: tuple[Path, str], tmp_path: Path) -> None:
    _, outside = module_repo
    assert outside == ""  # seen at module scope
    assert _git("config", "--list", "--show-origin", cwd=tmp_path) == ""  # and in a test
