"""How long a training run takes on a device: the one rule for ``train``, ``fit --train``, ``recommend --train``
and ``plan``.

FLOPs per token by method (formulas/training_time.py: eqs. (1)-(2) full, (4)-(5) adapters), recomputation from
the gradient-checkpointing setting, the device's dense peak for the compute dtype at the achieved utilisation of the
executed FLOPs (efficiency.TRAINING_DEVICE_UTILIZATION), data-parallel communication over the interconnect and
paged-optimizer traffic over the host link (eqs. (6)-(8)); tensor/pipeline-parallel runs take Megatron's at-scale
utilisation (efficiency.TRAINING_HFU). The calibrated range of the result: estimate/ranges.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..catalog.hardware import Device
from ..errors import InputError
from ..formulas.lora import lora_params
from ..formulas.params import count_params
from ..formulas.training_time import (
    adapter_flops_per_token,
    communication_seconds,
    data_parallel_bytes,
    device_hours,
    step_tokens_per_second,
    training_flops_per_token,
)
from ..formulas.weight_formats import weight_bytes
from ..result import Assumption
from ..specs import ModelSpec, TrainingWorkload
from ..specs.training import normalize_targets
from . import efficiency as E
from . import ranges as R
from .fit import link_bandwidth_for
from .speed import attention_width
from .training import estimate_training

ADAPTER_METHODS = ("lora", "dora", "qlora")


def recompute_mode(grad_checkpointing: str | None) -> str:
    """'full' when every layer's forward runs again in the backward pass, else 'none' (selective recomputation
    re-runs only the attention core, whose FLOPs the 12 L d s term already counts once)."""
    return "full" if grad_checkpointing == "full" else "none"


@dataclass(frozen=True)
class TrainingFlops:
    per_token: float
    formula: str
    source: str
    trained_params: int


def flops_per_token(spec: ModelSpec, method: str = "full", seq_len: int = 2048, recompute: str = "none",
                    rank: int = 16, targets: tuple[str, ...] | str = TrainingWorkload.targets) -> TrainingFlops:
    """Training FLOPs per token for ``method`` (full, lora, dora, qlora)."""
    n = count_params(spec).active
    width = attention_width(spec)
    if method in ADAPTER_METHODS:
        na = lora_params(spec, rank, targets, dora=method == "dora").total
        f = adapter_flops_per_token(n, na, spec.num_layers, width, seq_len, recompute)
        return TrainingFlops(f, ("6N + 6N_a + 16 L d s (frozen base, full recomputation)" if recompute == "full"
                                 else "4N + 6N_a + 12 L d s (frozen base: no weight gradients)"),
                             "formulas/training_time.py eqs. (4)-(5)", na)
    if method != "full":
        raise InputError(f"unknown method {method!r}; choose one of: full, {', '.join(ADAPTER_METHODS)}")
    f = training_flops_per_token(n, spec.num_layers, width, seq_len, recompute)
    return TrainingFlops(f, "8N + 16 L d s (full recomputation)" if recompute == "full" else "6N + 12 L d s",
                         "formulas/training_time.py eqs. (1)-(2)", n)


@dataclass(frozen=True)
class Duration:
    """Wall-clock time of a training run on ``devices`` x one device type (None where the peak is unsourced)."""

    tokens: float
    devices: int
    flops: TrainingFlops
    peak_flops: float | None
    peak_key: str
    utilization: float
    utilization_source: str
    seconds: float | None
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)
    step: StepTime | None = None
    lower_bound: bool = False  # timed at the whole peak (a CPU with no calibrated utilisation): the shortest time

    @property
    def tokens_per_second(self) -> float | None:
        return self.step.tokens_per_second if self.step is not None else None

    @property
    def seconds_range(self) -> tuple[float, float] | None:
        """Calibrated [low, high] wall-clock seconds from the training-throughput band (estimate/ranges.py) of
        data-parallel runs; None for tensor/pipeline-parallel runs (no validation rows)."""
        if self.step is None or self.step.topology in ("model-parallel", "cpu") or self.seconds is None:
            return None
        r = R.calibrated_range(R.TRAINING_SPEED, R.PYTORCH_TRAINING, self.step.tokens_per_second)
        return None if r is None else (self.tokens / r[1], self.tokens / r[0])

    @property
    def device_hours(self) -> float | None:
        return device_hours(self.seconds, self.devices) if self.seconds is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "devices": self.devices, "flops_per_token": self.flops.per_token,
                "flops_formula": self.flops.formula, "flops_source": self.flops.source,
                "peak_flops": self.peak_flops, "peak_key": self.peak_key, "utilization": self.utilization,
                "utilization_source": self.utilization_source, "seconds": self.seconds,
                "device_hours": self.device_hours, "tokens_per_second": self.tokens_per_second,
                "calibrated_seconds_range": self.seconds_range,
                "step": self.step.to_dict() if self.step is not None else None,
                "assumptions": [a.to_dict() for a in self.assumptions],
                "warnings": list(self.warnings), "lower_bound": self.lower_bound}


@dataclass(frozen=True)
class StepTime:
    """One optimizer step of data-parallel training (formulas/training_time.py eqs. 6-8), per device."""

    compute_seconds: float  # per micro-step, eq. (6)
    comm_seconds: float  # per micro-step, eq. (7)
    paging_seconds: float  # per optimizer step
    micro_steps: int
    tokens_per_second: float  # all devices
    comm_bytes: float  # per device per micro-step
    topology: str  # 'single', 'direct', 'host-staged', 'model-parallel', 'cpu' (one CPU)

    def to_dict(self) -> dict[str, Any]:
        return {"compute_seconds": self.compute_seconds, "comm_seconds": self.comm_seconds,
                "paging_seconds": self.paging_seconds, "micro_steps": self.micro_steps,
                "tokens_per_second": self.tokens_per_second, "comm_bytes": self.comm_bytes,
                "topology": self.topology}


def _weight_format(w: TrainingWorkload) -> str:
    if w.method == "qlora":
        return "nf4-dq"
    return "fp32" if w.precision == "fp32" or w.base_dtype == "fp32" else "bf16"


def step_time(spec: ModelSpec, device: Device, w: TrainingWorkload, fl: TrainingFlops, peak: float, u: float,
              link_bandwidth: float | None, paged_bytes: float, notes: list[Assumption],
              warnings: list[str]) -> StepTime:
    """Eqs. (6)-(8) of formulas/training_time.py for workload ``w`` (its gpus, sharding, micro-batch, grad
    accumulation) on ``device``; ``paged_bytes``: optimizer states in unified memory (the memory estimate's)."""
    n = w.gpus
    tokens = float(w.micro_batch * w.seq_len)
    t_c = tokens * fl.per_token / (peak * u)
    sharded = w.zero == 3 or w.fsdp in ("full", "hybrid")
    comm_b = t_m = 0.0
    topology = "single"
    if n > 1 and w.tp * w.pp == 1:
        wb = float(weight_bytes(spec, _weight_format(w)).total)
        gb = float(fl.trained_params) * (2 if w.precision in ("bf16", "fp16") else 4)
        comm_b = data_parallel_bytes(n, wb, gb, sharded)
        host = device.id in E.NO_PEER_TO_PEER
        bw = E.HOST_STAGED_COLLECTIVE_BANDWIDTH.expected if host else link_bandwidth
        topology = "host-staged" if host else "direct"
        if bw:
            t_m = communication_seconds(comm_b, n, bw, host)
            notes.append(Assumption("collective_bandwidth", bw, True,
                                    E.HOST_STAGED_COLLECTIVE_BANDWIDTH.source if host
                                    else "the device's interconnect (per direction)"))
        else:
            warnings.append(f"no interconnect bandwidth for {n} x {device.id}: data-parallel communication "
                            "is not counted")
    elif n > 1:
        topology = "model-parallel"
    if device.kind == "cpu" and n == 1:
        topology = "cpu"
    t_p = 0.0
    if paged_bytes:
        t_p = 2.0 * paged_bytes / E.HOST_LINK_BANDWIDTH
        notes.append(Assumption("host_link_bandwidth", E.HOST_LINK_BANDWIDTH, True, E.HOST_LINK_SOURCE))
    tps = step_tokens_per_second(n, tokens, w.grad_accumulation, t_c, t_m, t_p)
    return StepTime(t_c, t_m, t_p, w.grad_accumulation, tps, comm_b, topology)


def training_peak(device: Device, precision: str = TrainingWorkload.precision) -> tuple[float | None, str, bool]:
    """(peak FLOP/s, its key, timed at the whole peak) a training run with ``precision`` is timed against: a GPU's
    dense BF16 peak; a CPU's BF16 matrix peak (AMX, derived in the catalog) for a bf16 recipe where sourced, else its
    FP32 peak, which has no calibrated utilisation (True: efficiency.TRAINING_UTILIZATION_CPU_BOUND)."""
    peak, key = device.peak_flops("bf16")
    if device.kind != "cpu":
        return peak, key, False
    if "bf16" in precision and peak is not None:
        return peak, key, False
    peak, key = device.peak_flops("fp32")
    return peak, key, True


def training_duration(spec: ModelSpec, device: Device, devices: int, tokens: float, *, method: str = "full",
                      seq_len: int = 2048, grad_checkpointing: str | None = None, utilization: float | None = None,
                      rank: int = 16, targets: tuple[str, ...] | str = TrainingWorkload.targets,
                      flops: TrainingFlops | None = None, workload: TrainingWorkload | None = None,
                      link_bandwidth: float | None = None, paged_bytes: float = 0.0) -> Duration:
    """Eqs. (6)-(8) of formulas/training_time.py for this model, method and device: per-device compute at the
    achieved utilisation of the executed FLOPs, data-parallel communication over the interconnect (overlapped),
    optimizer paging. ``workload`` gives the full settings (devices, sharding, micro-batch, grad accumulation);
    without it one data-parallel replica per device with the method/sequence given here. Tensor/pipeline-parallel
    runs use Megatron's at-scale utilisation (efficiency.TRAINING_HFU) with no separate communication term.
    ``flops``: the FLOP count of these same settings when the caller already has it."""
    if tokens <= 0:
        raise InputError(f"tokens must be positive, got {tokens}")
    w = workload or TrainingWorkload(method=method, seq_len=seq_len, grad_checkpointing=grad_checkpointing or "none",
                                     rank=rank, targets=normalize_targets(targets), gpus=devices)
    recompute = recompute_mode(w.grad_checkpointing)
    fl = flops or flops_per_token(spec, w.method, w.seq_len, recompute, w.rank, w.targets)
    own = True
    peak, key, cpu_bound = training_peak(device, w.precision)
    if w.tp * w.pp > 1:
        factor = E.TRAINING_HFU
    elif device.kind == "cpu":
        factor = E.TRAINING_UTILIZATION_CPU_BOUND if cpu_bound else E.TRAINING_UTILIZATION_CPU_AMX
    else:
        factor, own = E.training_utilization(device.architecture)
    u = utilization if utilization is not None else factor.expected
    if not 0 < u <= 1:
        raise InputError(f"utilization must be in (0, 1], got {u}")
    notes = [Assumption("utilization", u, utilization is None, factor.source),
             Assumption("flops_per_token", round(fl.per_token), True, f"{fl.formula} ({fl.source})")]
    warnings: list[str] = []
    if not own and utilization is None:
        notes.append(Assumption("utilization_architecture", device.architecture or "unknown", True,
                                "no validation row for this GPU architecture: the Ada (RTX 4090) value is used"))
    if w.method == "qlora":
        warnings.append("QLoRA dequantizes the 4-bit base in every forward and backward pass; that memory-bound "
                        "work is not in the FLOP count, so the duration is a lower bound")
    if cpu_bound and utilization is None and w.tp * w.pp == 1 and peak is not None:
        warnings.append(f"{device.id} is a CPU without a sourced BF16 matrix peak (or an fp32/fp16 recipe): the CPU "
                        f"utilisation is calibrated for AMX BF16 only, so the duration is at 100% of its {key} peak, "
                        "the shortest time that peak allows")
    if peak is None:
        warnings.append(f"{device.id} has no sourced {key} peak FLOP/s: duration not estimated")
        return Duration(tokens, devices, fl, None, key, u, factor.source, None, tuple(notes), tuple(warnings))
    st = step_time(spec, device, w, fl, peak, u, link_bandwidth, paged_bytes, notes, warnings)
    secs = tokens / st.tokens_per_second
    bound = cpu_bound and utilization is None and w.tp * w.pp == 1
    return Duration(tokens, devices, fl, peak, key, u, factor.source, secs, tuple(notes), tuple(warnings), st, bound)


def training_duration_for(spec: ModelSpec, device: Device, devices: int, tokens: float, fields: dict[str, Any],
                          utilization: float | None = None) -> Duration:
    """``training_duration`` for TrainingWorkload keyword ``fields`` (method, seq_len, grad_checkpointing, rank,
    targets; the dataclass defaults otherwise)."""
    kw = {k: v for k, v in fields.items() if k in TrainingWorkload.__dataclass_fields__}
    kw["gpus"] = devices
    w = TrainingWorkload(**kw)
    paged = sum(i.bytes for i in estimate_training(spec, w).items if i.name == "paged_optimizer_states")
    return training_duration(spec, device, devices, tokens, utilization=utilization, workload=w,
                             link_bandwidth=link_bandwidth_for(device, None) if devices > 1 else None,
                             paged_bytes=paged)
