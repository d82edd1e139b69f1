"""formulas/speed.py eq. (16), the serving engines' fused-MoE kernel in a decode step: its three constants
(efficiency.FUSED_MOE_STREAM_SHARE, FUSED_MOE_CALL_SECONDS, FUSED_MOE_EXPERT_SECONDS) re-derived from the published
kernel times they were fitted on (validation/fused_moe_kernel_times.csv: vLLM PR #24700, SGLang PR #11730), each row
reproduced; and where the term applies in a decode step (a serving engine on a GPU, bf16 / fp8 experts, not under eq.
15's MLA + MoE roof)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.speed import fused_moe_seconds, moe_expert_fraction
from llmsizer.validation_cases import data_dir

_BYTES = {"fp8": 1, "bf16": 2}


def _rows() -> list[dict[str, str]]:
    with (data_dir() / "fused_moe_kernel_times.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _terms(r: dict[str, str]) -> tuple[float, float, float]:
    """(the touched experts' bytes, the GPU's datasheet bandwidth, the experts touched) of one kernel row: eq. 5 at
    the benchmark's random routing, both expert GEMMs (2 N x K gate/up + K x N down) of each touched expert."""
    e, n, k, top, b = (int(r[x]) for x in ("num_experts", "n", "k", "top_k", "batch"))
    touched = e * moe_expert_fraction(top, e, b)
    bw = float(builtin_catalog().device(r["device"]).bandwidth)
    return touched * 3 * n * k * _BYTES[r["dtype"]], bw, touched


def test_constants_rederived_from_the_kernel_rows() -> None:
    rows = _rows()
    assert len(rows) == 6
    a = np.array([[1.0, nbytes / bw, touched] for nbytes, bw, touched in map(_terms, rows)])
    y = np.array([float(r["kernel_us"]) * 1e-6 for r in rows])
    call, inv_share, each = np.linalg.lstsq(a, y, rcond=None)[0]
    assert E.FUSED_MOE_CALL_SECONDS.expected == pytest.approx(call, rel=0.01)
    assert E.FUSED_MOE_STREAM_SHARE.expected == pytest.approx(1 / inv_share, rel=0.01)
    assert E.FUSED_MOE_EXPERT_SECONDS.expected == pytest.approx(each, rel=0.01)


def test_each_kernel_row_reproduced() -> None:
    for r in _rows():
        nbytes, bw, touched = _terms(r)
        t = fused_moe_seconds(nbytes, bw, E.FUSED_MOE_STREAM_SHARE.expected, 1, touched,
                              E.FUSED_MOE_CALL_SECONDS.expected, E.FUSED_MOE_EXPERT_SECONDS.expected)
        # the comment at the factors: every row within 9 %
        assert t == pytest.approx(float(r["kernel_us"]) * 1e-6, rel=0.095), r["id"]


def test_formula_by_hand_and_bad_input() -> None:
    # 1 GB at 0.5 x 2 TB/s = 1 ms, plus 2 layers x (10 us + 100 x 1 us) = 0.22 ms
    assert fused_moe_seconds(1e9, 2e12, 0.5, 2, 100, 10e-6, 1e-6) == pytest.approx(1.22e-3)
    with pytest.raises(InputError):
        fused_moe_seconds(1e9, 2e12, 0.0, 2, 100, 10e-6, 1e-6)


def _decode(model: str, engine: str, device: str, count: int, fmt: str, conc: int = 32):
    dev = builtin_catalog().device(device)
    return estimate_speed(find(model).spec(), dev, count, weights_format=fmt, prompt_tokens=1024, output_tokens=128,
                          concurrency=conc, kv_dtype="bf16", engine=engine)


def test_where_the_term_applies() -> None:
    s = _decode("qwen3.5-397b-a17b", "vllm", "b200", 8, "bf16")
    names = [a.name for a in s.assumptions]
    assert "fused_moe_kernel" in names
    # 60 MoE layers, 512 experts top 10 at 32 sequences: 240 touched (eq. 5)
    value = next(a.value for a in s.assumptions if a.name == "fused_moe_kernel")
    assert str(value).startswith("60 x (27.5 us + 239.6 experts")
    # the MLA + MoE roof (eq. 15) holds the fused-MoE kernels already: no eq. 16
    d = _decode("deepseek-r1", "sglang", "h200", 8, "fp8-block", 8)
    assert "fused_moe_kernel" not in [a.name for a in d.assumptions]
    assert E.fused_moe_kernel("llama.cpp", "gpu", "bf16", 0.0) is False
    assert E.fused_moe_kernel("vllm", "gpu", "mxfp4", 0.0) is False
    assert E.fused_moe_kernel("vllm", "gpu", "fp8-block", 0.0) is True
    assert E.fused_moe_kernel("vllm", "gpu", "fp8-block", 0.01) is False
