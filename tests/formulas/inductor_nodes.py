"""The scheduler nodes inductor emits while a compiled function runs, with the bytes it counts for each
(``GraphLowering.count_bytes``, torch/_inductor/graph.py): the one hook the compiled-traffic and compiled-kernel
tests read (tests/formulas/test_elementwise_traffic.py, test_launch_overhead.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch


def inductor_nodes(run: Any) -> list[tuple[Any, int]]:
    """(scheduler node, bytes) of every graph compiled while ``run`` runs; no cached graph (a cache hit skips the
    lowering that counts)."""
    import torch._inductor.graph as graph
    from torch._inductor import config

    seen: list[tuple[Any, int]] = []
    original = graph.GraphLowering.count_bytes

    def count_bytes(self: Any) -> Any:
        total, counts, runtimes = original(self)
        seen.extend((node, n * 4) for node, n in counts)  # count_bytes reports bytes // 4
        return total, counts, runtimes

    torch._logging.set_logs(inductor_metrics=True)
    logging.getLogger("torch._inductor").setLevel(logging.WARNING)
    try:
        with pytest.MonkeyPatch.context() as mp, config.patch(fx_graph_cache=False), \
                torch._functorch.config.patch(enable_autograd_cache=False):
            mp.setattr(graph.GraphLowering, "count_bytes", count_bytes)
            torch._dynamo.reset()
            run()
    finally:
        torch._logging.set_logs()
        torch._dynamo.reset()
    return seen
