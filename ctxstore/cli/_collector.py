"""The cyclic garbage collector around a command line's start (``ctxstore.cli.main``).

Importing click, the root group and a command's module allocates tens of thousands of
objects that live as long as the process (modules, classes, functions): the collector would
only rescan them (about 30 collections in a ``ctx index`` process, 6-15 ms). ``main`` turns
it off while the command line starts (``pause``); ``resume`` moves what exists out of its
sight (``gc.freeze``) and turns it back on before the command runs, so a long-lived command
(``ctx mcp``, ``ctx ui``) collects its own garbage as usual. Nothing here imports click.
"""

from __future__ import annotations

import gc

__all__ = ["pause", "resume"]

_paused = False


def pause() -> None:
    """Turn the collector off while this process, which runs one command, starts."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Freeze what exists and turn the collector back on, if ``pause`` turned it off."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
