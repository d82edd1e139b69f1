#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, lint and type checks.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh test
.venv/bin/python -m ruff check src tests bench
.venv/bin/python -m mypy
.venv/bin/python -m pytest "$@"
