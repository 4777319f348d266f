"""Fixtures of the ``ctx ui`` tests: the project, a running server, and a headless Chromium.

The browser is Debian's ``chromium`` driven through its ``chromium-driver`` by selenium (the
test extra). When they are missing and the tests run as root on a machine with apt-get (a
fresh CI machine), the session installs them once, under a lock that pytest-xdist workers
share; otherwise the browser tests are skipped, saying why.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.ui.server import UiServer
from tests.ui.project import Project, make_project

CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")
# Flags that keep Chromium off the network (it would otherwise reach update, sync and field
# trial servers) and out of the user's profile.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--disable-extensions", "--no-default-browser-check",
                  "--window-size=1280,900", "--force-device-scale-factor=1")
_INSTALL_LOCK = Path(tempfile.gettempdir()) / "ctx-tests-chromium.lock"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return make_project(tmp_path_factory.mktemp("ui"))


@pytest.fixture(scope="module")
def server(project: Project) -> Iterator[UiServer]:
    """A running server over the project, on a thread of this process."""
    ui = UiServer.start(project.ctx)
    thread = threading.Thread(target=ui.serve_forever, daemon=True)
    thread.start()
    yield ui
    ui.shutdown()
    thread.join(10)
    ui.close()


def _install_chromium() -> str | None:
    """Install chromium and chromium-driver with apt-get when missing; the reason when impossible."""
    if CHROMIUM.exists() and DRIVER.exists():
        return None
    if os.geteuid() != 0:
        return ("the browser tests need Debian's chromium and chromium-driver: "
                "apt-get install -y chromium chromium-driver (as root)")
    if shutil.which("apt-get") is None:
        return "the browser tests need chromium and chromedriver, and there is no apt-get here"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open(_INSTALL_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer; the other workers wait for it
        if CHROMIUM.exists() and DRIVER.exists():
            return None
        for command in (["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"]):
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
            if done.returncode != 0:
                return (f"installing chromium failed ({' '.join(command)}, exit "
                        f"{done.returncode}): {done.stderr.strip()[-400:]}")
    return None if CHROMIUM.exists() and DRIVER.exists() else "apt-get installed no chromium"


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Chromium's binary, installed when missing and possible (else the test is skipped)."""
    reason = _install_chromium()
    if reason is not None:
        pytest.skip(reason)
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium with a fresh profile, its console log kept."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the test extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
