"""Activation offloading (torchtune) and float8 training (torchao) against real CPU training steps (#12).

Each case runs ``measure_step.py`` (a fresh process; transformers + torch, random weights) and tracks the peak of
live tensor bytes:

- ``offload``: torchtune's ``OffloadActivations`` hook rules (``measure_step.OffloadActivations``: tensors of at
  least 1 KiB that are not parameters copied to a host tensor the tracker does not count, the last 5 originals
  stashed, brought back in the backward) entered around the decoder as torchtune's recipes do; the bytes copied
  to the host are counted by the hook. llmsizer's ``activation_offload`` must land within 10% on the device peak
  and within 20% on the host bytes (HOST_TOLERANCE), and the same run estimated without offloading must miss the
  device peak by more than 10%.
- ``float8``: the model converted by torchao's real ``convert_to_float8_training`` (torchao 0.18.0, its CPU
  ``_scaled_mm`` path), every linear but lm_head, pure bf16. llmsizer's ``float8`` must land within 10%. Float8
  changes only transients in eager mode (the high-precision input is what is saved), so the single-linear test
  checks the transient itself: the extra peak bytes of one Float8Linear step over a bf16 nn.Linear step against
  ``float8_backward_cast_bytes`` run eagerly (fp32 temporaries of the casts included).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_measured import PEAK_TOLERANCE, _measure  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.float8_training import float8_backward_cast_bytes, float8_forward_cast_bytes  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

MiB = 2**20
LLAMA = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 320, "intermediate_size": 864,
         "num_hidden_layers": 4, "num_attention_heads": 10, "num_key_value_heads": 2,
         "max_position_embeddings": 1024, "tie_word_embeddings": False}

# The host copies are counted per save (torchtune packs every save, with no deduplication): the estimate adds the
# repeated saves it knows (formulas/activation_offload.py repeated_saves); saves its storage-based layer terms do not
# list apart (o_proj's contiguous input, K/V repeated for SDPA) leave it 9-15% low on these runs (measured
# 2026-12-01), hence a wider tolerance for the host bytes than for the device peak.
HOST_TOLERANCE = 0.20
OFFLOAD: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama fp32 adamw, offloaded activations": (
        dict(config=LLAMA, batch=2, seq=512, offload=True),
        dict(precision="fp32", micro_batch=2, seq_len=512, optimizer_impl="foreach")),
    "llama pure bf16 sgd, offloaded activations": (
        dict(config=LLAMA, batch=4, seq=512, dtype="bf16", optimizer="sgd", offload=True),
        dict(precision="bf16", micro_batch=4, seq_len=512, optimizer="sgd")),
    "llama fp32 sgd, full checkpointing + offloaded checkpoint inputs": (
        dict(config=LLAMA, batch=4, seq=512, optimizer="sgd", offload=True, grad_ckpt=True),
        dict(precision="fp32", micro_batch=4, seq_len=512, optimizer="sgd", grad_checkpointing="full")),
}


@pytest.fixture(scope="module")
def offload_measured() -> dict[str, dict[str, Any]]:
    return {name: _measure(case) for name, (case, _) in OFFLOAD.items()}


@pytest.mark.parametrize("name", list(OFFLOAD))
def test_activation_offload_peak_and_host(name: str, offload_measured: dict[str, dict[str, Any]]) -> None:
    case, fields = OFFLOAD[name]
    spec = spec_from_config(case["config"], name=name)
    est = estimate_training(spec, **fields, activation_offload=True)
    pred, meas = est.details["tensor_peak_bytes"], offload_measured[name]["peak_bytes"]
    host_pred = est.item("host_offloaded_activations").bytes
    host_meas = offload_measured[name]["offloaded_bytes_per_step"]
    without = estimate_training(spec, **fields).details["tensor_peak_bytes"]
    err, h_err = (pred - meas) / meas, (host_pred - host_meas) / host_meas
    print(f"\n{name}: device peak predicted {pred / MiB:.2f} MiB, measured {meas / MiB:.2f} MiB ({err:+.2%}); "
          f"host predicted {host_pred / MiB:.2f} MiB, measured {host_meas / MiB:.2f} MiB ({h_err:+.2%}); "
          f"without offloading {without / MiB:.2f} MiB ({(without - meas) / meas:+.1%})")
    assert abs(err) <= PEAK_TOLERANCE
    assert abs(h_err) <= HOST_TOLERANCE
    if not case.get("grad_ckpt"):  # checkpointed layers save only their inputs: offloading moves little
        assert abs(without - meas) / meas > PEAK_TOLERANCE


FLOAT8: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama pure bf16 sgd, torchao float8 linears": (
        dict(config=LLAMA, batch=4, seq=512, dtype="bf16", optimizer="sgd", float8=True),
        dict(precision="bf16", micro_batch=4, seq_len=512, optimizer="sgd")),
    "llama pure bf16 adamw, torchao float8 linears": (
        dict(config=LLAMA, batch=2, seq=256, dtype="bf16", float8=True),
        dict(precision="bf16", micro_batch=2, seq_len=256, optimizer_impl="foreach")),
}


@pytest.mark.skipif(not os.environ.get("LLMSIZER_FLOAT8_PEAK"),
                    reason="torchao float8 on CPU: this full-model step did not finish in 7 min on the 2-core CI "
                           "machine, so the whole-model float8 peak is NOT verified here; set LLMSIZER_FLOAT8_PEAK=1 "
                           "on a faster machine (the single-linear transient test below does run)")
@pytest.mark.parametrize("name", list(FLOAT8))
def test_float8_training_peak(name: str) -> None:
    pytest.importorskip("torchao")
    case, fields = FLOAT8[name]
    meas = _measure(case)["peak_bytes"]
    spec = spec_from_config(case["config"], name=name)
    pred = estimate_training(spec, **fields, float8=True).details["tensor_peak_bytes"]
    err = (pred - meas) / meas
    print(f"\n{name}: predicted {pred / MiB:.2f} MiB, measured {meas / MiB:.2f} MiB ({err:+.2%})")
    assert abs(err) <= PEAK_TOLERANCE


def _linear_step_peak(float8: bool, tokens: int, d_in: int, d_out: int) -> int:
    """Peak live bytes of one forward + backward of a single bf16 linear (torchao Float8Linear when ``float8``),
    above what exists before the step (weight, input, and the output gradient it is given)."""
    import torch
    from measure_step import LiveTensorBytes

    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.Linear(d_in, d_out, bias=False)).to(torch.bfloat16)
    if float8:
        from torchao.float8 import convert_to_float8_training

        convert_to_float8_training(lin)
    x = torch.randn(tokens, d_in, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, d_out, dtype=torch.bfloat16)
    tracker = LiveTensorBytes(lambda live: {})
    for t in [*lin.parameters(), x, g]:
        tracker.track(t)
    base = tracker.current
    with tracker.mode:
        y = lin(x)
        y.backward(g)
    # the step's own results (y, x.grad, weight.grad) are not transients: take them out
    results = y.numel() * 2 + x.numel() * 2 + d_in * d_out * 2
    return tracker.peak - base - results


@pytest.mark.parametrize(("tokens", "d_in", "d_out"), [(2048, 512, 1408), (4096, 1024, 256)])
def test_float8_linear_transient(tokens: int, d_in: int, d_out: int) -> None:
    pytest.importorskip("torchao")
    plain = _linear_step_peak(False, tokens, d_in, d_out)
    f8 = _linear_step_peak(True, tokens, d_in, d_out)
    meas = f8 - plain
    # eager: the casts' fp32 temporaries count (the formula's compiled=False)
    pred = max(float8_forward_cast_bytes(tokens, d_in, d_out, False),
               float8_backward_cast_bytes(tokens, d_in, d_out, compiled=False))
    err = (pred - meas) / meas
    print(f"\nFloat8Linear {tokens}x{d_in}->{d_out}: extra peak measured {meas / MiB:.3f} MiB, predicted "
          f"{pred / MiB:.3f} MiB ({err:+.1%})")
    assert abs(err) <= 0.15
