"""Saved activations under torch.compile, against the real min-cut partitioner (#12).

Independent truth: one transformers decoder layer (random weights, CPU) is compiled with
``torch.compile(backend=aot_autograd(partition_fn=min_cut_rematerialization_partition))`` - the partitioner inductor
uses for training (torch/_inductor/compile_fx.py) - and a forward + backward is run. The tensors the forward saves
for the backward are the backward graph's inputs minus its tangents; their bytes, less the layer's parameters
and the rotary cos/sin (shared by every layer, a separate item), are the truth. llmsizer's
``compiled_layer_terms`` must agree within 2%; the eager terms of the same layer must miss by more than 10% (the
case discriminates).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from compiled_saved import LLAMA, QWEN2, decoder_model, min_cut_saved_bytes  # noqa: E402
from llmsizer.formulas.compiled_activations import compiled_layer_terms  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

LLAMA_MHA = dict(LLAMA, hidden_size=384, intermediate_size=1000, num_attention_heads=6, num_key_value_heads=6)

# name: (config, batch, seq, dtype)
CASES: dict[str, tuple[dict[str, Any], int, int, str]] = {
    "llama GQA bf16": (LLAMA, 2, 256, "bf16"),
    "llama MHA bf16, longer sequence": (LLAMA_MHA, 1, 704, "bf16"),
    "llama GQA fp32": (LLAMA, 2, 192, "fp32"),
    "qwen2 (q/k/v biases) bf16": (QWEN2, 3, 160, "bf16"),
}


def _compiled_saved_bytes(cfg: dict[str, Any], batch: int, seq: int, dtype_name: str) -> int:
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    model, layer = decoder_model(cfg, dtype)
    return min_cut_saved_bytes(model, layer, batch, seq, dtype)


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_saved_activations(name: str) -> None:
    cfg, batch, seq, dt = CASES[name]
    b = {"bf16": 2, "fp32": 4}[dt]
    spec = spec_from_config(cfg, name=name)
    st = ActivationSetup(batch=batch, seq=seq, residual=b, compute=b, expert=b)
    eager = layer_saved_terms(spec, 0, st)
    pred = sum(t.bytes for t in compiled_layer_terms(spec, 0, st, eager))
    meas = _compiled_saved_bytes(cfg, batch, seq, dt)
    eager_b = sum(t.bytes for t in eager)
    err = (pred - meas) / meas
    print(f"\n{name}: compiled saved {meas / 2**20:.3f} MiB, predicted {pred / 2**20:.3f} MiB ({err:+.2%}); "
          f"eager terms {eager_b / 2**20:.3f} MiB ({(eager_b - meas) / meas:+.1%})")
    assert abs(err) <= 0.02
    assert abs(eager_b - meas) / meas > 0.10
