"""How well a matrix multiplication of a given shape uses a GPU: the roofline of its arithmetic intensity and the
quantization of its output into tiles.

NVIDIA, "Matrix Multiplication Background User's Guide" (Deep Learning Performance documentation,
docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication), for C[M, N] = A[M, K] B[K, N]
in elements of b bytes:

    arithmetic intensity   I = 2 M N K / (b (M K + K N + M N))        [FLOP/B]                      (1)

(section 2.1 "Math and Memory Bounds": the GEMM is limited by memory when I is below the device's ratio of
math throughput to memory bandwidth). Its time on a device of sustained math rate R u and memory bandwidth B::

    t = max(2 M N K / (R u), b (M K + K N + M N) / B)                                             (2)

Tile quantization (section 4.1): the output is cut into thread-block tiles; a dimension that is not a multiple of
the tile leaves the last tile partly idle, so a dimension x >= T runs at x / (ceil(x / T) T) of its work::

    q(x) = x / (ceil(x / T) T)   for x >= T;   1 for x < T (cuBLAS then takes a smaller tile:
                                                cublasLtMatmulTile_t goes down to 8 x 8)                 (3)

with T = 128, the smaller side of the guide's 256 x 128 example tile.

Wave quantization (section 4.2): the tiles run in waves of one tile per SM (the guide's A100 example: "256x128
thread block tiles ... one thread block per SM, leading to a wave size of 108 tiles"), so n tiles on S SMs take
ceil(n / S) waves and the last one runs partly idle::

    w(n) = n / (ceil(n / S) S)                                                                        (5)

A group of G equal GEMMs (one per local expert) of which at most c run side by side (TransformerEngine's grouped
GEMM: one cuBLAS GEMM per expert, expert i on compute stream i mod 4, TransformerEngine @d0067d0d
common/gemm/cublaslt_gemm.cu lines 970-1021 ``multi_stream_cublas_gemm``, common/util/multi_stream.cpp line 53
``num_compute_streams = 4``), each of n_t = ceil(M / T_a) ceil(N / T_b) tiles (T_a x T_b = 256 x 128 in the
orientation that leaves fewer SMs idle, as a heuristic choosing the tile would): the streams' GEMMs run as concurrent
kernels, so the SMs one GEMM's last wave leaves take the tiles of the GEMMs in flight beside it, and a stream starts
its next GEMM when its last one ends. With every tile the same time and free SMs taking pending tiles, the group
takes at least the more of the work's waves and one stream's G / c GEMMs one after another, and its useful share
of the SMs' tile slots is::

    w_G = G M N / (T_a T_b S max(ceil(G n_t / S), ceil(G / c) ceil(n_t / S)))                         (6)

(the tiles' own quantization, eq. (3) of that tile, times the idle SMs; an event simulation of that schedule ends
when eq. (6) says but where c GEMMs in flight hold a few more tiles than the SMs, then up to 2 waves later,
tests/formulas/test_gemm_shapes.py; with c = G = 1, M N / (n_t T_a T_b) x eq. (5)). A side takes the 256 or 128 of
the tile only where the dimension reaches it; below, as eq. (3) says, cuBLAS takes a smaller tile, the power of two
that covers the dimension, at least 8 (cublasLtMatmulTile_t's sides: 8 x 8 up)::

    T(x, side) = min(side, max(8, 2^ceil(log2 x)))                                                    (6a)

The tile and wave quantization idle the SMs' math, not the memory reads, so a grouped expert GEMM of eq. (2)'s
operand bytes takes t = max(2 M N K / (R u w_G), bytes / B): its e_g of eq. (4) is min(w_G, I B / (R u)), the
roofline's memory bound unchanged by the idle tile slots.

Every expert of a Megatron-Core MoE layer gets its own GEMMs; with balanced routing (Megatron's
``moe_router_force_load_balancing``: random router logits, balanced in expectation, Megatron-LM @d7288711
megatron/core/transformer/moe/router.py lines 697-699) each local expert's rows are the tokens its
expert-parallel group routes to it::

    M_e = (T / tp) etp ep k / E                                                                       (7)

over the T tokens of a device's micro-batch, split over tp ranks by sequence parallelism before the dispatch and
gathered over the etp ranks of an expert's tensor-parallel group (MoEAlltoAllTokenDispatcher: the all-to-all over
ep, megatron/core/transformer/moe/token_dispatcher.py lines 671-676, then the all-gather over the expert
tensor-parallel group, lines 696-706), k routed experts per token of E: the E / ep local experts of width I / etp
then hold (T / tp) etp k rows, the FLOPs of k expert MLPs of width I / tp per token.

Where M_e is small an expert may get no row, and TransformerEngine's grouped GEMM launches no GEMM for an empty
split (TransformerEngine @d0067d0d pytorch/csrc/extensions/gemm.cpp lines 535-542: ``if (te_A.numel() == 0 ||
te_B.numel() == 0) { ... continue; }``, the output zeroed where it is not accumulated). Under the forced balancing each of the N = M_e E / k tokens that
reach a device picks an expert with probability k / E (k distinct experts of E, uniformly at random), so of the
L = E / ep local experts the expected number with at least one row (the occupancy of L bins) and their rows are::

    G_ne = L (1 - (1 - k / E)^N),   M_ne = L M_e / G_ne                                               (8)

(G_ne rounded to the nearest whole GEMM, at least 1; M_ne then keeps the L M_e rows: the FLOPs are conserved).
The empty share (1 - k / E)^N is at most e^-M_e, so G_ne = L once L e^-M_e < 1/2 (M_e = 16 on up to 10^6 experts).

Training runs three GEMMs per linear layer of input width k and output width n over t tokens (Kaplan et al.
2020, section 2.1): the forward (M t, N n, K k), the gradient of its input (M t, N k, K n) and, for a trained
weight only, the gradient of the weight (M n, N k, K t). The shape efficiency of a step is the FLOP-weighted
harmonic mean over its GEMMs::

    e = sum_g F_g / sum_g (F_g / e_g),   e_g = F_g / (R u t_g) x q(M_g) q(N_g)                     (4)

(a grouped expert GEMM's e_g times its w_G of eq. (6)).
"""

from __future__ import annotations

import math
import sys
from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import Hashable, Iterable, Sequence
from functools import reduce
from itertools import chain
from operator import add, itemgetter
from typing import TypeVar

from ..errors import InputError

H = TypeVar("H", bound=Hashable)

TILE = 128  # the smaller side of the Matrix Multiplication Background guide's 256 x 128 example tile


def arithmetic_intensity(m: float, n: float, k: float, elem_bytes: float = 2.0) -> float:
    """Eq. (1): FLOPs per byte moved of an M x K by K x N GEMM."""
    if min(m, n, k) <= 0 or elem_bytes <= 0:
        raise InputError("GEMM dimensions and element size must be positive")
    return 2.0 * m * n * k / (elem_bytes * (m * k + k * n + m * n))


def tile_quantization(x: float, tile: int = TILE) -> float:
    """Eq. (3): the share of useful work in the tiles that cover a dimension of ``x``."""
    if x < tile:
        return 1.0
    return x / (math.ceil(x / tile) * tile)


def gemm_efficiency(m: float, n: float, k: float, math_rate: float, bandwidth: float,
                    elem_bytes: float = 2.0) -> float:
    """Eqs. (2)-(3): the share of ``math_rate`` (sustained FLOP/s, R u) one GEMM reaches; memory-bound shapes run at
    ``bandwidth`` [B/s]."""
    if math_rate <= 0 or bandwidth <= 0:
        raise InputError("math rate and bandwidth must be positive")
    roof = min(1.0, arithmetic_intensity(m, n, k, elem_bytes) * bandwidth / math_rate)
    return roof * tile_quantization(m) * tile_quantization(n)


WAVE_TILE = (256, 128)  # section 4.2's example tile, one thread block per SM
TE_GROUPED_GEMM_STREAMS = 4  # TransformerEngine @d0067d0d common/util/multi_stream.cpp line 53


def wave_quantization(tiles: int, sms: int) -> float:
    """Eq. (5): the share of busy SM slots when ``tiles`` tiles run in waves of one tile per SM on ``sms`` SMs.

    >>> wave_quantization(108, 108), wave_quantization(109, 108)
    (1.0, 0.5046296296296297)
    """
    if tiles < 1 or sms < 1:
        raise InputError("tiles and SMs must be at least 1")
    return tiles / (math.ceil(tiles / sms) * sms)


def gemm_tiles(m: float, n: float, tile: tuple[int, int] = WAVE_TILE) -> int:
    """Output tiles of an M x N GEMM cut into ``tile`` (rows, columns): ceil(M / T_a) ceil(N / T_b)."""
    if m <= 0 or n <= 0:
        raise InputError("GEMM dimensions must be positive")
    return math.ceil(m / tile[0]) * math.ceil(n / tile[1])


SMALLEST_TILE = 8  # cublasLtMatmulTile_t's smallest side (CUBLASLT_MATMUL_TILE_8x8)


def grouped_tile(x: float, side: int) -> int:
    """Eq. (6a): the tile side cuBLAS takes for a dimension of ``x``: ``side`` where x reaches it, else the power of
    two that covers x, at least 8.

    >>> grouped_tile(1024, 256), grouped_tile(16, 256), grouped_tile(1.3, 128), grouped_tile(100, 128)
    (256, 16, 8, 128)
    """
    if x <= 0:
        raise InputError("GEMM dimensions must be positive")
    return side if x >= side else min(side, max(SMALLEST_TILE, 1 << math.ceil(math.log2(x))))


def grouped_wave_efficiency(m: float, n: float, gemms: int, sms: int, concurrent: int = TE_GROUPED_GEMM_STREAMS,
                            tile: tuple[int, int] = WAVE_TILE) -> float:
    """Eq. (6): the useful share of the SMs' tile slots (tile and wave quantization) for ``gemms`` equal M x N
    GEMMs, at most ``concurrent`` in flight, on ``sms`` SMs, the tile in its better orientation.

    >>> round(grouped_wave_efficiency(1024, 5760, 1, 132), 4)  # one expert's fc1 on an H100: 2 waves of 132
    0.6818
    >>> round(grouped_wave_efficiency(1024, 5760, 16, 132), 4)  # 16 experts: 2880 tiles in 22 waves
    0.9917
    """
    if gemms < 1 or concurrent < 1 or sms < 1:
        raise InputError("GEMM count, concurrency and SMs must be at least 1")
    best = 0.0
    for a, b in sorted({(grouped_tile(m, t_a), grouped_tile(n, t_b)) for t_a, t_b in (tile, tile[::-1])}):
        n_t = gemm_tiles(m, n, (a, b))
        waves = max(math.ceil(gemms * n_t / sms), math.ceil(gemms / concurrent) * math.ceil(n_t / sms))
        best = max(best, gemms * m * n / (a * b * waves * sms))
    return best


def expert_rows(tokens: float, top_k: int, experts: int, ep: int = 1, tp: int = 1, etp: int = 1) -> float:
    """Eq. (7): the rows each local expert's GEMMs take per micro-batch under balanced routing, M_e = (T / tp) etp
    ep k / E.

    >>> expert_rows(4096, 4, 128, ep=8)  # gpt-oss-120b, EP 8: 16 local experts of 1024 rows
    1024.0
    """
    if tokens <= 0 or min(top_k, experts, ep, tp, etp) < 1 or top_k > experts or experts % ep:
        raise InputError("expert rows need positive tokens, 1 <= top_k <= experts and ep dividing the experts")
    return tokens / tp * etp * ep * top_k / experts


def occupied_experts(rows: float, local: int, top_k: int, experts: int) -> tuple[int, float]:
    """Eq. (8): (G_ne, M_ne), the GEMMs of ``local`` experts that get a row when each gets ``rows`` (M_e, eq. (7))
    in expectation, and the rows of each, under balanced random routing of ``top_k`` of ``experts`` experts.

    >>> occupied_experts(0.5, 16, 8, 128)  # Qwen3-30B-A3B, EP 8, one token per device: 8 rows over 16 experts
    (6, 1.3333333333333333)
    >>> occupied_experts(1024.0, 16, 4, 128)
    (16, 1024.0)
    """
    if rows <= 0 or local < 1 or not 1 <= top_k <= experts:
        raise InputError("occupied experts need positive rows, a local expert and 1 <= top_k <= experts")
    tokens = rows * experts / top_k
    gemms = max(1, round(local * -math.expm1(tokens * math.log1p(-top_k / experts))))
    return gemms, local * rows / gemms


def training_gemms(tokens: int, linears: Iterable[tuple[int, int, bool]]) -> list[tuple[int, int, int]]:
    """The (M, N, K) of every GEMM of one training step's linear layers: (input width, output width, trained)
    per linear; forward and input gradient always, weight gradient for trained weights only."""
    out: list[tuple[int, int, int]] = []
    for k, n, trained in linears:
        out += ((tokens, n, k), (tokens, k, n), (n, k, tokens)) if trained else ((tokens, n, k), (tokens, k, n))
    return out


def shape_efficiency(gemms: Iterable[tuple[int, int, int]], math_rate: float, bandwidth: float,
                     elem_bytes: float = 2.0) -> float:
    """Eq. (4): FLOP-weighted harmonic mean of :func:`gemm_efficiency` over ``gemms`` (1.0 for none)."""
    return block_shape_efficiency((tuple(gemms),), math_rate, bandwidth, elem_bytes)


def block_shape_efficiency(blocks: Sequence[Sequence[tuple[int, int, int]]], math_rate: float, bandwidth: float,
                           elem_bytes: float = 2.0) -> float:
    """Eq. (4) over the GEMMs of ``blocks`` taken in order (a training step's: one block per decoder layer, then the
    head's), equal bit for bit to :func:`shape_efficiency` of all of them: both sums add the same terms in the same
    order. A block passed again as the same object (every layer of one kind) reuses its terms, and each distinct
    GEMM shape's efficiency is computed once."""
    per_shape: dict[tuple[int, int, int], tuple[float, float]] = {}  # (F_g, F_g / e_g) of each distinct shape
    # each distinct block (by identity: the blocks are alive for the whole call, so an id is not reused) once:
    # (its F_g in order, its F_g / e_g in order, its FLOPs as an integer or -1), and how many times it comes
    distinct = dict(zip(map(id, blocks), blocks, strict=True))
    done: dict[int, tuple[list[float], list[float], int]] = {}
    for key, block in distinct.items():
        for g in dict.fromkeys(block):
            if g not in per_shape:
                m, n, k = g
                f = 2.0 * m * n * k
                per_shape[g] = (f, f / gemm_efficiency(m, n, k, math_rate, bandwidth, elem_bytes))
        fs, ts = (list(col) for col in zip(*map(per_shape.__getitem__, block), strict=True)) if block else ([], [])
        done[key] = (fs, ts, sum(map(int, fs)) if all(map(float.is_integer, fs)) else -1)
    order = list(map(done.__getitem__, map(id, blocks)))
    # the FLOPs as an integer (each distinct block's times its count: integers, so any grouping is exact): while it
    # stays below 2^53 every running float sum of them is exact
    counts = tally(map(id, blocks))
    exact = -1 if any(done[key][2] < 0 for key in counts) else sum(done[key][2] * c for key, c in counts.items())
    time = running_sum(chain.from_iterable(map(itemgetter(1), order)))
    total = float(exact) if 0 <= exact <= 2**53 else running_sum(chain.from_iterable(map(itemgetter(0), order)))
    return total / time if time else 1.0


def running_sum(xs: Iterable[float]) -> float:
    """((0.0 + x0) + x1) + ...: the sum a running ``+=`` loop makes, at C speed. Python 3.12+ ``sum()`` compensates
    its rounding (Neumaier), so there the fold is explicit; up to 3.11 ``sum()`` of floats is that loop."""
    return sum(xs, 0.0) if _SUM_IS_RUNNING else reduce(add, xs, 0.0)


_SUM_IS_RUNNING = sys.version_info < (3, 12)


def tally(xs: Iterable[H]) -> dict[H, int]:
    """How many times each distinct item of ``xs`` comes, in order of first appearance: ``dict(Counter(xs))``,
    counted by the C helper ``Counter`` itself uses (``collections._count_elements``) without ``Counter``'s
    Python-level ``__init__`` and ``update`` (an ABC check per call), which the estimate's sums over layers alike
    would pay several times per estimate."""
    out: dict[H, int] = {}
    _count_elements(out, xs)
    return out
