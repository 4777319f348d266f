#!/usr/bin/env bash
# A short tour of ctx in a throw-away Git repository: init, a few writes, a commit,
# the log and an integrity check. Safe to run anywhere; it cleans up after itself.
set -euo pipefail

demo=$(mktemp -d "${TMPDIR:-/tmp}/ctx-demo.XXXXXX")
trap 'rm -rf "$demo"' EXIT
cd "$demo"
git init -q -b main .
git config user.name "ctx demo"
git config user.email "demo@example.invalid"
git config commit.gpgsign false

run() { printf '\n$ %s\n' "$*"; "$@"; }

run ctx init
run ctx stage start "Add connection retry with exponential backoff"
run ctx add --type decision --tag topic:retry "Retry with exponential backoff and jitter: 100 ms initial, 10 s cap, 5 tries"
run ctx add --type fact --tag topic:retry "Client::connect fails transiently when the server restarts"
echo "Tests pass with the retry loop in place" | run ctx add --type observation --stdin
run ctx stage status
run ctx commit -m "Record the retry design"
run ctx log
run ctx debug state
run ctx debug verify
printf '\n$ git status --short .ctx | head\n'
git status --short .ctx | head
