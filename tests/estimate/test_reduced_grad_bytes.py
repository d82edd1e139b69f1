"""Bytes per gradient element the data-parallel reduction moves (estimate/duration.py ``reduced_grad_bytes``).
Truth: (1) gradients measured in real CPU backward passes (DDP all-reduces ``param.grad`` as it is: torch
distributed/algorithms/ddp_comm_hooks/default_hooks.py allreduce_hook works on the bucket in the gradient dtype);
(2) DeepSpeed's engine, quoted (deepspeedai/DeepSpeed runtime/engine.py ``communication_data_type``: 'if
self.fp16_enabled(): return torch.float16 / if self.bfloat16_enabled(): return torch.bfloat16 / return
torch.float32', with no ZeRO-stage condition), so DeepSpeed's own bf16 reduces 2-byte elements with or without ZeRO."""

from __future__ import annotations

import pytest

from llmsizer.estimate.duration import reduced_grad_bytes
from llmsizer.specs import TrainingWorkload

torch = pytest.importorskip("torch")


def _grad_element_size(param_dtype: object, autocast: object | None) -> int:
    lin = torch.nn.Linear(8, 8).to(param_dtype)
    x = torch.randn(4, 8, dtype=param_dtype if autocast is None else torch.float32)
    if autocast is None:
        lin(x).float().sum().backward()
    else:
        with torch.autocast("cpu", dtype=autocast):
            lin(x).float().sum().backward()
    assert lin.weight.grad is not None
    return int(lin.weight.grad.element_size())


@pytest.mark.parametrize("precision,param_dtype,autocast", [
    ("fp32", "float32", None), ("bf16", "bfloat16", None), ("fp16", "float16", None),
    ("bf16-mixed", "float32", "bfloat16"), ("fp16-mixed", "float32", "float16"),
])
def test_ddp_reduces_the_gradients_as_a_real_backward_makes_them(precision: str, param_dtype: str,
                                                                  autocast: str | None) -> None:
    measured = _grad_element_size(getattr(torch, param_dtype), getattr(torch, autocast) if autocast else None)
    assert reduced_grad_bytes(TrainingWorkload(precision=precision)) == measured


@pytest.mark.parametrize("precision", ["deepspeed-bf16", "deepspeed-fp16"])
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_deepspeed_reduces_in_its_half_precision_at_every_stage(precision: str, zero: int) -> None:
    assert reduced_grad_bytes(TrainingWorkload(precision=precision, zero=zero)) == 2
