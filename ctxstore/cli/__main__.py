"""``python -m ctxstore.cli``."""

from ctxstore.cli import main

main()
