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


def test_smoke_moegemm_set_writes_gemm_records_beside_the_cores_prediction(tmp_path: Path) -> None:
    """LLMSIZER_GPU_SET=moegemm --smoke: bench/gpu_moe_gemm.py's one tiny case (PM1362's experts at 16 tokens, fp32
    on the CPU) through the script's plumbing, into validation/measured/gemm/ (not read by ``llmsizer validate``):
    a header record, then each variant's GEMMs timed with llmsizer's predicted seconds beside them."""
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path), LLMSIZER_GPU_VENV=str(tmp_path / "venv"),
               TMPDIR=str(tmp_path), LLMSIZER_GPU_SET="moegemm")
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_validation.sh"), "--smoke"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not list((tmp_path / "validation" / "measured").glob("*.jsonl"))
    files = list((tmp_path / "validation" / "measured" / "gemm").glob("smoke-*-moegemm.jsonl"))
    assert len(files) == 1
    head, *records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert head["kind"] == "gemm-set" and head["dtypes"] == ["fp32"] and head["device"]["catalog_id"] == "h100-sxm"
    fp8 = [r for r in records if r["dtype"] == "fp8"]  # the FP8 path's tiny case (fp8_smoke_case), where torch has it
    records = [r for r in records if r["dtype"] == "fp32"]
    assert head["fp8_smoke"] == bool(fp8) and all(r["status"] == "ok" for r in fp8)
    assert [(r["status"], r["variant"]) for r in records] == [("ok", "te-4-streams"), ("ok", "dense-same-flops")]
    for r in records:
        assert [g["role"] for g in r["gemms"]] == ["fc1.fwd", "fc1.dgrad", "fc1.wgrad", "fc2.fwd", "fc2.dgrad",
                                                   "fc2.wgrad"]
        for g in r["gemms"]:
            assert g["device_seconds"] > 0 and g["predicted_seconds"] > 0
            assert g["measured_over_predicted"] == pytest.approx(g["device_seconds"] / g["predicted_seconds"])
        t = r["total"]
        assert t["predicted_seconds"] == pytest.approx(sum(g["predicted_seconds"] for g in r["gemms"]))
    grouped = records[0]
    assert grouped["streams"] == 4 and {g["count"] for g in grouped["gemms"]} == {8}
    assert grouped["total"]["core_check_seconds"] == pytest.approx(grouped["total"]["predicted_seconds"], rel=1e-12)
