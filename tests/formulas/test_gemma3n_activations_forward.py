"""Gemma 3n's inference activation peak (formulas/activations.py ``gemma3n_prefill_terms``) against the live
tensors of a real CPU forward.

Independent truth: ``torch.distributed._tools.mem_tracker.MemTracker`` (as tests/formulas/test_activations_forward.py)
records the peak bytes of live tensors during a no-grad forward of a small Gemma 3n text model (hidden 256, 4 AltUp
streams, per-layer inputs 6 x 32, LAuReL rank 8, 2 of 6 layers sharing K/V) over B=2 sequences of T=512 tokens with
``logits_to_keep=1``; one variant doubles the MLP width and turns on activation sparsity (``_gaussian_topk``). The
activation part (measured peak - weights - KV cache, both exact: tests/catalog/test_gemma3n_params.py,
tests/formulas/test_gemma3n_kv_forward.py) must match the prediction within 0.5%. Measured (transformers 5.24, torch
2.13 CPU, sdpa; MiB, the KV as held after a prefill: sliding layers keep the whole prompt):

    fp32  peak 67.99 = weights 25.98 + kv 4.00 + activations 38.01
    bf16  peak 34.12 = weights 12.99 + kv 2.00 + activations 19.13

Before the Gemma 3n terms the activation model gave 0.447 / 0.444 of these. A live-tensor trace (storage
allocations by aten op and source line) finds the peak at the MLP's down projection: 38.27 [tokens, hidden] units
in bf16 (I = 1024: 54.27 with I = 2048 and sparsity 0.95), of which the docstring of ``gemma3n_prefill_terms``
names 38.25 (54.25).
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.activations import prefill_activation_bytes
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import GEMMA3N_SMALL, prefill_peak_bytes, torch

pytest.importorskip("torch.distributed._tools.mem_tracker")

pytestmark = pytest.mark.slow

CONFIG = GEMMA3N_SMALL
SPARSE = {**CONFIG, "intermediate_size": 2048, "activation_sparsity_pattern": [0.95] * 6}
BATCH, TOKENS = 2, 512
DTYPES = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}
CASES = {"fp32": ("fp32", CONFIG), "bf16": ("bf16", CONFIG), "bf16-wide-sparse": ("bf16", SPARSE)}


@pytest.mark.parametrize("case", list(CASES))
def test_activation_model_matches_gemma3n_forward(case, capsys):
    kv_dtype, config = CASES[case]
    dtype, act_bytes = DTYPES[kv_dtype]
    measured = prefill_peak_bytes(config, dtype, "sdpa", BATCH, TOKENS)
    spec = spec_from_config(config, name="tiny-gemma3n")
    weights = count_params(spec).total * act_bytes
    # after a prefill a sliding layer's cache still holds the whole prompt (tests/formulas/test_kv_cache_forward.py)
    kv = kv_cache(spec, TOKENS, BATCH, kv_dtype, window_extra=10**9).total_bytes
    act = prefill_activation_bytes(spec, BATCH, TOKENS, TOKENS, act_bytes, "sdpa", logits_positions=1,
                                   logits_bytes_per_elem=0, forward_locals=True).peak_bytes
    measured_act = measured - weights - kv
    with capsys.disabled():
        mib = 2**20
        print(f"\n[gemma3n {case}] measured peak {measured / mib:.2f} MiB = weights {weights / mib:.2f} + kv "
              f"{kv / mib:.2f} + activations {measured_act / mib:.2f}; predicted activations {act / mib:.2f} "
              f"(ratio {act / measured_act:.3f})")
    assert act == pytest.approx(measured_act, rel=0.005)
