"""LoRA under FSDP2 mixed precision (``precision='fsdp-bf16-mixed'``): FSDP2's MixedPrecisionPolicy keeps the
sharded parameters in the dtype they were created in and casts to ``param_dtype`` only for the all-gather (torch
``distributed/fsdp/_fully_shard/_fsdp_api.py`` MixedPrecisionPolicy: "param_dtype ... the dtype for the unsharded
parameter and hence the dtype for forward/backward computation"), so PEFT's adapters, created in fp32 beside the
recipe's fp32 parameters, stay fp32. The default adapter dtype was read from the recipe's name ('fsdp') and raised
KeyError instead of an estimate. The all-gathered blocks with their adapters are compared with real FSDP2 steps in
tests/training/test_fsdp2_reduce_scatter_pool.py."""

from __future__ import annotations

from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.lora import lora_params
from llmsizer.models import load_model


def test_fsdp_mixed_precision_lora_keeps_fp32_adapters() -> None:
    spec = load_model("qwen2.5-0.5b")
    est = estimate_training(spec, method="lora", precision="fsdp-bf16-mixed", gpus=2, fsdp="full")
    assert next(a.value for a in est.assumptions if a.name == "adapter_dtype") == "fp32"
    adapters = lora_params(spec, 16, ("q", "k", "v", "o", "gate", "up", "down")).total * 4
    assert est.item("adapter_weights").bytes == -(-adapters // 2)  # fp32, sharded over the 2 ranks
