"""Prefill memory (weights + KV cache + activation peak) against the live tensors of a real CPU forward pass.

Independent truth: ``torch.distributed._tools.mem_tracker.MemTracker`` (a TorchDispatchMode that follows every
storage an op creates until it is freed) records the peak bytes of live tensors -- parameters, buffers, the
KV cache and every intermediate -- during a no-grad forward of a small llama (hidden 256, intermediate 1024,
2 layers, 4 heads / 2 KV heads, vocab 1024) over B=2 sequences of T=512 tokens with ``logits_to_keep=1``
(what ``generate()`` asks for at prefill). Tolerance 10 %; measured and predicted numbers are printed.

Measured (transformers 5.24, torch 2.13 CPU; MiB, ratio = predicted / measured), with what transformers' forward
keeps alive through the layer loop counted (``forward_locals``: input embeddings, rotary cos/sin tables, the
post-attention residual during the MLP); position ids per row, as ``generate()`` passes them:

    fp32 eager  measured 38.01  predicted 36.00  ratio 0.947
    fp32 sdpa   measured 28.01  predicted 28.00  ratio 1.000   (0.919 without forward_locals)
    bf16 eager  measured 30.01  predicted 30.00  ratio 1.000
    bf16 sdpa   measured 14.01  predicted 14.00  ratio 1.000   (0.919 without forward_locals)
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.activations import prefill_activation_bytes
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import prefill_peak_bytes, torch

pytest.importorskip("torch.distributed._tools.mem_tracker")

pytestmark = pytest.mark.slow

CONFIG = {"model_type": "llama", "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 1024,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 1024}
BATCH, TOKENS = 2, 512
TOLERANCE = 0.10
DTYPES = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}

# Systematic mismatch found by this test (formula not adjusted here; reported to the maintainers). Fitting
# the T^2 term of the measured peak at T=1024 and 2048 (B=1, 4 heads) gives 36 B per T^2 in fp32 and 42 B in
# bf16, i.e. per score element 8 B (fp32) and 10 B (bf16) plus the materialised 4-D causal mask
# (B x 1 x T x T x act bytes, shared by the heads). formulas/activations.py charges 2*act + 4 + act per score:
# 10 B in bf16 (right) but 16 B in fp32, where the fp32 softmax needs no input copy and ``.to(query.dtype)``
# is a no-op; it leaves the mask out in both.
KNOWN: dict[tuple[str, str], str] = {}  # (dtype, attention) -> reason for a strict xfail


def _measure(kv_dtype: str, attention: str) -> int:
    dtype, _ = DTYPES[kv_dtype]
    return prefill_peak_bytes(CONFIG, dtype, attention, BATCH, TOKENS)


def _predict(kv_dtype: str, attention: str) -> dict[str, Any]:
    _, act_bytes = DTYPES[kv_dtype]
    spec = spec_from_config(CONFIG, name="tiny-llama")
    weights = count_params(spec).total * act_bytes
    kv = kv_cache(spec, TOKENS, BATCH, kv_dtype).total_bytes
    # a bare forward returns logits in the model dtype: no fp32 upcast (logits_bytes_per_elem=0)
    act = prefill_activation_bytes(spec, BATCH, TOKENS, TOKENS, act_bytes, attention, logits_positions=1,
                                   logits_bytes_per_elem=0, forward_locals=True)
    return {"weights": weights, "kv": kv, "activations": act.peak_bytes, "total": weights + kv + act.peak_bytes}


def _cases() -> list[Any]:
    out = []
    for d in DTYPES:
        for a in ("eager", "sdpa"):
            marks = [pytest.mark.xfail(reason=KNOWN[d, a], strict=True)] if (d, a) in KNOWN else []
            out.append(pytest.param(d, a, id=f"{d}-{a}", marks=marks))
    return out


@pytest.mark.parametrize(("kv_dtype", "attention"), _cases())
def test_prefill_peak_within_10_percent_of_live_tensors(kv_dtype, attention, capsys):
    measured = _measure(kv_dtype, attention)
    pred = _predict(kv_dtype, attention)
    ratio = pred["total"] / measured
    with capsys.disabled():
        mib = 2**20
        print(f"\n[{kv_dtype} {attention}] measured peak {measured / mib:.2f} MiB; predicted {pred['total'] / mib:.2f} "
              f"MiB = weights {pred['weights'] / mib:.2f} + kv {pred['kv'] / mib:.2f} + activations "
              f"{pred['activations'] / mib:.2f}; ratio {ratio:.3f}")
    assert abs(ratio - 1) <= TOLERANCE, f"predicted/measured = {ratio:.3f}"
