"""Gemma 3's inference activation peak, sliding-window mask included (formulas/activations.py
``sdpa_sliding_mask_bytes``), against the live tensors of a real CPU forward.

Independent truth: ``torch.distributed._tools.mem_tracker.MemTracker`` (as tests/formulas/test_activations_forward.py)
records the peak bytes of live tensors during a no-grad forward of a small Gemma 3 text model (hidden 256, 6 layers,
sliding window 128 on 4 of them) over B=2 sequences of T=512 tokens with ``logits_to_keep=1``, SDPA. The activation
part (measured peak - weights - the KV cache after a prefill) must match the prediction within 0.5%; the mask is
1.4% of it in fp32, 2.9% in bf16, so the model without it fails. A live-tensor trace (storage allocations by aten
op and source line) of the bf16 run finds at the MLP peak, besides act(gate), up, their product and four [t, h]
tensors, the [1, 1, 512, 512] bool mask of ``create_sliding_window_causal_mask``
(masking_utils.py ``and_mask``): 17.51 [t, h] units, 17.0 without the mask.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.activations import prefill_activation_bytes, sdpa_sliding_mask_bytes
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import prefill_peak_bytes, torch

pytest.importorskip("torch.distributed._tools.mem_tracker")

pytestmark = pytest.mark.slow

CONFIG: dict[str, Any] = {
    "model_type": "gemma3_text", "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 1024,
    "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "sliding_window": 128, "max_position_embeddings": 1024,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
}
BATCH, TOKENS = 2, 512


@pytest.mark.parametrize("kv_dtype", ["fp32", "bf16"])
def test_activation_peak_with_the_sliding_mask_matches_gemma3_forward(kv_dtype, capsys):
    dtype, act_bytes = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}[kv_dtype]
    measured = prefill_peak_bytes(CONFIG, dtype, "sdpa", BATCH, TOKENS)
    spec = spec_from_config(CONFIG, name="tiny-gemma3")
    weights = count_params(spec).total * act_bytes
    kv = kv_cache(spec, TOKENS, BATCH, kv_dtype, window_extra=10**9).total_bytes
    act = prefill_activation_bytes(spec, BATCH, TOKENS, TOKENS, act_bytes, "sdpa", logits_positions=1,
                                   logits_bytes_per_elem=0, forward_locals=True).peak_bytes
    mask = sdpa_sliding_mask_bytes(spec, TOKENS, TOKENS, "sdpa")
    measured_act = measured - weights - kv
    with capsys.disabled():
        mib = 2**20
        print(f"\n[gemma3 {kv_dtype}] measured activations {measured_act / mib:.3f} MiB; predicted {act / mib:.3f} "
              f"(mask {mask / mib:.3f}; ratio {act / measured_act:.3f})")
    assert mask == TOKENS * TOKENS  # [1, 1, q, kv] bool
    assert act == pytest.approx(measured_act, rel=0.005)
    assert act - mask < measured_act * 0.995  # without the mask the model would be outside the tolerance
