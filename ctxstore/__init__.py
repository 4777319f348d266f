"""ctxstore: persistent, Git-friendly memory and context for coding agents.

Importing this package is cheap: it loads nothing heavy.
"""

from __future__ import annotations

# The one version: the build reads it (pyproject.toml, tool.setuptools.dynamic); CHANGELOG.md's
# newest entry names it (tests/test_release.py).
__version__ = "0.1.0"
__all__ = ["__version__", "open_store", "CtxError"]

from ctxstore.errors import CtxError


def open_store(path):  # type: ignore[no-untyped-def]
    """Open the store at ``path`` (a ``.ctx`` directory). See ``ctxstore.repo.open_store``."""
    from ctxstore.repo import open_store as _open

    return _open(path)
