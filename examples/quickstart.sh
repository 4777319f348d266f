#!/usr/bin/env bash
# A short tour of ctx in a throw-away Git repository: init, indexing a small code base, a
# few writes, a task and a note in the narrative Markdown, a failing test run, a commit, the
# log, ranked search, a prompt pack for a task, what a Claude Code session start injects, and
# an integrity check. Safe to run anywhere; it cleans up after itself.
set -euo pipefail

demo=$(mktemp -d "${TMPDIR:-/tmp}/ctx-demo.XXXXXX")
trap 'rm -rf "$demo"' EXIT
cd "$demo"
git init -q -b main .
git config user.name "ctx demo"
git config user.email "demo@example.invalid"
git config commit.gpgsign false

run() { printf '\n$ %s\n' "$*"; "$@"; }

mkdir -p netlib
cat > netlib/client.py <<'PY'
"""A tiny network client."""
from netlib.backoff import delays


class Client:
    def connect(self, host: str) -> None:
        """Open a connection; retried with backoff when the server restarts."""
        for delay in delays(tries=5):
            if self._try(host):
                return
            raise ConnectionError(host)

    def _try(self, host: str) -> bool:
        return bool(host)
PY
cat > netlib/backoff.py <<'PY'
"""Exponential backoff with jitter."""
import random


def delays(tries: int, first: float = 0.1, cap: float = 10.0) -> list[float]:
    return [min(cap, first * 2 ** n) * random.uniform(0.5, 1.0) for n in range(tries)]
PY
touch netlib/__init__.py
git add -A && git commit -qm "netlib"

run ctx init
run ctx index
run ctx stage start "Add connection retry with exponential backoff"
fact=$(ctx add --type fact --tag tier:reference --tag topic:retry "Client::connect fails transiently when the server restarts")
echo "\$ ctx add --type fact ...   -> $fact"
decision=$(ctx add --type decision --tag tier:reference --tag topic:retry --meta rationale="avoids retry storms" \
  "Retry with exponential backoff and jitter: 100 ms initial, 10 s cap, 5 tries")
echo "\$ ctx add --type decision ... -> $decision"
echo "Tests pass with the retry loop in place" | run ctx add --type observation --tag tier:working --stdin
run ctx link "$decision" "$fact" --type DEPENDS_ON
run ctx add task "Add connection retry" --body "Max 5 retries, 100 ms initial delay, jitter"
run ctx add note "Retry loop merged; the flaky connect test is green"
printf 'netlib/client.py:11: error: Missing return statement  [return]\nFound 1 error in 1 file\n' \
  | run ctx add command --name mypy --stdin
run ctx stage status
run ctx commit -m "Record the retry design"
run ctx log -n 2
run ctx search "how do we retry a connection?"
run ctx pack "Client.connect gives up too early when the server restarts" --budget 1200 --format text
run ctx query "type:decision AND tag:topic:retry"
run ctx compose --budget 2000
printf '\n$ cat .ctx/narrative/log/*.md\n'
cat .ctx/narrative/log/*.md
printf '\n$ echo {"session_id": ..., "source": "startup"} | ctx hook session-start   # what Claude Code runs\n'
printf '{"session_id":"demo","cwd":"%s","source":"startup","hook_event_name":"SessionStart"}' "$demo" \
  | ctx hook session-start | python3 -c 'import json, sys; print(json.load(sys.stdin)["hookSpecificOutput"]["additionalContext"])'
run ctx status
run ctx debug verify
printf '\n$ git status --short .ctx | head\n'
git status --short .ctx | head
