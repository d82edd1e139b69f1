"""Calibrated ranges: how far a measured value may lie from llmsizer's expected value, per kind and engine.

A band (low, high) says: of the project's own validation rows of this kind and engine (``validation/``, the rows
``llmsizer validate`` summarises: calibration rows, rows with assumed settings and lower bounds left out), at least
90 % have measured / expected inside [low, high]. The range of a new estimate is then
[expected x low, expected x high] (``calibrated_range``).

Derivation (``band``, re-derived from the rows by tests/validation/test_ranges.py and written by
scripts/rederive_bands.py, which scripts/gen_docs.py runs, so a merge that moves predictions is one command away from
bands that match its rows again): the n ratios measured / expected are sorted; the band stated is ``band`` below,
reaching to 1 where all rows lie on one side (``band_around_expected``: the expected value always lies inside its own
range).

Each setup weighs as one. The rows of one setup (validation_cases.setup_of: a measured run's file of runs, a published
row's source document) share its hardware, software and author and so its error: pooled row by row, one setup's many
rows would decide a band alone (the Qwen2.5 page's 102 transformers memory rows set it to 1.000..1.080 and left 5 of
the other 11 rows outside). Each row therefore weighs 1 / (rows of its setup) (``band_weights``): the pooled CDF of
the setups' CDFs, R. Dunn, L. Wasserman & A. Ramdas, "Distribution-Free Prediction Sets for Two-Layer Hierarchical
Models", JASA 118 (2023) 2491-2502, doi 10.1080/01621459.2022.2060112 (arXiv 1809.07441): their "CDF pooling", for a
new run of a new setup (asymptotically valid as the setups grow; no finite-sample guarantee across setups, so
docs/accuracy.md publishes the leave-one-setup-out coverage). The count the finite-sample rules use is Kish's
effective sample size n = (sum w)^2 / sum w^2 (``effective_rows``): equal weights (one row per setup, or every row
from one setup) give n and the unweighted rule below exactly.

* n >= 19: split-conformal order statistics (Vovk, Gammerman & Shafer, *Algorithmic Learning in a Random World*,
  2005; Lei et al., "Distribution-Free Predictive Inference for Regression", JASA 2018, Theorem 2.2): low and high
  are the d-th smallest and d-th largest ratio with d = floor(0.05 (n + 1)), i.e. drop d - 1 rows from each end.
  For a new run exchangeable with the rows, P(below low) <= 5 % and P(above high) <= 5 %, so P(inside) >= 90 %.
  Leave-one-out coverage of n rows is then >= 90 % as well: a held-out row is outside only when it is among the
  floor(0.05 n) most extreme on its side (the old rule, drop floor(0.05 n) from each end, held 90 % only on the
  rows it was fitted to: 153/171 = 89 % leave-one-out for training speed). Weighted, the same in weight units
  (the weighted quantile of weighted conformal prediction, Tibshirani, Barber, Candes & Ramdas, "Conformal
  Prediction Under Covariate Shift", NeurIPS 2019, arXiv 1904.06019: the new run's share, 1 / (n + 1) here, placed
  beyond the rows): each end is the first ratio, counted from the other end, where the cumulated weight reaches
  (1 - 0.05) (n + 1) / n of the total.
* n < 19: no order statistic of n rows reaches the 95th per-side quantile (the conformal band would be unbounded),
  so the band is the 90 % prediction interval of a log-normal error: exp(mean +- t(0.95, n-1) s sqrt(1 + 1/n)) of
  the log ratios (mean, sample standard deviation s; Student's t quantile, NIST/SEMATECH e-Handbook of
  Statistical Methods section 1.3.6.7.2), never narrower than the rows' full span. Weighted: the weighted mean and
  the weighted variance with the reliability-weights correction 1 / (1 - 1/n) (the sample variance when the weights
  are equal), t with floor(n) - 1 degrees of freedom. Its coverage rests on the log-normal assumption, and
  docs/accuracy.md publishes the leave-one-out figures beside it.

low and high are stated to 4 decimals rounded outwards. A kind/engine with fewer than two summarised rows
(``MIN_BAND_ROWS``) has no calibrated range (None): the estimate then carries only its own component ranges.

Serving engines (vLLM, SGLang) get a band per release scope (``SERVING_SCOPES``, the release boundaries of
estimate/engines.py ``STEP_HOST``: the host work per decode step, and so the error, changes with them), applied only
where its rows are representative (``serving_band``): the estimate's engine and release fall in the scope, and its
rows measured at least ``MIN_BAND_DEVICES`` catalog devices or the estimate's own (each serving band lists its rows'
devices); a scope held out as specific to its release and devices (``ServingScope.held_out``, the reason in the row)
applies to those devices alone. Elsewhere the estimate takes the pooled serving-engine band (``SERVING_POOLED``: every
summarised vLLM and SGLang row of the kind outside held-out scopes), named in its assumptions; a held-out scope's rows
never feed the pooled band.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

from ..errors import InputError

COVERAGE = 0.90
# A band needs at least two rows: one ratio has no spread, and the band it gives (that ratio at both ends) would
# claim 90 % coverage with no width. A kind/engine with fewer summarised rows has no band.
MIN_BAND_ROWS = 2

# the kinds of figure a band is for (validation_cases uses the same names for its rows)
INFERENCE_MEMORY = "inference memory"
TRAINING_MEMORY = "training memory"
DECODE = "decode throughput"
BATCHED = "batched decode throughput"
PREFILL = "prefill throughput"
TRAINING_SPEED = "training throughput"
# engines: the serving or training software whose behaviour the rows measured
LLAMACPP, VLLM, TRANSFORMERS, PYTORCH_TRAINING = "llama.cpp", "vllm", "transformers", "pytorch training"
SGLANG = "sglang"


@dataclass(frozen=True)
class Band:
    kind: str
    engine: str
    low: float  # measured / expected, lower end
    high: float
    rows: int
    devices: tuple[str, ...] = ()  # the catalog devices of a serving band's rows (() where not tracked)
    setups: int = 0  # the setups the rows measured, each weighing as one (validation_cases.setup_of)

    def to_dict(self) -> dict[str, float | int | str | list[str]]:
        return {"kind": self.kind, "engine": self.engine, "low": self.low, "high": self.high, "rows": self.rows,
                "setups": self.setups, "devices": list(self.devices), "coverage_target": COVERAGE}


# Student's t, one-sided 0.95 quantile by degrees of freedom (NIST/SEMATECH e-Handbook 1.3.6.7.2, column 0.95)
T_095 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
         1.746, 1.740, 1.734)


def effective_rows(weights: list[float]) -> float:
    """Kish's effective sample size of weighted rows, (sum w)^2 / sum w^2 (L. Kish, *Survey Sampling*, Wiley 1965,
    section 11.7): n when the weights are equal (so one row per setup, or every row from one setup, counts n), between
    the number of setups and n when ``band_weights`` weighs setups of unequal row counts as one each."""
    return sum(weights) ** 2 / sum(w * w for w in weights)


def band(ratios: list[float], coverage: float = COVERAGE,
         weights: list[float] | None = None) -> tuple[float, float]:
    """(low, high) of measured / expected ratios: a new ratio lies inside with probability >= ``coverage`` (see the
    module doc: weighted conformal order statistics from 19 effective rows, a weighted log-normal prediction interval
    below). ``weights`` (one per ratio, > 0; None: all equal) weigh the rows; ``band_weights`` gives each setup one
    unit. Equal weights give the unweighted rule exactly."""
    if not ratios:
        raise InputError("a band needs at least one ratio")
    if not 0 < coverage <= 1:
        raise InputError(f"coverage must be in (0, 1], got {coverage}")
    if any(not r > 0 for r in ratios):
        raise InputError("a band needs positive ratios (measured / expected)")
    if weights is None:
        weights = [1.0] * len(ratios)
    if len(weights) != len(ratios) or any(not w > 0 for w in weights):
        raise InputError("a band needs one positive weight per ratio")
    pairs = sorted(zip(ratios, weights, strict=True))
    xs, ws = [x for x, _ in pairs], [w for _, w in pairs]
    n, total = effective_rows(ws), sum(ws)
    tail = (1 - coverage) / 2
    # the conformal order statistic in weight units: the new run's share 1 / (n + 1) lies beyond either end, so each
    # end is the first ratio, counted from the other end, where the cumulated weight reaches (1 - tail) (n + 1) / n
    # of the total (equal weights: the d-th most extreme ratio, d = floor(tail (n + 1)))
    need = (1 - tail) * (n + 1) / n * total * (1 - 1e-12)
    if need <= total:
        return _reach(xs[::-1], ws[::-1], need), _reach(xs, ws, need)
    if n < 2 - 1e-9 or abs(coverage - COVERAGE) > 1e-12:
        return xs[0], xs[-1]
    p = [w / total for w in ws]
    logs = [math.log(x) for x in xs]
    mean = sum(pi * lx for pi, lx in zip(p, logs, strict=True))
    # weighted variance with the reliability-weights correction 1 / (1 - sum p^2) = 1 / (1 - 1 / n): the sample
    # variance (n - 1 denominator) when the weights are equal
    var = sum(pi * (lx - mean) ** 2 for pi, lx in zip(p, logs, strict=True)) / (1 - 1 / n)
    t = T_095[int(n + 1e-9) - 2]  # floor(n) - 1 degrees of freedom: the wider t of a fractional count
    w = t * math.sqrt(var) * math.sqrt(1 + 1 / n)
    return min(xs[0], math.exp(mean - w)), max(xs[-1], math.exp(mean + w))


def _reach(xs: list[float], ws: list[float], need: float) -> float:
    """The first of ``xs`` where the cumulated ``ws`` reach ``need``."""
    acc = 0.0
    for x, w in zip(xs, ws, strict=True):
        acc += w
        if acc >= need:
            return x
    return xs[-1]  # pragma: no cover - need <= sum(ws)


def band_weights(setups: list[str]) -> list[float]:
    """One weight per row, named by its setup: 1 / (rows of that setup), so that each setup weighs as one in
    ``band`` whatever its row count (module doc: the pooled CDF of Dunn, Wasserman & Ramdas 2022)."""
    count = Counter(setups)
    return [1 / count[s] for s in setups]


def band_around_expected(ratios: list[float], weights: list[float] | None = None) -> tuple[float, float]:
    """The band a kind/engine states: ``band`` of its ratios, reaching to 1 where every ratio lies on one side of it.
    A range is quoted around the expected value ([expected x low, expected x high]); one that left the expected value
    outside would contradict the estimate it ranges. Reaching to 1 only widens the band, so its coverage stays >= the
    target. Where this applies, the rows say the model is biased for that scope (docs/accuracy.md lists the bands)."""
    lo, hi = band(ratios, weights=weights)
    return min(lo, 1.0), max(hi, 1.0)


def stated(lo: float, hi: float) -> tuple[float, float]:
    """(low, high) to 4 decimals, rounded outwards so that the rows at the ends stay inside."""
    return math.floor(lo * 1e4) / 1e4, math.ceil(hi * 1e4) / 1e4


# -- serving engines: one band per release scope --------------------------------------------------------------------
SERVING_ENGINES = (VLLM, SGLANG)
SERVING_POOLED = "serving engines (pooled)"


@dataclass(frozen=True)
class ServingScope:
    """Releases [first, until) of one serving engine whose validation rows share a band (the band's key is ``name``).
    ``devices`` and ``held_out``: the rows are known to represent only this release on these devices (why in
    ``held_out``); the band then applies there alone and its rows stay out of the pooled band."""

    engine: str
    name: str
    first: tuple[int, int]
    until: tuple[int, int] | None
    devices: tuple[str, ...] = ()
    held_out: str = ""


# The vLLM boundaries are STEP_HOST's (tests/validation/test_ranges.py checks they stay equal). SGLang 0.4 on the H20:
# the Qwen3 speed benchmark rows (SG01-SG07, SGLang 0.4.6.post1) stream 1.36 TB/s of the H20's 4.0, while SGLang
# 0.5.13.post2 streams 2.27 TB/s on the same part and a device copy 3.3 TB/s (docs/hardware.md, SGLang section;
# tests/validation/test_sglang_rows.py): their ratio (0.39-0.96 with the Hopper stream limit of that release,
# estimate/engines.py STREAM_LIMITED; 0.18-0.42 before it) belongs to that release's kernels on that GPU, not to
# SGLang elsewhere.
SERVING_SCOPES: tuple[ServingScope, ...] = (
    ServingScope(VLLM, "vllm < 0.6", (0, 0), (0, 6)),
    ServingScope(VLLM, "vllm 0.6-0.7", (0, 6), (0, 8)),
    ServingScope(VLLM, "vllm 0.8-0.13", (0, 8), (0, 14)),
    ServingScope(VLLM, "vllm >= 0.14", (0, 14), None),
    ServingScope(SGLANG, "sglang 0.4 on h20", (0, 4), (0, 5), ("h20",),
                 "SGLang 0.4.6.post1 on the H20 streams 1.36 of 4.0 TB/s, SGLang 0.5.13 2.27 TB/s on the same part "
                 "(docs/hardware.md): the rows represent that release on that GPU only"),
    ServingScope(SGLANG, "sglang < 0.5", (0, 0), (0, 5)),
    ServingScope(SGLANG, "sglang >= 0.5", (0, 5), None),
)


HELD_OUT_SCOPES = tuple(sc.name for sc in SERVING_SCOPES if sc.held_out)


@functools.lru_cache(maxsize=256)
def serving_scope(engine: str, version: str | None, device: str | None) -> ServingScope:
    """The release scope of ``engine`` at ``version`` (None: engines.CURRENT_VERSION) on ``device``: the first of
    ``SERVING_SCOPES`` whose releases hold it and whose devices (if any) include ``device``."""
    from .engines import release

    v = release(engine, version)
    for sc in SERVING_SCOPES:
        if sc.engine == engine and sc.first <= v and (sc.until is None or v < sc.until) \
                and (not sc.devices or device in sc.devices):
            return sc
    raise InputError(f"no {engine} release {version} is known")  # pragma: no cover - the scopes cover 0.0 onwards


# A release scope's band speaks for other GPUs only when its rows measured at least this many devices; rows of one
# device represent that device (another GPU's kernels, memory and clocks move the ratio: the H20 rows above).
MIN_BAND_DEVICES = 2


def serving_band(kind: str, engine: str, version: str | None, device: str | None) -> tuple[Band | None, str]:
    """(band, why) for a serving-engine estimate: its release scope's band where its rows are representative (at
    least ``MIN_BAND_ROWS`` rows, and rows of ``MIN_BAND_DEVICES`` devices or of this device), else the pooled
    serving-engine band, else None; ``why`` names the choice (the estimate's assumption)."""
    sc = serving_scope(engine, version, device)
    own = BANDS.get((kind, sc.name))
    on = f" on {', '.join(own.devices)}" if own is not None and own.devices else ""
    if own is not None and (len(own.devices) >= MIN_BAND_DEVICES or device in own.devices):
        return own, (f"{kind} band of {sc.name} ({own.rows} validation rows of that release scope{on}"
                     + (f"; held out as release-specific: {sc.held_out}" if sc.held_out else "") + ")")
    if own is None:
        reason = f"{sc.name} has no band of its own (fewer than {MIN_BAND_ROWS} summarised rows)"
    else:
        reason = f"the {sc.name} band's {own.rows} rows measured only {', '.join(own.devices)}"
    pooled = BANDS.get((kind, SERVING_POOLED))
    if pooled is None:
        return None, f"no {kind} band: {reason}, and no pooled serving-engine band exists"
    return pooled, (f"{kind} band of {SERVING_POOLED} ({pooled.rows} rows of vLLM/SGLang on "
                    f"{', '.join(pooled.devices)}, outside held-out scopes {', '.join(HELD_OUT_SCOPES)}): {reason}")


# Written by scripts/rederive_bands.py from the rows of `llmsizer validate` (tests/validation/test_ranges.py re-derives
# them); do not edit by hand.
BANDS: dict[tuple[str, str], Band] = {}


def _add(kind: str, engine: str, low: float, high: float, rows: int, setups: int,
         devices: tuple[str, ...] = ()) -> None:
    BANDS[(kind, engine)] = Band(kind, engine, low, high, rows, devices, setups)


_add("batched decode throughput", "llama.cpp", 0.9409, 1.0727, 57, 1)
_add("batched decode throughput", "serving engines (pooled)", 0.7430, 1.1828, 16, 3, ('a100-sxm-80gb', 'h100-sxm'))
_add("batched decode throughput", "transformers", 0.4119, 1.4010, 6, 1)
_add("batched decode throughput", "vllm 0.8-0.13", 0.9301, 1.0330, 3, 1, ('h100-sxm',))
_add("batched decode throughput", "vllm < 0.6", 0.7430, 1.2457, 12, 2, ('a100-sxm-80gb',))
_add("decode throughput", "llama.cpp", 0.8752, 1.1055, 154, 4)
_add("decode throughput", "serving engines (pooled)", 0.8452, 1.0478, 34, 2, ('a100-sxm-80gb', 'a10g'))
_add("decode throughput", "sglang 0.4 on h20", 0.3572, 1.4182, 7, 1, ('h20',))
_add("decode throughput", "sglang >= 0.5", 0.9031, 1.0742, 7, 1, ('a10g',))
_add("decode throughput", "transformers", 0.4554, 1.2714, 21, 2)
_add("decode throughput", "vllm 0.6-0.7", 0.8452, 1.0478, 21, 1, ('a100-sxm-80gb',))
_add("decode throughput", "vllm >= 0.14", 0.9098, 1.0560, 6, 1, ('a10g',))
_add("inference memory", "transformers", 0.9702, 1.0619, 120, 4)
_add("inference memory", "vllm", 0.9622, 1.0931, 13, 2)
_add("prefill throughput", "llama.cpp", 0.6257, 1.2666, 27, 3)
_add("prefill throughput", "transformers", 0.7622, 1.0000, 11, 1)
_add("training memory", "pytorch training", 0.9085, 1.0873, 34, 7)
_add("training throughput", "pytorch training", 0.5041, 1.1598, 244, 9)


def band_for(kind: str, engine: str) -> Band | None:
    return BANDS.get((kind, engine))


def calibrated_range(kind: str, engine: str, expected: float | None) -> tuple[float, float] | None:
    """[expected x low, expected x high] of the band for ``kind`` and ``engine``; None without one."""
    b = band_for(kind, engine)
    if b is None or expected is None:
        return None
    return expected * b.low, expected * b.high
