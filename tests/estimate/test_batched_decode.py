"""llama.cpp batched decode (formulas/speed.py eq. 10) and the KV cells its sliding layers read: properties of the
mechanism (the published rows that check its numbers are in tests/validation/test_public_speed.py)."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.speed import SpeedEstimate, estimate_speed


def _speed(model: str, fmt: str, prompt: int, batch: int, **kw: Any) -> SpeedEstimate:
    return estimate_speed(find(model).spec(), builtin_catalog().devices["dgx-spark"], weights_format=fmt,
                          prompt_tokens=prompt, output_tokens=32, concurrency=batch, kv_dtype="fp16", **kw)


def test_sliding_layers_read_the_stream_not_the_window() -> None:
    """A larger n_ubatch grows the sliding layers' stream, so llama.cpp's decode at a long context reads more and is
    slower; below the window nothing changes (every cell is in the window anyway)."""
    long_small = _speed("gemma-3-4b-it", "gguf:q4_0", 8192, 1, ubatch=512).decode
    long_big = _speed("gemma-3-4b-it", "gguf:q4_0", 8192, 1, ubatch=2048).decode
    assert long_small is not None and long_big is not None and long_big.seconds > long_small.seconds
    short_small = _speed("gemma-3-4b-it", "gguf:q4_0", 256, 1, ubatch=512).decode
    short_big = _speed("gemma-3-4b-it", "gguf:q4_0", 256, 1, ubatch=2048).decode
    assert short_small is not None and short_big is not None
    assert short_big.seconds == pytest.approx(short_small.seconds)


def test_batched_step_adds_compute_to_the_bytes() -> None:
    """Eq. (10): more sequences never make a step shorter, the aggregate rate grows, and the step exceeds the
    memory term by the products' and attention's compute (not their max, as eq. 3 would)."""
    steps = [_speed("qwen2.5-7b", "gguf:q8_0", 512, b, ubatch=2048) for b in (1, 2, 8, 32)]
    secs = [s.decode.seconds for s in steps if s.decode is not None]
    rates = [s.tokens_per_second for s in steps]
    assert len(secs) == 4 and secs == sorted(secs)
    assert all(r is not None for r in rates)
    assert [r or 0.0 for r in rates] == sorted(r or 0.0 for r in rates)
    d = steps[-1].decode
    assert d is not None and d.compute_seconds > 0
    assert d.seconds == pytest.approx(d.memory_seconds + d.compute_seconds + d.comm_seconds + d.overhead_seconds)
    assert any(a.name == "llamacpp_batched_decode" for a in steps[-1].assumptions)


def test_moe_batched_step_reads_more_experts_even_for_identical_prompts() -> None:
    """llama-batched-bench feeds every sequence token 0, yet its MoE steps grow 1.7-1.9x from one sequence to two
    (dense 1.07-1.2x): llama.cpp's batched step reads the experts of more than one routing (eq. 11)."""
    one = _speed("qwen3-30b-a3b", "gguf:q8_0", 512, 1, identical_sequences=True).decode
    two = _speed("qwen3-30b-a3b", "gguf:q8_0", 512, 2, identical_sequences=True)
    assert one is not None and two.decode is not None
    assert two.decode.memory_seconds > 1.5 * one.memory_seconds
    assert any(a.name == "identical_sequences_routing" for a in two.assumptions)


def test_fit_speed_reads_the_workloads_n_ubatch() -> None:
    """One answer: `fit` sizes llama.cpp's iSWA cache with the workload's n_ubatch, and its speed reads the same
    cells (before, the speed took the 512 default whatever --ubatch said)."""
    import llmsizer

    small = llmsizer.fit("gemma-3-4b-it", "dgx-spark", weights="q4_0", engine="llamacpp", context=8192,
                         concurrency=8, n_ubatch=512)
    big = llmsizer.fit("gemma-3-4b-it", "dgx-spark", weights="q4_0", engine="llamacpp", context=8192,
                       concurrency=8, n_ubatch=2048)
    assert small.speed is not None and big.speed is not None
    assert small.speed.decode is not None and big.speed.decode is not None
    assert big.speed.decode.seconds > small.speed.decode.seconds
    cells = [a.value for a in big.speed.assumptions if a.name == "llamacpp_sliding_cells_read"]
    # within its pad256(1024 + 2048)-cell ring, beyond the whole 1536-cell ring of n_ubatch 512 (flash attention over
    # several streams reads up to the ring's last in-window tile, engines.LLAMACPP_FA_KV_TILE)
    assert len(cells) == 1 and 1024 + 512 < cells[0] <= 1024 + 2048
