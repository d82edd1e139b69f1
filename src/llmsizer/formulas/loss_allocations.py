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

Under tensor parallelism torchtitan @ 9dec370 runs the same lines inside torch's ``loss_parallel()`` (utils.py lines
196-201, entered by train.py line 302 whenever tp > 1) on the lm_head's vocabulary-sharded DTensor
(parallelize_llama.py lines 138-141: ``output_layouts=Shard(-1)``, ``use_local_output=False``). The context replaces
aten's log-softmax and NLL kernels by decompositions on each rank's shard (torch 2.13
``torch/distributed/tensor/parallel/loss.py``, ``customized_loss_ops`` lines 598-605), so with V the rank's share of
the vocabulary (V / tp) the sequence is

    forward   alloc  logits            t V c   the ColwiseParallel lm_head's local result
              alloc  upcast            t V 4   ``.float()`` (none when c = 4)
              alloc  shifted           t V 4   ``_log_softmax``: ``x - x_max`` (line 212; line 204 copies nothing)
              alloc  exp               t V 4   ``torch.exp(shifted)`` (line 213)
              free   exp                       once summed
              alloc  log-softmax       t V 4   ``shifted - shifted_logsumexp`` (line 218), saved for the backward
              free   shifted                   when ``_log_softmax`` returns
              free   upcast                    when ``cross_entropy`` returns
              free   logits                    ``del pred``
    backward  alloc  grad_input        t V 4   ``_nll_loss_and_log_softmax_backward``: ``zeros_like(x)`` (line 470)
              alloc  exp(x)            t V 4   ``(grad_input + torch.exp(x)) * grad_output`` (line 518)
              alloc  sum               t V 4   (line 518)
              free   exp(x)
              alloc  d upcast          t V 4   the product (line 518); the log-softmax's own backward handler
              free   sum                       returns it as it is (lines 259-266)
              free   grad_input                when the handler returns
              free   log-softmax               once the log-softmax's node has run
              alloc  d logits          t V c   ``ToCopyBackward`` (none when c = 4)
              free   d upcast
              free   d logits                  after the lm_head's backward has read it                     (L1p)

Both measured on CPU with torch 2.13.0 from the profiler's memory events (real allocations and frees, no tracer;
(L1p) on two gloo ranks through a real ``ColwiseParallel`` lm_head: tests/formulas/test_loss_allocations.py). The
caching allocator serves the stretch from fresh memory at the top of the default stream's pool when none of the
blocks freed earlier in the step is as large as the smallest of these requests (t V c; the largest activation of a
layer is far smaller at a large vocabulary), so its hole is eq. (4'') of formulas/caching_allocator.py over the
sequence. (L1), c = 2: the first gradient takes the bottom of the 6 t V hole the logits and their upcast left, and the
second (t V 4) does not fit the t V 2 above it. (L1p), c = 2: the logits, upcast and shifted leave 10 t V below the
kept log-softmax; grad_input and exp(x) take 8 t V of it and their sum (t V 4) does not fit the t V 2 left:

    hole = 2 t V     (c = 2)          0     (c = 4: the first gradients fit the freed places exactly)

at the loss backward, the moment of the most live [t, V] bytes (3 x t V 4 with (L1), 4 x t V 4 with (L1p)). Only for
these two losses: chunked, compiled or fused losses allocate other sequences (not modelled here).
"""

from __future__ import annotations

from ..errors import InputError

# (L1) and (L1p) as (event, tensor, bytes per element of [t, V]); 'c' stands for the logits' element bytes. The
# tensors that exist only when the logits are half precision (the upcast and its gradient's cast back) are marked
# by HALF: with c = 4 ``.float()`` returns the logits themselves and no ToCopyBackward runs.
HALF = ("upcast", "d logits")
_L1: tuple[tuple[str, str, int | str], ...] = (
    ("alloc", "logits", "c"), ("alloc", "upcast", 4), ("alloc", "log-softmax", 4), ("free", "upcast", 0),
    ("free", "logits", 0),
    ("alloc", "d log-softmax", 4), ("alloc", "d upcast", 4), ("free", "d log-softmax", 0), ("free", "log-softmax", 0),
    ("alloc", "d logits", "c"), ("free", "d upcast", 0), ("free", "d logits", 0))
_L1P: tuple[tuple[str, str, int | str], ...] = (
    ("alloc", "logits", "c"), ("alloc", "upcast", 4), ("alloc", "shifted", 4), ("alloc", "exp", 4),
    ("free", "exp", 0), ("alloc", "log-softmax", 4), ("free", "shifted", 0), ("free", "upcast", 0),
    ("free", "logits", 0),
    ("alloc", "grad_input", 4), ("alloc", "exp(x)", 4), ("alloc", "sum", 4), ("free", "exp(x)", 0),
    ("alloc", "d upcast", 4), ("free", "sum", 0), ("free", "grad_input", 0), ("free", "log-softmax", 0),
    ("alloc", "d logits", "c"), ("free", "d upcast", 0), ("free", "d logits", 0))


def eager_loss_events(tokens: int, vocab: int, logits_bytes: int,
                      loss_parallel: bool = False) -> list[tuple[str, int]]:
    """Eq. (L1), or (L1p) with ``loss_parallel``: the eager cross-entropy's [t, V] allocations and frees in order, as
    formulas/caching_allocator.py ``stream_trace_pool_bytes`` events (``("free", k)`` frees the k-th alloc).
    ``tokens``: t of one rank's step, ``vocab``: V of this rank (under ``loss_parallel`` its vocabulary shard),
    ``logits_bytes``: c, the logits' element bytes (4: fp32, no upcast)."""
    for name, x in (("tokens", tokens), ("vocab", vocab), ("logits_bytes", logits_bytes)):
        if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
            raise InputError(f"{name} must be a positive whole number, got {x!r}")
    tv = tokens * vocab
    index: dict[str, int] = {}
    events: list[tuple[str, int]] = []
    for kind, tensor, per in _L1P if loss_parallel else _L1:
        if logits_bytes == 4 and tensor in HALF:
            continue
        if kind == "alloc":
            index[tensor] = len(index)
            events.append(("alloc", tv * (logits_bytes if per == "c" else int(per))))
        else:
            events.append(("free", index[tensor]))
    return events
