"""A trained lm_head's backward over chunked logits (formulas/training_activations.py ``lm_head_backward_bytes``,
eq. H1) against a live-tensor trace on the CPU, bf16.

The head is torchtune's chunked output (``[self.output(chunk) for chunk in h.chunk(C, dim=1)]``,
torchtune/modules/transformer.py @ 1814feb) followed by each chunk's cross-entropy on its fp32 upcast
(``CEWithChunkedOutputLoss``), written with plain torch operators (torchtune is not installed); the lm_head weight
trains. What autograd really allocates in the backward is measured (tests/training/measure_step.py
``AllocatorBytes``: the CPU allocator's bytes, no dispatch mode, so the engine's input-buffer sums stay in place where
they would untraced): the peak of the backward above what the forward left alive. The engine runs every chunk's loss
backward before the first linear's and sums the C weight gradients out of place, so from the second chunk on three
[V, h] gradients coexist; the loss-only backward term (two fp32 chunk gradients) must miss that peak by more than
10 % (the case discriminates).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.formulas.training_activations import (  # noqa: E402
    ActivationSetup,
    head_activations,
    lm_head_backward_bytes,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

B, S, H, V, CHUNKS = 2, 256, 1024, 4096, 8
CONFIG = dict(model_type="llama", vocab_size=V, hidden_size=H, intermediate_size=2048, num_hidden_layers=2,
              num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=4096)


def _backward_peak(autocast: bool = False) -> int:
    """Bytes above the forward's leftovers at the backward's peak; ``autocast``: an fp32 lm_head under bf16 autocast
    (one cached bf16 copy serves every chunk; its gradient is summed in bf16, then cast to the fp32 .grad)."""
    torch.manual_seed(0)
    with AllocatorBytes() as alloc:
        hidden = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
        weight = torch.randn(V, H, dtype=torch.float32 if autocast else torch.bfloat16, requires_grad=True)
        labels = torch.randint(0, V, (B, S))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            chunks = [F.linear(c, weight) for c in hidden.chunk(CHUNKS, dim=1)]
        loss = sum(F.cross_entropy(lg.float().reshape(-1, V), lb.reshape(-1), reduction="sum")
                   for lg, lb in zip(chunks, labels.chunk(CHUNKS, dim=1), strict=True))
        del chunks  # the recipe's `del logits` before loss.backward()
        alloc.mark()
        loss.backward()
    return alloc.peak(0) - alloc.level(0)


@pytest.mark.parametrize("autocast", [False, True], ids=["bf16", "fp32 weight, bf16 autocast"])
def test_lm_head_backward_peak_matches_a_live_trace(autocast: bool) -> None:
    spec = spec_from_config(CONFIG, name="tiny-llama")
    st = ActivationSetup(batch=B, seq=S, residual=2, compute=2, full=True)
    head = head_activations(spec, st, lm_head_trained=True, loss_chunks=CHUNKS)
    loss_saved = sum(t.bytes for t in head.saved if t.name.startswith("loss log-softmax")) - B * S * 8
    dlogits, dweight = lm_head_backward_bytes(CHUNKS, B * S, V, 2, V * H * 2)  # summed in bf16 either way
    pred = max(head.loss_backward, dlogits + dweight - loss_saved)  # the saved log-softmax is freed by then
    meas = _backward_peak(autocast)
    print(f"\nbackward peak above the forward's leftovers: {meas / 2**20:.2f} MiB, predicted {pred / 2**20:.2f} MiB; "
          f"the loss-only term {head.loss_backward / 2**20:.2f} MiB")
    assert pred == pytest.approx(meas, rel=0.05)
    assert abs(head.loss_backward - meas) / meas > 0.10
