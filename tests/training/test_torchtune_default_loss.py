"""The torchtune profile's loss (catalog/data/frameworks.json): LinearCrossEntropyLoss with 8 chunks, the loss of every
SFT config at the pinned pytorch/torchtune @bd2a0fc (162 of its 197 configs), not the plain unchunked cross-entropy.

Independent truth: what autograd and the operators allocate on the CPU (tests/training/measure_step.py
``AllocatorBytes``) over a loss forward and backward, bf16, frozen lm_head (LoRA):

- torchtune's loss, written here from its lines with plain torch operators (torchtune @bd2a0fc is not released: the
  PyPI torchtune 0.6.1 of 2025-04-07 predates LinearCrossEntropyLoss, added in 9c06c8bda on 2025-04-30):
  torchtune/modules/loss/cross_entropy_loss.py lines 160-188 (``forward``: the ignored tokens masked out,
  ``mask_inputs`` lines 132-144, then the hidden states split into 8 row chunks), lines 104-115
  (``compute_cross_entropy``: the chunk's lm_head output upcast and reduced with ``reduction='sum'``);
- the unchunked loss llmsizer gave torchtune before: the model's whole logits upcast, one cross-entropy.

The estimate's tensor peak under the profile's default and under a stated ``loss='ce'`` differ by what the measured
peaks of those two losses differ by (everything else in the step is the same).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.estimate.framework import with_framework  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs.training import TrainingWorkload  # noqa: E402

B, S, H, V, CHUNKS, IGNORE = 2, 256, 256, 4096, 8, -100
CONFIG = dict(model_type="llama", vocab_size=V, hidden_size=H, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096)


def _torchtune_linear_ce(hidden: Any, weight: Any, targets: Any) -> Any:
    """LinearCrossEntropyLoss.forward @bd2a0fc, mask_ignored_tokens True (its default), 8 chunks."""
    total_valid = torch.where(targets != IGNORE)[0].numel()
    targets = targets.reshape(-1)
    outputs = hidden.reshape(-1, hidden.shape[-1])
    indices = torch.where(targets != IGNORE)[0]
    outputs, targets = outputs.index_select(0, indices), targets.index_select(0, indices)
    total = torch.tensor(0.0)
    for hc, tc in zip(outputs.tensor_split(CHUNKS, dim=0), targets.tensor_split(CHUNKS, dim=0), strict=True):
        logits = F.linear(hc, weight)
        total += F.cross_entropy(logits.float(), tc, reduction="sum", ignore_index=IGNORE)
    return total / total_valid


def _plain_ce(hidden: Any, weight: Any, targets: Any) -> Any:
    logits = F.linear(hidden, weight)
    return F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1), ignore_index=IGNORE)


def _peak(loss_fn: Any) -> int:
    """The peak bytes above the inputs over the loss forward and backward."""
    torch.manual_seed(0)
    hidden = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(V, H, dtype=torch.bfloat16)  # frozen lm_head: its input is not kept for a weight gradient
    targets = torch.randint(0, V, (B, S))
    with AllocatorBytes() as alloc:
        alloc.mark()
        loss_fn(hidden, weight, targets).backward()
        alloc.mark()
    return alloc.peak(0, 1) - alloc.level(0)


def _tensor_peak(**fields: Any) -> int:
    spec = spec_from_config(CONFIG, name="tiny-llama")
    est = estimate_training(spec, framework="torchtune", method="lora", micro_batch=B, seq_len=S, **fields)
    assert est.details["peak_phase"] == "loss backward"  # the loss head is what the step peaks on, both ways
    return int(est.details["tensor_peak_bytes"])


def test_the_profiles_loss_saves_what_torchtunes_chunked_loss_saves() -> None:
    """Measured: the unchunked loss peaks at 3 fp32 [t, V] (log-softmax + two gradients), torchtune's at the fp32
    log-softmax of every chunk + two fp32 gradients of one chunk, 2 x 7/8 fp32 [t, V] less."""
    saved = _peak(_plain_ce) - _peak(_torchtune_linear_ce)
    assert saved == pytest.approx(2 * B * S * V * 4 * (CHUNKS - 1) / CHUNKS, rel=0.01)  # the trace's own size
    assert _tensor_peak(loss="ce") - _tensor_peak() == pytest.approx(saved, rel=0.01)


def test_the_profile_names_its_loss_and_a_given_loss_keeps_its_own_chunks() -> None:
    """The profile's chunk count qualifies its loss (estimate/framework.py QUALIFIES): with a loss given, that loss
    runs its own chunk count; with the linear loss given or nothing, torchtune's 8; a chunk count given is kept."""
    spec = spec_from_config(CONFIG, name="tiny-llama")

    def applied(**fields: Any) -> tuple[str, int]:
        w = TrainingWorkload(framework="torchtune", method="lora", **fields)  # ``given``: the fields passed
        _, w = with_framework(spec, w)
        return w.loss, w.loss_chunks

    assert applied() == ("linear-ce", 8)
    assert applied(loss="ce") == ("ce", 1)
    assert applied(loss="ce", loss_chunks=8) == ("ce", 8)  # CEWithChunkedOutputLoss: the KD configs' loss
    assert applied(loss="linear-ce") == ("linear-ce", 8)
    assert applied(loss_chunks=4) == ("linear-ce", 4)
    est = estimate_training(spec, framework="torchtune", method="lora", micro_batch=B, seq_len=S)
    why = {a.name: a.why for a in est.assumptions}
    assert why["loss"].startswith("from framework profile torchtune (pytorch/torchtune @bd2a0fc")
    assert why["loss_chunks"].startswith("from framework profile torchtune (pytorch/torchtune @bd2a0fc")


def test_a_compiled_linear_loss_is_said_to_be_counted_eager() -> None:
    """torchtune compiles each chunk's cross-entropy under compile (cross_entropy_loss.py @bd2a0fc lines 54-65),
    which llmsizer does not model for linear-ce: the estimate says so; the eager profile says nothing."""
    spec = spec_from_config(CONFIG, name="tiny-llama")
    said = "what the compiled chunks save is not modelled"
    compiled = estimate_training(spec, framework="torchtune", method="lora", micro_batch=B, seq_len=S, compile=True)
    assert any(said in str(x) for x in compiled.warnings)
    eager = estimate_training(spec, framework="torchtune", method="lora", micro_batch=B, seq_len=S)
    assert not any(said in str(x) for x in eager.warnings)
