#!/usr/bin/env bash
# One command from a fresh checkout to a real tuning session on a private PostgreSQL sandbox:
# installs agenticdb, starts the sandbox (the server's default configuration), tunes it on TPC-H at a small
# scale factor for at most 12 minutes, then prints what changed and why (the session's story). Re-runnable:
# the sandbox and the TPC-H data are kept and reused; each run is a new session in the same journal.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
ADB=.venv/bin/agenticdb
$ADB sandbox up postgres
# TPC-H (22 analytic queries, objective: their total time) is a workload the default configuration serves
# poorly: 128MB shared_buffers against ~500 MB of tables and indexes at SF 0.3, 4MB work_mem for sorts and
# hashes, JIT on for short queries. The session opens with a race of whole configurations (issue 36) and
# proves the leader on fresh pairs; the budget counts everything after the install: the first run also
# loads the data (SF 0.3: ~12 s on 2 quiet cores, ~70 s on busy ones), later runs reuse it.
rc=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
$ADB tune --sandbox postgres --workload tpch --scale "${SCALE:-0.3}" --rounds "${ROUNDS:-3}" \
  --time-budget "${BUDGET_S:-720}" | tee "$out" || rc=$?
# the id of the session just run: from tune's own last line ("agenticdb journal show <id>")
sid=$(grep -o 'journal show [0-9A-Za-z-]*' "$out" | tail -1 | cut -d' ' -f3 || true)
if [ -z "$sid" ]; then
  sid=$($ADB journal list --format json | .venv/bin/python -c 'import json, sys; s = json.load(sys.stdin); print(s[-1]["id"] if s else "")')
fi
bash scripts/demo_story.sh "$sid"
exit $rc
