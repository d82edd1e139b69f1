"""bench/gpu_validation.sh --smoke: the GPU matrix's plumbing (interpreter choice, per-case processes, timeouts,
the JSONL it writes for validation/measured/) run end to end on the CPU with two tiny cases.

What it cannot show without a GPU: the CUDA figures themselves (max_memory_allocated/reserved, NVML). Those are
the device half of the measure issue; this keeps the script that will collect them runnable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_matrix_runs_and_writes_comparable_records(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path), LLMSIZER_GPU_VENV=str(tmp_path / "venv"),
               TMPDIR=str(tmp_path))
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_validation.sh"), "--smoke"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    files = list((tmp_path / "validation" / "measured").glob("smoke-*.jsonl"))
    assert len(files) == 1
    records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [r["kind"] for r in records] == ["inference", "training"]
    for r in records:
        assert r["status"] == "ok", r.get("error")
        peak = next(c for c in r["comparison"] if c["component"] == "peak tensors")
        assert abs(peak["error"]) <= 0.10, peak
    assert not (tmp_path / "venv").exists()  # the running interpreter already had torch + transformers + peft
