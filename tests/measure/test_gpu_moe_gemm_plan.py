"""bench/gpu_moe_gemm.py (LLMSIZER_GPU_SET=moegemm of bench/gpu_validation.sh): the GEMMs it times are the rows'
expert GEMMs, and the seconds it predicts for them are llmsizer's.

Independent truth: each row's per-expert shapes by hand from eq. (7) of formulas/gemm_shapes.py, M_e = (T / tp) etp ep
k / E, over the layout its archive line prints (validation/public_measurements.csv PM1361-PM1367: micro-batch x
sequence, TP, EP) and the models' published configs (Qwen3-30B-A3B: hidden 2048, moe_intermediate_size 768, 128
experts, 8 per token; Qwen3-235B-A22B: 4096, 1536, 128, 8; gpt-oss-120b: hidden 2880, intermediate 2880, 128 experts,
4 per token; Nemotron 3 Nano: hidden 2688, moe_intermediate_size 1856, 128 experts, 6 per token, squared-ReLU experts
without a gate); one prediction by hand from eq. (6)'s tile and wave count on the H100 SXM's 132 SMs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gpu_moe_gemm", ROOT / "bench" / "gpu_moe_gemm.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_moe_gemm", mod)
    spec.loader.exec_module(mod)
    return mod


# row: (local experts G = E / ep, M_e, x, I, fc1 width): M_e = micro-batch x seq / tp x ep x k / E
HAND = {
    "PM1362": (128 // 16, 1 * 4096 * 16 * 8 // 128, 2048, 768, 2 * 768),
    "PM1361": (128 // 8, 1 * 4096 * 8 * 4 // 128, 2880, 2880, 2 * 2880),
    "PM1363": (128 // 32, 1 * 4096 // 2 * 32 * 8 // 128, 4096, 1536, 2 * 1536),
    "PM1367": (128 // 8, 1 * 8192 * 8 * 6 // 128, 2688, 1856, 1856),
    "PM1364": (128 // 8, 4 * 4096 * 8 * 4 // 128, 2880, 2880, 2 * 2880),
    "PM1365": (128 // 64, 4 * 4096 * 64 * 4 // 128, 2880, 2880, 2 * 2880),
}


@pytest.mark.parametrize("rid", sorted(HAND))
def test_each_rows_expert_gemms_are_its_shapes(rid: str) -> None:
    g, m, x, i, fc1 = HAND[rid]
    cases = {c.variant: c for c in _bench().expert_cases(rid)}
    assert set(cases) == {"te-4-streams", "1-stream", "dense-same-flops"}
    want = [("fc1.fwd", m, fc1, x), ("fc1.dgrad", m, x, fc1), ("fc1.wgrad", fc1, x, m),
            ("fc2.fwd", m, x, i), ("fc2.dgrad", m, i, x), ("fc2.wgrad", x, i, m)]
    for variant in ("te-4-streams", "1-stream"):
        assert [(q.role, q.m, q.n, q.k, q.count, q.grouped) for q in cases[variant].gemms] == [
            (*w, g, True) for w in want]
    assert cases["te-4-streams"].streams == 4 and cases["1-stream"].streams == 1
    dense = cases["dense-same-flops"].gemms
    assert [q.count for q in dense] == [1] * 6 and not any(q.grouped for q in dense)
    assert [q.flops for q in dense] == [2.0 * a * b * c * g for _, a, b, c in want]


def test_the_prediction_is_the_cores_and_matches_a_hand_count() -> None:
    """PM1365's fc1 forward on an H100 SXM: 2 experts of 32768 x 5760, 256 x 128 tiles: 128 x 45 = 5760 tiles each,
    11520 in ceil(11520 / 132) = 88 waves (the other orientation takes 90), w_G = 2 x 32768 x 5760 / (32768 x 88 x
    132); compute-bound, so t = F / (R u w_G) with the H100 SXM's 989.4 TFLOP/s and Hopper's u. And every grouped
    case's six predictions add up to the core's own expert_gemm_time."""
    b = _bench()
    r = b.rates(b.builtin_catalog().devices["h100-sxm"])
    assert (r.peak, r.sms) == (989.4e12, 132)
    from llmsizer.estimate.efficiency import TRAINING_UTILIZATION_BY_ARCH

    u = TRAINING_UTILIZATION_BY_ARCH["hopper"].expected
    fwd = b.expert_cases("PM1365")[0].gemms[0]
    w = 2 * 32768 * 5760 / (256 * 128 * 88 * 132)
    assert b.predicted_seconds(fwd, "bf16", r) == pytest.approx(2 * 2 * 32768 * 5760 * 2880 / (989.4e12 * u * w),
                                                                rel=1e-12)
    for case in b.plan(False):
        for dtype in ("bf16", "fp8"):
            core = b.core_check_seconds(case, dtype, r)
            if case.variant in ("te-4-streams", "1-stream", "sweep-4-streams"):
                assert core == pytest.approx(sum(b.predicted_seconds(q, dtype, r) for q in case.gemms), rel=1e-12)
            else:
                assert core is None


def test_the_sweep_varies_only_the_rows_per_expert() -> None:
    """The M_e sweep: PM1362's 8 local Qwen3-30B-A3B experts and PM1361's 16 gpt-oss ones at 256-8192 rows each, the
    rows' own M_e (4096, 1024) left out, over 4 streams."""
    sweep = _bench().sweep_cases()
    got: dict[str, list[int]] = {}
    for c in sweep:
        assert c.variant == "sweep-4-streams" and c.streams == 4
        g, _, x, i, fc1 = HAND[c.row]
        m = c.gemms[0].m
        assert [(q.m, q.n, q.k, q.count) for q in c.gemms] == [
            (m, fc1, x, g), (m, x, fc1, g), (fc1, x, m, g), (m, x, i, g), (m, i, x, g), (x, i, m, g)]
        got.setdefault(c.row, []).append(m)
    assert got == {"PM1362": [256, 512, 1024, 2048, 8192], "PM1361": [256, 512, 2048, 4096, 8192]}


def test_the_reference_is_the_calibration_rows_dense_layer() -> None:
    """The dense reference: one Llama 3.1 8B decoder layer (q, k, v, o; w1, w3, w2) and the lm_head at PM0501's 2 x
    8192 tokens, each linear's forward, input and weight gradient."""
    case = _bench().calibration_case()
    t = 2 * 8192
    got = {(q.role, q.m, q.n, q.k): q.count for q in case.gemms}
    assert got[("4096->4096.fwd", t, 4096, 4096)] == 2  # q, o
    assert got[("4096->1024.wgrad", 1024, 4096, t)] == 2  # k, v
    assert got[("4096->14336.dgrad", t, 4096, 14336)] == 2  # w1, w3
    assert got[("14336->4096.fwd", t, 4096, 14336)] == 1  # w2
    assert got[("4096->128256.fwd", t, 128256, 4096)] == 1  # lm_head
    assert len(got) == 15
