#!/usr/bin/env bash
# Create .venv and install llmsizer (its one dependency, PyYAML, comes with it: pyproject.toml). Pass "test" to add the test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ "${1:-}" = "test" ]; then
  # torch pinned exactly: 2.13.0 is the CPU build; any other spec pulls a multi-GB CUDA build
  .venv/bin/python -m pip install -q torch==2.13.0
  .venv/bin/python -m pip install -q -e ".[test]"
  # mamba_ssm / causal-conv1d sources (pinned sdists, unpacked only) for the Mamba kernel-path test
  .venv/bin/python scripts/fetch_kernel_sources.py
else
  .venv/bin/python -m pip install -q -e .
fi
