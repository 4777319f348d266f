"""The Markdown templates shipped with the package (``narrative_templates/``), rendered.

A new store's ``narrative/README.md`` (``init``) and every entry ctx writes into narrative
files (``narrative/``) come from these templates. A base module: it imports nothing of
ctxstore, so the storage layer (``init``) and the operations layer share it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["TEMPLATE_DIR", "read_template", "render_template"]

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "narrative_templates"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def read_template(name: str) -> str:
    """Return the text of a narrative template shipped with the package.

    Args:
        name: The template's file name (``log_entry.md``).

    Returns:
        Its text.

    Raises:
        FileNotFoundError: if the template is not installed.
    """
    for base in (TEMPLATE_DIR, Path(__file__).resolve().parent / "narrative_templates"):
        path = base / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"narrative template {name} is not installed")


def render_template(name: str, **values: str) -> str:
    """A template with each ``{key}`` replaced by its value; other braces are left alone.

    One pass over the template, so a value holding ``{text}`` or ``{end}`` stays as
    written. A line holding only a key whose value is empty is left out (an entry
    without a body has no blank line for it).

    Args:
        name: The template's file name.
        **values: The value of each placeholder.

    Returns:
        The rendered text, ending in one newline.

    Raises:
        FileNotFoundError: if the template is not installed.
    """
    empty = {"{" + key + "}" for key, value in values.items() if not value}
    lines = [line for line in read_template(name).rstrip("\n").split("\n")
             if line.strip() not in empty]
    text = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), "\n".join(lines))
    return text.rstrip() + "\n"
