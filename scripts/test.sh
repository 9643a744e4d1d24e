#!/usr/bin/env bash
# The test suite: real private PostgreSQL and MariaDB instances, real sysbench/pgbench, real SQLite,
# real /proc/sys writes (restored) when run as root. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest -q --durations=15 "$@"
