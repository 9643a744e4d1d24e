#!/usr/bin/env bash
# What a reviewer checks before reading the code: ruff's rules (incl. C901 complexity and BLE blind
# excepts, see pyproject.toml), the ruff format, mypy --strict on the package, and the layer contracts of
# docs/architecture.md (.importlinter: layer order, no import circle). Fails on the first.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy --strict agenticdb
.venv/bin/lint-imports --no-cache
