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

with T = 128, the smaller side of the guide's 256 x 128 example tile. Wave quantization (section 4.2: the number
of tiles against the number of SMs) needs the SM count, which the catalog does not hold; it is not modelled.

Training runs three GEMMs per linear layer of input width k and output width n over t tokens (Kaplan et al.
2020, section 2.1): the forward (M t, N n, K k), the gradient of its input (M t, N k, K n) and, for a trained
weight only, the gradient of the weight (M n, N k, K t). The shape efficiency of a step is the FLOP-weighted
harmonic mean over its GEMMs::

    e = sum_g F_g / sum_g (F_g / e_g),   e_g = F_g / (R u t_g) x q(M_g) q(N_g)                     (4)
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
