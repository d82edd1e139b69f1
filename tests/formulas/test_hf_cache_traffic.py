"""Eqs. (H1)-(H3) of formulas/hf_cache_traffic.py against real PyTorch decode steps.

Independent truth: a transformers Llama (random weights, CPU, two and four layers) prefills T tokens into a
DynamicCache, then runs one decode step under a ``TorchDispatchMode`` that adds up the bytes of every aten op's
tensor inputs and outputs (views excepted; GEMMs and the attention kernel included). The double difference
(4 - 2 layers) x (T2 - T1 cached tokens) keeps only what each layer moves per cached token: the weights, the
per-forward mask and everything the step does once cancel. The formula's K/V read (2 h_kv d c per layer and token,
the bytes the step's attention reads) plus eqs. (H1)-(H3) must equal it.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_elementwise_traffic import VIEWS, _physical_bytes  # noqa: E402

from llmsizer.formulas.hf_cache_traffic import (  # noqa: E402
    cache_append_bytes,
    eager_score_bytes,
    repeat_kv_bytes,
)

pytestmark = pytest.mark.slow

HEADS, KV_HEADS, HIDDEN = 8, 2, 256
HEAD_DIM = HIDDEN // HEADS


def _step_bytes(attn: str, dtype: Any, layers: int, cached: int) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    torch.manual_seed(0)
    conf = transformers.LlamaConfig(hidden_size=HIDDEN, intermediate_size=688, num_attention_heads=HEADS,
                                    num_key_value_heads=KV_HEADS, num_hidden_layers=layers, vocab_size=512,
                                    attn_implementation=attn)
    model = transformers.LlamaForCausalLM(conf).to(dtype).eval()
    cache = transformers.DynamicCache(config=model.config)
    total = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ in VIEWS:
                return out
            tensors = [a for a in tree_flatten((args, kwargs, out))[0] if isinstance(a, torch.Tensor)]
            total[0] += sum(_physical_bytes(a) for a in tensors)
            return out

    with torch.no_grad():
        model(input_ids=torch.randint(0, 512, (1, cached)), use_cache=True, logits_to_keep=1, cache=cache)
        nxt = torch.randint(0, 512, (1, 1))
        with Count():
            model(input_ids=nxt, use_cache=True, logits_to_keep=1, cache=cache)
    return total[0]


def _per_layer_token(attn: str, dtype: Any) -> float:
    t1, t2 = 128, 384
    b = {(n, t): _step_bytes(attn, dtype, n, t) for n in (2, 4) for t in (t1, t2)}
    return ((b[4, t2] - b[4, t1]) - (b[2, t2] - b[2, t1])) / (2 * (t2 - t1))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sdpa_decode_step_reads_the_cache_and_copies_it(dtype: str) -> None:
    c = 4 if dtype == "float32" else 2
    kv = 2.0 * KV_HEADS * HEAD_DIM * c  # the K/V the attention reads per layer and cached token
    traced = _per_layer_token("sdpa", getattr(torch, dtype))
    assert kv + cache_append_bytes(kv) == pytest.approx(traced, rel=1e-6)
    assert kv < 0.5 * traced  # the K/V read alone (today's decode bytes) falls short


def test_eager_decode_step_repeats_kv_and_writes_the_scores() -> None:
    # fp32: CUDA's and CPU's softmax run the same kernels (bf16 on CPU adds an fp32 copy that CUDA fuses, eq. H3)
    c = 4
    kv = 2.0 * KV_HEADS * HEAD_DIM * c
    traced = _per_layer_token("eager", torch.float32)
    formula = kv + cache_append_bytes(kv) + repeat_kv_bytes(kv, HEADS, KV_HEADS) + eager_score_bytes(1, HEADS, 1, 1, c)
    assert formula == pytest.approx(traced, rel=1e-6)
    assert kv + cache_append_bytes(kv) + repeat_kv_bytes(kv, HEADS, KV_HEADS) < 0.97 * traced  # (H3) matters


def test_eager_bf16_on_cpu_adds_only_the_fp32_upcast() -> None:
    c = 2
    kv = 2.0 * KV_HEADS * HEAD_DIM * c
    traced = _per_layer_token("eager", torch.bfloat16)
    formula = kv + cache_append_bytes(kv) + repeat_kv_bytes(kv, HEADS, KV_HEADS) + eager_score_bytes(1, HEADS, 1, 1, c)
    # CPU softmax(dtype=float32) copies the scores to fp32 first and its softmax then reads 4 bytes, not c: the copy's
    # fp32 write and read (4 + 4 bytes a score) are what CUDA's half_to_float softmax does not move
    upcast_on_cpu = HEADS * 8
    assert formula + upcast_on_cpu == pytest.approx(traced, rel=1e-6)
