"""``.ci/browser``, which ``.ci/run`` calls first: it installs what the browser tests need.

Run against a PATH of its own, where ``apt-get`` (and ``sudo``, when the tests do not run as
root) are scripts that write down how they were called.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "browser"


def _bin(tmp_path: Path, *, apt_get: str | None) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("bash", "env", "id"):
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    log = tmp_path / "calls.log"
    if apt_get is not None:
        (folder / "apt-get").write_text(
            f'#!/bin/sh\necho "$DEBIAN_FRONTEND apt-get $*" >> {log}\n{apt_get}\n')
    (folder / "sudo").write_text(f'#!/bin/sh\necho "sudo" >> {log}\nexec "$@"\n')
    for script in folder.iterdir():
        if not script.is_symlink():
            script.chmod(0o755)
    return folder


def _run(folder: Path, chromium: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": str(folder), "CHROMIUM_BIN": str(chromium),
           "CHROMEDRIVER_BIN": str(chromium.with_name("chromedriver"))}
    return subprocess.run([str(folder / "bash"), str(SCRIPT)], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return [line for line in log.read_text().splitlines() if line != "sudo"] if log.exists() else []


def test_ci_browser_installs_chromium_and_its_driver_when_missing(tmp_path: Path) -> None:
    folder = _bin(tmp_path, apt_get="exit 0")
    done = _run(folder, tmp_path / "none" / "chromium")
    assert done.returncode == 0, done.stderr
    assert _calls(tmp_path) == ["noninteractive apt-get update -qq",
                                "noninteractive apt-get install -y -qq chromium chromium-driver"]


def test_ci_browser_does_nothing_when_both_are_there(tmp_path: Path) -> None:
    folder = _bin(tmp_path, apt_get="exit 0")
    present = tmp_path / "usr"
    present.mkdir()
    for name in ("chromium", "chromedriver"):
        (present / name).write_text("#!/bin/sh\n")
        (present / name).chmod(0o755)
    done = _run(folder, present / "chromium")
    assert (done.returncode, _calls(tmp_path)) == (0, [])
    (present / "chromedriver").unlink()  # one of the two is not enough
    assert _run(folder, present / "chromium").returncode == 0
    assert len(_calls(tmp_path)) == 2


def test_ci_browser_fails_ci_when_the_install_fails(tmp_path: Path) -> None:
    folder = _bin(tmp_path, apt_get="exit 100")
    done = _run(folder, tmp_path / "none" / "chromium")
    assert done.returncode != 0
    assert _calls(tmp_path) == ["noninteractive apt-get update -qq"]


def test_ci_browser_without_apt_get_says_the_tests_will_skip(tmp_path: Path) -> None:
    folder = _bin(tmp_path, apt_get=None)
    done = _run(folder, tmp_path / "none" / "chromium")
    assert done.returncode == 0
    assert "no apt-get here: the browser tests of ctx ui will be skipped" in done.stderr


def test_ci_run_calls_it_before_the_tests() -> None:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    browser = lines.index(".ci/browser")
    assert browser < next(i for i, line in enumerate(lines) if "pytest" in line)
