"""How long a training run takes on a device: the one rule for ``train``, ``fit --train``, ``recommend --train``
and ``plan``.

FLOPs per token by method (formulas/training_time.py: eqs. (1)-(2) full, (4)-(5) adapters), recomputation from
the gradient-checkpointing setting, the device's dense peak for the compute dtype, and a utilisation factor
(estimate/efficiency.py: TRAINING_HFU with full recomputation, TRAINING_MFU otherwise), then eq. (3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..catalog.hardware import Device
from ..errors import InputError
from ..formulas.lora import lora_params
from ..formulas.params import count_params
from ..formulas.training_time import adapter_flops_per_token, device_hours, training_flops_per_token, training_seconds
from ..result import Assumption
from ..specs import ModelSpec, TrainingWorkload
from . import efficiency as E
from .speed import attention_width

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

    @property
    def device_hours(self) -> float | None:
        return device_hours(self.seconds, self.devices) if self.seconds is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "devices": self.devices, "flops_per_token": self.flops.per_token,
                "flops_formula": self.flops.formula, "flops_source": self.flops.source,
                "peak_flops": self.peak_flops, "peak_key": self.peak_key, "utilization": self.utilization,
                "utilization_source": self.utilization_source, "seconds": self.seconds,
                "device_hours": self.device_hours, "assumptions": [a.to_dict() for a in self.assumptions],
                "warnings": list(self.warnings)}


def training_duration(spec: ModelSpec, device: Device, devices: int, tokens: float, *, method: str = "full",
                      seq_len: int = 2048, grad_checkpointing: str | None = None, utilization: float | None = None,
                      rank: int = 16, targets: tuple[str, ...] | str = TrainingWorkload.targets,
                      flops: TrainingFlops | None = None) -> Duration:
    """Eq. (3) of formulas/training_time.py for this model, method and device. ``flops``: the FLOP count of
    these same settings when the caller already has it (a search over devices computes it once)."""
    if tokens <= 0:
        raise InputError(f"tokens must be positive, got {tokens}")
    recompute = recompute_mode(grad_checkpointing)
    fl = flops or flops_per_token(spec, method, seq_len, recompute, rank, targets)
    factor = E.TRAINING_HFU if recompute == "full" else E.TRAINING_MFU
    u = utilization if utilization is not None else factor.expected
    if not 0 < u <= 1:
        raise InputError(f"utilization must be in (0, 1], got {u}")
    peak, key = device.peak_flops("fp32" if device.kind == "cpu" else "bf16")
    notes = [Assumption("utilization", u, utilization is None, factor.source),
             Assumption("flops_per_token", round(fl.per_token), True, f"{fl.formula} ({fl.source})")]
    warnings: list[str] = []
    if method == "qlora":
        warnings.append("QLoRA dequantizes the 4-bit base in every forward and backward pass; that memory-bound "
                        "work is not in the FLOP count, so the duration is a lower bound")
    if peak is None:
        warnings.append(f"{device.id} has no sourced {key} peak FLOP/s: duration not estimated")
        return Duration(tokens, devices, fl, None, key, u, factor.source, None, tuple(notes), tuple(warnings))
    secs = training_seconds(tokens, fl.per_token, devices, peak, u)
    return Duration(tokens, devices, fl, peak, key, u, factor.source, secs, tuple(notes), tuple(warnings))


def training_duration_for(spec: ModelSpec, device: Device, devices: int, tokens: float, fields: dict[str, Any],
                          utilization: float | None = None) -> Duration:
    """``training_duration`` for TrainingWorkload keyword ``fields`` (method, seq_len, grad_checkpointing, rank,
    targets; the dataclass defaults otherwise)."""
    w = TrainingWorkload(**{k: v for k, v in fields.items() if k in TrainingWorkload.__dataclass_fields__})
    return training_duration(spec, device, devices, tokens, method=w.method, seq_len=w.seq_len,
                             grad_checkpointing=w.grad_checkpointing, utilization=utilization, rank=w.rank,
                             targets=w.targets)
