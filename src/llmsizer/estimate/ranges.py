"""Calibrated ranges: how far a measured value may lie from llmsizer's expected value, per kind and engine.

A band (low, high) says: of the project's own validation rows of this kind and engine (``validation/``, the rows
``llmsizer validate`` summarises: calibration rows, rows with assumed settings and lower bounds left out), at least
90 % have measured / expected inside [low, high]. The range of a new estimate is then
[expected x low, expected x high] (``calibrated_range``).

Derivation (``band``, re-derived from the rows by tests/validation/test_ranges.py, so a band that no longer matches
its rows fails there): sort the n ratios measured / expected and drop floor(0.05 n) from each end; low and high are
the smallest and largest kept ratio, stated to 4 decimals rounded outwards. With fewer than 20 rows nothing is dropped (the band is
the rows' full span). The coverage on the same rows is therefore at least 90 % by construction; the report also
gives the leave-one-out coverage (each row judged by the band of the other rows), the honest out-of-sample figure.
A kind/engine with no validation rows has no calibrated range (None): the estimate then carries only its own
component ranges.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

COVERAGE = 0.90

# the kinds of figure a band is for (validation_cases uses the same names for its rows)
INFERENCE_MEMORY = "inference memory"
TRAINING_MEMORY = "training memory"
DECODE = "decode throughput"
BATCHED = "batched decode throughput"
PREFILL = "prefill throughput"
TRAINING_SPEED = "training throughput"
# engines: the serving or training software whose behaviour the rows measured
LLAMACPP, VLLM, TRANSFORMERS, PYTORCH_TRAINING = "llama.cpp", "vllm", "transformers", "pytorch training"


@dataclass(frozen=True)
class Band:
    kind: str
    engine: str
    low: float  # measured / expected, lower end
    high: float
    rows: int

    def to_dict(self) -> dict[str, float | int | str]:
        return {"kind": self.kind, "engine": self.engine, "low": self.low, "high": self.high, "rows": self.rows,
                "coverage_target": COVERAGE}


def band(ratios: list[float], coverage: float = COVERAGE) -> tuple[float, float]:
    """(low, high) of measured / expected ratios holding at least ``coverage`` of them (see the module doc)."""
    if not ratios:
        raise InputError("a band needs at least one ratio")
    if not 0 < coverage <= 1:
        raise InputError(f"coverage must be in (0, 1], got {coverage}")
    xs = sorted(ratios)
    drop = int(len(xs) * (1 - coverage) / 2 + 1e-9)
    return xs[drop], xs[len(xs) - 1 - drop]


# Derived from the rows of `llmsizer validate` at this commit (tests/validation/test_ranges.py re-derives them).
BANDS: dict[tuple[str, str], Band] = {}


def _add(kind: str, engine: str, low: float, high: float, rows: int) -> None:
    BANDS[(kind, engine)] = Band(kind, engine, low, high, rows)


_add("batched decode throughput", "llama.cpp", 0.8692, 1.1086, 57)
_add("batched decode throughput", "vllm", 0.7234, 1.0736, 12)
_add("decode throughput", "llama.cpp", 0.8346, 1.0967, 57)
_add("inference memory", "transformers", 0.9700, 1.1814, 11)
_add("inference memory", "vllm", 0.9951, 1.0931, 13)
_add("prefill throughput", "llama.cpp", 0.3216, 1.6914, 18)
_add("training memory", "pytorch training", 0.9082, 1.1198, 11)
_add("training throughput", "pytorch training", 0.7830, 1.1471, 205)


def band_for(kind: str, engine: str) -> Band | None:
    return BANDS.get((kind, engine))


def calibrated_range(kind: str, engine: str, expected: float | None) -> tuple[float, float] | None:
    """[expected x low, expected x high] of the band for ``kind`` and ``engine``; None without one."""
    b = band_for(kind, engine)
    if b is None or expected is None:
        return None
    return expected * b.low, expected * b.high
