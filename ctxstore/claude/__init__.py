"""Claude Code integration: hooks, transcripts, command tags, install, skill, CLAUDE.md."""
