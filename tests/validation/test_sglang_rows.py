"""SGLang speed rows (validation/sglang_speed_benchmark.csv): the Qwen3 speed benchmark page's SGLang 0.4.6.post1
tables on one H20, batch 1, a 1-token prompt and 2048 generated tokens, every setting stated, so summarised.

They are reported as they land: llmsizer predicts them 2.4x (Qwen3-14B/32B) to 5.9x (Qwen3-0.6B) too fast. The
measured steps of the dense models from 8B up follow one effective bandwidth of about 1.36 TB/s, a third of the
H20's 4.0 TB/s datasheet figure (the catalog's), and the small models sit above it again; no mechanism here models
either. The SM streaming limit of eq. 12 (llama.cpp's) is not it: with the H20's SM count and clock now in the
catalog, the rate the rows need per SM is well below what the same part streams under a later SGLang release
(test_the_h20_rate_belongs_to_the_release_not_the_sms; docs/hardware.md).
"""

from __future__ import annotations

import csv

from llmsizer.estimate.engines import step_host
from llmsizer.validation_cases import DECODE, SGLANG, data_dir, engine_of, engine_speed_cases


def _rows() -> dict[str, dict[str, str]]:
    with (data_dir() / "sglang_speed_benchmark.csv").open(newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_rows_are_expressed_with_source_quote_and_release() -> None:
    rows = _rows()
    cases = {c.id: c for c in engine_speed_cases() if c.id.startswith("SG")}
    assert set(cases) == set(rows) and len(rows) == 7
    for rid, c in cases.items():
        r = rows[rid]
        assert c.kind == DECODE and engine_of(c) == SGLANG and not c.excluded
        assert "speed_benchmark.md" in r["source"] and r["value"] in r["quote"], rid
        rule = step_host("sglang", r["engine_version"])
        assert rule is not None and not rule.established  # named and warned in each estimate, not guessed
        assert c.predicted is not None and c.predicted > 0


def test_the_dense_rows_share_one_effective_bandwidth() -> None:
    """What the miss is: from 8B up the measured time per token is close to proportional to the bytes a step reads
    (weights), at about 1.36 TB/s on a 4.0 TB/s part; llmsizer's engine-free estimate streams at 0.8 of the datasheet
    figure (the serving engines at efficiency.SERVING_DECODE_BANDWIDTH)."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.catalog.models import find
    from llmsizer.estimate import efficiency as E
    from llmsizer.estimate.speed import estimate_speed

    rows = _rows()
    bandwidths = []
    for rid in ("SG04", "SG05", "SG06"):  # Qwen3-8B, 14B, 32B
        r = rows[rid]
        s = estimate_speed(find(r["catalog_model"]).spec(), builtin_catalog().devices[r["device"]],
                           weights_format=r["dtype"], prompt_tokens=1, output_tokens=2048, kv_dtype=r["dtype"])
        assert s.decode is not None
        step_bytes = s.decode.memory_seconds * float(builtin_catalog().devices[r["device"]].bandwidth) \
            * E.DECODE_BANDWIDTH_GPU.expected
        bandwidths.append(step_bytes / (1.0 / float(r["value"])))
    assert max(bandwidths) / min(bandwidths) < 1.1
    assert 1.2e12 < sum(bandwidths) / 3 < 1.5e12


# Published H20 measurements outside this table (acupof-ai/tileRL docs/experience/2026-08-28-vs-sglang-h20.md):
# SGLang 0.5.13.post2 (sgl-kernel 0.4.2.post2+cu129), python -m sglang.bench_one_batch --batch-size 1, a dense 27B
# BF16 checkpoint on one H20: "sglang bf16 reads 42 GB in 18.5 ms = 2.3 TB/s".
LATER_SGLANG_H20_BYTES, LATER_SGLANG_H20_SECONDS = 42e9, 18.5e-3


def test_the_h20_rate_belongs_to_the_release_not_the_sms() -> None:
    """Read through eq. (12) (bandwidth <= N_SM f beta), the 8B-32B rows need beta = 7.3-7.7 bytes per SM-cycle of
    the H20's 78 SMs at the catalog clock (f = 44 TFLOP/s / (2 x 9984 lanes) = 2.20 GHz). A later SGLang release
    streams 2.27 TB/s through the same SMs, beta >= 13.2: the rows' limit is the 0.4.6.post1 stack's kernels, not
    the part, so the core applies an SM cap to the PyTorch engines' BF16 steps only for the releases whose rows show
    it (estimate/engines.py STREAM_LIMITED, Hopper's beta from an H100 row: tests/validation/test_serving_share.py). The beta of SG06 would also take the
    held-out H100 vLLM row VS01 (154.3 tokens/s measured) more than 10 % slow."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.catalog.models import find
    from llmsizer.estimate import efficiency as E
    from llmsizer.estimate.speed import estimate_speed

    devs = builtin_catalog().devices
    h20 = devs["h20"]
    assert h20.sm_count is not None and h20.sm_count.base == 78
    cycles = h20.sm_cycles_per_second
    assert cycles is not None and 2.1e9 < cycles / 78 < 2.3e9
    rows = _rows()
    betas = {}
    for rid in ("SG04", "SG05", "SG06"):
        r = rows[rid]
        s = estimate_speed(find(r["catalog_model"]).spec(), h20, weights_format=r["dtype"], prompt_tokens=1,
                           output_tokens=2048, kv_dtype=r["dtype"])
        assert s.decode is not None
        assert "llamacpp_sm_stream_limit" not in {a.name for a in s.assumptions}
        step_bytes = s.decode.memory_seconds * float(h20.bandwidth) * E.DECODE_BANDWIDTH_GPU.expected
        betas[rid] = step_bytes * float(rows[rid]["value"]) / cycles
    assert all(7.0 < b < 8.0 for b in betas.values()), betas
    later = LATER_SGLANG_H20_BYTES / LATER_SGLANG_H20_SECONDS / cycles
    assert later > 1.6 * max(betas.values())
    # no SM cap for non-GGUF weights; llama.cpp's own beta does cap the H20 (no published row checks it)
    assert E.llamacpp_stream_cap("bf16", h20.kind, h20.vendor, cycles) is None
    cap = E.llamacpp_stream_cap("gguf:q4_k_m", h20.kind, h20.vendor, cycles)
    assert cap is not None and 1.0e12 < cap < 1.1e12
    # the SG06 beta carried to the H100 SXM: VS01 (vLLM 0.21, Llama-3.1-8B fp16, one sequence) would be > 10 % slow
    h100 = devs["h100-sxm"]
    assert h100.sm_cycles_per_second and h100.bandwidth
    capped = betas["SG06"] * h100.sm_cycles_per_second / float(h100.bandwidth)
    s = estimate_speed(find("llama-3.1-8b").spec(), h100, weights_format="fp16", prompt_tokens=128,
                       output_tokens=128, kv_dtype="fp16", bandwidth_efficiency=capped)
    assert s.tokens_per_second_per_user is not None and s.tokens_per_second_per_user < 0.9 * 154.3
