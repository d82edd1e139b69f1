"""Host time per kernel of the measure worker's training step against a no-grad decode step of the same model, on
this CPU: a RATIO check, never a constant for a GPU host (the task hosttrain, validation/measured/README.md).

The model is transformers' Qwen2 with a real model's layer count (24: Qwen2.5-0.5B; 28: Qwen2.5-1.5B) and tiny
widths (hidden 64, one sequence of 8 tokens), so that the CPU's arithmetic is small beside the host's per-op work
(Python, the dispatcher, autograd). The step is the worker's own (measure/workloads.py ``prepare_training``,
``make_optimizer`` with foreach AdamW as on CUDA, ``training_step``); the decode step is the worker's ``_Forward``
on a DynamicCache under ``no_grad``. Counted: kernel-launching aten ops by phase (a TorchDispatchMode, the rule of
tests/formulas/test_training_step_kernels.py) and ``nn.Module`` calls (a global forward pre-hook, in a pass of its
own); timed: the minimum over 150 steps of each phase's host time (the minimum: the 2 vCPUs are shared).

    PYTHONPATH=src .venv/bin/python bench/host_step_ratio.py [--layers 24] [--ckpt] [--precision bf16|bf16-mixed]
        [--method full|lora|qlora]
"""

from __future__ import annotations

import argparse
import collections
import time
from typing import Any

import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode

from llmsizer.measure import MeasureSettings
from llmsizer.measure.workloads import Where, _Forward, make_optimizer, new_cache, prepare_training, training_step

NO_KERNEL = {"detach", "lift_fresh", "alias", "_unsafe_view", "empty", "empty_like", "empty_strided",
             "new_empty_strided", "_record_function_enter_new", "_record_function_exit"}


class Count(TorchDispatchMode):
    def __init__(self, ops: collections.Counter[str], phase: list[str]) -> None:
        super().__init__()
        self.ops, self.phase = ops, phase

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if not func.is_view and func.overloadpacket.__name__ not in NO_KERNEL:
            self.ops[self.phase[0]] += 1
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "bf16-mixed"])
    ap.add_argument("--method", default="full", choices=["full", "lora", "qlora"])
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    conf = transformers.Qwen2Config(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                    num_key_value_heads=2, vocab_size=256, tie_word_embeddings=True,
                                    num_hidden_layers=a.layers)
    conf._attn_implementation = "sdpa"
    model: Any = transformers.Qwen2ForCausalLM(conf)
    if a.precision == "bf16" or a.method != "full":
        model = model.to(torch.bfloat16)
    if a.method == "qlora":  # the worker's NF4 base (measure/build.py), unmarked as the worker leaves it
        from llmsizer.measure.build import quantize_4bit

        quantize_4bit(model, device="cpu", compute_dtype="bf16", double_quant=True)
    s = MeasureSettings("training", "tiny", device="cpu", method=a.method, precision=a.precision, micro_batch=1,
                        seq_len=8, grad_checkpointing="full" if a.ckpt else "none", rank=8,
                        allow_cpu_bnb=a.method == "qlora")
    model = prepare_training(model, s)
    opt = make_optimizer("adamw", [p for p in model.parameters() if p.requires_grad], "foreach")
    ids = torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(0))
    where = Where()
    for k in range(3):
        training_step(model, opt, ids, s, where, k + 1)
    ops: collections.Counter[str] = collections.Counter()
    phase = ["fwd"]
    marks: list[float] = []

    def phased_step() -> list[float]:
        marks.clear()
        t = time.perf_counter()
        training_step(model, opt, ids, s, where, 4, None, marks)
        return [marks[0] - t, marks[1] - marks[0], marks[2] - marks[1]]

    class PhaseWhere(Where):  # the count's phase follows training_step's own ``where`` calls
        def __call__(self, name: str, step: int | None = None) -> None:
            phase[0] = {"forward": "fwd", "backward": "bwd", "optimizer": "opt"}.get(name, phase[0])
            super().__call__(name, step)

    pw = PhaseWhere()
    with Count(ops, phase):
        training_step(model, opt, ids, s, pw, 4)
    mods: collections.Counter[str] = collections.Counter()
    h = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, args: mods.update([phase[0]]))
    training_step(model, opt, ids, s, pw, 4)
    h.remove()
    fwd = _Forward(model)
    with torch.no_grad():
        cache = new_cache(model)
        nxt, cache = fwd(ids, cache)
        phase[0] = "decode"
        with Count(ops, phase):
            fwd(nxt, cache)
    step_min = [float("inf")] * 3
    dec_min = float("inf")
    for _ in range(150):  # interleaved: both see the same load
        step_min = [min(x, y) for x, y in zip(step_min, phased_step(), strict=True)]
        with torch.no_grad():
            t = time.perf_counter()
            fwd(nxt, cache)
            dec_min = min(dec_min, time.perf_counter() - t)
    kernels = ops["fwd"] + ops["bwd"]
    per_kernel = sum(step_min) / kernels
    per_decode = dec_min / ops["decode"]
    print(f"Qwen2 x{a.layers} {a.method} {a.precision}{' ckpt' if a.ckpt else ''}: kernels fwd {ops['fwd']} "
          f"bwd {ops['bwd']} (opt {ops['opt']} ops), module calls fwd {mods['fwd']} bwd {mods['bwd']}; host ms fwd "
          f"{step_min[0] * 1e3:.2f} bwd {step_min[1] * 1e3:.2f} opt {step_min[2] * 1e3:.2f}; "
          f"{per_kernel * 1e6:.2f} us per counted kernel (optimizer included) vs decode {per_decode * 1e6:.2f} us/op "
          f"({ops['decode']} ops): ratio {per_kernel / per_decode:.2f}")


if __name__ == "__main__":
    main()
