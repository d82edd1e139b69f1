"""Expert parameters' optimizer shards span the expert data-parallel ranks (dp x cp / ep), not the dense ones.

Independent truth:

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
    base = dict(method="full", micro_batch=1, seq_len=4096, optimizer="adamw", gpus_per_node=8, zero=1,
                grad_checkpointing="full", precision="megatron-bf16")
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


def test_deepseek_v3_expert_states_do_not_shrink_with_ep() -> None:
    """64 GPUs, TP 8: a GPU's expert share E / (8 x ep) is sharded over 8 / ep expert data-parallel ranks, so its
    master weights and Adam moments are E / 64 elements at every ep; only the (unsharded) bf16 weights shrink, by
    E / 8 x (1 - 1/ep) x 2 B."""
    c = entries()["deepseek-v3"].config
    experts = ((c["num_hidden_layers"] - c["first_k_dense_replace"]) * c["n_routed_experts"] * 3 * c["hidden_size"]
               * c["moe_intermediate_size"])
    one = _items("deepseek-v3", gpus=64, tp=8, ep=1)
    for ep in (2, 8):
        got = _items("deepseek-v3", gpus=64, tp=8, ep=ep)
        for item in ("master_weights", "optimizer_states"):
            assert got[item] == pytest.approx(one[item], rel=1e-6), (ep, item)
        assert one["weights"] - got["weights"] == pytest.approx(experts / 8 * (1 - 1 / ep) * 2, rel=1e-4), ep


def test_fsdp_expert_shards_span_dp_over_ep() -> None:
    """torchtitan's FSDP2 (zero 3 equivalent) shards experts over efsdp = dp_shard x cp x tp / ep
    (parallel_dims.py:282): 16 GPUs, no TP, EP 4 -> experts over 4 ranks, the rest over 16. A GPU's resident
    weights: 2 B x (dense / 16 + experts / 4 / 4) = 2 B x total / 16, the same as without EP."""
    fields = dict(gpus=16, zero=0, fsdp="full", precision="bf16", framework="torchtitan")
    one = _items("qwen3-30b-a3b", ep=1, **fields)
    four = _items("qwen3-30b-a3b", ep=4, **fields)
    assert four["weights"] == pytest.approx(one["weights"], rel=1e-6)
