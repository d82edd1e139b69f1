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

Each setup weighs as one. A setup (validation_cases.setup_of) is one device measured by one author's procedure: a
measured run's file of runs (one machine, one session), or a published row's source document without its commit
plus the device its CSV names (validation_cases.device_key), so two snapshots of one README are one setup and a
community thread of many users' GPUs is one setup per GPU. A setup's rows share its hardware, software and author and
so its error: pooled row by row, one setup's many rows would decide a band alone (the Qwen2.5 page's 102
transformers memory rows set it to 1.000..1.080 and left 5 of the other 11 rows outside). Each row therefore weighs
1 / (rows of its setup) (``band_weights``): the pooled CDF of the setups' CDFs, R. Dunn, L. Wasserman & A. Ramdas,
"Distribution-Free Prediction Sets for Two-Layer Hierarchical Models", JASA 118 (2023) 2491-2502, doi
10.1080/01621459.2022.2060112 (arXiv 1809.07441): their "CDF pooling". The count the finite-sample rules use is
Kish's effective sample size n = (sum w)^2 / sum w^2 (``effective_rows``): equal weights (one row per setup, or every
row from one setup) give n and the unweighted rule below exactly. The stated band (``band_around_expected``) is the
wider of this setup-weighted band and the same rule with each row its own unit, so that it also holds 90 % of the
measured rows themselves (issue #12: "at least 90 % of measured values inside, per kind and engine"): a setup of
many rows that all miss one way (the 16 A10G llama-bench pp512 rows, PX) weighs as one setup in the first and as its
rows in the second, and widens the band rather than leaving its rows outside (llama.cpp on CUDA's; those of its rows
that are known misses stay out of the engine-wide band that backends without a band inherit: below).

What the coverage is of (``Band.coverage_of``): a new run of one of the band's setups, each equally likely -- the
target the weighted rows represent. It is not a finite-sample claim for a run of a new setup: that would need the
setup count in place of n (Dunn et al.: 19 setups for the conformal rule), and no band but llama.cpp decode has 19.
Counting setups instead was tried and rejected: with 2-4 setups the t-interval on 1-3 degrees of freedom gives
bands such as 0.10..6.17 (transformers decode, 2 setups) and 0.57..1.62 (pooled serving decode), which say nothing,
and leaving one of two setups out leaves one setup's rows either way (the same 79 %). The evidence for a new setup is
instead stated beside each band: its leave-one-setup-out coverage (``Band.loso``: each setup's rows against the band
of the other setups, the share inside averaged over setups; in ``Band.to_dict`` and docs/accuracy.md), which falls
short of the 90 % of ``COVERAGE`` for several bands. Every printed range states this beside its target
(``Band.coverage``: the target, the in-sample coverage per run of the setups ``Band.inside``, the leave-one-setup-out
coverage, the setups and rows), with ``Band.coverage_warning`` in words where the leave-one-setup-out coverage is
below the target.

Rows whose miss has no established mechanism (validation_cases.KNOWN_MISSES: the row, what is seen, why unexplained)
stay in the summary and in the band and may set its end: the band states how far measured runs lie from the
estimate, and the runs the model cannot yet explain are part of that; dropping them would claim a coverage the model
does not have where they occur. They weigh as their setup's share like any row, and docs/accuracy.md lists each with
its ratio and whether it sets a band end.

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

llama.cpp's prefill and one-sequence decode get a band per backend (``llamacpp_band``: CUDA, Metal, CPU, other, as
estimate/device.py ``llamacpp_backend`` decides it from the device), fitted on that backend's rows by the rule above,
where its rows measured at least ``MIN_BAND_DEVICES`` setups (setups, each one device measured by one author's
procedure, not distinct devices); elsewhere the estimate takes the engine-wide llama.cpp
band (every such row of the kind but the known misses of backends with a band of their own, which feed that band
alone: one backend's unexplained kernel gap does not widen the range of backends it was not measured on), named in
its assumptions.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

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
# the serving load rows (validation/serving_load.csv): what users see at C requests in flight (formulas/serving_queue.py
# eqs. Q4-Q9); summarised, no band (llmsizer prints no calibrated range for them); a TTFT row carries the estimate's
# own range (independent arrivals .. arriving together), whose coverage validate reports beside the error
SERVING_TTFT = "serving TTFT under load"
SERVING_RATE = "serving requests/s under load"
# the longest sequence a training recipe fits on a card of a given memory (validation/unsloth_max_context.csv):
# summarised, no band; each row carries the estimate's own range (its memory range read as a length range)
MAX_TRAINING_CONTEXT = "longest training sequence that fits"
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
    # leave-one-setup-out coverage: each setup's rows against the band of the other setups, the share inside averaged
    # over setups (validation_cases.loso_share); None with one setup
    loso: float | None = None
    # in-sample coverage per run of the setups: each setup's share of its rows inside this band, averaged over the
    # setups (each weighing as one; validation_cases.inside_share); None where not derived
    inside: float | None = None

    @property
    def coverage_of(self) -> str:
        """What ``COVERAGE`` is the probability of (module doc): a new run of one of the band's setups."""
        return ("a new run of this band's one setup" if self.setups <= 1 else
                f"a new run of one of this band's {self.setups} setups, each equally likely")

    @property
    def coverage_warning(self) -> str | None:
        """Words for a user where the leave-one-setup-out coverage falls short of ``COVERAGE`` (module doc: the
        evidence for a run of a setup the band was not fitted on); None where it does not or cannot (one setup)."""
        if self.loso is None or self.loso >= COVERAGE:
            return None
        return (f"this range is less sure than its {COVERAGE:.0%} target on a machine or software stack it was not "
                f"fitted on: when each of its {self.setups} measured setups was left out in turn, the range fitted "
                f"on the others held on average only {self.loso:.1%} of the left-out setup's runs, so expect a "
                f"measurement outside it more often than 1 in {round(1 / (1 - COVERAGE))} on such a setup")

    def coverage(self) -> dict[str, Any]:
        """The coverage the band has, stated beside its target (the one home of these words and numbers; the
        calibrated ranges of estimate/allocator.py, estimate/speed.py and estimate/duration.py carry it; render/text.py
        ``coverage_lines`` prints it under each): the target and what it is of,
        the in-sample coverage per run of the setups (``inside``), the leave-one-setup-out coverage (``loso``), the
        setups and rows, and ``coverage_warning``."""
        return {"target": COVERAGE, "of": self.coverage_of, "in_sample": self.inside,
                "leave_one_setup_out": self.loso, "setups": self.setups, "rows": self.rows,
                "warning": self.coverage_warning}

    def to_dict(self) -> dict[str, Any]:
        # coverage_target, coverage_of, coverage_new_setup_leave_one_setup_out: the deprecated names of
        # coverage.target, .of and .leave_one_setup_out (the same values), kept for one release (docs/nomenclature.md)
        return {"kind": self.kind, "engine": self.engine, "low": self.low, "high": self.high, "rows": self.rows,
                "setups": self.setups, "devices": list(self.devices), "coverage": self.coverage(),
                "coverage_target": COVERAGE, "coverage_of": self.coverage_of,
                "coverage_new_setup_leave_one_setup_out": self.loso}


# Student's t, one-sided 0.95 quantile by degrees of freedom (NIST/SEMATECH e-Handbook 1.3.6.7.2, column 0.95)
T_095 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
         1.746, 1.740, 1.734)


def effective_rows(weights: list[float]) -> float:
    """Kish's effective sample size of weighted rows, (sum w)^2 / sum w^2 (L. Kish, *Survey Sampling*, Wiley 1965,
    section 11.7): n when the weights are equal (so one row per setup, or every row from one setup, counts n), between
    the number of setups and n when ``band_weights`` weighs setups of unequal row counts as one each."""
    return sum(weights) ** 2 / sum(w * w for w in weights)


def band(ratios: list[float], coverage: float = COVERAGE,
         setups: list[str] | None = None) -> tuple[float, float]:
    """(low, high) of measured / expected ratios: a new ratio lies inside with probability >= ``coverage`` (see the
    module doc: weighted conformal order statistics from 19 effective rows, a weighted log-normal prediction interval
    below). ``setups`` (one name per ratio; None: each row its own setup) weigh each setup as one
    (``band_weights``). Equal weights (one row per setup, or every row of one setup) give the unweighted rule
    exactly."""
    if not ratios:
        raise InputError("a band needs at least one ratio")
    if not 0 < coverage <= 1:
        raise InputError(f"coverage must be in (0, 1], got {coverage}")
    if any(not r > 0 for r in ratios):
        raise InputError("a band needs positive ratios (measured / expected)")
    if setups is not None and len(setups) != len(ratios):
        raise InputError("a band needs one setup name per ratio")
    if setups is None or len(set(setups)) == 1:
        # one setup: its rows are the runs a new run of it is exchangeable with, each its own unit
        setups = [str(i) for i in range(len(ratios))]
    weights = band_weights(setups)
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
    lo, hi = setup_span(ratios, setups, coverage)
    return min(lo, math.exp(mean - w)), max(hi, math.exp(mean + w))


def setup_span(ratios: list[float], setups: list[str], coverage: float = COVERAGE) -> tuple[float, float]:
    """The floor of a small-sample band: (lowest, highest) over the setups of each setup's shortest range (in log
    ratio) holding ceil(``coverage`` x its rows) of its rows. A band never narrower than this leaves every setup
    with at least ``coverage`` of its rows inside, in sample; a setup of one row is that row, so with one row per
    setup this is the rows' full span (the unweighted rule), while one outlying row of a many-row setup (weighing
    1 / rows of it) is among the rows its setup leaves out and cannot set an end alone."""
    by: dict[str, list[float]] = {}
    for r, s in zip(ratios, setups, strict=True):
        by.setdefault(s, []).append(r)
    ends = [_shortest(sorted(xs), math.ceil(coverage * len(xs) - 1e-9)) for xs in by.values()]
    return min(lo for lo, _ in ends), max(hi for _, hi in ends)


def _shortest(xs: list[float], k: int) -> tuple[float, float]:
    """The shortest range (smallest high / low) of ``k`` consecutive sorted ``xs``; the lowest of equal ones."""
    i = min(range(len(xs) - k + 1), key=lambda a: (xs[a + k - 1] / xs[a], a))
    return xs[i], xs[i + k - 1]


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
    ``band`` whatever its row count (module doc: the pooled CDF of Dunn, Wasserman & Ramdas, JASA 2023)."""
    count = Counter(setups)
    return [1 / count[s] for s in setups]


def band_around_expected(ratios: list[float], setups: list[str] | None = None) -> tuple[float, float]:
    """The band a kind/engine states: ``band`` of its ratios, reaching to 1 where every ratio lies on one side of it.
    A range is quoted around the expected value ([expected x low, expected x high]); one that left the expected value
    outside would contradict the estimate it ranges. Reaching to 1 only widens the band, so its coverage stays >= the
    target. Where this applies, the rows say the model is biased for that scope (docs/accuracy.md lists the bands)."""
    lo, hi = band(ratios, setups=setups)
    if setups is not None:
        # the setup-weighted band covers a new setup; the same rule with each row its own unit covers a new row of the
        # setups measured (the "90 % of measured values inside, per kind and engine"): the band states both,
        # so a setup of many rows that the weighting treats as one (16 A10G llama-bench prefill rows) widens it
        row_lo, row_hi = band(ratios)
        lo, hi = min(lo, row_lo), max(hi, row_hi)
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
# llama.cpp's per-backend bands (``llamacpp_band``) take the same number as their least setups, not devices.
MIN_BAND_DEVICES = 2


# A one-sequence decode on more than one GPU (tensor parallel) has no calibrated range: every summarised one-sequence
# vLLM / SGLang row that feeds a decode band ran on one GPU (the tensor-parallel Qwen2.5 rows QV23-QV29 have assumed
# settings; the MoE rows of validation/moe_multigpu_decode.csv, DeepSeek V3/R1/V3.2 on 8 H100 / H200 / H20 at one
# sequence, have assumed settings). A band fitted on one-GPU dense decodes says nothing about such a step -- its
# per-layer kernels and all-reduces weigh more than on one GPU -- so none is applied (tests/validation/
# test_moe_multigpu_rows.py checks the premise: no summarised band row of the kind has more than one GPU).
MULTI_GPU_DECODE_NO_BAND = ("a one-sequence decode on more than one GPU: no summarised one-sequence vLLM / SGLang "
                            "row measures one (every decode band row ran on one GPU), so no calibrated range")
# An MLA + mixture-of-experts model (DeepSeek V3 / R1 / V3.2, Kimi K2, ...) tensor-parallel on more than one GPU has no
# calibrated decode range at any concurrency. Its step is bound by the layers' latency-bound kernels (formulas/speed.py
# eq. 15, efficiency.MLA_MOE_LAYER_KERNEL_SECONDS, calibrated on MD01 of validation/moe_multigpu_decode.csv); the held-
# out rows measure below the estimate (MLA_MOE_MEASURED) at 16-64 sequences on the calibration row's server (MD05-MD07:
# the fused-MoE and attention kernels grow with the batch above the roof, and a serving sweep's TPOT holds displaced
# decode steps) and at one sequence on other engines, releases and GPUs (MD02-MD04, settings assumed): more than a
# band fitted on other shapes may claim (a band widened by what the model lacks would misstate every other estimate's
# range). The dense and Mixtral tensor-parallel rows (VB04: 8 x A100, batch 8, within the pooled band) keep theirs.
# MLA_MOE_MEASURED: (lowest, highest) measured / estimated to 2 decimals and the rows, per group; written from the rows
# by scripts/rederive_bands.py (validation_cases.mla_moe_measured; scripts/gen_docs.py runs it), do not edit by hand;
# tests/validation/test_moe_multigpu_rows.py compares it with a fresh derivation.
MLA_MOE_MEASURED = {"one sequence": (0.38, 0.78, ("MD02", "MD03", "MD04")),
                    "16-64 sequences": (0.71, 0.76, ("MD05", "MD06", "MD07"))}
MLA_MOE_MULTI_GPU_NO_BAND = ("an MLA + mixture-of-experts decode on more than one GPU: the published runs of that "
                             "shape (validation/moe_multigpu_decode.csv) measure "
                             + "; ".join(f"{lo:.2f}-{hi:.2f} x the estimate at {k} ({', '.join(ids)})"
                                         for k, (lo, hi, ids) in MLA_MOE_MEASURED.items())
                             + ", so no calibrated range")

# The same kernel floor on one GPU. Its chain (MLA's projections, norms, RoPE, the absorbed products, the router and
# top-k, the fused-MoE kernels, the shared expert) runs on one GPU as on eight: MD01's figure has the step's
# all-reduces, the only kernels tensor parallelism adds to a layer (two per layer, SGLang/vLLM DeepSeek-V2 model
# code: after attention and after the MoE), taken out, so the floor applies at any tensor-parallel degree. But it was
# fitted on one shape (R1, hidden 7168, FP8 with its activation quantizations, TP 8 on H200) and no row measures
# another: where the floor decides a one-GPU step (bound "kernel latency"), the pooled band fitted on bandwidth-bound
# steps says nothing about it, so none is given.
MLA_MOE_FLOOR_NO_BAND = ("the step is the MLA + mixture-of-experts kernel floor (formulas/speed.py eq. 15, "
                         "efficiency.MLA_MOE_LAYER_KERNEL_SECONDS, fitted on one row: DeepSeek-R1 FP8, TP 8 on 8 x "
                         "H200, MD01); no published run checks it on one GPU or another model, so no calibrated range")


# A training run on a GPU architecture with no training calibration row (estimate/efficiency.py
# TRAINING_UTILIZATION_BY_ARCH) has no calibrated duration range: its GEMM utilisation is another architecture's
# (TRAINING_UTILIZATION_UNCALIBRATED, the lowest fitted share), so the training-throughput band -- fitted on runs whose
# architecture's own utilisation was calibrated -- says nothing about how far such a run lies from its estimate. Such
# rows are summarised (validation_cases: Case.no_band) but feed no band. The MI300X rows of torchao's float8 benchmark
# (PM1341-PM1347) were such rows while CDNA3 had no calibration row: at Hopper's share they measured 0.53-0.61 x the
# estimate and had widened the pooled band of every GPU (0.632-1.160 -> 0.529-1.157, leave-one-setup-out 0.89 ->
# 0.83). Since CDNA3 is calibrated on PM1341 (efficiency.TRAINING_UTILIZATION_BY_ARCH['cdna3'], excluded as a
# calibration row) and its float8 share on PM1343 (efficiency.FLOAT8_GEMM_SHARE_CDNA3, likewise excluded), its two
# held-out float8 rows (0.98-1.05 x the estimate; 0.80-0.92 at Hopper's float8 share) feed the band.
UNCALIBRATED_ARCH_TRAINING_NO_BAND = ("a training run on a GPU architecture with no training calibration row: its "
                                      "utilisation is another architecture's, so the band fitted on calibrated "
                                      "architectures' runs says nothing about it; no calibrated range")
# What the summarised rows of each such architecture measured: (lowest, highest) measured / expected, to 2 decimals,
# and the rows; the duration's warning quotes them (estimate/duration.py) in place of a range.
# tests/validation/test_ranges.py re-derives the ratios from the rows.
# CDNA3's four MI300X rows left it when CDNA3 was calibrated; Blackwell's two (Megatron-Bridge's GPT-OSS 120B BF16 runs
# on 64 x B200 and 64 x GB200, PM1364-PM1365, measured / estimated 0.67-0.76 at Hopper's share) when Blackwell was
# (efficiency.TRAINING_UTILIZATION_BY_ARCH['blackwell'], PM1368 against its H100 twin PM1366): they feed the band now,
# with the held-out GB300 row PM1369. No uncalibrated architecture has a compared row today.
UNCALIBRATED_TRAINING_MEASURED: dict[str, tuple[float, float, tuple[str, ...]]] = {}


def uncalibrated_training_note(architecture: str) -> str:
    """Words for a training estimate on ``architecture`` without a calibration row: what its published rows measured
    against the estimate (``UNCALIBRATED_TRAINING_MEASURED``), or that none were measured."""
    m = UNCALIBRATED_TRAINING_MEASURED.get(architecture)
    if m is None:
        return "no published run on it is compared, so how far a run lies from the estimate is not known"
    lo, hi, ids = m
    measured = f"{lo:.2f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"
    fast = f"{1 / hi - 1:.0%}" if lo == hi else f"{1 / hi - 1:.0%}-{1 / lo - 1:.0%}"
    return (f"its published runs ({', '.join(ids)}) measured {measured} x this rule's tokens/s (the "
            f"estimate is {fast} too fast there)")


# Tensor-parallel training measured slower than the estimate where no sourced mechanism accounts for it
# (torchtitan's AsyncTP benchmark, validation_cases.TORCHTITAN_RUNS, held out: nothing is fitted on them). After the
# tensor-parallel collectives at NCCL's NVLink bus bandwidth (formulas/network.py eq. (12)), op-level selective
# checkpointing's all-gathers again in the backward and full recomputation's early stop (formulas/model_parallel_time.py
# eq. (T1''')), and the copies around the sequence-dimension collectives (formulas/elementwise_traffic.py eq. (E14)),
# vanilla TP lands within 4 % (PM1310 +1.8 %, PM1316 +3.5 %) but async TP 13-18 % fast (PM1311, PM1317: its gain
# over-estimated), and torchao's rowwise float8 with TP (its collectives in bf16, casts around them:
# formulas/float8_training.py eqs. F4-F5) 8-30 % fast (the rows timed at their GPUs' 2.4 TB/s,
# validation_cases.torchtitan_h100). Ruled out (numbers in the tpmech and tpwgrad reports): wave
# quantisation of the forward / input-gradient GEMMs (98,304 rows: >= 40 waves on 132 SMs, < 1 %); of the sharded
# weight-gradient GEMMs (k/v: 128 x 4096 outputs, 16 tiles, K = 98,304): cuBLAS runs such long-K few-tile shapes as
# split-K kernels (its nvjet *_splitK kernels + splitKreduce_kernel, Dao-AILab/quack PR #157's baseline); collective
# latency (the 805 MB all-gathers: bandwidth term). The rows stay summarised and in the band; the duration warns with
# what they measured. (recipe key, (lowest, highest) measured / expected to 2 decimals, rows);
# tests/validation/test_ranges.py re-derives the ratios from the rows.
# torchao's rowwise recipe with high-precision weight gradients ('torchao-rowwise-gw-hp') has no published TP row.
TENSOR_PARALLEL_TRAINING_MEASURED: dict[str, tuple[float, float, tuple[str, ...]]] = {
    "bf16": (0.85, 0.98, ("PM1310", "PM1311", "PM1316", "PM1317")),
    "torchao-rowwise": (0.77, 0.93, ("PM1314", "PM1315", "PM1320", "PM1321")),
}


# float8 recipes of PyTorch tensor parallelism with no published TP row, and the recipe whose rows are the nearest
NO_TENSOR_PARALLEL_TRAINING_ROW = {"torchao-rowwise-gw-hp": "torchao-rowwise"}


def tensor_parallel_training_note(recipe: str) -> str | None:
    """Words for a tensor-parallel training estimate of ``recipe`` ('bf16', 'torchao-rowwise' or
    'torchao-rowwise-gw-hp'): what the published torchtitan TP rows measured against it
    (``TENSOR_PARALLEL_TRAINING_MEASURED``), or, for a recipe without such a row (``NO_TENSOR_PARALLEL_TRAINING_ROW``),
    that it has none and what the nearest recipe's rows measured; None for another recipe."""
    near = NO_TENSOR_PARALLEL_TRAINING_ROW.get(recipe)
    if near is not None:
        lo, hi, ids = TENSOR_PARALLEL_TRAINING_MEASURED[near]
        return (f"PyTorch tensor-parallel training with {recipe}: no published tensor-parallel row of this recipe "
                f"checks this estimate; torchtitan's TP 8 runs of {near} on H100 ({', '.join(ids)}) measured "
                f"{lo:.2f}-{hi:.2f} x that recipe's tokens/s (the estimate {1 / hi - 1:.0%}-{1 / lo - 1:.0%} too "
                "fast): a mechanism not modelled")
    m = TENSOR_PARALLEL_TRAINING_MEASURED.get(recipe)
    if m is None:
        return None
    lo, hi, ids = m
    return (f"PyTorch tensor-parallel training{' with torchao rowwise float8' if recipe != 'bf16' else ''}: torchtitan's "
            f"published TP 8 runs on H100 ({', '.join(ids)}) measured {lo:.2f}-{hi:.2f} x this rule's tokens/s (the "
            f"estimate {1 / hi - 1:.0%}-{1 / lo - 1:.0%} too fast; the smaller model, Llama 3.1 8B, the larger miss): "
            "a mechanism not modelled")


def serving_band(kind: str, engine: str, version: str | None, device: str | None,
                 devices: int = 1, mla_moe: bool = False, floor_bound: bool = False) -> tuple[Band | None, str]:
    """(band, why) for a serving-engine estimate: its release scope's band where its rows are representative (at
    least ``MIN_BAND_ROWS`` rows, and rows of ``MIN_BAND_DEVICES`` devices or of this device), else the pooled
    serving-engine band, else None; ``why`` names the choice (the estimate's assumption). A one-sequence decode on
    ``devices`` > 1 GPUs gets none (``MULTI_GPU_DECODE_NO_BAND``), nor does an MLA + MoE model (``mla_moe``) on
    more than one GPU at any concurrency (``MLA_MOE_MULTI_GPU_NO_BAND``), nor one whose step the MLA + MoE kernel
    floor decides on one GPU (``floor_bound``: ``MLA_MOE_FLOOR_NO_BAND``)."""
    if devices > 1 and mla_moe:
        return None, f"no {kind} band: {MLA_MOE_MULTI_GPU_NO_BAND}"
    if mla_moe and floor_bound:
        return None, f"no {kind} band: {MLA_MOE_FLOOR_NO_BAND}"
    if kind == DECODE and devices > 1:
        return None, f"no {kind} band: {MULTI_GPU_DECODE_NO_BAND}"
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


# -- llama.cpp: one band per backend ---------------------------------------------------------------------------------
# llama.cpp's prefill and one-sequence decode run the backend's own kernels (ggml-cuda's MMQ / cuBLAS, ggml-metal's
# simdgroup products, ggml-cpu's), so how far a run lies from the estimate is the backend's: a band pooled over
# backends let one source's 50 Apple rows (discussion 4167, AP01-AP50: 22 of the prefill band's 34 setups) move the
# CUDA and CPU prefill ranges (low end 0.6257 -> 0.7952). Each summarised llama.cpp row of these kinds feeds its
# engine-wide band and the band of its device's backend (validation_cases.band_keys; estimate/device.py
# llamacpp_backend of the catalog device its CSV names). An estimate takes its backend's band where that band has
# rows of at least MIN_BAND_DEVICES setups, else the engine-wide band, named as such in its assumption
# (``llamacpp_band``). This rule counts setups, not devices (the serving bands' rule above counts devices; the two
# share the threshold's number only): a setup is one device measured by one author's procedure
# (validation_cases.setup_of, the unit a band weighs as one), so two authors' rows of one GPU are two setups and pass.
# The engine-wide band of these kinds is applied only to a backend without a band of its own (CPU, ROCm and the other
# runtimes today: no summarised row), so a known miss (validation_cases.KNOWN_MISSES: a miss whose mechanism is not
# established) of a backend with its own band feeds that band alone (validation_cases.band_rows,
# ``has_own_llamacpp_band``): it stays in the band of the backend it occurs on (the module doc) and is not exported to
# backends it was never measured on. review35 D2: the A10G's 11 MMQ prefill misses (PW03, PX01, ...: 2.0-2.9x and
# PX13 0.31x, an unexplained CUDA-kernel gap) had moved the engine-wide prefill band that CPU and ROCm estimates take
# from 0.7640..1.6176 (without them) to 0.7727..2.3238 by the row-unit rule (``band_around_expected``); the CUDA band
# keeps them (0.6257..2.8749). A backend's other rows feed both bands as before, and a backend that inherits the
# engine-wide band keeps its own known misses in it (they occur where it is applied).
LLAMACPP_BACKEND_KINDS = (PREFILL, DECODE)
LLAMACPP_BACKENDS = {"cuda": "CUDA", "metal": "Metal", "cpu": "CPU"}  # any other backend's rows: 'other backends'


def llamacpp_band_name(backend: str) -> str:
    """The band key of llama.cpp on ``backend`` (estimate/device.py llamacpp_backend: 'cuda', 'metal', 'cpu' or
    another runtime, which share 'other backends')."""
    return f"{LLAMACPP} on {LLAMACPP_BACKENDS.get(backend, 'other backends')}"


def llamacpp_band(kind: str, backend: str | None) -> tuple[Band | None, str]:
    """(band, why) for a llama.cpp estimate of ``kind`` on ``backend`` (estimate/device.py llamacpp_backend; None:
    not known): its backend's band where ``kind`` is keyed by backend (``LLAMACPP_BACKEND_KINDS``) and that band's
    rows measured at least ``MIN_BAND_DEVICES`` setups (``Band.setups``: one device by one author's procedure each,
    validation_cases.setup_of; not distinct devices, which this rule does not count), else the engine-wide llama.cpp
    band (None without one); ``why`` names the choice (the estimate's assumption)."""
    engine_wide = BANDS.get((kind, LLAMACPP))
    if kind not in LLAMACPP_BACKEND_KINDS:
        return engine_wide, f"{kind} band of {LLAMACPP} (not keyed by backend)"
    name = llamacpp_band_name(backend or "")
    own = BANDS.get((kind, name))
    if own is not None and has_own_llamacpp_band(own.setups):
        return own, f"{kind} band of {name} ({own.rows} validation rows of {own.setups} setups on that backend)"
    if backend is None:
        reason = "the device's backend is not known"
    elif own is None:
        reason = f"{name} has no band of its own (fewer than {MIN_BAND_ROWS} summarised rows)"
    else:
        reason = f"the {name} band's {own.rows} rows measured {own.setups} setup (fewer than {MIN_BAND_DEVICES})"
    if engine_wide is None:
        return None, f"no {kind} band: {reason}, and no engine-wide {LLAMACPP} band exists"
    fed = sorted(e.removeprefix(f"{LLAMACPP} on ") for k, e in BANDS if k == kind and e.startswith(f"{LLAMACPP} on "))
    return engine_wide, (f"engine-wide {kind} band of {LLAMACPP} ({engine_wide.rows} rows of {engine_wide.setups} "
                         f"setups, on {', '.join(fed) or 'every backend'}; the known misses of a backend with a band "
                         f"of its own stay in that band): {reason}")


def has_own_llamacpp_band(setups: int) -> bool:
    """Whether a llama.cpp backend whose rows of a kind measured ``setups`` setups takes its own band
    (``llamacpp_band``): at least ``MIN_BAND_DEVICES``. Such a backend's known misses feed its own band only, not the
    engine-wide one that backends without a band inherit (validation_cases.band_rows; the section's comment)."""
    return setups >= MIN_BAND_DEVICES


# Written by scripts/rederive_bands.py from the rows of `llmsizer validate` (tests/validation/test_ranges.py re-derives
# them); do not edit by hand.
BANDS: dict[tuple[str, str], Band] = {}


def _add(kind: str, engine: str, low: float, high: float, rows: int, setups: int, inside: float, loso: float | None,
         devices: tuple[str, ...] = ()) -> None:
    BANDS[(kind, engine)] = Band(kind, engine, low, high, rows, devices, setups, loso, inside)


_add("batched decode throughput", "llama.cpp", 0.9409, 1.0727, 57, 1, 0.965, None)
_add("batched decode throughput", "serving engines (pooled)", 0.7474, 1.2109, 16, 3, 1.000, 0.889,
     ('a100-sxm-80gb', 'h100-sxm'))
_add("batched decode throughput", "transformers", 0.4460, 1.5168, 6, 1, 1.000, None)
_add("batched decode throughput", "vllm 0.8-0.13", 0.9301, 1.0330, 3, 1, 1.000, None, ('h100-sxm',))
_add("batched decode throughput", "vllm < 0.6", 0.7474, 1.2660, 12, 2, 1.000, 0.833, ('a100-sxm-80gb',))
_add("decode throughput", "llama.cpp", 0.8752, 1.1335, 179, 38, 0.928, 0.915)
_add("decode throughput", "llama.cpp on CUDA", 0.8758, 1.4028, 113, 14, 0.966, 0.877)
_add("decode throughput", "llama.cpp on Metal", 0.8210, 1.1366, 68, 24, 0.969, 0.950)
_add("decode throughput", "serving engines (pooled)", 0.8452, 1.0478, 34, 2, 1.000, 0.786, ('a100-sxm-80gb', 'a10g'))
_add("decode throughput", "sglang 0.4 on h20", 0.3745, 1.4653, 7, 1, 1.000, None, ('h20',))
_add("decode throughput", "sglang >= 0.5", 0.9031, 1.0742, 7, 1, 1.000, None, ('a10g',))
_add("decode throughput", "transformers", 0.4909, 1.3765, 21, 2, 1.000, 1.000)
_add("decode throughput", "vllm 0.6-0.7", 0.8452, 1.0478, 21, 1, 1.000, None, ('a100-sxm-80gb',))
_add("decode throughput", "vllm >= 0.14", 0.9098, 1.0560, 6, 1, 1.000, None, ('a10g',))
_add("inference memory", "transformers", 0.9702, 1.0414, 120, 4, 0.993, 0.803)
_add("inference memory", "vllm", 0.9734, 1.1438, 44, 7, 1.000, 0.929)
_add("prefill throughput", "llama.cpp", 0.7640, 1.6176, 95, 39, 0.966, 0.925)
_add("prefill throughput", "llama.cpp on CUDA", 0.6257, 2.8749, 50, 14, 0.991, 0.949)
_add("prefill throughput", "llama.cpp on Metal", 0.8199, 1.1904, 56, 25, 0.960, 0.920)
_add("prefill throughput", "transformers", 0.7617, 1.0000, 11, 1, 1.000, None)
_add("training memory", "pytorch training", 0.9085, 1.0921, 46, 8, 1.000, 0.925)
_add("training throughput", "pytorch training", 0.5763, 1.1563, 261, 15, 0.951, 0.884)


def band_for(kind: str, engine: str) -> Band | None:
    return BANDS.get((kind, engine))


def calibrated_range(kind: str, engine: str, expected: float | None) -> tuple[float, float] | None:
    """[expected x low, expected x high] of the band for ``kind`` and ``engine``; None without one."""
    return band_range(band_for(kind, engine), expected)


def band_range(b: Band | None, expected: float | None) -> tuple[float, float] | None:
    """[expected x low, expected x high] of band ``b`` (the module doc's range); None without a band or a value."""
    if b is None or expected is None:
        return None
    return expected * b.low, expected * b.high


def range_coverage(b: Band | None, expected: float | None) -> dict[str, Any] | None:
    """The coverage (``Band.coverage``) of the range ``band_range(b, expected)`` gives, beside it wherever it is
    printed (the speed ranges, the training duration's range); None exactly where there is no range."""
    return None if b is None or expected is None else b.coverage()
