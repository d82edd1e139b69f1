"""An FP8-block checkpoint shards only into whole blocks (formulas/tensor_parallel.py ``quant_block_refusal``, eq. TP5).

Truth: vLLM's and SGLang's load-time checks written out here from their source, applied to the layer shapes their
model code builds from each checkpoint's own config.json (the catalog rows' ``config``, not llmsizer's tensors):

- vllm 0.19.1 (PyPI wheel) vllm/model_executor/layers/quantization/utils/fp8_utils.py:1425-1474
  ``validate_fp8_block_shape``: a row-parallel layer (tp > 1, input split) needs input_size / tp % block_k == 0; a
  column-parallel one (tp > 1, output split) or a merged one needs every output partition % block_n == 0, but
  layers/linear.py:502-521 lets a merged layer (QKV, gate_up) whose partitions are not whole blocks through;
- vllm quantization/fp8.py:610-649 Fp8MoEMethod.create_weights: the fused experts' intermediate_size // tp
  (fused_moe/layer.py:426) % block_n == 0, and % block_k == 0 when tp > 1 ("The output_size of gate's and up's weight
  = 192 is not divisible by weight quantization block_n = 128", the error users report for MiniMax-M2.7 at TP 8);
- sglang 0.5.23 srt/layers/quantization/fp8.py:570-610 (the same, a merged layer's partitions all checked) and
  :1579-1601 (the same experts check).

The layers (vllm models/deepseek_v2.py: q_b_proj / kv_b_proj ColumnParallelLinear, o_proj RowParallelLinear, dense
and shared-expert down_proj RowParallelLinear, gate_up_proj MergedColumnParallelLinear; minimax_m2.py: qkv merged,
o_proj row, FusedMoE experts of config.intermediate_size).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.formulas.tensor_parallel import quant_block_refusal, serving_tensor_parallel_refusal
from llmsizer.models import load_model

MODELS = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"


def layers(cfg: dict) -> list[tuple[str, int, bool]]:
    """(kind, size, dense) of the layers a vLLM model builds from config.json: 'row' (input columns split), 'column'
    (output rows split), 'merged' (each partition's output rows), 'experts' (the fused experts' intermediate)."""
    heads = cfg["num_attention_heads"]
    out: list[tuple[str, int, bool]] = []
    if "kv_lora_rank" in cfg:  # DeepSeek-V2/V3 MLA
        nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        out += [("column", heads * (nope + rope), True), ("column", heads * (nope + v), True),
                ("row", heads * v, True)]
        inter = cfg["moe_intermediate_size"]
        out += [("experts", inter, False), ("merged", cfg["intermediate_size"], True),
                ("row", cfg["intermediate_size"], True)]
        shared = cfg.get("n_shared_experts") or 0
        if shared:
            out += [("merged", inter * shared, False), ("row", inter * shared, False)]
    else:  # MiniMax-M2: GQA heads of head_dim, FusedMoE of config.intermediate_size
        out += [("row", heads * cfg["head_dim"], True), ("experts", cfg["intermediate_size"], False)]
    return out


def engine_loads(cfg: dict, tp: int, engine: str) -> bool:
    block_n, block_k = cfg["quantization_config"]["weight_block_size"]
    for kind, size, _ in layers(cfg):
        if kind == "experts":
            per = size // tp
            if per % block_n or (tp > 1 and per % block_k):
                return False
        elif tp > 1 and size % tp:
            return False  # divide() asserts
        elif kind == "row" and tp > 1 and (size // tp) % block_k:
            return False
        elif kind == "column" and tp > 1 and (size // tp) % block_n:
            return False
        elif kind == "merged" and engine == "sglang" and (size // tp) % block_n:
            return False
    return True


@pytest.mark.parametrize("name", ["minimax-m2.7", "deepseek-v3", "kimi-k2-instruct"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_refusals_are_the_engines_checks(name: str, engine: str) -> None:
    cfg = json.loads((MODELS / f"{name}.json").read_text())["config"]
    spec = load_model(name)
    seen = set()
    for tp in (1, 2, 4, 8, 16, 32, 64):
        if cfg["num_attention_heads"] % tp:
            continue
        refused = quant_block_refusal(spec, tp, engine) is not None
        assert refused == (not engine_loads(cfg, tp, engine)), (name, engine, tp)
        seen.add(refused)
    assert seen == {True, False}  # each model has a degree either side


def test_minimax_m2_7_at_tp_8_is_the_users_error() -> None:
    """1536 / 8 = 192: vLLM's "output_size of gate's and up's weight = 192 is not divisible by weight quantization
    block_n = 128"; TP 4 (384 = 3 x 128) loads; the refusal names expert parallelism as not modelled."""
    spec = load_model("minimax-m2.7")
    why = quant_block_refusal(spec, 8, "vllm")
    assert why is not None and "192 per device" in why and "128" in why and "expert parallelism" in why
    assert quant_block_refusal(spec, 4, "vllm") is None
    # the serving rule refuses it only at the format that has blocks
    assert serving_tensor_parallel_refusal(spec, 8, "vllm", "fp8-block") == why
    assert serving_tensor_parallel_refusal(spec, 8, "vllm", "bf16") is None
    assert serving_tensor_parallel_refusal(spec, 8, "vllm", "nvfp4") is None


def test_a_bf16_checkpoint_named_fp8_block_takes_128_blocks() -> None:
    """Qwen3-30B-A3B (moe_intermediate_size 768, config.json) sized as --weights fp8-block: the default 128 x 128
    block (Qwen/Qwen3-30B-A3B-FP8 config.json weight_block_size [128, 128]): 768 / 2 = 384 loads, 768 / 4 = 192
    does not."""
    spec = load_model("qwen3-30b-a3b")
    assert spec.moe is not None and spec.moe.expert_intermediate_size == 768
    assert quant_block_refusal(spec, 2, "vllm") is None
    assert "192 per device" in str(quant_block_refusal(spec, 4, "vllm"))
    assert quant_block_refusal(spec, 4, "transformers") is None  # the rule is vLLM's and SGLang's
