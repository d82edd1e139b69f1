"""A GPTQ / AWQ / compressed-tensors group checkpoint shards only into whole groups (formulas/tensor_parallel.py
``quant_block_refusal``, eq. TP5, the rule fp8-block's blocks share).

Truth: vLLM's and SGLang's load-time checks written out here from their source, applied to the layer shapes their
model code builds from each checkpoint's own config.json (the catalog rows' ``config``, not llmsizer's tensors):

- a row-parallel layer (o_proj, down_proj; input columns split, ``divide`` asserting in % tp == 0) needs its input per
  rank a multiple of the group, unless the group is the whole input: vllm 0.19.1 (PyPI wheel)
  vllm/model_executor/layers/quantization/awq.py:185-196 and gptq.py:250-255 ("The input size is not aligned with the
  quantized weight shape. This can be caused by too large tensor parallel size"), the kernels Marlin falls back to
  (awq_marlin.py:271-278; utils/marlin_utils.py:163-195 ``verify_marlin_supports_shape``, the same group check, only
  picks the kernel), compressed_tensors/schemes/compressed_tensors_wNa16.py:130; sglang 0.5.23
  srt/layers/quantization/awq/schemes/awq_linear.py:39, gptq/schemes/gptq_linear.py:47,
  compressed_tensors/schemes/compressed_tensors_wNa16.py:128;
- the fused experts (gptq/awq): Marlin MoE when intermediate_size_per_partition % max(64, group) == 0 and
  hidden % 128 == 0 (vllm utils/marlin_utils.py:229-246), else MoeWNA16 (vllm awq_marlin.py:291-297,
  gptq_marlin.py:247-253; sglang awq/awq.py:383-388), whose create_weights halves the group while the shard's
  intermediate or hidden is not a multiple of it and asserts group >= 32 (vllm moe_wna16.py:241-245, sglang
  moe_wna16.py:276-279).

The layers (vllm models/llama.py, qwen2.py: o_proj of heads x head_dim and down_proj of intermediate_size,
RowParallelLinear; qwen3_moe.py, minimax_m2.py: o_proj row-parallel, FusedMoE of moe_intermediate_size /
intermediate_size).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.formulas.tensor_parallel import quant_block_refusal, serving_tensor_parallel_refusal
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config

MODELS = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"


def shapes(cfg: dict) -> tuple[list[int], list[int], int]:
    """(row-parallel inputs, fused-expert intermediates, hidden) of the layers vLLM builds from config.json."""
    heads, hidden = cfg["num_attention_heads"], cfg["hidden_size"]
    attn = heads * (cfg.get("head_dim") or hidden // heads)
    if cfg.get("moe_intermediate_size"):  # Qwen3-MoE: every layer sparse
        return [attn], [cfg["moe_intermediate_size"]], hidden
    if cfg.get("num_local_experts"):  # MiniMax-M2: FusedMoE of config.intermediate_size
        return [attn], [cfg["intermediate_size"]], hidden
    return [attn, cfg["intermediate_size"]], [], hidden


def engine_loads(cfg: dict, tp: int, group: int) -> bool:
    rows, experts, hidden = shapes(cfg)
    for size in rows:
        if tp > 1 and (size % tp or (group < size and (size // tp) % group)):
            return False
    for inter in experts:
        per, g = inter // tp, group
        if per % max(64, g) == 0 and hidden % 128 == 0:
            continue  # Marlin MoE
        while per % g or hidden % g:  # MoeWNA16
            g //= 2
            if g < 32:
                return False
    return True


@pytest.mark.parametrize("name", ["qwen2.5-72b-instruct", "llama-2-7b-hf", "qwen3-30b-a3b", "minimax-m2.7"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("fmt", ["awq-int4", "gptq-int4", "gptq-int8"])
def test_refusals_are_the_engines_checks(name: str, engine: str, fmt: str) -> None:
    cfg = json.loads((MODELS / f"{name}.json").read_text())["config"]
    spec = load_model(name)
    seen = set()
    for tp in (1, 2, 4, 8, 16, 32):
        if cfg["num_attention_heads"] % tp or serving_tensor_parallel_refusal(spec, tp, engine) is not None:
            continue
        for group in (128, 64, 32):
            loads = engine_loads(cfg, tp, group)
            assert (quant_block_refusal(spec, tp, engine, fmt, group) is None) == loads, (name, tp, group)
            assert (serving_tensor_parallel_refusal(spec, tp, engine, fmt, group) is None) == loads
            seen.add(loads)
    assert seen == {True, False} or name == "minimax-m2.7"  # each model meets both answers over the degrees


def test_the_known_cases() -> None:
    # Qwen2.5-72B's 29568-wide MLP: 14784 per rank at TP 2, not whole groups of 128 (why Qwen's AWQ release pads
    # intermediate_size to 29696); Llama-2-7B's 11008 at TP 4 (2752); MiniMax-M2.7's experts at TP 8: 192 per rank,
    # not Marlin's, loaded by MoeWNA16 at group 64 (so vLLM and SGLang load it: no refusal)
    assert "14784 per device" in str(quant_block_refusal(load_model("qwen2.5-72b-instruct"), 2, "vllm", "awq-int4"))
    assert "2752 per device" in str(quant_block_refusal(load_model("llama-2-7b-hf"), 4, "sglang", "gptq-int4"))
    assert quant_block_refusal(load_model("llama-2-7b-hf"), 2, "vllm", "gptq-int4") is None
    mm = load_model("minimax-m2.7")
    assert quant_block_refusal(mm, 8, "vllm", "awq-int4") is None
    # Qwen3-30B-A3B's 768 experts at TP 16: 48 per rank, no group from 128 down to 32 divides it
    assert "48 per device" in str(quant_block_refusal(load_model("qwen3-30b-a3b"), 16, "vllm", "awq-int4"))
    assert quant_block_refusal(load_model("llama-2-7b-hf"), 4, "transformers", "awq-int4") is None  # vLLM's, SGLang's


LLAMA_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
            "intermediate_size": 11008, "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 32,
            "tie_word_embeddings": False, "torch_dtype": "float16", "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu"}


@pytest.mark.parametrize(("quant", "fmt", "refused_at_4"), [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}, "gptq-int4", True),
    ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True, "version": "gemm"}, "awq-int4", False),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": False, "sym": True}, "gptq-int8", False),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
      "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "weights": {
          "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}}}},
     "compressed-tensors", True),
])
def test_the_checkpoints_own_group(quant: dict, fmt: str, refused_at_4: bool) -> None:
    """The group is the checkpoint's (2752 per rank at TP 4: 128 refused, 64 whole, -1 one group per column)."""
    spec = spec_from_config({**LLAMA_7B, "quantization_config": quant}, name="llama-7b-q")
    assert quant_block_refusal(spec, 2, "vllm", fmt) is None
    assert (quant_block_refusal(spec, 4, "vllm", fmt) is not None) == refused_at_4
    assert (serving_tensor_parallel_refusal(spec, 4, "sglang", fmt) is not None) == refused_at_4
