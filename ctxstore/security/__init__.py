"""Security: the one secret scanner every write path passes its content through, and purge.

``secrets`` finds credentials (a vendored rule set run by a linear-time regex engine) and
applies the ``[security]`` policy of each write path: explicit writes are refused, automatic
capture is redacted. ``purge`` removes content from the ctx history. docs/security.md.
"""

__all__: list[str] = []
