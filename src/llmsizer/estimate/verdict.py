"""Does it fit? The one rule every command uses: headroom, budget and verdict.

    budget = device memory x (1 - headroom)                                                   (1)
    fits   = expected need <= budget                                                          (2)
    vLLM:  fits = sequences the KV pool admits >= sequences run at once, with gpu_memory_utilization = 1 - headroom
           (run at once: min(concurrency, max_num_seqs), estimate/inference/common.py eq. R1)                 (3)

(1)-(2): the headroom is a policy default (``DEFAULT_HEADROOM``, 10 %): memory kept free for allocator
fragmentation, other processes and, for RAM, no swapping. It is recorded as an assumption wherever it applies,
and the verdict states that it uses the expected (middle) value of the range; when the high end does not fit a
warning says so, naming which high end: the components' ranges or, where the kind has validation rows, the
calibrated range (estimate/ranges.py via estimate/allocator.py ``calibrated_need``), whichever is higher. (3): vLLM reserves ``gpu_memory_utilization`` x memory at start-up and admits the sequences
its KV pool holds (vllm/worker/gpu_worker.py ``determine_available_memory``); its default 0.9 equals
1 - DEFAULT_HEADROOM, so the two conventions coincide when neither is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frozen import fast_init
from ..numbers import HEADROOM, check_number
from ..result import Assumption
from ..units import format_bytes

# Memory kept free on top of the estimate (allocator fragmentation, other processes, swap-free margin for RAM).
# A policy default, not a measurement: recorded as an assumption and settable (--headroom).
DEFAULT_HEADROOM = 0.10
HEADROOM_WHY = "memory kept free on each device (fragmentation, other processes, no swapping)"


def check_headroom(headroom: float | None) -> float:
    """The headroom in force: ``headroom`` validated, or DEFAULT_HEADROOM when None."""
    if headroom is None:
        return DEFAULT_HEADROOM
    # the range the command line and request files take (numbers.HEADROOM), with their words
    return float(check_number(headroom, "headroom", HEADROOM))


def headroom_assumption(headroom: float | None) -> Assumption:
    return Assumption("headroom", check_headroom(headroom), headroom is None, HEADROOM_WHY)


def budget_term(basis: str) -> str:
    """What a ``Verdict.budget`` is, in words (docs/nomenclature.md): eq. (1)'s "budget" (basis "expected"), or,
    under a pool engine's admission rule (eq. 3), the "device memory" the engine sizes its pool from. A pool engine's
    budget in the glossary's sense is what its pool offers the workload (``workload_budget_bytes``)."""
    return "budget" if basis == "expected" else "device memory"


def pool_budget_words(engine: str) -> str:
    """How a pool engine's budget (what its pool offers the workload, ``workload_budget_bytes``) is described."""
    return f"what {engine}'s pool offers the workload, with the CUDA context"


def memory_budget(usable: int, headroom: float) -> int:
    """Eq. (1): bytes a workload may use on a device of ``usable`` bytes."""
    return int(usable * (1 - headroom))


def fits_budget(need: int, usable: int, headroom: float) -> bool:
    """Eq. (2): whether an expected need [bytes per device] fits a device of ``usable`` bytes: ``memory_verdict``'s
    ``fits`` without its words (a search that only compares stages)."""
    return need <= memory_budget(usable, headroom)


@fast_init
@dataclass(frozen=True)
class Verdict:
    """The fit verdict for one device: need against budget, and why."""

    fits: bool
    need: int  # expected bytes per device
    need_high: int
    usable: int  # device memory
    headroom: float
    budget: int  # usable x (1 - headroom); vLLM: usable (its pool is utilization x usable, eq. 3)
    basis: str  # "expected" (eq. 2) or "vllm-admission" (eq. 3)
    reason: str
    warnings: tuple[str, ...] = ()
    high_basis: str = "high end"  # which high end the reason and warnings quote ("calibrated high end": ranges.py)

    @property
    def headroom_bytes(self) -> int:
        return self.budget - self.need

    def details(self) -> dict[str, object]:
        return {"fits": self.fits, "memory_budget": self.budget, "device_memory": self.usable,
                "headroom": self.headroom, "headroom_bytes": self.headroom_bytes, "verdict_basis": self.basis,
                "verdict_high": self.need_high, "verdict_high_basis": self.high_basis, "verdict": self.reason}


def memory_verdict(need: int, need_high: int, usable: int, headroom: float,
                   calibrated: dict[str, object] | None = None) -> Verdict:
    """Eqs. (1)-(2) for an expected need and the high end of its range [bytes per device]. With ``calibrated`` (the
    calibrated range of the need, estimate/allocator.py ``calibrated_need``) the high end is the larger of the
    components' high end and the calibrated high, and the reason names which one it is."""
    budget = memory_budget(usable, headroom)
    fits = fits_budget(need, usable, headroom)
    bound = "high end"
    if calibrated is not None and int(calibrated["high"]) > need_high:  # type: ignore[call-overload]
        need_high, bound = int(calibrated["high"]), "calibrated high end"  # type: ignore[call-overload]
    reason = (f"needs {format_bytes(need)} per device (the expected value; {bound} {format_bytes(need_high)}) "
              f"of a {format_bytes(budget)} budget ({format_bytes(usable)} x (1 - {headroom:g} headroom))")
    warnings: tuple[str, ...] = ()
    if not fits:
        warnings = (f"does not fit: needs {format_bytes(need)} ({bound} {format_bytes(need_high)}) but the budget "
                    f"is {format_bytes(budget)} ({format_bytes(usable)} x (1 - {headroom:g} headroom))",)
    elif need_high > budget:
        warnings = (f"fits at the expected {format_bytes(need)} but not at the {bound} {format_bytes(need_high)} "
                    f"of the range (budget {format_bytes(budget)})",)
    return Verdict(fits, need, need_high, usable, headroom, budget, "expected", reason, warnings, bound)


def admission_verdict(admitted: int, concurrency: int, context: int, need: int, usable: int,
                      utilization: float, *, engine: str = "vLLM", pool: str = "KV pool",
                      knob: str = "gpu_memory_utilization", requested: int | None = None) -> Verdict:
    """Eq. (3): a pool engine (vLLM; SGLang with its token pool and mem_fraction_static) fits when its pool admits
    ``concurrency`` sequences of ``context`` tokens: those it runs at once (``requested`` more are asked, the others
    wait in its queue: estimate/inference/common.py eq. R1)."""
    fits = admitted >= concurrency
    asked = ("requested" if requested is None or requested == concurrency
             else f"would run at once (its running cap) of {requested} requested")
    budget = usable  # the engine sizes its pool from the whole device (utilization x memory)
    at = "utilization" if knob == "gpu_memory_utilization" else knob
    reason = (f"{engine} {pool} holds {admitted} sequence(s) of {context} tokens at {at} {utilization:.2f}"
              + ("" if fits else f"; {concurrency} {asked}"))
    warnings: tuple[str, ...] = ()
    if not fits:
        warnings = (f"does not fit: {engine} admits {admitted} sequence(s) of {context} tokens at once, "
                    f"{concurrency} {asked} ({knob} {utilization:.2f} of {format_bytes(usable)})",)
    basis = "vllm-admission" if engine == "vLLM" else f"{engine.lower()}-admission"
    # the headroom the pool leaves, 1 - utilization, to the digits a headroom is given in (0.1, not 1 - 0.9 in floats)
    return Verdict(fits, need, need, usable, round(1 - utilization, 9), budget, basis, reason, warnings)
