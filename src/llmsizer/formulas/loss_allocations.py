"""The eager cross-entropy's [t, V] allocations and frees in a training step, in the order PyTorch makes them [bytes].

The loss of torchtitan @ 9dec370 (``train.py`` lines 131-134: ``cross_entropy`` of the logits flattened to [t, V] and
upcast with ``.float()``; lines 303-308: ``pred = model(input_ids)``, the loss, ``del pred``, then
``loss.backward()``), on the half-precision logits its model returns (``models/llama/model.py`` lines 444-445: the
output projection of the final norm, in FSDP2's ``param_dtype``). With t tokens, V the vocabulary and c the logits'
element bytes, the tensors of t V elements are, in order (torch 2.13 ``tools/autograd/derivatives.yaml``: the
backward of ``_to_copy``, ``_log_softmax`` and ``nll_loss_forward``):

    forward   alloc  logits            t V c   the output projection's result
              alloc  upcast            t V 4   ``.float()`` (none when c = 4: it returns the logits themselves)
              alloc  log-softmax       t V 4   ``cross_entropy`` = ``nll_loss(log_softmax(x))``, saved for the backward
              free   upcast                    when ``cross_entropy`` returns (``ToCopyBackward`` keeps no tensor)
              free   logits                    ``del pred`` (the output projection saves its input, not its output)
    backward  alloc  d log-softmax     t V 4   ``nll_loss_backward``: zeros of the log-softmax's shape, scattered
              alloc  d upcast          t V 4   ``_log_softmax_backward_data``
              free   d log-softmax             the engine drops a node's input gradient once the node has run
              free   log-softmax               and its saved tensors (no ``retain_graph``)
              alloc  d logits          t V c   ``ToCopyBackward``: the gradient cast back to the logits' dtype
              free   d upcast
              free   d logits                  after the output projection's backward has read it           (L1)

Measured on CPU with torch 2.13.0 from the profiler's memory events (real allocations and frees, no tracer: tests/
formulas/test_loss_allocations.py). The caching allocator serves the stretch from fresh memory at the top of the
default stream's pool when none of the blocks freed earlier in the step is as large as the smallest of these
requests (t V c; the largest activation of a layer is far smaller at a large vocabulary), so its hole is eq. (4'')
of formulas/caching_allocator.py over (L1): with c = 2 the first gradient takes the bottom of the 6 t V hole the
logits and their upcast left, and the second (t V 4) does not fit the t V 2 above it:

    hole = 2 t V     (c = 2)          0     (c = 4: no upcast, the first gradient fits the logits' place exactly)

at the loss backward, the moment of the most live [t, V] bytes (3 x t V 4). Only for this loss: chunked, compiled,
fused or vocabulary-parallel losses allocate other sequences (not modelled here).
"""

from __future__ import annotations

from ..errors import InputError


def eager_loss_events(tokens: int, vocab: int, logits_bytes: int) -> list[tuple[str, int]]:
    """Eq. (L1): the eager cross-entropy's [t, V] allocations and frees in order, as formulas/caching_allocator.py
    ``stream_trace_pool_bytes`` events (``("free", k)`` frees the k-th alloc). ``tokens``: t of one rank's step,
    ``vocab``: V (of this rank), ``logits_bytes``: c, the logits' element bytes (4: fp32, no upcast)."""
    for name, x in (("tokens", tokens), ("vocab", vocab), ("logits_bytes", logits_bytes)):
        if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
            raise InputError(f"{name} must be a positive whole number, got {x!r}")
    tv = tokens * vocab
    if logits_bytes == 4:  # .float() returns the fp32 logits themselves: no upcast, and no cast back in the backward
        return [("alloc", tv * 4), ("alloc", tv * 4), ("free", 0),  # logits, log-softmax; del pred
                ("alloc", tv * 4), ("alloc", tv * 4), ("free", 2), ("free", 1), ("free", 3)]
    return [("alloc", tv * logits_bytes), ("alloc", tv * 4), ("alloc", tv * 4), ("free", 1), ("free", 0),
            ("alloc", tv * 4), ("alloc", tv * 4), ("free", 3), ("free", 2),
            ("alloc", tv * logits_bytes), ("free", 4), ("free", 5)]
