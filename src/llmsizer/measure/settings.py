"""What a measurement runs: one validated, JSON-round-trippable settings object (no torch here).

The names follow the estimators' workloads so a measurement can be compared with the estimate of the same
settings: ``context``/``concurrency``/``output_tokens``/``dtype``/``weights``/``attention`` as in
:class:`~llmsizer.specs.InferenceWorkload`; ``method``/``rank``/``targets``/``optimizer``/``precision``/
``micro_batch``/``seq_len``/``grad_checkpointing`` as in :class:`~llmsizer.specs.training.TrainingWorkload`.
Only what can really be run on one device in a few steps is accepted; everything else is refused up front with
the list of allowed values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import InputError, LlmsizerError
from ..formulas.hf_cache_traffic import ATTENTION  # transformers attn_implementation names, one home
from ..formulas.training_states import BNB_OPTIMIZERS  # the bitsandbytes ones: one field of each optimizer's record
from ..specs.training import (  # every one of them runs: torch or bitsandbytes (workloads.py)
    METHODS,
    OPTIMIZER_IMPLS,
    OPTIMIZERS,
    MethodDefault,
    default_grad_checkpointing,
    paged_off_cuda,
)
from ..specs.training import normalize_targets as estimate_targets
from ..specs.workload import DTYPES
from ..suggest import unknown_choice

KINDS = ("inference", "training")
TORCH_DEVICES = ("auto", "cpu", "cuda")  # the torch device a measurement runs on (not specs' workload kinds)
INFER_WEIGHTS = ("nf4", "nf4-dq")  # besides the compute dtype itself: bitsandbytes 4-bit (CUDA)
# the training precisions and checkpointing the harness runs: a subset of specs/training.py PRECISIONS and
# GRAD_CHECKPOINTING (no FSDP, Megatron or selective recompute here), named apart so the two never read as one
MEASURED_PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "bf16", "fp16")
MEASURED_GRAD_CHECKPOINTING = ("none", "full")
# PEFT's own shorthand, passed to it as is (every nn.Linear but the output head: peft tuners/tuners_utils.py
# ``_maybe_include_all_linear_layers``): the rule the estimate follows for 'all-linear' (specs/training.py ALL_LINEAR)
ALL_LINEAR = ("all-linear",)

class MeasureUnavailableError(LlmsizerError, RuntimeError):
    """The optional 'measure' extra (torch, transformers, peft) is not installed."""


# transformers attn_implementation for each attention name (flash needs the flash-attn package)
HF_ATTENTION = {"sdpa": "sdpa", "eager": "eager", "flash": "flash_attention_2"}


@dataclass(frozen=True)
class MeasureSettings:
    """One measurement.

    kind: 'inference' (prefill of ``context - output_tokens`` prompt tokens for ``concurrency`` sequences, then
        ``output_tokens`` one-token decode steps, greedy, transformers DynamicCache) or 'training' (optimizer
        steps on ``micro_batch`` x ``seq_len`` random tokens).
    model: catalog name, config.json or model folder (a folder with weight files is loaded as a checkpoint
        unless ``random_weights``).
    device: 'auto' (CUDA when available, else CPU), 'cpu' or 'cuda'.
    dtype: inference compute and weight dtype; None: bf16 on CUDA, fp32 on CPU (recorded as a default).
    weights: inference weight format besides the dtype: 'nf4' / 'nf4-dq' (bitsandbytes 4-bit; CUDA).
    steps: timed repetitions after the tracked pass (inference: whole prefill+decode passes; training:
        optimizer steps). The tracked pass is one inference pass, or two training steps (the second one runs
        with the optimizer state allocated).
    base_dtype: dtype of the frozen base of lora/dora (and of the tensors QLoRA leaves unquantized); None: bf16,
        or fp32 for precision fp32 (the estimator's default).
    optimizer_impl: 'fused' / 'foreach' / 'for-loop' (torch optimizers); None: torch's default (foreach on CUDA,
        for-loop on CPU).
    memory_cap: bytes the workload may use (CUDA: ``set_per_process_memory_fraction``; CPU: a limit on the
        growth of the process's data segment, ``RLIMIT_DATA``); None: no cap.
    """

    kind: str
    model: str
    device: str = "auto"
    # inference
    context: int = 1024
    concurrency: int = 1
    output_tokens: int = 16
    dtype: str | None = None
    weights: str | None = None
    attention: str = "sdpa"
    # training
    method: str = "full"
    rank: int = 16
    alpha: int | None = None
    targets: tuple[str, ...] = ALL_LINEAR
    optimizer: str = "adamw"
    precision: str | None = None
    base_dtype: str | None = None
    optimizer_impl: str | None = None
    micro_batch: int = 1
    seq_len: int = 512
    # None: the method's default, the estimate's own rule (specs/training.py default_grad_checkpointing: full for
    # QLoRA, peft's k-bit preparation; none otherwise), so `measure train --method qlora` runs the recipe
    # `train --method qlora` sizes
    grad_checkpointing: str = None  # type: ignore[assignment]
    # both
    steps: int | None = None
    seed: int = 0
    threads: int | None = None
    memory_cap: int | None = None
    random_weights: bool = False
    allow_cpu_bnb: bool = False  # bitsandbytes 4-bit weights (QLoRA, nf4) on CPU: for tests of the code path only

    def __post_init__(self) -> None:
        if self.grad_checkpointing is None or type(self.grad_checkpointing) is MethodDefault:
            object.__setattr__(self, "grad_checkpointing", default_grad_checkpointing(self.method))
        closed = (("kind", self.kind, KINDS), ("device", self.device, TORCH_DEVICES),
                  ("attention", self.attention, ATTENTION), ("method", self.method, METHODS),
                  ("optimizer", self.optimizer, OPTIMIZERS),
                  ("grad_checkpointing", self.grad_checkpointing, MEASURED_GRAD_CHECKPOINTING))
        for name, value, allowed in closed:
            if value not in allowed:
                raise InputError(unknown_choice(name, value, allowed))
        if self.dtype is not None and self.dtype not in DTYPES:
            raise InputError(unknown_choice("dtype", self.dtype, DTYPES))
        for opt_name, opt_value, opt_allowed in (("base_dtype", self.base_dtype, DTYPES),
                                                 ("optimizer_impl", self.optimizer_impl, OPTIMIZER_IMPLS)):
            if opt_value is not None and opt_value not in opt_allowed:
                raise InputError(unknown_choice(opt_name, opt_value, opt_allowed))
        if self.base_dtype is not None and self.method == "full":
            raise InputError("base_dtype applies to lora/dora/qlora (a frozen base); full training stores weights "
                             "in the precision's dtype")
        if self.precision is not None and self.precision not in MEASURED_PRECISIONS:
            raise InputError(f"measure runs precision {self.precision!r} only through its own framework; choose one "
                             f"of: {', '.join(MEASURED_PRECISIONS)}")
        if self.weights is not None and self.weights not in (*DTYPES, *INFER_WEIGHTS):
            raise InputError(f"measure loads weights as {', '.join((*DTYPES, *INFER_WEIGHTS))}; got {self.weights!r}")
        for name in ("context", "concurrency", "micro_batch", "seq_len", "rank"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"{name} must be a positive integer, got {v!r}")
        if not 0 <= self.output_tokens < self.context:
            raise InputError(f"output_tokens must be between 0 and context - 1 ({self.context - 1}), "
                             f"got {self.output_tokens}")
        if self.steps is not None and self.steps < 0:
            raise InputError(f"steps must not be negative, got {self.steps}")
        if self.memory_cap is not None and self.memory_cap <= 0:
            raise InputError(f"memory_cap must be positive, got {self.memory_cap}")
        if not self.targets:
            raise InputError("LoRA needs at least one target module (e.g. q_proj,v_proj)")
        if self.method == "qlora" and self.precision in ("fp32", "fp16", "fp16-mixed"):
            raise InputError(f"qlora computes in bf16 on a 4-bit base; precision {self.precision!r} does not apply "
                             "(use bf16-mixed or bf16)")
        # bitsandbytes 0.50.2 runs its optimizers on a CPU (its CPU backend: the 8-bit block-wise kernels and the
        # 32-bit ones), so they are measured there; a paged one pages nothing there (optim/optimizer.py
        # get_state_buffer lines 374-382 fall back to unpaged RAM with a warning) and the estimate refuses it on a
        # CPU (specs/training.py paged_off_cuda): the same refusal and alternative here
        if self.device == "cpu" and self.kind == "training" and self.optimizer.startswith("paged-"):
            raise InputError(paged_off_cuda(self.optimizer, cpu=True, measure=True))
        if self.device == "cpu" and not self.allow_cpu_bnb:
            if self.kind == "training" and self.method == "qlora":
                raise InputError("QLoRA needs CUDA (bitsandbytes 4-bit kernels); measure it on a GPU")
            if self.kind == "inference" and self.weights in INFER_WEIGHTS:
                raise InputError("bitsandbytes 4-bit weights need CUDA; measure them on a GPU")

    # -- derived ---------------------------------------------------------------------------------------------
    @property
    def prompt_tokens(self) -> int:
        return self.context - self.output_tokens

    @property
    def timed_steps(self) -> int:
        return self.steps if self.steps is not None else (1 if self.kind == "inference" else 2)

    def resolved(self, device: str) -> tuple[MeasureSettings, list[tuple[str, Any, str]]]:
        """Settings with the device and every default filled in, and the defaults applied (name, value, why)."""
        defaults: list[tuple[str, Any, str]] = []
        changes: dict[str, Any] = {"device": device}
        if self.device == "auto":
            defaults.append(("device", device, "CUDA when torch sees a GPU, else CPU"))
        if self.kind == "inference" and self.dtype is None:
            changes["dtype"] = "bf16" if device == "cuda" else "fp32"
            defaults.append(("dtype", changes["dtype"], "bf16 on CUDA; fp32 on CPU (bf16 matmuls are slow there)"))
        if self.kind == "training" and self.precision is None:
            changes["precision"] = "bf16" if self.method == "qlora" else "bf16-mixed" if device == "cuda" else "fp32"
            defaults.append(("precision", changes["precision"], "bf16-mixed on CUDA (HF Trainer --bf16; bf16 for "
                                                                 "QLoRA), fp32 on CPU"))
        precision = changes.get("precision", self.precision)
        if self.kind == "training" and self.method != "full" and self.base_dtype is None:
            changes["base_dtype"] = "fp32" if precision == "fp32" else "bf16"
            defaults.append(("base_dtype", changes["base_dtype"], "frozen base in bf16 (torch_dtype=bfloat16, the "
                                                                   "usual PEFT setup); fp32 for precision fp32"))
        if self.kind == "training" and self.optimizer_impl is None and self.optimizer not in BNB_OPTIMIZERS:
            changes["optimizer_impl"] = "foreach" if device == "cuda" else "for-loop"
            defaults.append(("optimizer_impl", changes["optimizer_impl"], "torch's default: foreach for CUDA "
                                                                           "tensors, a for-loop on CPU"))
        if self.steps is None:
            changes["steps"] = self.timed_steps
            defaults.append(("steps", changes["steps"], "timed repetitions after the tracked pass"))
        return replace(self, **changes), defaults

    # -- (de)serialisation ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["targets"] = list(self.targets)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MeasureSettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown measure settings: {', '.join(unknown)}")
        kw = dict(d)
        if "targets" in kw:
            kw["targets"] = normalize_targets(kw["targets"])
        return cls(**kw)


def normalize_targets(targets: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """PEFT ``target_modules`` from 'q_proj,v_proj', ['q', 'v'] or 'all-linear': each name checked by the estimate's
    rule (specs/training.py ``normalize_targets``: the same names are accepted, an unknown one refused the same way);
    the short names q/k/v/o/gate/up/down become their transformers module names q_proj ... down_proj, embed
    embed_tokens; 'all-linear' stays PEFT's shorthand, alone (PEFT takes it as the whole target_modules)."""
    items = [t.strip() for t in (targets.split(",") if isinstance(targets, str) else targets) if t.strip()]
    if not items:
        return ()
    canonical = estimate_targets(items)  # raises InputError for a name the estimate does not know
    if any(t.lower() in ("all-linear", "all_linear", "all") for t in items):
        if len(items) > 1:
            raise InputError("targets: 'all-linear' stands alone (PEFT reads it as the whole target_modules); "
                             f"got {', '.join(items)}")
        return ALL_LINEAR
    if "linear" in canonical:
        raise InputError("targets: 'linear' names the linears only PEFT's 'all-linear' reaches; use all-linear")
    out: list[str] = []
    for t in items:
        n = _PEFT_MODULE.get(t, t)
        if n not in out:
            out.append(n)
    return tuple(out)


# the estimate's short target names as transformers names the modules (llama-style families)
_PEFT_MODULE = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
                "down": "down_proj", "embed": "embed_tokens"}
