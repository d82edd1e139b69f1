"""Under pipeline parallelism the estimate is the most loaded stage's, in the figure the user compares with
(``--metric``): the loss stage's reserve (the eager loss's hole in the default stream's pool, eq. 4'' of
formulas/loss_allocations.py eq. L1p under torch's loss_parallel) can make it the larger one in reserved memory while
stage 0 (min(pp, grad_accumulation) micro-batches in flight under 1F1B) holds more allocated memory.

The hole is counted by hand from eq. L1p's sequence with half-precision logits (hole = 2 t V' bytes, V' = ceil(V / tp)
the rank's share of the vocabulary; the sequence itself is compared with torch's profiler memory events in
tests/formulas/test_loss_allocations.py and tests/training/test_loss_parallel.py)."""

from __future__ import annotations

from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model

# Qwen2.5-7B (V = 152064), TP 2 x PP 4, 2 sequences of 8192 tokens, 2 micro-batches, no FSDP (so no side stream: the
# loss's hole is the whole fixed-shape reserve of the last stage, eq. R1 with H(p) at the loss backward)
LAYOUT = dict(gpus=8, tp=2, pp=4, micro_batch=2, seq_len=8192, grad_accumulation=2, loss="ce-loss-parallel",
              batch_shapes="fixed")


def test_the_loss_stage_is_picked_when_its_reserve_makes_it_the_larger() -> None:
    spec = load_model("qwen2.5-7b")
    # (allocated does not read the shapes, and refuses batch_shapes 'fixed': specs/training.py POOL_METRICS)
    allocated = estimate_training(spec, metric="allocated", **{k: v for k, v in LAYOUT.items() if k != "batch_shapes"})
    peaks = allocated.details["stage_peaks"]  # each stage's allocated peak (the figure the stages were picked by)
    first, last = peaks[0], peaks[LAYOUT["pp"] - 1]
    hole = 2 * LAYOUT["micro_batch"] * LAYOUT["seq_len"] * -(-spec.vocab_size // LAYOUT["tp"])  # eq. L1p, c = 2
    assert first > last and last + hole > first  # the case: allocated picks stage 0, reserved stage 3
    assert allocated.total("device")[1] == first
    for metric in ("reserved", "nvidia-smi"):
        est = estimate_training(spec, metric=metric, **LAYOUT)
        context = sum(i.bytes for i in est.items if i.name == "cuda_context")
        assert est.total("device")[1] == last + hole + context, metric
        assert est.item("allocator_reserve").bytes == hole
        assert est.details["peak_phase"] == "loss backward (pipeline stage 3)"


def test_the_reserve_cites_loss_parallel_only_where_it_runs() -> None:
    """The reserve's source names torch's loss_parallel (distributed/tensor/parallel/loss.py) on a loss_parallel run
    only; a plain 'ce' run's hole is eq. L1's (aten's log-softmax and NLL kernels)."""
    plain = estimate_training("qwen2.5-0.5b", metric="reserved", batch_shapes="fixed", loss="ce")
    parallel = estimate_training("qwen2.5-0.5b", metric="reserved", batch_shapes="fixed", gpus=2, tp=2,
                                 loss="ce-loss-parallel")
    for est, lp in ((plain, False), (parallel, True)):
        item = est.item("allocator_reserve")
        assert "loss backward" in item.formula or "eager loss's hole" in item.formula
        assert ("tensor/parallel/loss.py" in item.source) is lp
        assert ("eq. L1p" in item.formula) is lp and ("eq. L1," in item.formula) is not lp
