"""loss='ce-kept-logits' (formulas/training_activations.py ``head_activations``, eq. K1) against the CPU allocator's
bytes (tests/training/measure_step.py ``AllocatorBytes``) over torchtune's 2024-05 training loop on the CPU, bf16.

The loop is written here from its lines (torchtune is not installed; the 2024-05 recipes need torchtune 0.1 and
its torch): recipes/lora_finetune_single_device.py @ 0217d44c2 lines 460-469 (identical in
lora_finetune_distributed.py 553-563, full_finetune_single_device.py 416-426, full_finetune_distributed.py
478-488), with the model's last line ``output = self.output(h).float()`` (torchtune/modules/transformer.py line 210)
and ``torch.nn.CrossEntropyLoss`` (the configs' ``loss: _component_``). What is measured is what autograd and the
operators really allocate and keep, over two steps, so that the second step's forward runs while the first step's
``logits`` are still bound.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.errors import InputError  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup, head_activations  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

B, S, H, V = 2, 256, 256, 4096
CONFIG = dict(model_type="llama", vocab_size=V, hidden_size=H, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096)


def _steps(keep: bool) -> int:
    """Peak live bytes of the second step above what exists before it (the inputs and the first step's leftovers
    are in the base only if the loop keeps them: they are freed when the loop rebinds ``logits``)."""
    torch.manual_seed(0)
    loss_fn = torch.nn.CrossEntropyLoss()
    with AllocatorBytes() as alloc:
        weight = torch.randn(V, H, dtype=torch.bfloat16)  # frozen lm_head (LoRA): its input is not kept
        batches = []
        for _ in range(2):
            hidden = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
            labels = torch.randint(0, V, (B, S))
            batches.append((hidden, labels))
        alloc.mark()  # mark 0: the base
        logits: Any = None
        for hidden, labels in batches:
            alloc.mark()  # marks 1 and 3: a step starts
            logits = F.linear(hidden, weight).float()  # the model: self.output(h).float()
            logits = logits[..., :-1, :].contiguous()  # recipe line 462
            labels = labels[..., 1:].contiguous()
            logits = logits.transpose(1, 2)
            loss = loss_fn(logits, labels)
            if not keep:  # the 'ce' layout: nothing outside autograd holds the logits during the backward
                del logits
                logits = None
            loss.backward()
            alloc.mark()  # marks 2 and 4: its backward has ended
            hidden.grad = None
    return alloc.peak(3, 4) - alloc.level(0)


def test_the_kept_logits_are_what_the_loop_adds_to_the_peak() -> None:
    spec = spec_from_config(CONFIG, name="tiny-llama")
    st = ActivationSetup(batch=B, seq=S, residual=2, compute=2, full=False)
    head = head_activations(spec, st, lm_head_trained=False, kept_logits=True)
    assert head.kept_logits == B * (S - 1) * V * 4  # eq. K1
    kept, freed = _steps(True), _steps(False)
    assert kept - freed == pytest.approx(head.kept_logits, rel=0.01)
    # the loss backward's peak: the kept logits + the saved log-softmax + the two fp32 gradients (module docstring)
    log_softmax = next(t.bytes for t in head.saved if t.name.startswith("loss log-softmax")) - B * S * 8
    assert kept == pytest.approx(head.kept_logits + log_softmax + head.loss_backward, rel=0.01)


def test_the_estimate_carries_the_kept_logits_through_the_backward() -> None:
    fields = dict(method="lora", rank=8, targets="q,v", precision="bf16", grad_checkpointing="full", micro_batch=4,
                  seq_len=2048)
    ce = estimate_training("llama-2-7b-hf", **fields)
    kept = estimate_training("llama-2-7b-hf", **fields, loss="ce-kept-logits")
    k = 4 * 2047 * 32000 * 4
    assert kept.item("kept_logits").bytes == k
    for name, total in kept.details["phases"].items():
        assert total - ce.details["phases"][name] == (0 if name in ("forward end", "model init") else k)
    assert kept.details["tensor_peak_bytes"] - ce.details["tensor_peak_bytes"] == k


def test_kept_logits_take_no_chunks() -> None:
    with pytest.raises(InputError, match="ce-kept-logits"):
        estimate_training("llama-2-7b-hf", method="lora", loss="ce-kept-logits", loss_chunks=8)
