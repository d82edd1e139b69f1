"""Per-expert GEMM rates of the Megatron-Bridge MoE rows on one CUDA GPU against llmsizer's grouped-GEMM rule
(``LLMSIZER_GPU_SET=moegemm bash bench/gpu_validation.sh``; plain torch, no Megatron / TransformerEngine needed).

Why: the Megatron-Bridge MoE rows (PM1361-PM1365, PM1367) read 22-73 % too fast. One candidate is cuBLAS's own rate
on the small per-expert GEMMs, which no published table gives (/work/notes/megmoe3_report.md). This times them.

What it times, per MoE row (validation_cases.MEGATRON_BRIDGE_RUNS), at the shapes the core gives that row
(estimate/duration.py ``megatron_expert_gemms``: formulas/gemm_shapes.py eqs. (7)-(8), M_e rows per local expert at
the row's micro-batch x sequence, tp, ep, etp and top-k; fc1 ``x -> fc1_width``, fc2 ``width -> x``), the six
training GEMMs of each local expert (forward, input gradient, weight gradient of fc1 and fc2; Kaplan et al. 2020
section 2.1, as formulas/gemm_shapes.py ``training_gemms``) in three variants:

- ``te-4-streams``: one GEMM per expert, expert i on stream i mod 4 after the streams wait on the main stream, the
  main stream then waiting on all four: TransformerEngine's grouped GEMM (TransformerEngine @d0067d0d
  common/gemm/cublaslt_gemm.cu lines 970-1021 ``multi_stream_cublas_gemm``, common/util/multi_stream.cpp line 53
  ``num_compute_streams = 4``), what eq. (6) of formulas/gemm_shapes.py models;
- ``1-stream``: the same GEMMs one after another on one stream (what the 4 streams buy);
- ``dense-same-flops``: one GEMM with the group's FLOPs, the G experts' rows stacked in the token dimension (what a
  dense GEMM of that work would reach; timed by the dense rule, eqs. (2)-(3)).

then ``sweep-4-streams``: the ``te-4-streams`` group of PM1362's Qwen3-30B-A3B experts and of PM1361's gpt-oss ones
at M_e 256-8192 (the rate against the rows per expert); and, as the reference the calibrated u stands for, the
dense GEMMs of one Llama 3.1 8B decoder layer and its lm_head at the tokens of torchtitan's FSDP row PM0501 (validation_cases.TORCHTITAN_FSDP: local batch 2 x 8192), on which
Hopper's u (efficiency.TRAINING_UTILIZATION_BY_ARCH['hopper']) and its FP8 share rho8 (PM0503,
efficiency.FLOAT8_GEMM_SHARE) were fitted (``calibration-dense``).

Each in BF16 (``torch.mm``, the operand layouts of a linear layer: forward x W^T, input gradient dy W, weight
gradient dy^T x) and, where the GPU has FP8 tensor cores (compute capability >= 8.9) and torch has
``torch._scaled_mm``, in FP8 with per-tensor scales as the rows' recipe runs them: TransformerEngine's
Float8CurrentScaling, HYBRID format (E4M3 forward operands, E5M2 gradients), split accumulator off in the forward
and on in both gradients (TransformerEngine @d0067d0d transformer_engine/common/recipe/__init__.py lines 286-309;
``use_fast_accum`` is torch's name for split accumulation off), every operand in the TN layout Hopper's FP8 GEMMs take.

How: CUDA events after warm-up calls. Each GEMM set is timed twice: ``eager`` (issued from this Python loop, the host
free to fall behind) and ``device`` (the same calls queued behind a ``torch.cuda._sleep`` longer than the host takes
to issue them, so the events bracket device time alone; ``queue_prefilled`` says whether the host did finish
issuing before the sleep ended, by events: the sleep's measured length ``sleep_seconds`` against the host's
``issue_seconds``; the sleep's rate is calibrated after a warm-up that raises the clocks, and a sleep the host outran
is recalibrated from its own length and timed again once: ``Timer``). The comparison is ``device``.

What it predicts, for the device measured (catalog/detect.py ``catalog_gpu`` of the driver's name, or
``--device-id``): llmsizer's seconds for the same GEMMs, F / (R u e_g) (BF16: R the dense BF16 peak,
estimate/duration.py ``training_peak``; FP8: R the dense FP8 peak x rho8, estimate/device.py ``fp8_peak`` and
efficiency.float8_gemm_share, as ``step_time`` times the float8 FLOPs), u the architecture's calibrated utilisation
(efficiency.training_utilization), e_g of formulas/gemm_shapes.py: for the grouped variants eq. (4)'s e_g of the
grouped expert GEMM, min(roofline, eq. (6)'s w_G over the device's SMs), computed as estimate/duration.py
``expert_gemm_time`` computes it (whose sum over the six GEMMs each record checks, ``core_check_seconds``); for the
dense variants eqs. (2)-(3) (``gemm_efficiency``, the rule of every non-expert linear). ``1-stream`` is predicted
as ``te-4-streams``: llmsizer has no serial variant. ``implied_u``: the u at which eq. (4) meets the measurement,
F / (t R e_g), beside the calibrated u.

Writes one JSON record per (case, variant, dtype) to ``--out`` (bench/gpu_validation.sh puts it under
validation/measured/gemm/, which ``llmsizer validate`` does not read: not ``measure`` records), the first record the
device, versions and prediction inputs. ``--smoke``: one tiny case on the CPU in fp32 (PM1362's experts at 16
tokens, two variants) and a tinier FP8 one through the CPU's ``torch._scaled_mm`` (``fp8_smoke_case``), to check the
plumbing anywhere. The budget (``--budget``, default 170 s) is what bench/gpu_validation.sh passes: its moegemm set's
total (LLMSIZER_GPU_TOTAL, default 180 s) less its set-up. The device command (15-minute budget):
``export PYTHONUNBUFFERED=1 LLMSIZER_GPU_SET=moegemm LLMSIZER_GPU_TOTAL=240; timeout 300 bash bench/gpu_validation.sh``
with the device call's ``timeout_s`` >= 300 (validation/measured/README.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from llmsizer.catalog.hardware import Device, builtin_catalog  # noqa: E402
from llmsizer.catalog.models import find  # noqa: E402
from llmsizer.estimate import efficiency as E  # noqa: E402
from llmsizer.estimate.device import cuda_capability, fp8_peak  # noqa: E402
from llmsizer.estimate.duration import (  # noqa: E402
    ExpertGemms,
    expert_gemm_time,
    megatron_expert_gemms,
    step_linear_blocks,
    training_peak,
)
from llmsizer.estimate.framework import with_framework  # noqa: E402
from llmsizer.estimate.training.setup import compute_bytes  # noqa: E402
from llmsizer.formulas.context_parallel import local_tokens  # noqa: E402
from llmsizer.formulas.gemm_shapes import (  # noqa: E402
    arithmetic_intensity,
    gemm_efficiency,
    grouped_wave_efficiency,
    tally,
    training_gemms,
)
from llmsizer.specs.training import TrainingWorkload  # noqa: E402
from llmsizer.validation_cases import MEGATRON_BRIDGE_RUNS, TORCHTITAN_FSDP  # noqa: E402

# most informative first (the budget cuts from the end): the H100 FP8 row with the largest miss, the H100 BF16 row,
# the other H100 rows, then the Blackwell rows' shapes (timed on this GPU)
MOE_ROWS = ("PM1362", "PM1361", "PM1363", "PM1367", "PM1364", "PM1365")
ROLES = ("fc1.fwd", "fc1.dgrad", "fc1.wgrad", "fc2.fwd", "fc2.dgrad", "fc2.wgrad")
STREAMS = 4  # formulas/gemm_shapes.py TE_GROUPED_GEMM_STREAMS
CALIBRATION_MODEL, CALIBRATION_ROW = "llama-3.1-8b", "PM0501"


@dataclass(frozen=True)
class Gemm:
    """One GEMM role of a case: C[m, n] = A[m, k] B[k, n], ``count`` of them (one per expert), ``grouped``: timed by
    the grouped rule (eq. (6)) or the dense one (eqs. (2)-(3))."""

    role: str
    m: int
    n: int
    k: int
    count: int = 1
    grouped: bool = False

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count


@dataclass(frozen=True)
class Case:
    name: str
    row: str
    variant: str
    gemms: tuple[Gemm, ...]
    streams: int = 1
    expert: ExpertGemms | None = None  # the core's grouped GEMMs (te-4-streams: checked against expert_gemm_time)


def row_workload(rid: str) -> tuple[Any, TrainingWorkload, float]:
    """(spec, workload with its framework's defaults, tokens per micro-batch on one device) of a MEGATRON_BRIDGE_RUNS
    row, as estimate/duration.py ``training_duration_for`` and ``step_time`` take them."""
    model, _, fields, _ = MEGATRON_BRIDGE_RUNS[rid]
    spec, w = with_framework(find(model).spec(), TrainingWorkload(**fields))
    return spec, w, float(w.micro_batch * local_tokens(w.seq_len, w.context_parallel))


def row_experts(rid: str, tokens: float | None = None) -> ExpertGemms:
    """The core's grouped expert GEMMs of a row (``tokens``: override the micro-batch's, for the smoke run)."""
    spec, w, t = row_workload(rid)
    g = megatron_expert_gemms(spec, w, tokens or t)
    if g is None:
        raise SystemExit(f"{rid}: the core does not time its experts as Megatron-Core's grouped GEMMs")
    return g


def grouped_gemms(g: ExpertGemms) -> tuple[Gemm, ...]:
    """The six training GEMMs of each of the ``g.launched`` experts, M_ne = ``g.launched_rows`` rows each."""
    rows = round(g.launched_rows)
    return tuple(Gemm(r, m, n, k, g.launched, True) for r, (m, n, k) in zip(
        ROLES, training_gemms(rows, [(g.x, g.fc1_width, True), (g.width, g.x, True)]), strict=True))


def expert_cases(rid: str, tokens: float | None = None) -> list[Case]:
    """The three variants of one MoE row's expert GEMMs (``tokens``: override the micro-batch's, for the smoke run)."""
    g = row_experts(rid, tokens)
    rows, n_exp = round(g.launched_rows), g.launched
    grouped = grouped_gemms(g)
    shapes = [(q.role, q.m, q.n, q.k) for q in grouped]
    # the same FLOPs as one GEMM: the experts' rows stacked in the token dimension (M of fwd/dgrad, K of wgrad)
    dense = tuple(Gemm(r, m * n_exp, n, k) if not r.endswith("wgrad") else Gemm(r, m, n, k * n_exp)
                  for r, m, n, k in shapes)
    label = f"{rid} {MEGATRON_BRIDGE_RUNS[rid][0]} experts G={n_exp} M_e={rows} x={g.x} I={g.width}"
    return [Case(label, rid, "te-4-streams", grouped, STREAMS, g), Case(label, rid, "1-stream", grouped, 1, g),
            Case(label, rid, "dense-same-flops", dense)]


def calibration_case() -> Case:
    """The dense GEMMs of one Llama 3.1 8B decoder layer and its lm_head at PM0501's tokens (full training: each
    linear's three GEMMs), each distinct linear once with its count (run one after another), as
    estimate/duration.py ``step_linear_blocks`` gives them."""
    spec = find(CALIBRATION_MODEL).spec()
    tokens = int(str(TORCHTITAN_FSDP["micro_batch"])) * int(str(TORCHTITAN_FSDP["seq_len"]))
    blocks = step_linear_blocks(spec, "full", 0, ())
    linears = tally((*blocks[0], *blocks[-1]))  # each distinct linear, how many of it (q and o, k and v, w1 and w3)
    names = ("fwd", "dgrad", "wgrad")
    gemms = tuple(Gemm(f"{k_in}->{n_out}.{names[i]}", m, n, k, count)
                  for (k_in, n_out, trained), count in linears.items()
                  for i, (m, n, k) in enumerate(training_gemms(tokens, [(k_in, n_out, trained)])))
    return Case(f"{CALIBRATION_ROW} {CALIBRATION_MODEL} dense layer + lm_head, {tokens} tokens", CALIBRATION_ROW,
                "calibration-dense", gemms)


# the rate against M_e (TE's per-expert GEMMs over 4 streams), for the smallest and the widest expert of the rows:
# Qwen3-30B-A3B (x 2048, I 768: PM1362's local experts) and gpt-oss (x 2880, I 2880: PM1361's), their rows' own M_e
# left out (timed above); M_e from 256 (a short micro-batch or a wide EP) to 8192
SWEEP_ROWS, SWEEP_M = ("PM1362", "PM1361"), (256, 512, 1024, 2048, 4096, 8192)


def sweep_cases() -> list[Case]:
    """Each SWEEP_ROWS row's local experts at each SWEEP_M rows (M_e >= 16: every local expert gets rows, eq. (8))."""
    out = []
    for rid in SWEEP_ROWS:
        g = row_experts(rid)
        for m in SWEEP_M:
            if m == round(g.rows):
                continue
            s = replace(g, rows=float(m), launched=g.local, launched_rows=float(m))
            out.append(Case(f"{rid} {MEGATRON_BRIDGE_RUNS[rid][0]} experts G={s.local} M_e={m} x={g.x} I={g.width} "
                            "(sweep)", rid, "sweep-4-streams", grouped_gemms(s), STREAMS, s))
    return out


def plan(smoke: bool) -> list[Case]:
    """The set's cases, most informative first (the budget cuts from the end); the smoke run: one tiny case (two
    variants)."""
    if smoke:
        return [c for c in expert_cases("PM1362", tokens=16.0) if c.variant != "1-stream"]
    first, *rest = (expert_cases(rid) for rid in MOE_ROWS)  # the reference right after the largest miss
    return [*first, calibration_case(), *(c for cases in rest for c in cases), *sweep_cases()]


def fp8_smoke_case() -> Case:
    """The FP8 path's smoke case, small enough for the CPU's ``torch._scaled_mm`` (the same schema as CUDA's) in
    seconds: PM1362's three fc1 roles as two experts of m 32, n 48, k 64 (n and k multiples of 16, torch's FP8 shape
    rule), so ``operands``' TN layouts, the E4M3 forward and E5M2 gradient operands (and the both-E4M3 fallback
    where E5M2 x E4M3 is refused) and the record's fields are run anywhere."""
    gemms = tuple(Gemm(f"fc1.{role}", 32, 48, 64, 2, True) for role in ("fwd", "dgrad", "wgrad"))
    return Case("PM1362 experts G=2 m=32 n=48 k=64 (fp8 smoke)", "PM1362", "te-4-streams", gemms, STREAMS)


@dataclass(frozen=True)
class Rates:
    """The prediction inputs of one device: R (BF16 and FP8 dense peaks), u, rho8, memory bandwidth, SMs, the GEMMs'
    operand bytes of eq. (1) (the rows' compute dtype: 2, bf16, FP8 GEMMs included, as ``step_time``)."""

    device: str
    peak: float
    peak8: float | None
    u: float
    rho8: float
    bandwidth: float
    sms: int | None
    elem: float


def rates(device: Device) -> Rates:
    w = TrainingWorkload(**MEGATRON_BRIDGE_RUNS["PM1362"][2])
    peak, _, _, _ = training_peak(device, w.precision, w.tf32)
    if not peak:
        raise SystemExit(f"{device.id}: no sourced BF16 peak")
    u = E.training_utilization(device.architecture or "", cuda_capability(device))[0].expected
    bw = float(device.memory_bandwidth.base) if device.memory_bandwidth and device.memory_bandwidth.base else math.inf
    sms = int(device.sm_count.base) if device.sm_count is not None and device.sm_count.base else None
    return Rates(device.id, peak, fp8_peak(device)[0], u, E.float8_gemm_share(device.architecture).expected, bw, sms,
                 float(compute_bytes(w)))


def shape_efficiency(g: Gemm, r: Rates) -> float:
    """e_g of eq. (4): a grouped expert GEMM's min(roofline, w_G of eq. (6)) as ``expert_gemm_time`` takes it, else
    eqs. (2)-(3) (``gemm_efficiency``)."""
    if g.grouped:
        roof = min(1.0, arithmetic_intensity(g.m, g.n, g.k, r.elem) * r.bandwidth / (r.peak * r.u))
        return (min(roof, grouped_wave_efficiency(g.m, g.n, g.count, r.sms)) if r.sms
                else gemm_efficiency(g.m, g.n, g.k, r.peak * r.u, r.bandwidth, r.elem))
    return gemm_efficiency(g.m, g.n, g.k, r.peak * r.u, r.bandwidth, r.elem)


def peak_of(dtype: str, r: Rates) -> float:
    """The rate eq. (4)'s e_g and u scale: the BF16 peak, or the FP8 peak x rho8 (``step_time``'s float8 FLOPs)."""
    if dtype == "fp8":
        if not r.peak8:
            raise SystemExit(f"{r.device}: no FP8 peak")
        return r.peak8 * r.rho8
    return r.peak


def predicted_seconds(g: Gemm, dtype: str, r: Rates) -> float:
    return g.flops / (peak_of(dtype, r) * r.u * shape_efficiency(g, r))


def core_check_seconds(case: Case, dtype: str, r: Rates) -> float | None:
    """The group's seconds by the core's own rule, estimate/duration.py ``expert_gemm_time`` on one layer: the sum of
    the per-GEMM predictions must equal it."""
    if case.expert is None or not case.gemms[0].grouped:
        return None
    _, timed = expert_gemm_time(replace(case.expert, layers=1), True, r.peak * r.u, r.bandwidth, r.elem, r.sms)
    return timed / (peak_of(dtype, r) * r.u)


# ---------------------------------------------------------------------------------------------------- measurement


class Timer:
    """CUDA-event timing after warm-up (perf_counter on the CPU). The sleep that holds the queue is sized in clock
    cycles (``torch.cuda._sleep``), calibrated after the GPU was warmed (an idle GPU's SM clock can sit at a fraction
    of its clock under load, so a rate calibrated idle makes the later sleeps up to that much shorter), and each timed
    sleep is checked by events: its measured length against the host's issue time (``queue_prefilled``); a sleep the
    host outran is recalibrated from its own measured length and the timing redone once."""

    WARM_SECONDS = 1.0  # back-to-back 4096^3 BF16 GEMMs before the calibration: the clocks up

    def __init__(self, torch: Any, cuda: bool) -> None:
        self.torch, self.cuda = torch, cuda
        self.cycles_per_s = 0.0
        self.warm_seconds = 0.0
        self.calibrated_cycles_per_s = 0.0
        if cuda and hasattr(torch.cuda, "_sleep"):
            self.warm_seconds = self.warm_up(self.WARM_SECONDS)
            self.cycles_per_s = self.calibrated_cycles_per_s = self.calibrate()

    def warm_up(self, seconds: float) -> float:
        torch = self.torch
        x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(8):
                torch.mm(x, x)
            torch.cuda.synchronize()
        del x
        return time.perf_counter() - t0

    def calibrate(self) -> float:
        torch = self.torch
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        a.record()
        torch.cuda._sleep(20_000_000)
        b.record()
        torch.cuda.synchronize()
        return 20_000_000 / (a.elapsed_time(b) / 1e3)

    def time(self, fn: Callable[[], None], target_s: float, max_calls: int) -> dict[str, Any]:
        torch = self.torch
        for _ in range(2):  # warm-up: cuBLAS's heuristics, the allocator's blocks
            fn()
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            one = time.perf_counter() - t0
            reps = max(1, min(max_calls, int(target_s / max(one, 1e-6))))
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            s = (time.perf_counter() - t0) / reps
            return {"reps": reps, "device_seconds": s, "eager_seconds": s, "host_issue_seconds": s,
                    "queue_prefilled": None, "sleep_target_seconds": None, "sleep_seconds": None,
                    "issue_seconds": None, "sleep_tries": 0}
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        one = a.elapsed_time(b) / 1e3
        reps = max(3, min(max_calls, int(target_s / max(one, 1e-6))))
        # eager: issued from this loop as it goes
        h0 = time.perf_counter()
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        host = (time.perf_counter() - h0) / reps
        torch.cuda.synchronize()
        eager = a.elapsed_time(b) / 1e3 / reps
        # device: queued behind a sleep longer than the host takes to issue them; s0 before the sleep, a after it,
        # so s0 -> a is the sleep's real length, which the host's issue time must stay under
        prefilled, sleep_s, slept, issued, tries = None, None, None, None, 0
        device = eager
        if self.cycles_per_s:
            s0 = torch.cuda.Event(enable_timing=True)
            sleep_s = min(0.5, 1.5 * host * reps + 0.005)
            while tries < 2:
                tries += 1
                s0.record()
                torch.cuda._sleep(int(self.cycles_per_s * sleep_s))
                h0 = time.perf_counter()
                a.record()
                for _ in range(reps):
                    fn()
                b.record()
                issued = time.perf_counter() - h0
                torch.cuda.synchronize()
                slept = s0.elapsed_time(a) / 1e3
                device = a.elapsed_time(b) / 1e3 / reps
                prefilled = issued < slept
                if prefilled:
                    break
                # the host outran the sleep: the clock rose since the calibration (the cycles last less) or the
                # host was slower than in the eager pass; recalibrate from this sleep and size the next by ``issued``
                self.cycles_per_s = int(self.cycles_per_s * sleep_s) / max(slept, 1e-6)
                if tries < 2:
                    sleep_s = min(0.5, 1.5 * issued + 0.005)
        return {"reps": reps, "device_seconds": device, "eager_seconds": eager, "host_issue_seconds": host,
                "queue_prefilled": prefilled, "sleep_target_seconds": sleep_s, "sleep_seconds": slept,
                "issue_seconds": issued, "sleep_tries": tries}


def operands(torch: Any, g: Gemm, dtype: str, dev: Any) -> tuple[list[tuple[Any, Any]], Callable[[Any, Any], Any],
                                                                      str]:
    """``g.count`` operand pairs of one GEMM role and the op that multiplies a pair, and a note (an FP8 fallback)."""
    role = g.role.rsplit(".", 1)[-1]
    note = ""
    if dtype == "fp8":
        e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
        one = torch.ones((), device=dev, dtype=torch.float32)
        fast = role == "fwd"  # Float8CurrentScaling: split accumulator off in fprop only
        a_type = e4 if role == "fwd" else e5  # HYBRID: the gradient dy in E5M2

        def make(at: Any) -> list[tuple[Any, Any]]:  # TN: A [m, k] row-major, B = [n, k] row-major transposed
            return [(torch.randn(g.m, g.k, device=dev).to(at), torch.randn(g.n, g.k, device=dev).to(e4).t())
                    for _ in range(g.count)]

        def op(a: Any, b: Any) -> Any:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)

        pairs = make(a_type)
        try:
            op(*pairs[0])
        except RuntimeError as exc:  # a torch / cuBLASLt without E5M2 x E4M3: both E4M3
            if a_type is e4:
                raise
            note = f"E5M2 x E4M3 refused ({str(exc).splitlines()[0][:120]}): both E4M3"
            pairs = make(e4)
        return pairs, op, note
    dt = torch.float32 if dtype == "fp32" else torch.bfloat16

    def r(*shape: int) -> Any:
        return torch.randn(*shape, device=dev, dtype=dt)

    if role == "fwd":  # x W^T
        pairs = [(r(g.m, g.k), r(g.n, g.k).t()) for _ in range(g.count)]
    elif role == "dgrad":  # dy W
        pairs = [(r(g.m, g.k), r(g.k, g.n)) for _ in range(g.count)]
    else:  # dy^T x
        pairs = [(r(g.k, g.m).t(), r(g.k, g.n)) for _ in range(g.count)]
    return pairs, torch.mm, note


def group_fn(torch: Any, pairs: list[tuple[Any, Any]], op: Callable[[Any, Any], Any], streams: list[Any]
             ) -> Callable[[], None]:
    """One call: every pair's GEMM, pair i on ``streams[i % len]`` after they wait on the current stream, which
    then waits on them (TransformerEngine's multi_stream_cublas_gemm); no streams: one after another."""
    if not streams:
        def serial() -> None:
            for a, b in pairs:
                op(a, b)
        return serial
    main = torch.cuda.current_stream()

    def fanned() -> None:
        ev = torch.cuda.Event()
        ev.record(main)
        for s in streams:
            s.wait_event(ev)
        for i, (a, b) in enumerate(pairs):
            with torch.cuda.stream(streams[i % len(streams)]):
                op(a, b)
        for s in streams:
            main.wait_stream(s)
    return fanned


def measure_case(torch: Any, timer: Timer, case: Case, dtype: str, r: Rates, dev: Any, target_s: float
                 ) -> dict[str, Any]:
    cuda = dev.type == "cuda"
    streams = [torch.cuda.Stream() for _ in range(case.streams)] if cuda and case.streams > 1 else []
    gemms: list[dict[str, Any]] = []
    notes: list[str] = []
    for g in case.gemms:
        pairs, op, note = operands(torch, g, dtype, dev)
        if note and note not in notes:
            notes.append(note)
        # at most ~400 operations queued behind the sleep (CUDA's launch queue holds about a thousand): a call is
        # the GEMMs plus, over streams, an event, the streams' waits on it and the main stream's waits on them
        ops = g.count + (3 * len(streams) + 1 if streams else 0)
        t = timer.time(group_fn(torch, pairs, op, streams), target_s, max(1, 400 // ops))
        del pairs
        pred = predicted_seconds(g, dtype, r)
        e = shape_efficiency(g, r)
        s = t["device_seconds"]
        gemms.append({"role": g.role, "m": g.m, "n": g.n, "k": g.k, "count": g.count, "flops": g.flops, **t,
                      "tflops": g.flops / s / 1e12, "predicted_seconds": pred,
                      "predicted_tflops": g.flops / pred / 1e12, "shape_efficiency": e,
                      "measured_over_predicted": s / pred, "implied_u": g.flops / (s * peak_of(dtype, r) * e)})
    f = sum(g["flops"] for g in gemms)
    s = sum(g["device_seconds"] for g in gemms)
    pred = sum(g["predicted_seconds"] for g in gemms)
    core = core_check_seconds(case, dtype, r)
    return {"case": case.name, "row": case.row, "variant": case.variant, "dtype": dtype, "streams": case.streams,
            "gemms": gemms, "notes": notes,
            "total": {"flops": f, "device_seconds": s, "eager_seconds": sum(g["eager_seconds"] for g in gemms),
                      "tflops": f / s / 1e12, "predicted_seconds": pred, "predicted_tflops": f / pred / 1e12,
                      "measured_over_predicted": s / pred, "core_check_seconds": core,
                      # the GEMM sets whose device time may hold host gaps (the sleep ended before the host issued)
                      "not_prefilled": [g["role"] for g in gemms if g["queue_prefilled"] is False]}}


def versions(torch: Any) -> dict[str, Any]:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    from llmsizer import __version__
    return {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
            "llmsizer": __version__, "llmsizer_commit": commit}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--out", required=True, help="JSONL file the records are appended to")
    p.add_argument("--smoke", action="store_true", help="one tiny case on the CPU in fp32 (the plumbing)")
    p.add_argument("--device-id", help="catalog device the prediction is for (default: the GPU's driver name)")
    p.add_argument("--budget", type=float, default=170.0, help="seconds for the whole set (default 170)")
    p.add_argument("--target", type=float, default=0.03, help="seconds each GEMM set is timed for (default 0.03)")
    args = p.parse_args(argv)
    t_start = time.monotonic()
    import torch

    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        raise SystemExit("gpu_moe_gemm: no CUDA device (--smoke runs on the CPU)")
    dev = torch.device("cuda" if cuda else "cpu")
    cat = builtin_catalog()
    if args.device_id:
        device = cat.devices[args.device_id]
    elif cuda:
        from llmsizer.catalog.detect import catalog_gpu

        found = catalog_gpu(cat, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory)
        if found is None:
            raise SystemExit(f"gpu_moe_gemm: {torch.cuda.get_device_name(0)!r} is not in the catalog: --device-id")
        device = found
    else:
        device = cat.devices["h100-sxm"]  # the smoke run predicts for the rows' GPU
    r = rates(device)
    cap = torch.cuda.get_device_capability(0) if cuda else None
    fp8 = bool(cuda and cap is not None and cap >= (8, 9) and hasattr(torch, "_scaled_mm") and r.peak8)
    dtypes = ["fp32"] if args.smoke else ["bf16", *(["fp8"] if fp8 else [])]
    cases = plan(args.smoke)
    runs = [(c, d) for c in cases for d in dtypes]
    if args.smoke and hasattr(torch, "_scaled_mm"):
        runs.append((fp8_smoke_case(), "fp8"))  # the FP8 path's plumbing (fp8_smoke_case), not a measurement
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    torch.manual_seed(0)
    timer = Timer(torch, cuda)  # warmed and calibrated before the first case (Timer)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    head = {"schema": "moegemm-1", "date": stamp, "kind": "gemm-set", "smoke": args.smoke,
            "device": {"catalog_id": device.id, "name": torch.cuda.get_device_name(0) if cuda else "cpu",
                       "capability": list(cap) if cap else None,
                       "sms": torch.cuda.get_device_properties(0).multi_processor_count if cuda else None},
            "versions": versions(torch),
            "prediction": {"bf16_peak": r.peak, "fp8_peak": r.peak8, "u": r.u, "rho8": r.rho8,
                           "memory_bandwidth": r.bandwidth, "sms": r.sms, "operand_bytes": r.elem,
                           "source": "formulas/gemm_shapes.py eqs. (2)-(4), (6)-(8) via estimate/duration.py; "
                                     "efficiency.training_utilization, efficiency.float8_gemm_share"},
            "dtypes": dtypes, "fp8_note": None if fp8 or args.smoke else "no FP8 tensor cores or torch._scaled_mm",
            "fp8_smoke": any(d == "fp8" for _, d in runs) if args.smoke else None,
            "timer": {"warm_seconds": timer.warm_seconds, "cycles_per_s": timer.calibrated_cycles_per_s or None}}
    with open(args.out, "a") as f:
        f.write(json.dumps(head) + "\n")
    for i, (case, dtype) in enumerate(runs, 1):
        elapsed = time.monotonic() - t_start
        base = {"schema": "moegemm-1", "date": stamp, "kind": "gemm", "smoke": args.smoke, "device": device.id}
        if elapsed + 5 > args.budget:
            rec: dict[str, Any] = {**base, "status": "skipped", "case": case.name, "variant": case.variant,
                                   "dtype": dtype, "error": f"budget of {args.budget:.0f} s used after {elapsed:.0f} s"}
        else:
            t0 = time.monotonic()
            try:
                rec = {**base, "status": "ok", **measure_case(torch, timer, case, dtype, r, dev, args.target)}
            except Exception as exc:  # noqa: BLE001 - one case's failure (OOM, an FP8 refusal) is recorded, the set goes on
                rec = {**base, "status": "error", "case": case.name, "variant": case.variant, "dtype": dtype,
                       "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            rec["seconds"] = round(time.monotonic() - t0, 2)
            if cuda:
                torch.cuda.empty_cache()
        with open(args.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        tot = rec.get("total")
        print(f"[{i:2d}/{len(runs)}] {rec['status']:7s} {case.row} {case.variant:17s} {dtype:4s} "
              + (f"{tot['tflops']:7.1f} TFLOP/s measured, {tot['predicted_tflops']:7.1f} predicted, "
                 f"measured/predicted time {tot['measured_over_predicted']:.3f}"
                 + (f"; queue NOT prefilled: {', '.join(tot['not_prefilled'])}" if tot['not_prefilled'] else "")
                 if tot else str(rec.get("error"))),
              file=sys.stderr, flush=True)
    print(f"gpu_moe_gemm: {len(runs)} runs in {time.monotonic() - t_start:.0f} s; records in {args.out}")
    print(f"implied u (the u at which eq. (4) meets the device time: u x predicted / measured; calibrated u {r.u:g}):")
    with open(args.out) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "gemm" and rec.get("status") == "ok":
                t = rec["total"]
                print(f"  {rec['row']} {rec['variant']:17s} {rec['dtype']:4s} {t['tflops']:7.1f} TFLOP/s  "
                      f"measured/predicted {t['measured_over_predicted']:.3f}  implied u "
                      f"{r.u / t['measured_over_predicted']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
