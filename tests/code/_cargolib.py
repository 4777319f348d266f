"""The real cargo for the tests that run it, installed once when missing (even by two workers).

When cargo is missing and we are root, Debian's package is installed (``apt-get install -y
cargo``). Under pytest-xdist several workers may ask at once: a lock file in the temporary
directory makes one of them install while the others wait, so none sees a half-installed
cargo or skips because another worker has not finished yet.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["cargo_environment"]


def _find_cargo() -> tuple[str | None, Path]:
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)  # the real one: tests scrub HOME
    rustup = home / ".cargo" / "bin" / "cargo"
    return shutil.which("cargo") or (str(rustup) if rustup.is_file() else None), home


def _install_cargo() -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "install", "-y", "cargo"], ["apt-get", "update"],
                 ["apt-get", "install", "-y", "cargo"]):
        res = subprocess.run(argv, env=env, capture_output=True, timeout=1800)
        if argv[1] == "install" and res.returncode == 0:
            return


def cargo_environment() -> dict[str, str]:
    """The variables that run the real cargo offline; skips the test when there is none.

    Returns:
        ``CARGO`` (its path), ``CARGO_NET_OFFLINE``, and rustup's ``RUSTUP_HOME`` and
        ``CARGO_HOME`` when they exist.
    """
    lock = Path(tempfile.gettempdir()) / f"ctx-tests-cargo-{os.getuid()}.lock"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when closed
        cargo, home = _find_cargo()
        if cargo is None and os.geteuid() == 0 and shutil.which("apt-get"):
            _install_cargo()
            cargo, home = _find_cargo()
    if cargo is None:
        pytest.skip("cargo is not installed and could not be installed "
                    "(not root, or `apt-get install -y cargo` failed)")
    found = {"CARGO": cargo, "CARGO_NET_OFFLINE": "true"}
    for var, folder in (("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")):
        if (home / folder).is_dir():  # rustup's proxies find their toolchain there
            found[var] = str(home / folder)
    return found
