"""QLoRA under PEFT's ``prepare_model_for_kbit_training``: what it casts to fp32, checked by calling it.

Independent truth: PEFT's own function (peft 0.21.2, utils/other.py lines 197-209) run on the model transformers
builds (tiny configs, on the CPU) with its decoder linears replaced by bitsandbytes ``Linear4bit`` (as transformers'
``replace_with_bnb_linear`` does; the lm_head stays an ``nn.Linear``) and the model marked ``is_loaded_in_4bit``.
The function casts every bf16 parameter that is not a ``Params4bit`` to fp32: the embedding, the norms, the lm_head
and the 4-bit layers' biases. The bytes it adds must be what llmsizer's default QLoRA estimate adds over the same run
with those tensors in bf16 (``base_dtype``), and the hidden state between the decoder layers it leaves must be fp32
(llmsizer's residual stream in the base dtype, estimate/training/setup.py) -- under autocast too, where autocast's
bf16 copy of the fp32 lm_head stays saved for the backward (llmsizer's autocast_weight_copies: the lm_head's only,
bitsandbytes' 4-bit linears dequantize their own weights).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import estimate_training
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_CONFIGS, build, torch

pytestmark = pytest.mark.slow

bnb = pytest.importorskip("bitsandbytes")
peft = pytest.importorskip("peft")

CASES = ["llama-gqa", "llama-mha-bias-tied"]


def _quantized_model(cfg: dict[str, Any]) -> Any:
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.bfloat16)
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, lin in list(parent.named_children()):
                if type(lin) is torch.nn.Linear:
                    q = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None,
                                          compute_dtype=torch.bfloat16, quant_type="nf4", compress_statistics=True)
                    q.weight = bnb.nn.Params4bit(lin.weight.data.clone(), requires_grad=False, quant_type="nf4",
                                                 compress_statistics=True)
                    if lin.bias is not None:
                        q.bias = torch.nn.Parameter(lin.bias.data.clone(), requires_grad=False)
                    setattr(parent, name, q.to("cpu"))  # quantizes the weight
    model.is_loaded_in_4bit = True
    return model


def _unquantized_bytes(model: Any) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.__class__.__name__ != "Params4bit")


@pytest.mark.parametrize("label", CASES)
def test_prepare_model_for_kbit_training_upcast_is_counted(label: str) -> None:
    cfg = dict(TINY_CONFIGS[label], vocab_size=1000)  # a vocabulary wide enough for the peak to be the loss's
    model = _quantized_model(cfg)
    before = _unquantized_bytes(model)
    model = peft.prepare_model_for_kbit_training(model)
    added = _unquantized_bytes(model) - before
    assert added == before  # bf16 -> fp32: every such tensor doubled
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.__class__.__name__ != "Params4bit")

    spec = spec_from_config(cfg, name="tiny")
    kw = dict(method="qlora", rank=8, targets="q,v", micro_batch=1, seq_len=16)
    prepared = estimate_training(spec, **kw)
    plain = estimate_training(spec, **kw, base_dtype="bf16")
    assert next(a for a in prepared.assumptions if a.name == "base_dtype").value == "fp32"
    assert prepared.item("weights").bytes - plain.item("weights").bytes == added, label

    # the hidden state between decoder layers is fp32 after the cast, under bf16 autocast too
    seen: dict[str, Any] = {}

    def hook(_mod: Any, args: Any, kwargs: Any) -> None:
        seen["dtype"] = (kwargs.get("hidden_states") if "hidden_states" in kwargs else args[0]).dtype

    model.model.layers[1].register_forward_pre_hook(hook, with_kwargs=True)
    model.train()
    saved: list[Any] = []

    def pack(t: Any) -> Any:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=torch.randint(0, cfg["vocab_size"], (1, 16)))
    assert seen["dtype"] == torch.float32
    # autocast's bf16 copy of the fp32 lm_head (its own storage, not the parameter's), kept for the backward
    head = model.get_output_embeddings().weight
    copies = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in saved
              if t.dtype == torch.bfloat16 and t.numel() == head.numel()
              and t.untyped_storage().data_ptr() != head.untyped_storage().data_ptr()}
    assert sum(copies.values()) == prepared.item("autocast_weight_copies").bytes == head.numel() * 2, label
    assert not any(i.name == "autocast_weight_copies" for i in plain.items)  # a bf16 lm_head: no copy


def test_unsloth_and_profiles_keep_the_load_dtype() -> None:
    """Unsloth's own prepare_model_for_kbit_training casts only the LoRA weights (unsloth/models/_utils.py lines
    516-531 @e3162dc); torchtune's to_nf4 and GPTQ bases are not cast by PEFT either."""
    for kw in (dict(kernels="unsloth"), dict(framework="torchtune", nf4_quantizer="torchao")):
        est = estimate_training("llama-3.1-8b", method="qlora", **kw)
        assert next(a for a in est.assumptions if a.name == "base_dtype").value == "bf16", kw
