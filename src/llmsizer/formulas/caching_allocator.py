"""PyTorch's CUDA caching allocator: the sizes it rounds a request to, as pure functions [bytes].

Read from c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch @ 001074d25084fdb87a799823e395a50f5ec044d3; the
constants follow the ``namespace Native`` comment block near the top of the file; line numbers are not quoted
because the 4 GB repository could not be fetched whole here: the functions are named instead):

    kMinBlockSize = 512            "all sizes are rounded to at least 512 bytes"
    kSmallSize    = 1 MiB          "largest 'small' allocation is 1 MiB"
    kSmallBuffer  = 2 MiB          "'small' allocations are packed in 2 MiB blocks"
    kMinLargeAlloc = 10 MiB        "allocations between 1 and 10 MiB may use kLargeBuffer"
    kLargeBuffer  = 20 MiB         "'large' allocations may be packed in 20 MiB blocks"
    kRoundLarge   = 2 MiB          "round up large allocations to 2 MiB"

    block(n)   = 512                        n < 512                                  round_size()        (1)
               = 512 ceil(n / 512)          otherwise (roundup_power2_divisions unset, the default)
    segment(b) = 2 MiB                      b <= 1 MiB  (small pool)                 get_allocation_size (2)
               = 20 MiB                     1 MiB < b < 10 MiB
               = 2 MiB ceil(b / 2 MiB)      b >= 10 MiB
    split      = remaining >= 512           small pool                               should_split()      (3)
               = remaining > 1 MiB          large pool (max_split_size unlimited by default)

A tensor's block is what ``torch.cuda.memory_allocated`` counts (``allocated_bytes`` grows by ``block->size``);
a new segment is what ``memory_reserved`` grows by (cudaMalloc of ``segment``). A block carved from a fresh
segment is the whole segment when the rest is not split off (3), e.g. an 11.5 MiB request takes its whole 12 MiB
segment. The OOM message's "Tried to allocate X" prints ``segment(block(n))`` (eq. 2 of eq. 1), which is how the
rules are tested against published logs (tests/formulas/test_caching_allocator.py).

What is not exact, and is modelled as a calibrated range instead (estimate/allocator.py): freed blocks the next
allocation of another size cannot reuse (fragmentation from variable shapes).

A cache grown by concatenation (transformers' default DynamicCache: ``DynamicLayer.update`` rebinds
``self.keys = torch.cat([self.keys, key_states], dim=-2)``, then the values, layer by layer) makes, every decode step
and in each of its L layers, a K block of t + 1 tokens while the one of t tokens is alive, then frees it; then the
same for V. Where every one of these blocks is >= kMinLargeAlloc (the prompt's block already is), each takes a
segment of its own (2) whose rest (< 2 MiB) no other K/V request fits, separate segments never merge, and a freed
segment serves only a request no larger (best fit). With p bytes per token of one layer's K (batch x KV heads x
head_dim x bytes), c(t) = segment(t p) the segment class of t tokens, a prompt of t_0 tokens and N decode steps:

    reserved = 2 L c(t_0) + sum_{c in F} 2 L c + sum_{c in R} c                                            (C1')
    F = the classes c(t_0 + s), s = 1..N, other than c(t_0): the first step in one finds every cached segment too
        small, so all 2 L blocks of that step take fresh segments (the old ones stay cached)
    R = the classes in which a step follows a step of the same class (c(t_0) when c(t_0 + 1) = c(t_0)): its first
        K finds all 2 L segments of the class in use and takes one spare, which then serves every later request of
        the class (the block a layer's K frees serves its V, that one's the next layer's K, ...)

Eq. (C1) of tests/formulas/test_concat_cache_fragmentation.py is (C1') where the prompt's block ends on a class
boundary and every later class holds at least two steps. It is the pool of the K/V requests alone: blocks other
tensors freed before (the prefill's activations) can serve some of F's requests (``concat_growth_reserved_bytes``'s
caller bounds that). Below 10 MiB the blocks share 20 MiB segments (2) and split (3): not derived in closed form
(eq. 4' replays it, at tens of milliseconds for 32 layers: too slow for an estimate).

Per-stream pools (fixed shapes). "Allocations are associated with a stream. Once freed, blocks can be re-allocated
on the same stream, but not on any other stream" (CUDACachingAllocator.cpp @ 001074d lines 56-57): ``get_free_block``
returns false unless the best-fit cached block ``(*it)->stream == p.stream()``, and a freed block goes back to its
own pool (``free_block``); only ``empty_cache`` returns segments to the driver. So every stream keeps its own
high-water mark reserved. With the same shapes every step (fixed-length batches) each stream's requests find the
blocks they left last step (best fit, same sizes), no stream's pool grows after the first step, and

    pool(s)   = the segments (2) that stream s's blocks live together take, packed by best fit and split (3)    (4)
    reserved  = max_p [A(p) - S(p) + H(p)] + pool(side streams)                                               (R1)
    reserve   = reserved - max_p A(p)  >= 0

where A(p) is the allocated bytes at moment p of the step and S(p) the part of them in side-stream blocks: the
default stream's pool is its own high-water mark max_p [A(p) - S(p) + H(p)], the side streams' pools are (4) of
their blocks. (4) is the pool without expandable segments; with ``expandable_segments:True`` a stream's segment grows
in 20 MiB pages of the large pool (the "Note [Expandable Segments]" of the same file), the same bytes within 20 MiB.
H(p) is a hole inside the default stream's own pool at moment p: free bytes below its live blocks that a later,
larger request could not use, so the pool grew past them. It is modelled where a stretch of the step's default-stream
allocations is known in order and made from fresh memory at the top of the pool (no block freed earlier in the step
fits its requests): H = eq. (4'') of that stretch at its moment of most live bytes (the eager loss's [t, V] tensors,
formulas/loss_allocations.py), 0 at the other moments; other holes are not in (R1).

A side stream whose blocks are not all alive together (FSDP2's all-gather copy-in stream: each unit's flat buffer is
freed after its copy-out) keeps what its allocations and frees, replayed in order, make it reserve: eq. (4'), the
same best-fit and split rules, a freed block merged with its free neighbours in its segment (``free_block`` ->
``try_merge_blocks``), a new segment (2) only when no cached block fits. What such a stretch of requests leaves
unusable below its live blocks is

    hole = pool(4') - max_k live(k)                                                                          (4'')

live(k) being the bytes of its blocks alive after its k-th event (a block counted as the cell it took: eq. 3). With
expandable segments a request no cached block fits is mapped at the segment's end, merged with a free block there
(``find_expandable_block``, ``map_block``, ``try_allocate_expandable_block``) and the rest of a block is split off
from 512 B (``should_split``); for the eager loss's sequences (formulas/loss_allocations.py eqs. L1, L1p) that
reserves the same bytes as (4') to within one 20 MiB page (tests/formulas/test_loss_allocations.py, an address-level
replay of those rules written from the C++).
"""

from __future__ import annotations

from ..errors import InputError

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
MIN_LARGE_ALLOC = 10 << 20
LARGE_BUFFER = 20 << 20
ROUND_LARGE = 2 << 20


def _check(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InputError(f"a request must be a non-negative whole number of bytes, got {n!r}")
    return n


def block_bytes(n: int) -> int:
    """Eq. (1): the block a request of ``n`` bytes gets (``round_size``)."""
    n = _check(n)
    return MIN_BLOCK if n < MIN_BLOCK else MIN_BLOCK * -(-n // MIN_BLOCK)


def segment_bytes(n: int) -> int:
    """Eq. (2) of eq. (1): the cudaMalloc a request of ``n`` bytes makes when no cached block fits."""
    b = block_bytes(n)
    if b <= SMALL_SIZE:
        return SMALL_BUFFER
    if b < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * -(-b // ROUND_LARGE)


def splits(segment: int, block: int) -> bool:
    """Eq. (3): whether the rest of a ``segment`` after a ``block`` is split off as a free block."""
    rest = segment - block
    return rest >= MIN_BLOCK if segment <= SMALL_BUFFER and block <= SMALL_SIZE else rest > SMALL_SIZE


def allocated_bytes(n: int) -> int:
    """Bytes ``memory_allocated`` counts for a request of ``n`` bytes served from a fresh segment: the block, or
    the whole segment when the rest is too small to split off (eq. 3)."""
    b, s = block_bytes(n), segment_bytes(n)
    return b if splits(s, b) else s


def rounding_bytes(sizes: list[int] | tuple[int, ...]) -> int:
    """Sum over the tensors of ``allocated_bytes(n) - n``: what the allocator's rounding adds to the tensors' own
    bytes when each gets a fresh segment (the exactly modelled part of reserved - live bytes)."""
    return sum(allocated_bytes(n) - n for n in sizes)


def stream_pool_bytes(requests: list[int] | tuple[int, ...]) -> int:
    """Eq. (4): what one stream's pool keeps reserved for ``requests`` [bytes each, in the order made] that are
    alive together and made again with the same sizes every step. The first step packs them as the allocator does:
    each takes the smallest cached rest of its own pool (small <= 1 MiB, large) that fits, else a fresh
    ``segment`` (eq. 2), and the rest of what it took is split off when eq. (3) allows; later steps find the same
    blocks again (best fit, same sizes)."""
    rests: dict[bool, list[int]] = {True: [], False: []}  # cached rests of the small and the large pool
    total = 0
    for n in requests:
        b = block_bytes(n)
        pool = rests[b <= SMALL_SIZE]
        fits = [r for r in pool if r >= b]
        if fits:
            whole = min(fits)
            pool.remove(whole)
        else:
            whole = segment_bytes(n)
            total += whole
        if splits(whole, b):
            pool.append(whole - b)
    return total


def cross_stream_reserve(moments: list[tuple[int, int]] | tuple[tuple[int, int], ...], side_pool: int,
                         holes: list[int] | tuple[int, ...] = ()) -> int:
    """Eq. (R1): reserved - allocated under fixed shapes. ``moments``: (allocated bytes, of them in side-stream
    blocks) at each moment of the step; ``side_pool``: eq. (4) over the side streams' blocks; ``holes``: H(p), the
    default stream's hole at each moment (eq. 4''; empty: none)."""
    if not moments:
        raise InputError("a step needs at least one moment")
    if holes and len(holes) != len(moments):
        raise InputError(f"{len(holes)} holes for {len(moments)} moments; give one per moment or none")
    for a, s in moments:
        _check(a), _check(s)
        if s > a:
            raise InputError(f"side-stream bytes {s} exceed the allocated bytes {a} of their moment")
    default_pool = max(a - s + (_check(holes[k]) if holes else 0) for k, (a, s) in enumerate(moments))
    return max(0, default_pool + _check(side_pool) - max(a for a, _ in moments))


def stream_trace_pool_bytes(events: list[tuple[str, int]] | tuple[tuple[str, int], ...]) -> int:
    """Eq. (4'): what one stream's pool keeps reserved for a step's ``events``, made again the same every step:
    ``("alloc", bytes)`` makes a block, ``("free", k)`` frees the block of the k-th alloc (0-based). Each alloc
    takes the smallest free block of its pool (small <= 1 MiB, large) that fits, else a fresh ``segment`` (eq. 2);
    the rest is split off when eq. (3) allows; a freed block merges with free neighbours of its segment."""
    return _replay(events)[0]


def stream_trace_hole_bytes(events: list[tuple[str, int]] | tuple[tuple[str, int], ...]) -> int:
    """Eq. (4''): the bytes the pool of eq. (4') over ``events`` keeps beyond the most of its blocks alive at once
    (free below live blocks when the pool had to grow)."""
    total, peak = _replay(events)
    return total - peak


def _replay(events: list[tuple[str, int]] | tuple[tuple[str, int], ...]) -> tuple[int, int]:
    """(eq. 4' pool, the most bytes of blocks alive at once) of ``events``."""
    # segments: [pool is small, [[size, free], ...] in address order]
    segments: list[tuple[bool, list[list[int]]]] = []
    where: list[int] = []  # the alloc's segment
    blocks: list[list[int]] = []  # the alloc's block (a [size, free] cell of its segment's list)
    sizes: list[int] = []  # the alloc's block bytes (an allocated cell never changes size)
    total = live = peak = 0
    for kind, n in events:
        if kind == "free":
            if not 0 <= n < len(blocks) or blocks[n][1]:  # (a merged-away cell stays marked free)
                raise InputError(f"free of block {n}: no such allocated block")
            cell = blocks[n]
            cell[1] = 1
            live -= sizes[n]
            seg = segments[where[n]][1]
            i = next(k for k, c in enumerate(seg) if c is cell)
            if i + 1 < len(seg) and seg[i + 1][1]:  # merge with the free block after it
                cell[0] += seg.pop(i + 1)[0]
            if i > 0 and seg[i - 1][1]:  # and the one before
                seg[i - 1][0] += seg.pop(i)[0]
            continue
        if kind != "alloc":
            raise InputError(f"unknown allocator event {kind!r}; choose alloc or free")
        b = block_bytes(n)
        small = b <= SMALL_SIZE
        fits = [(c[0], s_i, k) for s_i, (sm, seg) in enumerate(segments) if sm == small
                for k, c in enumerate(seg) if c[1] and c[0] >= b]
        if fits:
            _, s_i, k = min(fits)
        else:
            size = segment_bytes(n)
            total += size
            segments.append((small, [[size, 1]]))
            s_i, k = len(segments) - 1, 0
        seg = segments[s_i][1]
        cell = seg[k]
        if splits(cell[0], b):
            seg.insert(k + 1, [cell[0] - b, 1])
            cell[0] = b
        cell[1] = 0
        blocks.append(cell)
        where.append(s_i)
        sizes.append(cell[0])
        live += cell[0]
        peak = max(peak, live)
    return total, peak


def concat_growth_in_closed_form(per_token: int, prompt: int) -> bool:
    """Whether eq. (C1') holds: the prompt's K block of one layer (``prompt`` x ``per_token`` bytes) is already
    >= kMinLargeAlloc, so every block of the growth takes segments of its own."""
    return block_bytes(_check(prompt) * _check(per_token)) >= MIN_LARGE_ALLOC


def concat_growth_reserved_bytes(layers: int, per_token: int, prompt: int, steps: int) -> int:
    """Eq. (C1'): the segments a cache grown by concatenation makes its pool reserve [bytes] over ``steps`` decode
    steps after a ``prompt`` of tokens, ``layers`` layers each holding a K and a V of ``per_token`` bytes per token
    (module docstring). Refused outside the large-block regime (``concat_growth_in_closed_form``)."""
    layers, per_token, prompt, steps = _check(layers), _check(per_token), _check(prompt), _check(steps)
    if not concat_growth_in_closed_form(per_token, prompt):
        raise InputError(f"eq. (C1') needs the prompt's K block >= 10 MiB, got {prompt} tokens x {per_token} B")

    def cls(t: int) -> int:
        return segment_bytes(t * per_token)

    c0 = cls(prompt)
    total = 2 * layers * c0
    if steps and 2 * per_token <= ROUND_LARGE:
        # at most 1 MiB a token: no class is skipped and every class wholly inside the growth holds >= 2 steps, so
        # F = k0+1..kN and R = k0+1..kN-1, kN where it holds two steps, k0 where the first step stays in it (classes
        # as multiples k of 2 MiB: a block's 512 B rounding never moves it across a 2 MiB boundary)
        k0, kn = c0 // ROUND_LARGE, cls(prompt + steps) // ROUND_LARGE
        if kn == k0:
            return total + c0
        ks = (kn * (kn + 1) - k0 * (k0 + 1)) // 2  # k0+1 + ... + kn
        last_steps = prompt + steps - (kn - 1) * ROUND_LARGE // per_token
        spare = ks - (0 if last_steps >= 2 else kn) + (k0 if cls(prompt + 1) == c0 else 0)
        return total + ROUND_LARGE * (2 * layers * ks + spare)
    # class by class (a class spans ROUND_LARGE / per_token tokens): the steps t_lo..t_hi (tokens after the step)
    # in class c; O(classes), not O(steps)
    t, end = prompt + 1, prompt + steps
    prev = c0
    while t <= end:
        c = cls(t)
        last = min(end, (c // MIN_BLOCK * MIN_BLOCK) // per_token)  # the most tokens whose block is still <= c
        while last < end and cls(last + 1) == c:  # (integer division can stop one short)
            last += 1
        if c != prev:
            total += 2 * layers * c
        if last > t or c == prev:  # a step follows one of the same class: one spare segment
            total += c
        prev, t = c, last + 1
    return total
