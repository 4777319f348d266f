"""The memory browser's assets ship in the wheel and fetch nothing from anywhere else.

The tests run ctx from its source tree, where ``importlib.resources`` finds every file; an
installed wheel holds only what ``pyproject.toml`` declares as package data, so the
declaration is what is checked here.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from ctxstore.ui.pages import ASSETS, PAGE_TEMPLATE, PAGES
from ctxstore.ui.server import asset_bytes

ROOT = Path(__file__).resolve().parents[2]
ASSET_DIR = ROOT / "ctxstore" / "ui" / "assets"
# The one absolute URL in the assets: the SVG namespace, a name that is never fetched.
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def _setuptools() -> dict[str, object]:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        tool: dict[str, object] = tomllib.load(handle)["tool"]["setuptools"]
    return tool


def test_assets_every_file_is_declared_package_data_of_a_listed_package() -> None:
    tool = _setuptools()
    packages = tool["packages"]
    assert isinstance(packages, list) and {"ctxstore.ui", "ctxstore.browse"} <= set(packages)
    data = tool["package-data"]
    assert isinstance(data, dict)
    globs = data["ctxstore.ui"]
    files = sorted(p.relative_to(ASSET_DIR.parent).as_posix() for p in ASSET_DIR.rglob("*")
                   if p.is_file())
    # The pages are filled from the one template (``asset_bytes``): only it is a file.
    assert files == sorted(f"assets/{name}" for name in (PAGE_TEMPLATE, *ASSETS))
    for name in files:
        assert any(fnmatch.fnmatch(name, glob) for glob in globs), (name, globs)


@pytest.mark.parametrize("name", [*PAGES, *ASSETS])
def test_assets_name_no_other_origin(name: str) -> None:
    text = asset_bytes(name).decode("utf-8").replace(SVG_NAMESPACE, "")
    # absolute and protocol-relative URLs, CSS imports; comments included (a URL in a comment
    # is one a later edit may turn into a fetch)
    assert re.findall(r"(?i)\b[a-z][a-z0-9+.-]*://|[\"'(]//|@import", text) == []


@pytest.mark.parametrize("page", PAGES)
def test_assets_each_page_loads_only_shipped_files_and_its_data(page: str) -> None:
    text = asset_bytes(page).decode("utf-8")
    loaded = re.findall(r"""<(?:script|link)\b[^>]*?\b(?:src|href)="([^"]*)\"""", text)
    assert loaded and "assets/app.js" in loaded
    for target in loaded:
        assert target == "data.js" or target == "data:," or (
            target.startswith("assets/") and target.removeprefix("assets/") in ASSETS), target
