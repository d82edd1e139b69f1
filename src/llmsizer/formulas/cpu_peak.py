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
