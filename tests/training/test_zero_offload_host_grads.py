"""DeepSpeed ZeRO-Offload keeps an fp32 gradient of the fp32 partition on the host (probe25 D4).

Truth from DeepSpeed 0.19.8's stage3.py (PyPI sdist): with offload_optimizer the optimizer's device is the CPU (line
333); ``grad_partitions_flat_buffer`` holds each rank's gradient partition in the gradient-accumulation dtype (the
model dtype, bf16 here; lines 791-795) and each subgroup's ``fp32_partitioned_groups_flat[i].grad`` is a
``torch.zeros(num_elements, dtype=gradient_dtype)`` with gradient_dtype the fp32 partition's (lines 1305,
1337-1342): 2 + 4 B per element of the rank's partition. ZeRO-1/2 (stage_1_and_2.py lines 937-941): the fp32 one,
4 B."""

from __future__ import annotations

import pytest

from llmsizer import estimate_training
from llmsizer.formulas.params import count_params
from llmsizer.models import load_model

BF16, FP32 = 2, 4


def _host_grads(**kw: object) -> int:
    est = estimate_training("llama-3.1-8b", method="full", gpus=8, micro_batch=1, seq_len=1024,
                            grad_checkpointing="full", **kw)
    return next(i.bytes for i in est.items if i.name == "host_gradients")


def test_zero3_offload_host_gradients_are_bf16_buffer_plus_fp32() -> None:
    n = count_params(load_model("llama-3.1-8b")).total
    got = _host_grads(zero=3, offload="params")
    assert got == pytest.approx(n / 8 * (BF16 + FP32), rel=1e-3)


def test_zero2_offload_host_gradients_are_fp32() -> None:
    n = count_params(load_model("llama-3.1-8b")).total
    got = _host_grads(zero=2, offload="optimizer")
    assert got == pytest.approx(n / 8 * FP32, rel=1e-3)
