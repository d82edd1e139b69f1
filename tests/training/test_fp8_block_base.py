"""LoRA over a checkpoint published fp8-block (probe32 D5: MiniMax-M2.7, DeepSeek-V3 ...).

Independent truth: transformers' own FineGrainedFP8 quantizer (transformers 5.24.0, the test extra's pin).
- What the frozen base holds: ``FineGrainedFP8HfQuantizer._process_model_before_weight_loading`` swaps the model
  transformers builds (tiny configs, meta device) to FP8Linear / FP8Experts (integrations/finegrained_fp8.py
  ``replace_with_fp8_linear``); the bytes of its parameters are what a loaded pre-quantized checkpoint holds. Ours
  (``weight_formats.weight_bytes(spec, 'fp8-block')``, the stored format's rule) must equal them.
- Where it stays FP8: ``validate_environment`` run with the GPU it would see (torch.cuda patched: no GPU, compute
  capability 8.0, 8.9, 9.0) sets ``quantization_config.dequantize`` exactly where ``setup.fp8_block_base`` says the
  base is dequantized.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import estimate_training
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.device import training_device_fields
from llmsizer.estimate.training.setup import fp8_block_base
from llmsizer.formulas.weight_formats import stored_format, weight_bytes
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs import TrainingWorkload
from oracle_utils import TINY_CONFIGS, build, torch

pytestmark = pytest.mark.slow

_Q = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "float8_e4m3fn", "weight_block_size": [128, 128]}

# dimensions over and under a 128 block, so the ceil of the scale grid is exercised; a fused gate_up whose halves are
# whole blocks (as in every fp8-block release: DeepSeek-V3 moe_intermediate 2048, MiniMax-M2 1536), since
# transformers' fused [E, 2I, H] scale grid equals two [I, H] grids only then
CASES: list[tuple[str, dict[str, Any]]] = [
    ("llama-gqa", {**TINY_CONFIGS["llama-gqa"], "hidden_size": 320, "intermediate_size": 200}),
    ("mixtral-moe", TINY_CONFIGS["mixtral-moe"]),
    ("qwen3-moe", TINY_CONFIGS["qwen3-moe"]),
    ("minimax-m2", {**TINY_CONFIGS["minimax-m2"], "hidden_size": 320, "intermediate_size": 256}),
    ("deepseek-v3-mla", {**TINY_CONFIGS["deepseek-v3-mla"], "hidden_size": 320, "moe_intermediate_size": 256,
                         "intermediate_size": 448, "q_lora_rank": 160, "kv_lora_rank": 96}),
]


def _transformers_bytes(cfg: dict[str, Any]) -> int:
    """Bytes of the parameters transformers holds for ``cfg`` loaded from an fp8-block checkpoint on a GPU it keeps
    FP8 on; a parameter the model class itself keeps fp32 in a bf16 load (``_keep_in_fp32_modules_strict``: DeepSeek-V3's
    router) counted at 2 B, as the bf16 sizing does (not this rule's)."""
    from transformers import FineGrainedFP8Config
    from transformers.quantizers.quantizer_finegrained_fp8 import FineGrainedFP8HfQuantizer

    model = build(cfg, dtype=torch.bfloat16)
    own_fp32 = {name for name, p in model.named_parameters() if p.dtype == torch.float32}
    q = FineGrainedFP8HfQuantizer(FineGrainedFP8Config(weight_block_size=(128, 128)), pre_quantized=True)
    q._process_model_before_weight_loading(model)
    return sum(p.numel() * (2 if name in own_fp32 else p.element_size()) for name, p in model.named_parameters())


@pytest.mark.parametrize(("label", "cfg"), CASES, ids=[c[0] for c in CASES])
def test_fp8_block_bytes_match_transformers_quantizer(label: str, cfg: dict[str, Any]) -> None:
    spec = spec_from_config({**cfg, "quantization_config": _Q, "torch_dtype": "bfloat16"}, name=label)
    assert stored_format(spec)[0] == "fp8-block"
    assert weight_bytes(spec, "fp8-block").total == _transformers_bytes(cfg)


def _dequantized(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int] | None) -> bool:
    """``quantization_config.dequantize`` after transformers' own ``validate_environment`` on a GPU of
    ``capability`` (None: no GPU)."""
    from transformers import FineGrainedFP8Config
    from transformers.quantizers.quantizer_finegrained_fp8 import FineGrainedFP8HfQuantizer

    monkeypatch.setattr(torch.cuda, "is_available", lambda: capability is not None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
    q = FineGrainedFP8HfQuantizer(FineGrainedFP8Config(), pre_quantized=True)
    q.validate_environment(device_map="cuda")
    return bool(q.quantization_config.dequantize)


@pytest.mark.parametrize(("device", "capability"), [("a100-sxm-80gb", (8, 0)), ("l40s", (8, 9)),
                                                    ("h100-sxm", (9, 0)), ("cpu", None)])
def test_where_the_base_stays_fp8_follows_transformers(monkeypatch: pytest.MonkeyPatch, device: str,
                                                       capability: tuple[int, int] | None) -> None:
    spec = find("minimax-m2.7").spec()
    kept = fp8_block_base(spec, _lora(device))
    assert kept is not None
    assert kept[0] is not _dequantized(monkeypatch, capability), kept[1]


def _lora(device: str, **kw: Any) -> TrainingWorkload:
    fields: dict[str, Any] = {"method": "lora", "device": "cpu" if device == "cpu" else "gpu", **kw}
    if device != "cpu":
        fields.update(training_device_fields(builtin_catalog().devices[device]), device="gpu")
    return TrainingWorkload(**fields)


def _assumption(est: Any, name: str) -> Any:
    return next(a for a in est.assumptions if a.name == name)


def test_minimax_lora_sizes_the_published_fp8_base() -> None:
    """MiniMax-M2.7 (published only fp8-block): LoRA at TP 8 on H200 holds the checkpoint's 214 GiB, not 426 GiB of
    bf16 (probe32 D5); on A100s (compute capability 8.0) transformers dequantizes it: bf16, with a warning."""
    spec = find("minimax-m2.7").spec()
    fp8 = weight_bytes(spec, "fp8-block").total
    bf16 = weight_bytes(spec, "bf16").total
    assert fp8 < 0.51 * bf16
    common = {"method": "lora", "gpus": 8, "tp": 8, "zero": 0, "grad_checkpointing": "full"}
    est = estimate_training("minimax-m2.7", device="h200", **common)
    assert _assumption(est, "base_weights").value == "fp8-block"
    weights = next(i for i in est.items if i.name == "weights")
    assert fp8 / 8 * 0.99 < weights.bytes < fp8 / 8 * 1.01
    old = estimate_training("minimax-m2.7", device="a100-sxm-80gb", **common)
    assert _assumption(old, "base_weights").value == "bf16"
    assert any("below 8.9" in w for w in old.warnings)
    assert next(i for i in old.items if i.name == "weights").bytes > 1.9 * weights.bytes


def test_qlora_refusal_names_a_real_option() -> None:
    """MiniMax publishes no unquantized checkpoint: the QLoRA refusal points at LoRA over the FP8 weights."""
    with pytest.raises(InputError, match="use method lora: transformers keeps its FP8 weights on this GPU"):
        estimate_training("minimax-m2.7", method="qlora", device="h100-sxm")
    with pytest.raises(InputError, match="use method lora, over its weights dequantized to bf16 here"):
        estimate_training("minimax-m2.7", method="qlora", device="a100-sxm-80gb")
