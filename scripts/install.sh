#!/usr/bin/env bash
# Install agenticdb and everything its tests and benchmarks need (Debian 12, run as root or with sudo).
#   Debian packages: sysbench, pgbench (postgresql-contrib/client), PostgreSQL 15 and MariaDB server binaries,
#   mysqltuner (the harness's MariaDB static peer, benchmarks/harness/mysqltuner.py).
#   Python: a virtualenv in .venv with agenticdb (editable), the test extras and the benchmark extras
#   (optuna, matplotlib: the harness smoke test draws its PNG) and the plot extra (matplotlib:
#   `agenticdb report --plot`).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
command -v sysbench >/dev/null || need+=(sysbench)
command -v pgbench >/dev/null || [ -x /usr/lib/postgresql/15/bin/pgbench ] || need+=(postgresql-client)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v mariadb-install-db >/dev/null || need+=(mariadb-server)
command -v runuser >/dev/null || need+=(util-linux)
command -v mysqltuner >/dev/null || need+=(mysqltuner)
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[test,bench,plot]'
echo "installed: $(.venv/bin/agenticdb --help >/dev/null && echo agenticdb CLI ok)"
