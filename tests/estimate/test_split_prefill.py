"""llama.cpp prefill with weights in host RAM (--n-cpu-moe, -ngl < all): eq. (8p) of formulas/speed.py.

The rule is ggml's (ggml-org/llama.cpp@00108827 ggml/src/ggml-cuda/ggml-cuda.cu ``ggml_backend_cuda_device_offload_op``
and ggml/src/ggml-backend.cpp's scheduler): a ubatch of 32 tokens or more runs the host's products on the GPU after
copying the weights (for MUL_MAT_ID, the experts the ubatch routes to) over PCIe; a smaller one stays on the CPU.
Expected values are computed here from gpt-oss-120b's published config (openai/gpt-oss-120b config.json:
hidden_size 2880, intermediate_size 2880, num_local_experts 128, experts_per_token 4) and the MXFP4 block layout
(ggml block_mxfp4: 32 4-bit values + one E8M0 scale byte = 17 B per 32 values), not from llmsizer's own output.
"""

from __future__ import annotations

import math

import pytest

import llmsizer
from llmsizer.formulas.speed import OP_OFFLOAD_MIN_BATCH, split_prefill_time

PCIE4_X16 = 32e9  # PCIe 4.0 x16, per direction (16 GT/s x 16 lanes, 128b/130b ~ 31.5 GB/s; the catalog's 32 GB/s)


def _fit(n_cpu_moe: int | None):
    kw = {"n_cpu_moe": n_cpu_moe} if n_cpu_moe is not None else {}
    return llmsizer.fit("gpt-oss-120b", "rtx-4090", context=32768, engine="llamacpp", host_device="amd-epyc-9654",
                        **kw)


def test_n_cpu_moe_prefill_pays_the_expert_copies_per_ubatch() -> None:
    """30 layers of experts in host RAM: 30 x 128 experts x 3 matrices of 2880 x 2880 (gate+up fused 2 x 2880, down
    2880) at 17 B / 32 values = 50.76 GB (+ biases, < 0.3%). A 32,512-token prompt in 512-token ubatches: 64
    ubatches, each routing to all 128 experts (1 - (124/128)^512 ~ 1), so 64 copies of 50.76 GB at 32 GB/s =
    101.5 s on top of the all-on-GPU prefill; the old answer (25.8 s) was the all-on-GPU time alone."""
    split = _fit(30)
    sp = split.speed
    assert sp is not None and sp.prefill is not None
    expert_bytes = 30 * 128 * 3 * 2880 * 2880 * 17 / 32
    ubatches = math.ceil(sp.prompt_tokens / 512)
    expected_copies = ubatches * expert_bytes / PCIE4_X16
    gpu_only = sp.details["split_prefill"]["gpu_seconds"]
    assert sp.prefill.seconds - gpu_only == pytest.approx(expected_copies, rel=0.01)
    assert sp.prefill.bound == "communication"
    # a split's prefill has no calibrated range: no validation row measures one; nor does it name the band the
    # all-on-GPU prefill would take (ranges.llamacpp_band), nor the decode band (host-held experts: none either)
    assert sp.prefill_range is None and sp.range_coverage["prefill_tokens_per_second"] is None
    names = {a.name for a in sp.assumptions}
    assert "prefill_range_band" not in names and "decode_range_band" not in names
    alone = llmsizer.fit("gpt-oss-20b", "rtx-4090", context=8192, engine="llamacpp").speed
    assert alone is not None and {"prefill_range_band", "decode_range_band"} <= {a.name for a in alone.assumptions}


def test_all_on_gpu_prefill_is_unchanged() -> None:
    """A model whose weights all sit on the GPU copies nothing: gpt-oss-20b on a 4090 keeps its calibrated range."""
    sp = llmsizer.fit("gpt-oss-20b", "rtx-4090", context=8192, engine="llamacpp").speed
    assert sp is not None and "split_prefill" not in sp.details and sp.prefill_range is not None


def test_small_ubatch_stays_on_the_host() -> None:
    """Under 32 tokens the CUDA backend declines the op (offload_op): the CPU reads the weights at its bandwidth,
    nothing crosses the link. 1 GB at 100 GB/s x 0.5 = 20 ms; a 512-token ubatch of the same weights copies at
    32 GB/s (31.25 ms)."""
    assert OP_OFFLOAD_MIN_BATCH == 32
    t, copy, host = split_prefill_time(0.0, [16], 1e9, 0.0, [1.0], PCIE4_X16, 100e9, 0.5)
    assert copy == 0 and host == pytest.approx(0.02)
    t, copy, host = split_prefill_time(1.0, [512], 1e9, 0.0, [1.0], PCIE4_X16, 100e9, 0.5)
    assert host == 0 and t == pytest.approx(1.0 + 1e9 / PCIE4_X16)
    # experts: only the share a ubatch routes to crosses (eq. 5): 32 tokens x top-4 of 128 -> 1 - (124/128)^32
    f = 1 - (124 / 128) ** 32
    _, copy, _ = split_prefill_time(0.0, [32], 0.0, 1e9, [f], PCIE4_X16, None, 1.0)
    assert copy == pytest.approx(f * 1e9 / PCIE4_X16)


def test_ngl_split_prefill_copies_the_host_layers_kv_cells_per_ubatch() -> None:
    """-ngl 40 of Llama-3.1-70B's 80 layers (+ the output on the GPU: llama.cpp puts layers 0-40 on the host): the
    host layers' attention runs on the GPU (the scheduler gives it the offloaded products' backend), their K/V cells
    crossing the link. Llama-3.1-70B config.json: 8 KV heads x head_dim 128 (8192 / 64), f16 cache: K + V = 2 x 1024 x
    2 B = 4096 B per token per layer, x 41 host layers. A 4096-token prompt in 8 ubatches of 512: the i-th reads
    n_i = 512 i cells and writes back its 512 rows, sum (n_i + u_i) = 512 x (36 + 8) = 22,528 tokens' worth."""
    fit = llmsizer.fit("llama-3.1-70b-instruct", "rtx-4090", engine="llamacpp", weights="q4_k_m", context=4352,
                       output_tokens=256, n_gpu_layers=40, host_device="amd-epyc-9654")
    sp = fit.speed
    assert sp is not None and sp.prefill is not None and sp.prompt_tokens == 4096
    res = sp.details["split_prefill"]
    kv_per_token = 41 * 2 * 8 * 128 * 2
    assert res["host_kv_bytes_per_token"] == kv_per_token
    weights = res["ubatches"] * res["host_layer_bytes"] / PCIE4_X16
    assert res["transfer_seconds"] - weights == pytest.approx(kv_per_token * 512 * (36 + 8) / PCIE4_X16, rel=1e-9)
    # the attention's FLOPs stay in the all-on-GPU time: nothing is timed on the CPU at 512-token ubatches
    assert res["host_seconds"] == 0 and sp.prefill.seconds == pytest.approx(res["gpu_seconds"] + res["transfer_seconds"])


def test_n_cpu_moe_split_copies_no_kv() -> None:
    """--n-cpu-moe keeps every layer's attention and KV cache on the GPU: no K/V crosses the link."""
    assert _fit(30).speed.details["split_prefill"]["host_kv_bytes_per_token"] == 0


def test_a_split_with_host_weights_states_no_calibrated_decode_range() -> None:
    """The decode of a split whose host holds layers or experts (eq. 8: host weights read at the host's bandwidth) is
    measured by no validation row (every llama.cpp row runs its layers on GPUs), so it carries no calibrated range,
    as its prefill does not; the all-on-GPU decode of the same engine keeps its band."""
    split = _fit(30).speed
    assert split is not None and split.decode is not None and "split_decode" in split.details
    assert split.decode_range is None and split.range_coverage["decode_tokens_per_second"] is None
    alone = llmsizer.fit("gpt-oss-20b", "rtx-4090", context=8192, engine="llamacpp").speed
    assert alone is not None and alone.decode_range is not None
    low, high = alone.decode_range
    assert low < alone.decode_tokens_per_second < high
