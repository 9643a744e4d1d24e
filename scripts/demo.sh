#!/usr/bin/env bash
# One command from a fresh checkout to a real tuning session on a private PostgreSQL sandbox:
# installs agenticdb, starts the sandbox, tunes it with pgbench, shows the journal. Re-runnable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
ADB=.venv/bin/agenticdb
$ADB sandbox up postgres
rc=0
$ADB tune --sandbox postgres --workload pgbench --rounds "${ROUNDS:-4}" --duration "${DURATION:-10}" --reset-data || rc=$?
$ADB journal list
echo
echo "Read the story of the session:  $ADB journal show <session-id>"
echo "Remove the sandbox:             $ADB sandbox down postgres"
exit $rc
