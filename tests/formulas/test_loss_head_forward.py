"""The loss head's tensors (formulas/training_activations.py ``head_activations``) against the CPU allocator's bytes
(tests/training/measure_step.py ``AllocatorBytes``) over the three loss layouts on the CPU, bf16:

- ce: the model returns all logits, the loss upcasts them (transformers ForCausalLMLoss: logits.float());
- chunked ce: the model returns the logits in 8 chunks, each upcast in the loss (torchtune CEWithChunkedOutputLoss,
  torchtune/modules/loss/ce_chunked_output_loss.py @ bd2a0fc lines 49, 89; torchtune/modules/transformer.py line 511);
- linear-ce: the hidden states are split into 8 row chunks and each chunk's lm_head, upcast and cross-entropy run
  inside the loss (torchtune LinearCrossEntropyLoss, torchtune/modules/loss/cross_entropy_loss.py @ bd2a0fc lines
  107, 110, 177).

Each layout is written here from those lines with plain torch operators (torchtune is not installed); what is
measured is what autograd and the operators really allocate and keep. Compared: the bytes alive above the inputs
at the end of the loss forward (what the backward needs) and the forward's peak above the inputs.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.formulas.training_activations import ActivationSetup, head_activations  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

B, S, H, V, CHUNKS = 2, 256, 256, 4096, 8
CONFIG = dict(model_type="llama", vocab_size=V, hidden_size=H, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096)


def _loss(kind: str, hidden: Any, weight: Any, labels: Any) -> Any:
    if kind == "ce":
        logits = F.linear(hidden, weight)
        return F.cross_entropy(logits.float().reshape(-1, V), labels.reshape(-1), reduction="sum")
    if kind == "chunked-ce":
        chunks = [F.linear(c, weight) for c in hidden.tensor_split(CHUNKS, dim=1)]
        return sum(F.cross_entropy(lg.float().reshape(-1, V), lb.reshape(-1), reduction="sum")
                   for lg, lb in zip(chunks, labels.tensor_split(CHUNKS, dim=1), strict=True))
    flat, target = hidden.reshape(-1, H), labels.reshape(-1)
    total = torch.zeros((), dtype=torch.float32)
    for hc, tc in zip(flat.tensor_split(CHUNKS, dim=0), target.tensor_split(CHUNKS, dim=0), strict=True):
        total = total + _compute_cross_entropy(hc, tc, weight)
    return total


def _compute_cross_entropy(hidden_chunk: Any, target_chunk: Any, weight: Any) -> Any:
    # as LinearCrossEntropyLoss.compute_cross_entropy: the chunk's logits are a local, alive during cross_entropy
    logits = F.linear(hidden_chunk, weight)
    return F.cross_entropy(logits.float(), target_chunk, reduction="sum")


def _measure(kind: str) -> dict[str, int]:
    torch.manual_seed(0)
    hidden = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(V, H, dtype=torch.bfloat16)  # frozen lm_head (LoRA): its input is not kept
    labels = torch.randint(0, V, (B, S))
    with AllocatorBytes() as alloc:  # the inputs exist before: the bytes above them
        alloc.mark()
        loss = _loss(kind, hidden, weight, labels)
        alloc.mark()
        loss.backward()
    return {"kept": alloc.level(1) - alloc.level(0), "forward_peak": alloc.peak(0, 1) - alloc.level(0)}


@pytest.mark.parametrize("kind", ["ce", "chunked-ce", "linear-ce"])
def test_loss_head_bytes_match_a_live_trace(kind: str) -> None:
    spec = spec_from_config(CONFIG, name="tiny-llama")
    st = ActivationSetup(batch=B, seq=S, residual=2, compute=2, full=False)
    head = head_activations(spec, st, lm_head_trained=False, loss_chunks=1 if kind == "ce" else CHUNKS,
                            linear_loss=kind == "linear-ce")
    log_softmax = next(t.bytes for t in head.saved if t.name.startswith("loss log-softmax"))
    labels = B * S * 8  # counted in the formula's term; in the trace they exist before the loss
    m = _measure(kind)
    # kept for the backward: the fp32 log-softmax of every token (plus the 0-d loss scalars)
    assert m["kept"] == pytest.approx(log_softmax - labels, rel=0.01)
    # the forward's peak: the kept log-softmax + the logits alive while the loss is computed
    assert m["forward_peak"] == pytest.approx(log_softmax - labels + head.logits_forward, rel=0.01)


def test_linear_ce_never_holds_the_whole_logits() -> None:
    peaks = {k: _measure(k)["forward_peak"] for k in ("ce", "chunked-ce", "linear-ce")}
    assert peaks["linear-ce"] < peaks["chunked-ce"] < peaks["ce"]
    # the saving of linear-ce over chunked-ce is the bf16 logits of the 7 other chunks
    assert peaks["chunked-ce"] - peaks["linear-ce"] == pytest.approx(B * S * V * 2 * (CHUNKS - 1) / CHUNKS, rel=0.01)
