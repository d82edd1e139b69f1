"""Per-rank weights, decode weight reads and prefill FLOPs under vLLM's / SGLang's tensor parallelism, against the
modules the engines keep whole on every rank.

Independent truth: the transformers 5.24 model built on the meta device (``oracle_utils.build``, shapes only, module
names from the Hugging Face definitions, classified by ``oracle_utils.component_of``) and, per parameter, whether the
engine's model code builds it whole on every TP rank, by its Hugging Face module name, read from the engines' model
files (vllm 0.19.1 and sglang 0.5.6 PyPI wheels):

- ``self_attn.q_a_proj`` + ``self_attn.kv_a_proj_with_mqa``: vLLM deepseek_v2.py:870-883 (a MergedColumnParallelLinear
  with ``disable_tp=True`` at :786, or a ReplicatedLinear), SGLang deepseek_v2.py:1217-1250 ReplicatedLinear;
- the routers ``mlp.gate`` / ``mlp.router`` / ``mixer.gate``: vLLM deepseek_v2.py:263 GateLinear, qwen3_moe.py:176,
  mixtral.py:120, qwen3_next.py:118 ReplicatedLinear, gpt_oss.py:177 GateLinear, glm4_moe.py:143 nn.Linear,
  nemotron_h.py:151 GateLinear, granitemoe.py:92 ReplicatedLinear (Granite-4.0-H's ``block_sparse_moe.router``); SGLang deepseek_v2.py:513-525 (MoEGate's whole [E, H]), qwen3_moe.py:123,
  mixtral.py:81, gpt_oss.py:146, glm4_moe.py:332 (the same MoEGate), qwen2_moe.py:169 (Qwen3-Next's block,
  qwen3_next.py:42), nemotron_h.py:141;
- Qwen's ``mlp.shared_expert_gate``: vLLM qwen3_next.py:126 ReplicatedLinear, SGLang qwen2_moe.py:192 nn.Linear;
- Nemotron-3 Super's latent projections ``mixer.fc1_latent_proj`` / ``mixer.fc2_latent_proj``: vLLM
  nemotron_h.py:192-206 ReplicatedLinear (SGLang 0.5.6 builds none: no latent MoE, not served there);
- the routed experts' down-projection bias ``mlp.experts.down_proj_bias`` [E, hidden] (gpt-oss): vLLM
  layers/quantization/mxfp4.py:219-227 ``w2_bias`` [num_experts, hidden_size], where w13_bias is
  [num_experts, 2 x intermediate_size_per_partition] (:208-216); SGLang layers/quantization/mxfp4.py:345-353 the same;
- every 1-D parameter (norms, row-parallel biases) but the biases of column-parallel linears (vLLM layers/linear.py
  :488-489 ``output_size_per_partition``, SGLang :343-344) and gpt-oss's per-head sinks (vLLM gpt_oss.py:102-104,
  SGLang gpt_oss.py:255-257).

The attention's K and V projections (``self_attn.k_proj`` / ``v_proj``, their biases too) are split by KV head, and
where TP exceeds the config's ``num_key_value_heads`` each rank holds one whole head (``QKVParallelLinear``: vLLM
layers/linear.py:1010-1027, SGLang layers/linear.py:817-834, num_kv_heads = 1 on each of tp / kv replicas): a rank
holds max(1, kv // tp) / kv of them. Mamba-2's groups likewise: with n_groups not a multiple of tp (1: Granite-4.0-H,
Falcon-H1) both extend them to tp, one copy per rank, and split ``mamba.in_proj`` and ``mamba.conv1d`` over the
extended rows (vLLM layers/mamba/mamba_mixer2.py:293-300, :332-348; SGLang layers/attention/mamba/mamba.py:185-238):
a rank holds 2 x (tp - n_groups) x d_state / tp rows of each beyond 1 / tp of the checkpoint's.

GLM-4.5's router on vLLM is an fp32 ``nn.Linear`` (vLLM glm4_moe.py:143-148, ``dtype=torch.float32``): 4 bytes per
element there, 2 (bf16, the model dtype) on SGLang (glm4_moe.py:332-334) and for every other parameter here but the
router's score-correction bias: transformers' ``e_score_correction_bias`` buffer, which both engines build as an fp32
parameter [n_routed_experts] whole on every rank where the config routes with it (vLLM deepseek_v2.py:268-273,
``topk_method == "noaux_tc"``; glm4_moe.py:149-151, nemotron_h.py:159-161 always; SGLang deepseek_v2.py:526-538,
glm4_moe.py:335-337, nemotron_h.py:149-151) and read by every decode step (added to the scores, vLLM
fused_moe/router/grouped_topk_router.py:90-97).

Every other matrix is split evenly tp ways (Column/RowParallelLinear, the Gated DeltaNet's in_proj_qkvz / in_proj_ba /
conv1d, vLLM layers/mamba/gdn_linear_attn.py:265-318; Mamba-2's in_proj / out_proj; FusedMoE over the intermediate
size; the vocabulary-parallel embedding and lm_head).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from llmsizer import estimate_inference  # noqa: E402
from llmsizer.catalog.models import entries  # noqa: E402
from llmsizer.estimate.speed import estimate_speed  # noqa: E402
from llmsizer.models import load_model  # noqa: E402
from oracle_utils import build, component_of, experts_per_token  # noqa: E402

WHOLE = {
    "vllm": (".self_attn.q_a_proj.", ".self_attn.kv_a_proj_with_mqa.", ".mlp.gate.", ".mlp.router.", ".mixer.gate.",
             ".mlp.shared_expert_gate.", ".mixer.fc1_latent_proj.", ".mixer.fc2_latent_proj.",
             ".mlp.experts.down_proj_bias", ".block_sparse_moe.router."),
    "sglang": (".self_attn.q_a_proj.", ".self_attn.kv_a_proj_with_mqa.", ".mlp.gate.", ".mlp.router.",
               ".mixer.gate.", ".mlp.shared_expert_gate.", ".mlp.experts.down_proj_bias"),
}
SPLIT_VECTORS = (".q_proj.bias", ".k_proj.bias", ".v_proj.bias", ".sinks")  # column-parallel biases, per-head sinks
REL = 1e-6
PROMPT = 4096


def _whole(engine: str, name: str, dim: int) -> bool:
    if dim == 1:
        return not name.endswith(SPLIT_VECTORS)
    return any(w in name for w in WHOLE[engine])


KV_PROJ = (".self_attn.k_proj.", ".self_attn.v_proj.")
MAMBA2_GROUPED = (".mamba.in_proj.weight", ".mamba.conv1d.weight")


def _bytes_per_element(model_type: str, engine: str, name: str) -> int:
    """GLM-4.5's fp32 router on vLLM and the fp32 score-correction bias (module docstring); bf16 for the rest."""
    if name.endswith("e_score_correction_bias"):
        return 4
    # Nemotron-H's router on SGLang: the model dtype (sglang 0.5.23 nemotron_h.py:265-271, no params_dtype; the
    # fp32 of 0.5.6's :141-148 is gone), so bf16 as the rest.
    return 4 if (engine, model_type) == ("vllm", "glm4_moe") and ".mlp.gate.weight" in name else 2


def _rank(model_name: str, engine: str, tp: int) -> tuple[float, float, float, float, float]:
    """(elements one rank holds, of them those it multiplies per decoded token, of those the output head's; the
    bytes of the held and the multiplied ones): whole parameters in full, the K/V projections at
    max(1, kv // tp) / kv, the rest / tp; the multiplied ones less the input embedding (a row lookup), the routed
    experts at the config's top-k / E."""
    cfg = entries()[model_name].config
    model = build(cfg)
    text = cfg.get("text_config", cfg)
    moe = any(text.get(key) for key in ("n_routed_experts", "num_local_experts", "num_experts"))
    k, e = experts_per_token(cfg) if moe else (1, 1)  # a dense model (Falcon-H1) has no experts to scale
    kv = text["num_key_value_heads"]
    kv_share = max(1, kv // tp) / kv
    groups = text.get("mamba_n_groups")
    # Mamba-2's B/C rows of the groups added so that each rank holds one (n_groups % tp != 0), / tp
    group_rows = 2 * (tp - groups) * text["mamba_d_state"] / tp if groups and groups % tp else 0.0
    held = read = head = held_b = read_b = 0.0
    routes = text["model_type"] in ("glm4_moe", "nemotron_h") or text.get("topk_method") == "noaux_tc"
    bias = [(n, b) for n, b in model.named_buffers() if n.endswith("e_score_correction_bias") and routes]
    for name, p in [*model.named_parameters(), *bias]:  # a tied lm_head once (none of these ties)
        if _whole(engine, name, p.dim()):
            n = float(p.numel())
        elif any(s in name for s in KV_PROJ):
            n = p.numel() * kv_share
        elif any(s in name for s in MAMBA2_GROUPED):
            n = p.numel() / tp + group_rows * p.numel() / p.shape[0]
        else:
            n = p.numel() / tp
        size = _bytes_per_element(text["model_type"], engine, name)
        comp = component_of(name)
        held += n
        held_b += n * size
        if name.endswith("e_score_correction_bias"):  # read each decode step (added to the scores), no product
            read_b += n * size
        elif comp != "embedding":
            r = n * (k / e if comp == "experts" else 1.0)
            read += r
            read_b += r * size
        if comp == "lm_head":
            head += n
    return held, read, head, held_b, read_b


CASES = [("deepseek-v3", "vllm", 8), ("deepseek-v3", "sglang", 8), ("kimi-k2-instruct", "vllm", 8),
         ("qwen3-next-80b-a3b-thinking", "vllm", 2), ("qwen3-next-80b-a3b-thinking", "sglang", 2),
         ("gpt-oss-120b", "vllm", 8), ("gpt-oss-120b", "sglang", 8), ("glm-4.5-air", "vllm", 8),
         ("nvidia-nemotron-3-super-120b-a12b", "vllm", 2), ("qwen3-30b-a3b", "sglang", 4),
         # TP above the KV heads: one whole KV head per rank (qwen3-next 2 KV heads, qwen3-30b-a3b 4, GLM-4.5-Air 8)
         ("qwen3-next-80b-a3b-thinking", "vllm", 8), ("qwen3-30b-a3b", "sglang", 8), ("glm-4.5-air", "vllm", 16),
         ("glm-4.5-air", "sglang", 16),
         # Mamba-2 with one group: a copy of it on every rank (Granite-4.0-H's in tests/formulas/
         # test_kv_head_replica_weights.py: its decode read differs from this oracle's at TP 1 already)
         ("falcon-h1-0.5b-instruct", "vllm", 2), ("falcon-h1-0.5b-instruct", "sglang", 2)]


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "engine", "tp"), CASES)
def test_rank_weights_reads_and_prefill_flops_keep_the_engines_whole_modules(model_name, engine, tp):
    """One answer for the three (formulas/tensor_parallel.py ``kept_whole`` through ``shard_weights`` and
    ``plan_rank_shares``, eqs. TP1, TP3-TP4), in bf16 (GLM's router on vLLM in fp32):
    - the weights per GPU are the bytes of the rank's elements;
    - a decode step of one sequence reads the bytes of the elements it multiplies;
    - a prefill's FLOPs on one rank are 2 x (its multiplied elements - its head's) per prompt token, 2 x its head's
      for the last token, and the attention scores' FLOPs / tp (every head split): the model's attention FLOPs are
      what TP 1 gives beyond its own 2N.
    Before (every matrix's FLOPs and every byte read scaled by tp or the per-device total's ratio), DeepSeek-V3 at
    TP 8 read 4.76 GB a decode step (fp8) where the rank holds 5.70 GB of what it multiplies, and its prefill was
    counted at 9.44e13 FLOPs per rank for 1.09e14: the MLA down-projections and routers, 1.03 B elements, are whole."""
    spec = load_model(model_name)
    mem = estimate_inference(spec, engine=engine, tensor_parallel=tp, context=4096, weights="bf16")
    held, read, head, held_b, read_b = _rank(model_name, engine, tp)
    assert next(i.bytes for i in mem.items if i.name == "weights") == pytest.approx(held_b, rel=REL)
    one, many = (estimate_speed(spec, "h200", t, engine=engine, tensor_parallel=t, weights_format="bf16",
                                prompt_tokens=PROMPT, output_tokens=64).details for t in (1, tp))
    assert many["weight_bytes_per_decode_step"] == pytest.approx(read_b, rel=REL)
    _, read1, head1, _, _ = _rank(model_name, engine, 1)
    attention = one["prefill_flops_per_device"] - 2 * (read1 - head1) * PROMPT - 2 * head1
    assert attention > 0
    expected = 2 * (read - head) * PROMPT + 2 * head + attention / tp
    assert many["prefill_flops_per_device"] == pytest.approx(expected, rel=REL)


def test_deepseek_v3_vllm_tp8_by_hand_from_config():
    """DeepSeek-V3 on vLLM at TP 8, from config.json's numbers alone (hidden 7168, 61 layers of which the first 3
    dense, q_lora_rank 1536, kv_lora_rank 512 + qk_rope_head_dim 64, 256 routed experts): each rank holds and
    multiplies whole, per layer, q_a_proj [1536, 7168] and kv_a_proj_with_mqa [576, 7168] with their norms
    [1536], [512], the two layer norms [7168] and, in the 58 MoE layers, the router [256, 7168]; plus the final
    norm [7168]; and, not multiplied, the routers' fp32 e_score_correction_bias [256] (vLLM deepseek_v2.py:268-273:
    topk_method 'noaux_tc'), B = 58 x 256 x 4 bytes read each decode step. Everything else splits 8 ways, so a rank's
    prefill FLOPs are (TP 1's - 2 W P) / 8 + 2 W P and a decode step's bytes (TP 1's - 2 W - B) / 8 + 2 W + B."""
    cfg = entries()["deepseek-v3"].config
    h, layers, dense = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["first_k_dense_replace"]
    q, kv = cfg["q_lora_rank"], cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
    e = cfg["n_routed_experts"]
    assert (h, layers, dense, q, kv, e) == (7168, 61, 3, 1536, 576, 256)
    whole = layers * ((q + kv) * h + q + cfg["kv_lora_rank"] + 2 * h) + (layers - dense) * e * h + h
    assert whole == 1_030_904_832
    spec = load_model("deepseek-v3")
    one, eight = (estimate_speed(spec, "h200", t, engine="vllm", tensor_parallel=t, weights_format="bf16",
                                 prompt_tokens=PROMPT, output_tokens=64).details for t in (1, 8))
    flops = (one["prefill_flops_per_device"] - 2 * whole * PROMPT) / 8 + 2 * whole * PROMPT
    assert eight["prefill_flops_per_device"] == pytest.approx(flops, rel=1e-9)
    bias = (layers - dense) * e * 4
    read = (one["weight_bytes_per_decode_step"] - 2 * whole - bias) / 8 + 2 * whole + bias
    assert eight["weight_bytes_per_decode_step"] == pytest.approx(read, rel=1e-9)
    # what dividing every matrix by 8 gave: 13 % fewer FLOPs and 22 % fewer bytes read per rank
    assert one["prefill_flops_per_device"] / 8 < 0.9 * flops
    assert one["weight_bytes_per_decode_step"] / 8 < 0.85 * read
