#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, lint and type checks.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh test
.venv/bin/python -m ruff check src tests bench
.venv/bin/python -m mypy
# --durations=25: every log names the slowest tests (docs/architecture.md, "A test that runs real ranks")
.venv/bin/python -m pytest --durations=25 "$@"
