"""End-to-end tests against the real Claude Code CLI (see conftest.py)."""
