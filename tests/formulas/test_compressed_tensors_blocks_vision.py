"""compressed-tensors configs under the engines' and the package's own rules (review40 D1, D3, D4).

D1, FP8 blocks under tensor parallelism (formulas/tensor_parallel.py ``quant_block_refusal``, eq. TP5, fed a
compressed-tensors ``block`` group's ``block_structure``). Truth, written out from the engines' code:
vllm 0.19.1 (PyPI wheel) compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py:115-126 calls
utils/fp8_utils.py:1425-1474 ``validate_fp8_block_shape`` for strategy BLOCK (row-parallel input per rank % block_k;
every output partition of a split or merged layer % block_n); layers/linear.py:502-510 lets a merged layer through
only where the quant config has ``weight_block_size``, which CompressedTensorsConfig has not, so gate_up partitions
are checked; compressed_tensors_moe.py:725-749 the fused experts' intermediate // tp % block_n (and % block_k when
tp > 1). sglang 0.5.23: compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py:79-91 (fp8_utils.py:2852-2893, no
allowance) and compressed_tensors_w8a8_fp8_moe.py:97-121 the same. The layer sizes are read from the catalog rows'
own config.json (vllm models/qwen3_moe.py, deepseek_v2.py).

D3, ``block_structure`` and ``targets``: the truth is compressed-tensors 0.20.1 itself (QuantizationArgs,
QuantizationScheme): what it refuses, llmsizer refuses in one line naming the field.

D4, the vision tower: a tiny Qwen3.5 built by transformers, the config applied with compressed-tensors'
``apply_quantization_config``: whether ``model.visual`` linears get a scheme is the truth; llmsizer refuses exactly
then, in the words the ModelOpt path uses (one rule).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.compressed_tensors import ct_config, ct_vision_check
from llmsizer.formulas.tensor_parallel import fp8_block_served, quant_block_refusal, serving_tensor_parallel_refusal
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.models import load_model

MODELS = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"
FP8 = {"num_bits": 8, "type": "float", "symmetric": True}


def ct_block(block: list[int], ignore: tuple[str, ...] = ("lm_head",)) -> dict[str, Any]:
    """llm-compressor's FP8_BLOCK preset: fp8 weights in [block_n, block_k] blocks, dynamic group-128 activations."""
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"],
                                          "weights": {**FP8, "strategy": "block", "block_structure": block},
                                          "input_activations": {**FP8, "strategy": "group", "group_size": 128,
                                                                "dynamic": True}}},
            "ignore": list(ignore)}


def with_quant(name: str, q: dict[str, Any]) -> Any:
    return dataclasses.replace(load_model(name), quantization=tuple(sorted(q.items())))


def layers(cfg: dict[str, Any]) -> list[tuple[str, int]]:
    """(kind, size) of the FP8-block layers vLLM builds from config.json: 'row' (input split), 'column' (output
    split), 'merged' (each gate/up partition), 'experts' (fused experts' intermediate)."""
    heads = cfg["num_attention_heads"]
    if "kv_lora_rank" in cfg:  # DeepSeek-V3 MLA (deepseek_v2.py)
        nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        inter, shared = cfg["moe_intermediate_size"], cfg.get("n_shared_experts") or 0
        return [("column", heads * (nope + rope)), ("column", heads * (nope + v)), ("row", heads * v),
                ("experts", inter), ("merged", cfg["intermediate_size"]), ("row", cfg["intermediate_size"]),
                ("merged", inter * shared), ("row", inter * shared)]
    # Qwen3-MoE (qwen3_moe.py): o_proj row-parallel of heads x head_dim, every MLP a FusedMoE
    return [("row", heads * cfg["head_dim"]), ("experts", cfg["moe_intermediate_size"])]


def loads(cfg: dict[str, Any], block: tuple[int, int], tp: int, experts: bool = True) -> bool:
    block_n, block_k = block
    for kind, size in layers(cfg):
        if kind == "experts":
            if experts and ((size // tp) % block_n or (tp > 1 and (size // tp) % block_k)):
                return False
        elif tp > 1 and size % tp:
            return False
        elif tp > 1 and kind == "row" and (size // tp) % block_k:
            return False
        elif tp > 1 and kind in ("column", "merged") and (size // tp) % block_n:
            return False
    return True


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "deepseek-v3"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("block", [(128, 128), (64, 64), (256, 128)])
def test_block_groups_are_refused_as_the_engines_refuse(name: str, engine: str, block: tuple[int, int]) -> None:
    cfg = json.loads((MODELS / f"{name}.json").read_text())["config"]
    spec = with_quant(name, ct_block(list(block)))
    assert fp8_block_served(spec, "compressed-tensors")
    for tp in (1, 2, 4, 8, 16, 32, 64):
        if cfg["num_attention_heads"] % tp:
            continue
        assert (quant_block_refusal(spec, tp, engine, "compressed-tensors") is None) == loads(cfg, block, tp), tp
        if serving_tensor_parallel_refusal(spec, tp, engine) is None:  # heads fine: the blocks decide
            got = serving_tensor_parallel_refusal(spec, tp, engine, "compressed-tensors")
            assert (got is None) == loads(cfg, block, tp), tp


def test_the_reviews_case_768_and_experts_kept_16_bit() -> None:
    """Qwen3-30B-A3B experts of 768: TP 2 loads (384 = 3 x 128), TP 4 does not (192). A config whose ignore keeps the
    experts bf16 (vLLM then builds them unquantized: no block check) loads at TP 4."""
    cfg = json.loads((MODELS / "qwen3-30b-a3b.json").read_text())["config"]
    spec = with_quant("qwen3-30b-a3b", ct_block([128, 128]))
    assert quant_block_refusal(spec, 2, "vllm", "compressed-tensors") is None
    why = quant_block_refusal(spec, 4, "vllm", "compressed-tensors")
    assert why is not None and "192 per device" in why and "block_structure" in why
    kept = with_quant("qwen3-30b-a3b", ct_block([128, 128], ("lm_head", "re:.*mlp\\.experts\\..*")))
    assert loads(cfg, (128, 128), 4, experts=False)
    assert quant_block_refusal(kept, 4, "vllm", "compressed-tensors") is None
    other = with_quant("qwen3-30b-a3b", {**ct_block([128, 128]), "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {**FP8, "strategy": "channel"}}}})
    assert not fp8_block_served(other, "compressed-tensors")  # a channel-wise fp8 config has no blocks
    assert serving_tensor_parallel_refusal(other, 4, "vllm", "compressed-tensors") is None


def _package_refuses(**kw: Any) -> bool:
    pytest.importorskip("compressed_tensors")
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from pydantic import ValidationError
    try:
        if "targets" in kw:
            QuantizationScheme(targets=kw["targets"], weights=QuantizationArgs(**FP8, strategy="channel"))
        else:
            QuantizationArgs(**FP8, strategy="block", block_structure=kw["block_structure"])
    except (ValidationError, ValueError):
        return True
    return False


@pytest.mark.parametrize("bs", [[0, 128], [-128, 128], [1.5, 128], [128], [128, 128, 1], "0x128", "128x64",
                                [128, 128], [64, 256], "axb", None])
def test_block_structure_as_compressed_tensors_checks_it(bs: Any) -> None:
    q = ct_block(bs)
    if _package_refuses(block_structure=bs):
        with pytest.raises(InputError) as e:
            ct_config("m", q)
        assert "block_structure" in str(e.value) and "\n" not in str(e.value)
    else:
        cfg = ct_config("m", q)
        assert cfg is not None
        want = [int(x) for x in bs.split("x")] if isinstance(bs, str) else bs
        assert list(cfg.schemes[0].block or ()) == want


@pytest.mark.parametrize("targets", ["Linear", ["Linear"]])
def test_targets_as_compressed_tensors_checks_them(targets: Any) -> None:
    q = ct_block([128, 128])
    q["config_groups"]["group_0"]["targets"] = targets
    if _package_refuses(targets=targets):
        with pytest.raises(InputError) as e:
            ct_config("m", q)
        msg = str(e.value)
        assert "targets" in msg and "'L'" not in msg and "\n" not in msg
    else:
        assert ct_config("m", q) is not None


def _tiny_qwen35_vision_quantized(ignore: list[str]) -> bool:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("compressed_tensors")
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
    c = transformers.Qwen3_5Config(
        text_config={"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
                     "layer_types": ["linear_attention", "full_attention"], "linear_num_key_heads": 2,
                     "linear_num_value_heads": 2, "linear_key_head_dim": 16, "linear_value_head_dim": 16},
        vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
                       "patch_size": 4, "num_position_embeddings": 16})
    model = transformers.Qwen3_5ForConditionalGeneration(c)
    apply_quantization_config(model, QuantizationConfig.model_validate({**NVFP4_CT, "ignore": ignore}))
    visual = [m for n, m in model.named_modules() if n.startswith("model.visual.")
              and isinstance(m, torch.nn.Linear)]
    assert visual and any(n == "model.visual.blocks.0.attn.qkv" for n, _ in model.named_modules())
    flags = {getattr(m, "quantization_scheme", None) is not None for m in visual}
    assert len(flags) == 1  # the whole tower one way
    return flags.pop()


NVFP4_CT = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group",
                                       "group_size": 16, "dynamic": False}}}}


@pytest.mark.parametrize("ignore", [["lm_head"], ["lm_head", "re:.*visual.*"], ["lm_head", "re:model\\.visual\\."]])
@pytest.mark.parametrize("name", ["qwen3.5-27b", "qwen3.5-122b-a10b"])
def test_a_quantized_vision_tower_is_refused_as_compressed_tensors_quantizes_it(ignore: list[str], name: str) -> None:
    truth = _tiny_qwen35_vision_quantized(ignore)
    q = {**NVFP4_CT, "ignore": ignore}
    spec = with_quant(name, q)
    cfg = ct_config(spec.name, q)
    assert cfg is not None and spec.vision is not None
    if truth:
        with pytest.raises(InputError) as e:
            ct_vision_check(spec, cfg)
        assert "only a 16-bit vision tower is modelled" in str(e.value) and "\n" not in str(e.value)
        with pytest.raises(InputError, match="only a 16-bit vision tower is modelled"):
            weight_bytes(spec, "compressed-tensors")  # the sizing meets the same rule
    else:
        ct_vision_check(spec, cfg)


def test_one_rule_for_modelopt_and_compressed_tensors() -> None:
    """The ModelOpt NVFP4 path refuses a quantized tower in the same words (formulas/modelopt_exclusions.py
    ``quantized_vision_refusal``)."""
    from llmsizer.formulas.weight_formats import stored_format
    q = {"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                      "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}}
    with pytest.raises(InputError, match="only a 16-bit vision tower is modelled"):
        stored_format(with_quant("qwen3.5-27b", q))
