"""Matrices a TP plan keeps whole run in full on every TP rank when that rank sees every token.

Independent truth:

- the plans' token layouts (formulas/tensor_parallel.py ``full_token_roles`` cites them): Megatron-Core's duplicated
  MLA down-projections and router read [s] tokens without sequence parallelism and [s/tp] with it (NVIDIA/Megatron-LM
  @d98e8a64 megatron/core/transformer/multi_latent_attention.py:641-663); torchtitan gathers the MLA input to
  Replicate always and runs the router on the local token shard under EP (pytorch/torchtitan @b5bcd76
  models/deepseek_v3/sharding.py:96-104, models/common/moe_sharding.py:89-123);
- the replicated counts from DeepSeek-V3's config.json keys;
- a matrix of R elements costs 2R FLOPs per token forward and 4R backward (input and weight gradients), 6R without
  recomputation (Narayanan et al. 2021, arXiv 2104.04473, section 5.1).
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import entries
from llmsizer.estimate.duration import training_duration_for
from llmsizer.formulas.tensor_parallel import full_token_replicated_elements
from llmsizer.models import load_model


def _counts() -> tuple[int, int]:
    """(MLA down-projection elements, router elements) of DeepSeek-V3 from its config.json."""
    c = entries()["deepseek-v3"].config
    h, layers = c["hidden_size"], c["num_hidden_layers"]
    down = layers * h * (c["q_lora_rank"] + c["kv_lora_rank"] + c["qk_rope_head_dim"])
    return down, (layers - c["first_k_dense_replace"]) * c["n_routed_experts"] * h


def test_full_token_replicated_counts() -> None:
    spec = load_model("deepseek-v3")
    down, router = _counts()
    assert full_token_replicated_elements(spec, "megatron-core", False, 1) == down + router
    assert full_token_replicated_elements(spec, "megatron-core", True, 8) == 0
    assert full_token_replicated_elements(spec, "torchtitan", True, 1) == down + router
    assert full_token_replicated_elements(spec, "torchtitan", False, 8) == down
    assert full_token_replicated_elements(spec, None, False, 1) == 0


def test_torchtitan_tp_ranks_run_them_whole_in_the_count_and_the_time() -> None:
    """torchtitan, TP 8, no pipeline, no EP, no recomputation: each TP rank runs the MLA down-projections and the
    router (R elements, from config.json) on all its tokens, 6 R FLOPs per token, where the model's count has them
    once. So the run's FLOP/token is the model's F + (tp - 1) x 6 R (the line the duration prints), and a rank's GEMM
    seconds per micro-step are (T / tp) x (F - F_attn + (tp - 1) x 6 R) / (peak x u x e): the step's compute less
    its memory-bound kernels and its attention kernel (max with the host launches, eq. (K1): the device side here)."""
    spec, h100 = load_model("deepseek-v3"), builtin_catalog().devices["h100-sxm"]
    down, router = _counts()
    tp, seq = 8, 4096
    run = dict(method="full", precision="bf16-mixed", framework="torchtitan", fsdp="full", tp=tp, micro_batch=1,
               seq_len=seq, grad_checkpointing="none", gpus_per_node=8)
    d = training_duration_for(spec, h100, tp, 1e9, run)
    extra = (tp - 1) * 6 * (down + router)
    assert d.flops_per_token == pytest.approx(d.flops.per_token + extra, rel=1e-9)
    assert {x.name: x.value for x in d.assumptions}["tp_replicated_flops_per_token"] == pytest.approx(
        6 * (down + router), rel=1e-9)
    st = d.step
    assert st is not None and d.peak_flops is not None
    assert st.compute_seconds > st.launch_seconds  # the device's work, not the host's launches, sets the step
    gemm = st.compute_seconds - st.elementwise_seconds - st.attention_seconds
    rate = d.peak_flops * d.utilization * st.shape_efficiency
    assert gemm == pytest.approx(seq / tp * (d.flops.per_token - d.flops.attention + extra) / rate, rel=1e-9)


def test_megatron_with_sequence_parallelism_runs_them_on_a_token_shard() -> None:
    """Megatron-Core trains an MoE under TP only with sequence parallelism (moe_layer.py:636-640), where its
    duplicated matrices read [s/tp] tokens: nothing run again, the FLOP/token is the model's."""
    spec, h100 = load_model("deepseek-v3"), builtin_catalog().devices["h100-sxm"]
    run = dict(method="full", precision="megatron-bf16", tp=8, pp=16, ep=8, zero=1, micro_batch=1, seq_len=4096,
               grad_checkpointing="none", grad_accumulation=16, gpus_per_node=8, sequence_parallel=True)
    sp = training_duration_for(spec, h100, 1024, 1e9, run)
    assert "tp_replicated_flops_per_token" not in {x.name for x in sp.assumptions}
    assert sp.flops_per_token == sp.flops.per_token
