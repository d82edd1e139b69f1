"""The eager cross-entropy's [t, V] allocation sequence (formulas/loss_allocations.py eq. L1) and the hole it leaves
in the caching allocator's pool (formulas/caching_allocator.py eqs. 4'', R1), against independent truth:

- the sequence of eq. (L1p), the same loss under torch's ``loss_parallel``: its profiler events on two gloo ranks
  (tests/training/test_loss_parallel.py ``test_loss_allocation_sequence_is_torchs``, slow);
- the sequence: real allocations and frees recorded by torch 2.13.0's profiler (``profile_memory``: the CPU
  allocator's own alloc/free reports with their addresses, no dispatch-mode tracer that could turn in-place ops into
  new tensors) while a small bf16 (or fp32) model runs the training-loop lines of torchtitan @ 9dec370 train.py
  131-134 and 303-308 (the model's logits upcast inside ``cross_entropy``, ``del pred``, ``loss.backward()``);
- the hole: an address-level replay of CUDACachingAllocator.cpp @ 001074d with ``expandable_segments:True`` (what
  torchtitan's run_llama_train.sh @ 9dec370 line 22 sets), written here from the C++ (``get_free_block`` with its
  expandable-size rule, ``should_split``, ``free_block`` merging, ``find_expandable_block`` / ``map_block`` mapping
  20 MiB pages at the lowest free address), independent of the formulas' replay (which models fixed segments),
  run for several fixed-shape steps with the measured sequence between a forward's and a backward's activations.

No CUDA device was lent to this session: the reserve itself is not measured on a GPU here.
"""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas import caching_allocator as CA
from llmsizer.formulas.loss_allocations import eager_loss_events
from oracle_utils import profiled_allocations

MiB = 1 << 20
PAGE = 20 * MiB  # an expandable segment of the large pool maps 20 MiB pages


def measured_loss_events(dtype: str, batch: int = 2, seq: int = 64, hidden: int = 32,
                         vocab: int = 1000) -> list[tuple[str, int]]:
    """The [t, V]-sized allocations and frees of one step of a tiny model whose output projection returns ``dtype``
    logits, run as torchtitan's loop runs it, from the profiler's memory events (frees as the index of their alloc)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    emb = torch.nn.Embedding(vocab, hidden).to(dt)
    norm = torch.nn.RMSNorm(hidden).to(dt)
    out = torch.nn.Linear(hidden, vocab, bias=False).to(dt)

    def model(tokens: object) -> object:  # the model's forward ends with the output projection of the final norm
        return out(norm(emb(tokens)))

    def loss_fn(pred: object, labels: object) -> object:  # train.py @ 9dec370 lines 131-134
        return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))  # type: ignore

    tokens = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch, seq))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        pred = model(tokens)  # lines 303-308
        loss = loss_fn(pred, labels)
        del pred
        loss.backward()  # type: ignore[attr-defined]
    raw = profiled_allocations(prof)
    tv = batch * seq * vocab
    least = tv * min(4, torch.empty((), dtype=dt).element_size())
    events: list[tuple[str, int]] = []
    live: dict[int, int] = {}  # address -> index of the alloc that holds it now
    n = 0
    for _, ptr, size in raw:
        # [t, V] tensors only: a size below one [t, V] element per token, or not a whole number of [t, V] elements
        # (oneDNN's fp16 matmul backward on CPUs with AVX512-FP16 allocates scratchpads of 387,328 and 550,656 B
        # here; a CUDA step has no such per-call scratch), is not one of the loss's tensors
        if abs(size) < least or abs(size) % tv:
            continue
        if size > 0:
            live[ptr] = n
            events.append(("alloc", size))
            n += 1
        else:
            events.append(("free", live.pop(ptr)))
    assert not live, "every [t, V] tensor of the step is freed by its end"
    return events


@pytest.mark.parametrize("dtype, c", [("bfloat16", 2), ("float16", 2), ("float32", 4)])
def test_eager_loss_sequence_is_torchs(dtype: str, c: int) -> None:
    assert measured_loss_events(dtype) == eager_loss_events(2 * 64, 1000, c)
    assert measured_loss_events(dtype, batch=1, seq=96, vocab=1531) == eager_loss_events(96, 1531, c)


class _Expandable:
    """One CUDA stream's large pool under expandable_segments:True (CUDACachingAllocator.cpp @ 001074d), as
    address-ordered cells: ``size[k]`` bytes in state ``state[k]``, 'a' (allocated), 'f' (free, mapped) or 'u'
    (unmapped: the segment's reserved address space, always the last cell here)."""

    def __init__(self) -> None:
        self.size: list[int] = [1 << 50]
        self.state: list[str] = ["u"]
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0

    def _expandable_size(self, k: int) -> int:
        return self.size[k] + (self.size[k + 1] if self.state[k + 1] == "u" else 0)

    def malloc(self, n: int) -> int:
        """Returns the block's address (its cell's offset)."""
        size = 512 * -(-n // 512)  # round_size
        # get_free_block: the smallest free block that fits (ties: lowest address), then, while it is expandable,
        # the next larger one if its expandable size is smaller
        free = sorted((b, k) for k, (b, st) in enumerate(zip(self.size, self.state, strict=True))
                      if st == "f" and b >= size)
        if free:
            j = 0
            while j + 1 < len(free) and self._expandable_size(free[j + 1][1]) < self._expandable_size(free[j][1]):
                j += 1
            pick = free[j][1]
        else:  # try_allocate_expandable_block: the free block before the unmapped space, mapped up to size in pages
            u = len(self.size) - 1
            pick = u - 1 if u > 0 and self.state[u - 1] == "f" else u
            mapped = PAGE * -(-(size - (self.size[pick] if pick < u else 0)) // PAGE)
            self.size[u] -= mapped
            self.reserved += mapped
            if pick < u:
                self.size[pick] += mapped
            else:
                self.size.insert(u, mapped)
                self.state.insert(u, "f")
        if self.size[pick] - size >= 512:  # should_split with expandable segments
            self.size.insert(pick + 1, self.size[pick] - size)
            self.state.insert(pick + 1, "f")
            self.size[pick] = size
        self.state[pick] = "a"
        self.allocated += self.size[pick]
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return sum(self.size[:pick])

    def free(self, addr: int) -> None:
        offsets = [sum(self.size[:k]) for k in range(len(self.size))]
        k = next(k for k, at in enumerate(offsets) if at == addr and self.state[k] == "a")
        self.state[k] = "f"
        self.allocated -= self.size[k]
        if self.state[k + 1] == "f":  # free_block -> try_merge_blocks with the block after it
            self.size[k] += self.size.pop(k + 1)
            self.state.pop(k + 1)
        if k > 0 and self.state[k - 1] == "f":  # and the one before
            self.size[k - 1] += self.size.pop(k)
            self.state.pop(k)

    def reset_peak(self) -> None:  # torch.cuda.reset_peak_memory_stats
        self.peak_reserved, self.peak_allocated = self.reserved, self.allocated


def _step(pool: _Expandable, activations: list[int], loss: list[tuple[str, int]]) -> list[int]:
    """One fixed-shape step: the forward's activations, the loss's events, the backward frees the activations last to
    first. Returns the allocated bytes at each moment."""
    kept = [pool.malloc(a) for a in activations]
    moments = [pool.allocated]
    addrs: list[int] = []
    for kind, n in loss:
        if kind == "alloc":
            addrs.append(pool.malloc(n))
        else:
            pool.free(addrs[n])
        moments.append(pool.allocated)
    for a in reversed(kept):
        pool.free(a)
        moments.append(pool.allocated)
    return moments


def _scaled(events: list[tuple[str, int]], tv0: int, tv: int) -> list[tuple[str, int]]:
    return [(k, n * tv // tv0 if k == "alloc" else n) for k, n in events]


@pytest.mark.parametrize("tokens", [16384, 32768])
@pytest.mark.parametrize("dtype, c", [("bfloat16", 2), ("float32", 4)])
def test_hole_of_the_measured_sequence_on_an_expandable_pool(tokens: int, dtype: str, c: int) -> None:
    # the sequence measured above at torchtitan's shapes (Llama 3 vocabulary, 2 x 8192 and the CP rows' 32768 tokens
    # per rank), between a forward's activations (each smaller than t V c, as a layer's are) and their backward
    vocab = 128256
    loss = _scaled(measured_loss_events(dtype), 2 * 64 * 1000, tokens * vocab)
    persistent, activations = 11 * 1024 * MiB, [300 * MiB + 2 * MiB * k for k in range(32)]
    pool = _Expandable()
    pool.malloc(persistent)  # weights and optimizer states, allocated once
    for step in range(3):
        if step == 1:
            pool.reset_peak()  # torchtitan's reset after the first step
        moments = _step(pool, activations, loss)
    replayed = pool.peak_reserved - pool.peak_allocated
    hole = CA.stream_trace_hole_bytes(eager_loss_events(tokens, vocab, c))
    assert hole == (tokens * vocab * 2 if c == 2 else 0)  # t V 2 B: the logits' place less the first gradient
    # eq. (R1) with H at the loss's moment of most live bytes: the replay's reserve, within its 20 MiB mapping pages
    at = max(range(len(moments)), key=moments.__getitem__)
    holes = [hole if k == at else 0 for k in range(len(moments))]
    r1 = CA.cross_stream_reserve([(persistent + a, 0) for a in moments], 0, holes)
    assert r1 <= replayed < r1 + PAGE, (r1 / MiB, replayed / MiB)


@pytest.mark.parametrize("tokens", [16384, 131072])
@pytest.mark.parametrize("c", [2, 4])
def test_loss_parallel_hole_on_an_expandable_pool(tokens: int, c: int) -> None:
    # eq. (L1p), the sequence tests/training/test_loss_parallel.py measures on two gloo ranks (torch's loss_parallel
    # through a ColwiseParallel lm_head), at torchtitan's TP 8 shard of Llama 3's vocabulary (128,256 / 8) and 2 x
    # 8192 / 16 x 8192 tokens, replayed on the expandable pool between a forward's activations and their backward
    shard = 128256 // 8
    loss = eager_loss_events(tokens, shard, c, loss_parallel=True)
    persistent, activations = 11 * 1024 * MiB, [300 * MiB + 2 * MiB * k for k in range(32)]
    pool = _Expandable()
    pool.malloc(persistent)
    for step in range(3):
        if step == 1:
            pool.reset_peak()
        moments = _step(pool, activations, loss)
    replayed = pool.peak_reserved - pool.peak_allocated
    hole = CA.stream_trace_hole_bytes(loss)
    # the logits, upcast and shifted leave 10 t V/tp below the kept log-softmax; grad_input and exp(x) take 8 of it
    # and their sum does not fit the 2 left (c = 4: no upcast, the 8 left fit the two exactly)
    tv = tokens * shard
    assert hole - (2 * tv if c == 2 else 0) in range(0, 2 * MiB)  # (fixed segments round each request to 2 MiB)
    at = max(range(len(moments)), key=moments.__getitem__)
    holes = [hole if k == at else 0 for k in range(len(moments))]
    r1 = CA.cross_stream_reserve([(persistent + a, 0) for a in moments], 0, holes)
    assert r1 <= replayed < r1 + PAGE, (r1 / MiB, replayed / MiB)


def test_hole_is_the_pools_growth_past_the_most_live_bytes() -> None:
    # two blocks freed together leave 6 units; the next two requests of 4 find only 2 above the first
    u = 64 * MiB
    ev = [("alloc", 2 * u), ("alloc", 4 * u), ("alloc", 4 * u), ("free", 1), ("free", 0), ("alloc", 4 * u),
          ("alloc", 4 * u)]
    assert CA.stream_trace_pool_bytes(ev) == 14 * u
    assert CA.stream_trace_hole_bytes(ev) == 2 * u
    # nothing freed before a larger request: no hole
    assert CA.stream_trace_hole_bytes([("alloc", u), ("alloc", 2 * u), ("free", 0), ("alloc", u)]) == 0


def test_reserve_takes_the_hole_only_at_its_moment() -> None:
    # the hole raises the default stream's high-water mark only where it stands
    assert CA.cross_stream_reserve([(100, 0), (80, 0)], 0, [0, 30]) == 10
    assert CA.cross_stream_reserve([(100, 0), (80, 0)], 0, [30, 0]) == 30
    with pytest.raises(InputError, match="holes for"):
        CA.cross_stream_reserve([(100, 0), (80, 0)], 0, [1])


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_eager_loss_events_refuse_bad_sizes(bad: object) -> None:
    with pytest.raises(InputError, match="positive whole number"):
        eager_loss_events(bad, 10, 2)  # type: ignore[arg-type]
