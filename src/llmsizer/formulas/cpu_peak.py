"""A CPU's peak arithmetic rate from its mechanism: cores x clock x operations per cycle per core.

A CPU core issues a fixed number of vector fused multiply-adds per cycle, each on a fixed number of lanes; the chip's
peak is that width times the cores and the clock they sustain::

    R_peak = N_cores x f x w,    w = n_FMA pipes x (vector bits / element bits) x 2 FLOP per FMA    (CP1)

with N_cores the physical cores that run the work, f [Hz] their clock and w [FLOP/cycle/core] the per-core width of
the micro-architecture (catalog/data/hardware/cpu_microarchitectures.json, each with its source). This is the
theoretical peak "Rpeak" of Dongarra's Linpack report and the TOP500 list: the floating-point additions and
multiplications a unit completes per cycle, times the clock, summed over the units (Wikipedia "Rpeak": an Itanium 2
at 1.5 GHz, 4 FLOP per cycle, is 6 GFLOP/s; the Gideon 300 cluster page, HKU: 'theoretical value as appeared in
Jack Dongarra's Linpack paper', 2 x 2200 MHz per P4). It is an upper bound a kernel reaches a share of (its
efficiency, estimate/efficiency.py COMPUTE), not a measured rate. Example: an AMD Zen 4 core runs
two 256-bit FMA pipes (AMD Software Optimization Guide for Zen 4 §2.11.1, as LLVM's X86ScheduleZnver4.td models it:
(v)FMA* on FP0 and FP1; 512-bit instructions double-pumped through the 256-bit hardware): w = 2 x 8 x 2 = 32 FP32
FLOP per cycle, so 16 cores at 4.5 GHz give 2.304 TFLOP/s.

A core's matrix unit (Intel AMX) has a width of its own, from its tile instruction's shape and issue rate::

    w = 2 x m x k x n / cycles per tile instruction                                                    (CP2)

and the same R_peak = N_cores x f x w with the same cores and clock (one clock for both peaks).
"""

from __future__ import annotations


def fma_width(pipes: int, vector_bits: int, element_bits: int) -> float:
    """w [FLOP/cycle/core] = pipes x vector_bits / element_bits x 2 (one FMA = 2 FLOP), eq. (CP1)."""
    if pipes <= 0 or vector_bits <= 0 or element_bits <= 0:
        raise ValueError("pipes, vector_bits and element_bits must be positive")
    return float(pipes * (vector_bits // element_bits) * 2)


def cpu_peak_flops(cores: float, clock_hz: float, flop_per_cycle_per_core: float) -> float:
    """R_peak [FLOP/s] = cores x clock [Hz] x FLOP per cycle per core, eq. (CP1)."""
    if cores <= 0 or clock_hz <= 0 or flop_per_cycle_per_core <= 0:
        raise ValueError("cores, clock_hz and flop_per_cycle_per_core must be positive")
    return float(cores) * float(clock_hz) * float(flop_per_cycle_per_core)


def matrix_tile_width(m: int, k: int, n: int, cycles: int) -> float:
    """w [FLOP/cycle/core] of a matrix unit: one tile instruction multiplies an m x k by a k x n tile into m x n
    (m x k x n multiply-adds, 2 FLOP each) and issues once per ``cycles`` cycles: w = 2 m k n / cycles, eq. (CP2),
    the width (CP1)'s R_peak takes for that unit's data type. Example: Intel AMX TDPBF16PS, a 16 x 32 BF16 tile by a
    32 x 16 one into 16 x 16 FP32 (Intel SDM, TDPBF16PS), once per 16 cycles: 2 x 16 x 32 x 16 / 16 = 1,024 BF16
    FLOP per cycle, Intel's '1024 BF16 operations per cycle' per 4th Gen Xeon core."""
    if m <= 0 or k <= 0 or n <= 0 or cycles <= 0:
        raise ValueError("m, k, n and cycles must be positive")
    return 2.0 * m * k * n / cycles
