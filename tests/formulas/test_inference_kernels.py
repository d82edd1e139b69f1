"""Kernels of an eager transformers inference step (formulas/launch_overhead.py eq. K4), against real PyTorch.

Independent truth: a tiny transformers Llama and Qwen2 (random weights, CPU, bf16, SDPA) run ``generate()`` (greedy,
no EOS) under a ``TorchDispatchMode`` that counts every aten op that launches a kernel (the rule of
tests/formulas/test_launch_overhead.py: views, aliases and pure allocations launch none). One decode step's kernels
are the difference between a run of 8 and one of 4 new tokens, over 4; a prefill forward is counted on its own. The
formula reads the same config.json through llmsizer's reader (estimate/launch.py inference_kernels). The counts must
be equal: each is an integer inventory.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from llmsizer.estimate.launch import inference_kernels  # noqa: E402
from llmsizer.formulas.launch_overhead import GENERATE_STEP_KERNELS, WORKER_STEP_KERNELS  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

NO_KERNEL = {"detach", "lift_fresh", "alias", "_unsafe_view", "empty", "empty_like", "empty_strided",
             "new_empty_strided"}
CFG = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
           max_position_embeddings=256, eos_token_id=None, pad_token_id=0)


def _counted(run: Any) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode

    n = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if not func.is_view and func.overloadpacket.__name__ not in NO_KERNEL:
                n[0] += 1
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Count():
        run()
    return n[0]


def _model(family: str, layers: int) -> Any:
    torch.manual_seed(0)
    conf_cls, model_cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                           "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                           "phi3": (transformers.Phi3Config, transformers.Phi3ForCausalLM)}[family]
    conf = conf_cls(**CFG, num_hidden_layers=layers, attn_implementation="sdpa")
    return model_cls(conf).to(torch.bfloat16).eval()


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("layers", [1, 2])
def test_generate_decode_step_kernels(family: str, layers: int) -> None:
    model = _model(family, layers)
    ids = torch.randint(1, CFG["vocab_size"], (1, 8))

    def gen(n: int) -> Any:
        return lambda: model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                      do_sample=False)

    step = (_counted(gen(8)) - _counted(gen(4))) / 4
    spec = spec_from_config(model.config.to_dict(), name=f"tiny-{family}")
    assert step == inference_kernels(spec, half=True)


def test_fused_linears_decode_layer_kernels() -> None:
    """A decoder layer with fused linears (transformers' Phi-3: one qkv_proj GEMM sliced into q/k/v, one gate_up_proj
    GEMM chunked, the rotary's pass-through ``cat`` per q and k, the copied attention output): one decode step's
    kernels per layer (a 2-layer model's less a 1-layer one's) equal eq. K4's per layer (formulas/launch_overhead.py
    LayerCode). (Outside the layers Phi-3's rotary tables launch one kernel fewer than eq. K4's Llama inventory; not
    this rule's.)"""
    steps, est = [], []
    for layers in (1, 2):
        model = _model("phi3", layers)
        ids = torch.randint(1, CFG["vocab_size"], (1, 8))

        def gen(n: int, model: Any = model, ids: Any = ids) -> Any:
            return lambda: model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                          min_new_tokens=n, do_sample=False)

        steps.append((_counted(gen(8)) - _counted(gen(4))) / 4)
        est.append(inference_kernels(spec_from_config(model.config.to_dict(), name=f"tiny-phi3-{layers}"), half=True))
    assert steps[1] - steps[0] == est[1] - est[0]


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_prefill_forward_kernels(family: str) -> None:
    """A bare prefill forward (a new cache, 16 tokens, the last token's logits) launches eq. K4's forward: the step's
    count less generate()'s own ops, ``inference_kernels(per_step=0)``."""
    model = _model(family, 2)
    ids = torch.randint(1, CFG["vocab_size"], (1, 16))
    forward = _counted(lambda: model(input_ids=ids, cache=transformers.DynamicCache(config=model.config),
                                     use_cache=True, logits_to_keep=1))
    spec = spec_from_config(model.config.to_dict(), name=f"tiny-{family}")
    assert forward == inference_kernels(spec, half=True) - GENERATE_STEP_KERNELS == inference_kernels(spec, per_step=0)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_measure_worker_step_kernels(family: str) -> None:
    """The measure worker's decode step (measure/workloads.py ``_Forward``: a forward over the last token and the
    cache, then the last logits' fp32 copy and argmax; no generate()) launches eq. K4 with its own 2 loop kernels:
    K4 - 13, the count its measured rows are timed with (estimate_speed decode_loop 'forward')."""
    from llmsizer.measure.workloads import _Forward, new_cache

    model = _model(family, 2)
    fwd = _Forward(model)
    ids = torch.randint(1, CFG["vocab_size"], (1, 8))

    def run(steps: int) -> Any:
        def go() -> None:
            nxt, cache = fwd(ids, new_cache(model))
            for _ in range(steps):
                nxt, cache = fwd(nxt, cache)
        return go

    step = (_counted(run(8)) - _counted(run(4))) / 4
    spec = spec_from_config(model.config.to_dict(), name=f"tiny-{family}")
    assert step == inference_kernels(spec, half=True, per_step=WORKER_STEP_KERNELS)
    assert step == inference_kernels(spec, half=True) - GENERATE_STEP_KERNELS + WORKER_STEP_KERNELS

