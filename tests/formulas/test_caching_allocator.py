"""The caching allocator's rounding (formulas/caching_allocator.py) against what PyTorch itself printed.

Independent truth: the CUDA out-of-memory message prints "Tried to allocate X", X being the segment the allocator
asked cudaMalloc for (get_allocation_size of round_size of the request), and published logs name the tensor that
failed. No GPU is needed: the message is the allocator's own arithmetic, recorded on someone else's GPU.
"""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas import caching_allocator as CA

MiB = 1 << 20


def test_torchinductor_buffer_oom_prints_its_2_mib_rounded_segment() -> None:
    # meta-llama/llama-cookbook pull 898: `buf22 = empty_strided_cuda((54080, 4096), (4096, 1), torch.bfloat16)` ->
    # "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 424.00 MiB."
    n = 54080 * 4096 * 2  # 422.5 MiB of bf16
    assert CA.segment_bytes(n) == 424 * MiB


def test_a_request_between_1_and_10_mib_asks_for_a_20_mib_segment() -> None:
    # bitsandbytes-foundation/bitsandbytes issue 307: vicuna-13b (hidden 5120) with "context 500" fails in
    # `hidden_states.to(torch.float32)`: "Tried to allocate 20.00 MiB". 500 x 5120 x 4 B = 9.77 MiB < 10 MiB.
    assert CA.segment_bytes(500 * 5120 * 4) == 20 * MiB
    # and the boundaries of eq. (2): 1 MiB is still small (2 MiB segment), 10 MiB is large and 2 MiB-rounded
    assert CA.segment_bytes(MiB) == 2 * MiB
    assert CA.segment_bytes(MiB + 1) == 20 * MiB
    assert CA.segment_bytes(10 * MiB) == 10 * MiB
    assert CA.segment_bytes(10 * MiB + 1) == 12 * MiB


def test_block_rounding_and_split_rule() -> None:
    assert CA.block_bytes(0) == CA.block_bytes(1) == 512
    assert CA.block_bytes(513) == 1024
    # an 11.5 MiB request takes its whole 12 MiB segment (0.5 MiB left is not split off from a large segment)
    assert CA.allocated_bytes(int(11.5 * MiB)) == 12 * MiB
    # a 10 MiB + 1 B request leaves ~2 MiB, which is split off: the block is the 512-rounded size
    assert CA.allocated_bytes(10 * MiB + 1) == 10 * MiB + 512
    # a 3 MiB request carves a 20 MiB segment and leaves 17 MiB free in it
    assert CA.allocated_bytes(3 * MiB) == 3 * MiB
    assert CA.rounding_bytes([1, int(11.5 * MiB)]) == 511 + MiB // 2


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_bad_request_is_one_line(bad: object) -> None:
    with pytest.raises(InputError):
        CA.block_bytes(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen2.5-0.5b", "qwen3-0.6b"])
def test_rounding_of_the_weights_is_negligible(model: str) -> None:
    # why estimate/allocator.py folds the exact rounding into the reserve range instead of an item of its own: every
    # bf16 weight tensor of these models (formulas/tensors.py, exact against transformers) loaded as its own
    # allocation gains under 0.1 % (Llama-3.1-8B: 0 B; Qwen2.5-0.5B: 382 KiB of 942 MiB, from its biases)
    import math

    from llmsizer.formulas.tensors import model_tensors
    from llmsizer.models import load_model

    sizes = [math.prod(t.shape) * 2 for t in model_tensors(load_model(model))]
    assert 0 <= CA.rounding_bytes(sizes) < 1e-3 * sum(sizes)


class _Pools:
    """A replay of CUDACachingAllocator.cpp's per-stream rules (@ 001074d), written from the C++ and independent of
    the formulas: a request takes the smallest cached block of its own stream that fits (``get_free_block``:
    ``(*it)->stream != p.stream()`` -> no block), else a fresh ``get_allocation_size`` segment; a block whose rest is
    over 1 MiB (large pool) is split (``should_split``); a freed block returns to its own stream's pool
    (``free_block``); segments are never released (no ``empty_cache``)."""

    def __init__(self) -> None:
        self.free: list[tuple[str, int]] = []  # (stream, bytes) cached blocks
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0

    def malloc(self, stream: str, n: int) -> tuple[str, int]:
        size = 512 * -(-n // 512)
        fits = sorted((b, i) for i, (s, b) in enumerate(self.free) if s == stream and b >= size)
        if fits:
            b, i = fits[0]
            del self.free[i]
        else:
            b = 2 << 20 if size <= 1 << 20 else 20 << 20 if size < 10 << 20 else (2 << 20) * -(-size // (2 << 20))
            self.reserved += b
        if b - size > 1 << 20:
            self.free.append((stream, b - size))
            b = size
        self.allocated += b
        self.peak_reserved, self.peak_allocated = (max(self.peak_reserved, self.reserved),
                                                   max(self.peak_allocated, self.allocated))
        return stream, b

    def release(self, block: tuple[str, int]) -> None:
        self.allocated -= block[1]
        self.free.append(block)


def _fsdp_like_step(pools: _Pools, acts: list[int], outputs: list[int]) -> list[tuple[int, int]]:
    """One fixed-shape step: the forward keeps each layer's activations (default stream); the backward frees them
    last to first while each unit's reduce-scatter output is allocated on the side stream and kept until zero_grad.
    Returns the (allocated, of it on the side stream) moments."""
    kept = [pools.malloc("default", a) for a in acts]
    side: list[tuple[str, int]] = []
    moments = [(pools.allocated, 0)]
    for o in outputs:
        pools.release(kept.pop())
        side.append(pools.malloc("rs", o))
        moments.append((pools.allocated, sum(b for _, b in side)))
    for b in side:  # zero_grad(set_to_none=True)
        pools.release(b)
    moments.append((pools.allocated, 0))
    return moments


@pytest.mark.parametrize("outputs", [[26 * MiB] * 4 + [60 * MiB], [3 * MiB] * 6, [int(11.5 * MiB)] * 3])
def test_side_stream_reserve_matches_a_replay_of_the_allocators_stream_rules(outputs: list[int]) -> None:
    # each layer a different size, the same every step; 2 MiB multiples, so the default stream's own segment
    # rounding (eq. 2, tested above; not part of eq. R1) is zero and the replay isolates the cross-stream part
    acts = [300 * MiB + 2 * MiB * k for k in range(len(outputs))]
    pools = _Pools()
    _fsdp_like_step(pools, acts, outputs)  # the first step builds the pools
    pools.peak_reserved, pools.peak_allocated = pools.reserved, pools.allocated  # reset_peak_memory_stats
    moments = _fsdp_like_step(pools, acts, outputs)
    moments = _fsdp_like_step(pools, acts, outputs)  # and no stream's pool grows after
    replayed = pools.peak_reserved - pools.peak_allocated
    assert CA.stream_pool_bytes(outputs) <= sum(map(CA.segment_bytes, outputs))
    assert CA.cross_stream_reserve(moments, CA.stream_pool_bytes(outputs)) == replayed > 0
    # one stream, all alive together: reserved is eq. (4)'s packing of its blocks, step after step
    single = _Pools()
    for _ in range(3):
        kept = [single.malloc("default", a) for a in acts + outputs]
        for b in kept:
            single.release(b)
    assert single.peak_reserved == single.reserved == CA.stream_pool_bytes(acts + outputs)
    assert CA.cross_stream_reserve([(single.peak_allocated, 0)], 0) == 0


def test_cross_stream_reserve_refuses_bad_moments() -> None:
    with pytest.raises(InputError, match="exceed"):
        CA.cross_stream_reserve([(10, 11)], 0)
    with pytest.raises(InputError, match="at least one"):
        CA.cross_stream_reserve([], 0)


MiB = 1 << 20


def test_stream_trace_pool_reuses_merges_and_grows() -> None:
    """Eq. (4'), cases worked by hand from the allocator's rules (best fit in the stream's own pool, split when the
    rest exceeds 1 MiB in the large pool, a freed block merged with its free neighbours, a new segment otherwise)."""
    pool = CA.stream_trace_pool_bytes
    # a freed 100 MiB block serves a 50 MiB request: no new segment
    assert pool([("alloc", 100 * MiB), ("free", 0), ("alloc", 50 * MiB)]) == 100 * MiB
    # a cached 30 MiB block cannot serve 40 MiB: a second 40 MiB segment
    assert pool([("alloc", 30 * MiB), ("alloc", 40 * MiB), ("free", 0), ("alloc", 40 * MiB)]) == 110 * MiB
    # two 30 MiB blocks split from one 100 MiB segment merge back with its 40 MiB rest when freed: 90 MiB fits
    assert pool([("alloc", 100 * MiB), ("free", 0), ("alloc", 30 * MiB), ("alloc", 30 * MiB), ("free", 1),
                 ("free", 2), ("alloc", 90 * MiB)]) == 100 * MiB
    # without the merge (the first 30 MiB still allocated) 90 MiB needs a segment of its own
    assert pool([("alloc", 100 * MiB), ("free", 0), ("alloc", 30 * MiB), ("alloc", 30 * MiB), ("free", 2),
                 ("alloc", 90 * MiB)]) == 190 * MiB
    # the small pool (<= 1 MiB) and the large pool do not serve each other
    assert pool([("alloc", 12 * MiB), ("free", 0), ("alloc", 1000)]) == 12 * MiB + 2 * MiB
    # what is alive together is eq. (4)'s pool
    sizes = [30 * MiB, 5 * MiB, 700_000]
    assert pool([("alloc", n) for n in sizes]) == CA.stream_pool_bytes(sizes)


def test_stream_trace_pool_refuses_a_bad_free() -> None:
    pool = CA.stream_trace_pool_bytes
    with pytest.raises(InputError, match="no such allocated block"):
        pool([("alloc", MiB), ("free", 0), ("free", 0)])
    with pytest.raises(InputError, match="no such allocated block"):
        pool([("free", 0)])
