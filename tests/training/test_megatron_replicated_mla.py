"""Training under tensor parallelism keeps the framework's replicated matrices whole on every TP rank.

Independent truth:

- the parameters of the real DeepSeek-V3 model (transformers 5.24 built on the meta device, shapes only:
  ``oracle_utils.build``) and, for each, how Megatron-Core's default Transformer-Engine spec places it, by its Hugging
  Face module name (NVIDIA/Megatron-LM @d98e8a64): ``q_a_proj`` / ``kv_a_proj_with_mqa`` are ``linear_q_down_proj`` /
  ``linear_kv_down_proj``, a TELinear with ``parallel_mode='duplicated'`` (megatron/core/transformer/
  multi_latent_attention.py:526-527, :573-574; extensions/transformer_engine.py:1229-1231 tp_size 1), the router
  ``mlp.gate.weight`` is ``Router.weight`` [num_moe_experts, hidden] (transformer/moe/router.py:64-66), whole;
  1-D tensors (norms) whole; every other matrix (routed experts too: expert tensor parallel = TP, Megatron's default) (column/row-parallel linears, vocabulary-parallel embedding and output
  layer) split tp ways;
- the replicated count from the config's own keys (hidden_size, q_lora_rank, kv_lora_rank, qk_rope_head_dim,
  num_hidden_layers, first_k_dense_replace, n_routed_experts): the memory of a run whose framework keeps them whole
  (torchtitan: models/deepseek_v3/sharding.py:112-133, moe_sharding.py:89-97) moves from a plain TP run's by that
  count x (1 - 1/tp) x the recipe's bytes for weights, master weights, gradients and optimizer states.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import entries
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model

TP, DP = 8, 8
WHOLE = (".self_attn.q_a_proj.", ".self_attn.kv_a_proj_with_mqa.", ".mlp.gate.weight")
# no expert parallelism: Megatron's expert data-parallel group is then the data-parallel group (world / (ETP x EP x
# PP) = 8), so its distributed optimizer (zero 1) shards expert and dense states alike over the same 8 ranks
BASE = dict(method="full", micro_batch=1, seq_len=4096, optimizer="adamw", gpus=TP * DP, gpus_per_node=8, tp=TP,
            zero=1, grad_checkpointing="full")


def _items(**fields: object) -> dict[str, int]:
    m = estimate_training(load_model("deepseek-v3"), **{**BASE, **fields})  # type: ignore[arg-type]
    return {i.name: i.bytes for i in m.items}


def _replicated_from_config() -> int:
    """Elements of the matrices Megatron-Core / torchtitan keep whole, from DeepSeek-V3's config.json."""
    c = entries()["deepseek-v3"].config
    h, layers = c["hidden_size"], c["num_hidden_layers"]
    down = h * c["q_lora_rank"] + h * (c["kv_lora_rank"] + c["qk_rope_head_dim"])
    router = c["n_routed_experts"] * h
    return layers * down + (layers - c["first_k_dense_replace"]) * router


def test_replicated_count_from_config() -> None:
    """61 x 7168 x (1536 + 576) + 58 x 256 x 7168: 0.92 B + 0.11 B elements; 0.81 B + 0.09 B more per GPU at TP 8."""
    assert _replicated_from_config() == 61 * 7168 * (1536 + 576) + 58 * 256 * 7168


def test_megatron_states_per_gpu_match_the_real_parameters() -> None:
    """megatron-bf16 under the distributed optimizer (zero 1): per GPU, each real parameter's share under
    Megatron-Core's placement, x 2 bytes (bf16 weights, whole), x 4 / dp (fp32 main params) and x 8 / dp (Adam's two
    fp32 moments). (The gradients item is the peak moment's, part of the layers' gradients: not the whole count.)"""
    from oracle_utils import build

    model = build(entries()["deepseek-v3"].config)
    share = 0.0
    for name, p in model.named_parameters():
        if p.dim() == 1 or any(r in name for r in WHOLE):
            share += p.numel()
        else:
            share += p.numel() / TP
    got = _items(precision="megatron-bf16", sequence_parallel=True)  # Megatron trains an MoE under TP only with SP
    assert got["weights"] == pytest.approx(2 * share, abs=1024)
    assert got["master_weights"] == pytest.approx(4 * share / DP, abs=1024)
    assert got["optimizer_states"] == pytest.approx(8 * share / DP, abs=1024)


def test_a_replicating_framework_moves_states_by_the_replicated_count() -> None:
    """Same precision (bf16-mixed: bf16 weights, fp32 master, fp32 Adam moments), torchtitan's plan against the
    plain one: weights, master and states grow by replicated x (1 - 1/tp) x their bytes (zero 1 over the 8
    data-parallel ranks for the master and the moments)."""
    extra = _replicated_from_config() * (1 - 1 / TP)
    plain = _items(precision="bf16-mixed", framework="none")
    titan = _items(precision="bf16-mixed", framework="torchtitan")
    for item, per_elem in (("weights", 2), ("master_weights", 4 / DP), ("optimizer_states", 8 / DP)):
        assert titan[item] - plain[item] == pytest.approx(extra * per_elem, abs=1024), item
