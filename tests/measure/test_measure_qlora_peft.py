"""The measure worker's QLoRA base is the one PEFT's real QLoRA path sees (bitsandbytes 0.50.2 and PEFT run on a CPU).

Independent truth: PEFT's own dispatch. A model that transformers loads with ``BitsAndBytesConfig(load_in_4bit=True)``
is marked ``is_loaded_in_4bit`` (transformers 5.24.0 quantizers/quantizer_bnb_4bit.py:138), and PEFT then wraps each
``bnb.nn.Linear4bit`` in its bitsandbytes LoRA layer ``peft.tuners.lora.bnb.Linear4bit`` (peft tuners/lora/bnb.py
``dispatch_bnb_4bit``), whose forward clones the base output (the kernel formulas/launch_overhead.py
``PEFT_4BIT_CLONE_KERNELS`` counts). Without the mark PEFT takes its plain ``lora.Linear``, which no real run takes.

Checks: after the worker's ``quantize_4bit`` and ``prepare_training`` (method qlora), every adapted module is PEFT's
bitsandbytes ``Linear4bit`` over a bitsandbytes ``Linear4bit`` (none is the plain ``lora.Linear``), and one
forward/backward on the CPU runs and gives the adapters gradients; the control (the mark removed before PEFT) gets the
plain layer, so the check can fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import TINY


def _prepared(mark: bool) -> Any:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("peft")
    pytest.importorskip("bitsandbytes")
    from llmsizer.measure import MeasureSettings
    from llmsizer.measure.build import quantize_4bit
    from llmsizer.measure.workloads import prepare_training

    torch.manual_seed(0)
    cfg = dict(TINY)
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
    n = quantize_4bit(model, device="cpu", compute_dtype="bf16", double_quant=True)
    assert n == 7 * TINY["num_hidden_layers"]
    if not mark:
        del model.is_loaded_in_4bit
    s = MeasureSettings("training", "unused", device="cpu", method="qlora", rank=8, micro_batch=1, seq_len=16,
                        precision="bf16", allow_cpu_bnb=True)
    return prepare_training(model, s)


def _adapted(model: Any) -> list[Any]:
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def test_worker_qlora_takes_peft_bitsandbytes_layer() -> None:
    model = _prepared(mark=True)
    import bitsandbytes as bnb
    import torch
    from peft.tuners.lora.bnb import Linear4bit as PeftLinear4bit

    layers = _adapted(model)
    assert len(layers) == 7 * TINY["num_hidden_layers"]
    assert all(type(m) is PeftLinear4bit for m in layers), {type(m).__name__ for m in layers}
    assert all(isinstance(m.get_base_layer(), bnb.nn.Linear4bit) for m in layers)
    ids = torch.randint(0, TINY["vocab_size"], (1, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_" in n]
    assert grads and all(g is not None for g in grads)


def test_unmarked_base_takes_plain_lora_linear() -> None:
    """The control: PEFT's dispatch really depends on the mark (the worker's path before it set it)."""
    from peft.tuners.lora import Linear as PlainLinear

    layers = _adapted(_prepared(mark=False))
    assert layers and all(type(m) is PlainLinear for m in layers)
