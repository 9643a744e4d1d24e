#!/usr/bin/env bash
# The demo's last part (scripts/demo.sh): a session's story from the journal and how to read it again.
# Usage: scripts/demo_story.sh <session-id>   (ADB: the agenticdb command, default .venv/bin/agenticdb;
# tests/test_cli.py keeps its output in tests/golden/demo-tail.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
ADB=${ADB:-.venv/bin/agenticdb}
sid=${1:-}
echo
echo "What changed and why (the session's story from the journal):"
echo "\$ $ADB journal show $sid"
$ADB journal show $sid || true
echo
echo "Read it again:       $ADB journal show ${sid:-<session-id>}"
echo "Remove the sandbox:  $ADB sandbox down postgres"
