"""Liger's fused linear cross-entropy under FSDP's mixed precision: the lm_head weight the loss reads is the unit
all-gathered in ``param_dtype`` (bf16), so its ``grad_weight = torch.zeros_like(weight)`` is bf16 and eq. LG5 takes
the bf16 path (Liger-Kernel ops/fused_linear_cross_entropy.py @ead96b6 L242-257: ``mm(..).float()`` summed into the
bf16 grad_weight, 2c + 8 + 2w = 16 B per [V, h] element and chunk), not the fp32 master's out_dtype addmm (8 B).

Truth: a real FSDP2 ``fully_shard`` step on the CPU (one gloo rank) reports the element size of ``zeros_like`` of the
weight a Linear's forward sees; the per-token difference is counted from Liger's loop by hand (chunks of
next_pow2(ceil(t / ceil(V / h))) rows, ops/fused_linear_cross_entropy.py L44-48)."""

from __future__ import annotations

import math
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from llmsizer.estimate.duration import elementwise_bytes_per_token  # noqa: E402
from llmsizer.formulas.training_states import recipe  # noqa: E402
from llmsizer.models import load_model  # noqa: E402
from llmsizer.specs.training import TrainingWorkload  # noqa: E402

_FSDP2_STEP = """
import os, sys, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
dist.init_process_group("gloo", rank=0, world_size=1)
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 32, bias=False))
seen = {}
m[1].register_forward_pre_hook(lambda mod, a: seen.update(w=torch.zeros_like(mod.weight).element_size()) or None)
fully_shard(m, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
m(torch.randn(4, 8)).float().sum().backward()
print(seen["w"], m[1].weight.element_size())
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_fsdp_mixed_forward_weight_is_param_dtype() -> None:
    out = subprocess.run([sys.executable, "-c", _FSDP2_STEP, str(_free_port())], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    seen, stored = int(out[-2]), int(out[-1])
    rec = recipe("fsdp-bf16-mixed")
    assert (seen, stored) == (2, 4)
    assert rec.model_bytes == stored and rec.forward_weight_bytes(rec.model_bytes) == seen
    bf16_mixed = recipe("bf16-mixed")  # torch.autocast leaves the parameter fp32: zeros_like is fp32
    assert bf16_mixed.forward_weight_bytes(bf16_mixed.model_bytes) == 4


def test_lg5_under_fsdp_mixed_takes_the_bf16_path() -> None:
    spec = load_model("llama-3.1-8b")
    base = dict(method="full", micro_batch=8, seq_len=1024, grad_checkpointing="full", fsdp="full", gpus=8,
                optimizer="adamw")

    def flce_minus_ce(precision: str) -> float:
        w = TrainingWorkload(**dict(base, precision=precision))  # type: ignore[arg-type]
        flce = TrainingWorkload(**dict(base, precision=precision, loss="liger-flce"))  # type: ignore[arg-type]
        return elementwise_bytes_per_token(spec, flce) - elementwise_bytes_per_token(spec, w)

    t, h, v = 8 * 1024, spec.hidden_size, spec.vocab_size
    rows = 1 << math.ceil(math.log2(math.ceil(t / math.ceil(v / h))))
    chunks = math.ceil(t / rows)
    # per [V, h] element and chunk: a bf16 grad_weight's mm().float() then += (c + (c + 4) + 4 + 2w = 16 B with
    # c = w = 2) against an fp32 grad_weight's addmm with out_dtype (its read and write, 8 B)
    expected = chunks * v * h * (16 - 8) / t
    assert flce_minus_ce("fsdp-bf16-mixed") - flce_minus_ce("bf16-mixed") == pytest.approx(expected, rel=1e-9)
