"""Context parallelism's ring-attention buffers against torch's own ring attention on CPU ranks (#12).

``ring_attention_step.py`` runs ``_templated_ring_attention`` and its backward (the code torchtitan's context
parallelism dispatches SDPA to) over gloo with the CPU flash kernel as the block op, head-tail load balancing and the
all-gather K/V rotation, and records, on every rank, what is live at the peak of live bytes beyond the inputs
(LiveTensorBytes; torch's AsyncCollectiveTensor wrappers count 0 B, they own no memory). The largest rank's forward
extra must match ``ring_attention_forward_bytes`` and its backward extra ``ring_attention_backward_bytes`` plus the
plain SDPA backward's dq, dk, dv (which llmsizer counts in every layer's backward transient). Both formulas model the
worst rank; rank 0 (half-q steps) peaks lower than the others.

gloo's worker threads would keep a collective's tensors alive past its wait for as long as they are descheduled (the
backward once read +921,600 B under CPU load); the step runs each collective on copies the tracker does not count
(``CollectivesOnCopies``). The ``cp2-held`` case keeps gloo's copies to the end of the step, a worker thread that
never lets go: the measurement must stay within the tolerance (with gloo holding the counted tensors themselves it
reads the flaky +921,600 B).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from ranks import run_cases, run_ranks  # noqa: E402

from llmsizer.formulas.context_parallel import (  # noqa: E402
    ring_attention_backward_bytes,
    ring_attention_forward_bytes,
)

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CASES: list[tuple[int, dict[str, Any], float]] = [
    (2, dict(batch=1, heads=4, kv_heads=4, local_seq=512, head_dim=64), 0.02),
    (4, dict(batch=2, heads=2, kv_heads=2, local_seq=256, head_dim=128), 0.02),
    (2, dict(batch=1, heads=4, kv_heads=4, local_seq=512, head_dim=64, hold_collective_tensors=True), 0.02),
]


@pytest.fixture(scope="module", autouse=True)
def _cases_per_rank_count() -> None:
    """The cases of one rank count in one launch (ranks.run_cases, torch only: cp2 and cp2-held); each test's
    run_ranks reads its case back (a count of one case launches as it did)."""
    for cp in sorted({cp for cp, _, _ in CASES}):
        cases = [case for n, case, _ in CASES if n == cp]
        if len(cases) > 1:
            run_cases(HERE / "ring_attention_step.py", cases, cp)


@pytest.mark.parametrize(("cp", "case", "tol"), CASES, ids=["cp2", "cp4", "cp2-held"])
def test_ring_attention_buffers(cp: int, case: dict[str, Any], tol: float) -> None:
    m = run_ranks(HERE / "ring_attention_step.py", case, cp)
    t = case["batch"] * case["local_seq"]
    w = case["heads"] * case["head_dim"]  # K/V repeated to every head: the CPU flash kernel takes MHA shapes
    measured_fwd = max(sum(r["forward_extra_at_peak"]) for r in m["ranks"])
    measured_bwd = max(sum(r["backward_extra_at_peak"]) for r in m["ranks"])
    fwd = ring_attention_forward_bytes(t, w, w, w, cp, 2)
    bwd = ring_attention_backward_bytes(t, w, w, w, cp, 2) + t * 3 * w * 2  # + the blocks' dq, dk, dv
    ef = (fwd - measured_fwd) / measured_fwd
    eb = (bwd - measured_bwd) / measured_bwd
    print(f"\nring attention over {cp} ranks: forward extra measured {measured_fwd} B, predicted {fwd} B ({ef:+.1%}); "
          f"backward extra measured {measured_bwd} B, predicted {bwd} B ({eb:+.1%}); per rank "
          f"{[(sum(r['forward_extra_at_peak']), sum(r['backward_extra_at_peak'])) for r in m['ranks']]}")
    assert abs(ef) <= tol and abs(eb) <= tol
