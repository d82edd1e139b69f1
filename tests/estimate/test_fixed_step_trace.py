"""A real training step's allocations against estimate/allocator.py eqs. (R1) and (R2) of a fixed-shape step.

torch 2.13's profiler records (``profile_memory``, CPU: real allocations and frees, with their addresses) one
transformers training step of a tiny Qwen2 (bf16, AdamW, labels = input_ids, as measure/workloads.py
``training_step`` runs it), after a first step has made the optimizer's states: every allocation and free of the
step in order. Replayed through formulas/caching_allocator.py eq. (4') -- the caching allocator's best fit, splits and
merges, as a fixed-shape step starting from an empty cache meets them -- the pool exceeds the most bytes alive at once
by the step's hole. Checked: the eager loss's hole (formulas/loss_allocations.py eq. L1, 2 t V at c = 2), the part of
eq. (R1) a one-GPU step has, is inside it (transformers' ``ForCausalLMLoss`` upcasts the logits and runs
``cross_entropy`` as torchtitan's loss does), and the rest is within eq. (R2)'s calibrated high end over the step's
dynamic bytes (``FIXED_STEP_RESERVE``, fitted on the H200 runs, not on this trace). The CPU has no caching
allocator; what is checked is the replay of the real sequence, not a CUDA reading.
"""

from __future__ import annotations

import pytest

from llmsizer.estimate import allocator as A
from llmsizer.formulas import caching_allocator as CA
from llmsizer.formulas.loss_allocations import eager_loss_events
from oracle_utils import profiled_allocations

V, B, S = 16000, 2, 256  # [t, V] bf16 logits of 16 MB: above the 10 MiB of a segment's own (eq. 2)


def _step_events(checkpointing: str) -> list[tuple[str, int]]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.profiler import ProfilerActivity, profile

    cfg = transformers.Qwen2Config(vocab_size=V, hidden_size=256, intermediate_size=768, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                                   max_position_embeddings=1024, use_cache=False)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(cfg).to(torch.bfloat16).train()
    if checkpointing == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, V, (B, S))

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # the optimizer's states: made once, persistent (not in the traced step)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    raw = profiled_allocations(prof)
    events: list[tuple[str, int]] = []
    live: dict[int, int] = {}
    for _, ptr, size in raw:
        if size > 0:
            live[ptr] = sum(1 for k, _ in events if k == "alloc")
            events.append(("alloc", size))
        elif ptr in live:
            events.append(("free", live.pop(ptr)))
    assert not live  # every block the step made it freed again (zero_grad frees the gradients): all dynamic
    return events


@pytest.mark.parametrize("checkpointing", ["none", "full"])
def test_a_real_steps_hole_holds_the_loss_hole_and_r2_bounds_the_rest(checkpointing: str) -> None:
    events = _step_events(checkpointing)
    pool, peak = CA._replay(events)
    hole = pool - peak
    loss_hole = CA.stream_trace_hole_bytes(eager_loss_events(B * S, V, 2))
    assert 2 * B * S * V <= loss_hole < 2 * B * S * V + 2 * 2**20  # eq. L1 at c = 2, in 2 MiB-rounded segments
    ratio = A.FIXED_STEP_RESERVE[checkpointing]
    assert loss_hole <= hole <= loss_hole + (ratio.high - 1) * peak, (checkpointing, hole, loss_hole, peak)
