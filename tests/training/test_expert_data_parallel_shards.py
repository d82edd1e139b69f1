"""Expert parameters' optimizer shards span the expert data-parallel ranks (dp x cp / ep), not the dense ones.

Independent truth (no test compares llmsizer with its own answer at another ep):

- the group-size rule of the frameworks (formulas/parallelism.py ``expert_shard_group`` cites them): Megatron-Core's
  expert_data_parallel_size = world / (expert_TP x EP x PP) (NVIDIA/Megatron-LM @d98e8a64
  megatron/core/parallel_state.py:871-880, expert_TP = TP by default) holds the expert distributed optimizer's shards
  (optimizer/__init__.py:1213-1245, distributed/distributed_data_parallel.py:285-289); the dense parameters'
  shards span dp = world / (TP x PP x CP);
- the parameters of the real Qwen3-30B-A3B model (transformers built on the meta device, shapes only:
  ``oracle_utils.build``), each placed as Megatron places it (1-D tensors and the router ``.mlp.gate.weight``
  whole: transformer/moe/router.py:64-66; every other matrix split over TP; the routed experts, ``.mlp.experts.``,
  over TP x EP);
- DeepSeek-V3's routed-expert element count from its config.json keys (num_hidden_layers - first_k_dense_replace)
  x n_routed_experts x 3 x hidden_size x moe_intermediate_size.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import entries
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model


def _items(model: str, **fields: object) -> dict[str, int]:
    # sequence parallelism: Megatron-Core trains an MoE under TP only with it (moe_layer.py:636-640); states unchanged
    base = dict(method="full", micro_batch=1, seq_len=4096, optimizer="adamw", gpus_per_node=8, zero=1,
                grad_checkpointing="full", precision="megatron-bf16", sequence_parallel=True)
    m = estimate_training(load_model(model), **{**base, **fields})  # type: ignore[arg-type]
    return {i.name: i.bytes for i in m.items}


def test_megatron_qwen3_moe_states_per_gpu_match_the_real_parameters() -> None:
    """64 GPUs, TP 4, EP 8: dp = 16, expert dp = 64 / (4 x 8) = 2. Per GPU: fp32 main params (4 B) and Adam's two
    fp32 moments (8 B) of dense_share / 16 + expert_share / 2 elements; bf16 weights (2 B) of both shares whole."""
    from oracle_utils import build

    gpus, tp, ep = 64, 4, 8
    dp, edp = gpus // tp, gpus // (tp * ep)
    model = build(entries()["qwen3-30b-a3b"].config)
    dense = expert = 0.0
    for name, p in model.named_parameters():
        if ".mlp.experts." in name:
            expert += p.numel() / (tp * ep)
        else:
            dense += p.numel() if p.dim() == 1 or name.endswith(".mlp.gate.weight") else p.numel() / tp
    got = _items("qwen3-30b-a3b", gpus=gpus, tp=tp, ep=ep)
    assert got["weights"] == pytest.approx(2 * (dense + expert), rel=1e-6)
    assert got["master_weights"] == pytest.approx(4 * (dense / dp + expert / edp), rel=1e-6)
    assert got["optimizer_states"] == pytest.approx(8 * (dense / dp + expert / edp), rel=1e-6)


def _deepseek_v3_shares(tp: int) -> tuple[float, float]:
    """(dense, routed-expert) elements of DeepSeek-V3 one TP rank holds before EP, from its config.json keys alone:
    routed experts (L - k) x E x 3 x d x f_moe; every other matrix split over TP except the ones Megatron-Core keeps
    whole (the MLA down-projections q_a / kv_a, TELinear parallel_mode='duplicated', multi_latent_attention.py:526-527,
    :573-574; the router, router.py:64-66), 1-D tensors (norms, the router's bias) whole."""
    c = entries()["deepseek-v3"].config
    d, layers, k = c["hidden_size"], c["num_hidden_layers"], c["first_k_dense_replace"]
    moe_layers, e, f_moe, heads = layers - k, c["n_routed_experts"], c["moe_intermediate_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    experts = moe_layers * e * 3 * d * f_moe
    whole_mat = layers * d * (c["q_lora_rank"] + c["kv_lora_rank"] + c["qk_rope_head_dim"]) + moe_layers * e * d
    split = (layers * (c["q_lora_rank"] * heads * qk + c["kv_lora_rank"] * heads * (c["qk_nope_head_dim"]
                                                                                     + c["v_head_dim"])
                       + heads * c["v_head_dim"] * d)
             + k * 3 * d * c["intermediate_size"] + moe_layers * c["n_shared_experts"] * 3 * d * f_moe
             + 2 * c["vocab_size"] * d)
    vectors = layers * (2 * d + c["q_lora_rank"] + c["kv_lora_rank"]) + d + moe_layers * e  # norms, router bias
    return whole_mat + vectors + split / tp, experts / tp


@pytest.mark.parametrize("ep", [2, 8])
def test_deepseek_v3_expert_states_per_gpu_from_config(ep: int) -> None:
    """64 GPUs, TP 8, EP ep: dp = 8, expert dp = 64 / (8 x ep) (parallel_state.py:871-880). Per GPU: bf16 weights
    2 B x (dense + experts / ep), fp32 main params 4 B and Adam's two fp32 moments 8 B x (dense / 8 + experts / ep /
    (8 / ep)), all from config.json shapes."""
    gpus, tp = 64, 8
    dense, experts = _deepseek_v3_shares(tp)
    dp, edp = gpus // tp, gpus // (tp * ep)
    got = _items("deepseek-v3", gpus=gpus, tp=tp, ep=ep)
    assert got["weights"] == pytest.approx(2 * (dense + experts / ep), rel=1e-5)
    assert got["master_weights"] == pytest.approx(4 * (dense / dp + experts / ep / edp), rel=1e-5)
    assert got["optimizer_states"] == pytest.approx(8 * (dense / dp + experts / ep / edp), rel=1e-5)


def test_fsdp_expert_shards_span_dp_over_ep() -> None:
    """torchtitan's FSDP2 (zero 3 equivalent) shards experts over efsdp = dp_shard x cp x tp / ep
    (parallel_dims.py:282): 16 GPUs, no TP, EP 4 -> each GPU's E / 4 experts over 4 ranks, the rest over 16. A
    GPU's resident bf16 weights: 2 B x (dense / 16 + experts / 4 / 4), counted on the real Qwen3-30B-A3B
    parameters (meta device)."""
    from oracle_utils import build

    gpus, ep = 16, 4
    dense = expert = 0
    for name, p in build(entries()["qwen3-30b-a3b"].config).named_parameters():
        if ".mlp.experts." in name:
            expert += p.numel()
        else:
            dense += p.numel()
    got = _items("qwen3-30b-a3b", ep=ep, gpus=gpus, zero=0, fsdp="full", precision="bf16", framework="torchtitan",
                 sequence_parallel=False)
    assert got["weights"] == pytest.approx(2 * (dense / gpus + expert / ep / (gpus // ep)), rel=1e-5)


def test_hybrid_shard_group_ep_does_not_divide_is_refused() -> None:
    """torchtitan's efsdp mesh, dp_shard x cp x tp / ep (parallel_dims.py:282), has no size when ep does not divide
    the ranks hybrid sharding shards over (8 per node here, ep 16): bad input naming ep, not a group of 1."""
    from llmsizer.errors import FieldError

    with pytest.raises(FieldError, match=r"ep \(16\) must divide the 8 data-parallel ranks") as e:
        _items("deepseek-v3", gpus=128, ep=16, zero=0, fsdp="hybrid", precision="bf16-mixed", framework="torchtitan",
               sequence_parallel=False)
    assert e.value.fields[:2] == ("ep", "fsdp")
