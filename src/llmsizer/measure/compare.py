"""Measured vs estimated: the estimate of a record's settings, and one row per component and per total.

Error is ``(estimated - measured) / measured``: positive when llmsizer over-estimates. Rows with a ``kind``
(``inference memory``, ``training memory``, ``prefill throughput``, ``decode
throughput`` (one sequence), ``batched decode throughput``, ``training throughput``) are the headline figures ``llmsizer validate``
summarises; the others are the per-component breakdown.

What is compared with what (inference, the ``transformers`` engine profile):

==================  ==================================================  ===========================================
row                 estimate                                            measurement
==================  ==================================================  ===========================================
weights             item ``weights``                                    parameter + buffer (+ 4-bit state) bytes
kv_cache            item ``kv_cache`` (KV at the peak phase)            KV-cache storages live at the tensor peak
activations         ``activations`` + ``dequant_buffer``                the rest of the live tensors at the peak
                    (+ ``tied_copy_on_load`` when loading peaks)
peak tensors        sum of the three                                    tracker peak (CPU) / ``max_memory_allocated``
allocator cache     ``allocator_cache``                                 ``max_memory_reserved - max_memory_allocated``
cuda_context        ``cuda_context``                                    NVML process memory - ``memory_reserved()``
device total        device total                                        ``cuda_context + max_memory_reserved``
host runtime        ``host_runtime``                                    RSS after the imports
process RSS         host total (CPU runs)                               peak RSS of the process
==================  ==================================================  ===========================================

Training rows use ``llmsizer.estimate.training.estimate_training`` when it is installed (its items are grouped into
weights / gradients / optimizer state / activations by name); without it only the measurement is shown. A CUDA
training run is estimated under the metric it measured, 'nvidia-smi' with the worker's fixed shapes: its ``allocator
reserve`` row (``allocator_reserve``: eqs. R1 + R2 of estimate/allocator.py) against ``max_memory_reserved -
max_memory_allocated``, its device total against ``cuda_context + max_memory_reserved``.
Throughput rows need the device in the hardware catalog (``llmsizer.estimate.speed.estimate_speed``;
training: ``formulas/training_time.py`` at the catalog's default MFU).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import LlmsizerError
from ..estimate.ranges import BATCHED, DECODE, PREFILL, TRAINING_SPEED
from ..result import Estimate
from ..specs import ModelSpec

MEMORY_KINDS = {"inference": "inference memory", "training": "training memory"}


@dataclass(frozen=True)
class Row:
    component: str
    estimated: float | None
    measured: float | None
    unit: str = "bytes"
    kind: str | None = None
    low: float | None = None
    high: float | None = None
    note: str = ""
    # a whole-need figure's (device total, process RSS) calibrated range, estimate/allocator.py ``calibrated_need``:
    # the one the CLI prints, by which ``validate`` judges the row (None: a live-tensor figure, judged by its band
    # alone; or a whole-need figure the CLI prints no range for -- a CPU run's process RSS -- judged by none)
    calibrated: tuple[int, int] | None = None
    # why the figure feeds no calibrated band ('' = its kind's): a training duration on a GPU architecture with no
    # training calibration row (estimate/duration.py Duration.no_band)
    no_band: str = ""

    @property
    def error(self) -> float | None:
        if self.estimated is None or not self.measured:
            return None
        return (self.estimated - self.measured) / self.measured

    @property
    def within_range(self) -> bool | None:
        if self.measured is None or self.low is None or self.high is None or self.low == self.high:
            return None
        return self.low <= self.measured <= self.high

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "kind": self.kind, "unit": self.unit, "estimated": self.estimated,
                "low": self.low, "high": self.high, "measured": self.measured, "error": self.error,
                "within_range": self.within_range, "note": self.note,
                "calibrated": None if self.calibrated is None else list(self.calibrated),
                **({"no_band": self.no_band} if self.no_band else {})}


def spec_of(record: dict[str, Any]) -> ModelSpec:
    from ..readers.hf_config import spec_from_config

    model = record["model"]
    return spec_from_config(model["config"], name=model["name"], source=model.get("source", ""))


# -- estimates --------------------------------------------------------------------------------------------------

def inference_estimate(spec: ModelSpec, s: dict[str, Any]) -> Estimate:
    from ..estimate.inference import estimate_inference

    return estimate_inference(spec, context=s["context"], concurrency=s["concurrency"],
                              output_tokens=s["output_tokens"], device="gpu" if s["device"] == "cuda" else "cpu",
                              engine="transformers", dtype=s["dtype"], attention=s["attention"],
                              weights=s.get("weights") or s["dtype"])


# the settings that apply to adapter methods only (a full fine-tune's record carries their defaults)
ADAPTER_FIELDS = ("rank", "targets", "alpha", "base_dtype")

# The shapes a measured training run has (specs/training.py ``batch_shapes``): the worker draws one batch of
# ``micro_batch`` x ``seq_len`` random token ids once (measure/worker.py ``_training``, line 325) and feeds that same
# tensor to every tracked and timed step (lines 336, 346) as ``model(input_ids=ids, labels=ids)`` (measure/workloads.py
# ``training_step``, line 221): no padding, no attention mask, the same tensor shapes every step. So 'fixed', not the
# workload's default 'variable' (batches padded to their longest sample). Inference needs no such field: the worker's
# ``concurrency`` prompts are one [concurrency, prompt_tokens] tensor of equal-length prompts (worker.py line 272),
# prefilled in one forward and decoded one token per sequence per step (workloads.py ``inference_pass``), which is
# what the inference workload's ``concurrency`` sequences of ``context`` tokens describe.
RUN_BATCH_SHAPES = "fixed"


def training_fields(s: dict[str, Any]) -> dict[str, Any]:
    """The training workload of a measured run's settings ``s`` (its record's ``settings``): what the worker ran,
    shapes included (``RUN_BATCH_SHAPES``)."""
    fields: dict[str, Any] = {"method": s["method"], "optimizer": s["optimizer"], "precision": s["precision"],
                              "micro_batch": s["micro_batch"], "seq_len": s["seq_len"],
                              "grad_checkpointing": s["grad_checkpointing"], "attention": s["attention"],
                              "batch_shapes": RUN_BATCH_SHAPES}
    if s.get("optimizer_impl"):
        fields["optimizer_impl"] = s["optimizer_impl"]
    if s["method"] != "full":
        fields.update(rank=s["rank"], targets=tuple(s["targets"]))
        if s.get("alpha"):
            fields["alpha"] = s["alpha"]
        if s.get("base_dtype"):
            fields["base_dtype"] = s["base_dtype"]
    return fields


def training_estimate(spec: ModelSpec, s: dict[str, Any]) -> tuple[Estimate | None, str]:
    """``estimate_training`` for the settings of a measured run (the second value is kept for callers that report
    why no estimate exists; it is always empty now that the estimator is part of the core)."""
    from ..estimate.training import estimate_training

    # on CUDA the run's device total is NVML's process memory = the CUDA context + max_memory_reserved (measure/
    # worker.py ``device_peak_bytes``): the 'nvidia-smi' metric, under the shapes the worker ran (``RUN_BATCH_SHAPES``:
    # the allocator's reserve of a fixed-shape step, estimate/allocator.py eqs. R1, R2); the live-tensor figures
    # (peak allocated, the tracker's) read the same tensor items under every metric. On a CPU no metric (the shapes
    # are read under a pool metric only, and refused without one: specs/training.py POOL_METRICS)
    fields = training_fields(s)
    if s.get("device") == "cuda":
        fields["metric"] = "nvidia-smi"
    else:
        del fields["batch_shapes"]
    try:
        return estimate_training(spec, **fields), ""
    except (TypeError, LlmsizerError) as e:
        return None, f"estimate_training could not express these settings: {e}"


def _group(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("context", "allocator", "nccl", "runtime", "host", "fragment", "overhead", "cache")):
        return "overhead"
    if "temporar" in n or "transient" in n:
        return "activations"
    if "grad" in n:
        return "gradients"
    if "optim" in n or "state" in n:
        return "optimizer_state"
    if any(k in n for k in ("activ", "logit", "autocast", "recompute", "workspace", "loss", "dequant")):
        return "activations"
    if any(k in n for k in ("weight", "param", "adapter", "master", "lora", "embedding")):
        return "weights"
    return "activations"


def _catalog_device(name: str | None) -> Any:
    if not name:
        return None
    from ..catalog.hardware import builtin_catalog

    cat = builtin_catalog()
    tries = [name, name.replace("NVIDIA ", "")]
    if "H100" in name:
        tries.append("h100-pcie" if "PCIe" in name else "h100-nvl" if "NVL" in name else "h100-sxm")
    for t in tries:
        try:
            return cat.device(t)
        except LlmsizerError:
            continue
    return None


# -- rows -------------------------------------------------------------------------------------------------------

def _item_bytes(est: Estimate, *names: str) -> tuple[int, int, int] | None:
    lo = mid = hi = 0
    found = False
    for it in est.items:
        if it.name in names:
            a, b, c = it.range
            lo, mid, hi, found = lo + a, mid + b, hi + c, True
    return (lo, mid, hi) if found else None


def _row(component: str, est: tuple[int, int, int] | None, measured: Any, kind: str | None = None,
         note: str = "") -> Row:
    if est is None:
        return Row(component, None, measured, kind=kind, note=note)
    return Row(component, est[1], measured, kind=kind, low=est[0], high=est[2], note=note)


def _calibrated(est: Estimate | None, kind: str, location: str = "device") -> tuple[int, int] | None:
    """The calibrated range of ``est``'s need at ``location`` (estimate/allocator.py ``calibrated_need``, eq. C1)
    with the band of the engine the runs measure (transformers inference, PyTorch training)."""
    from ..estimate import ranges as R
    from ..estimate.allocator import calibrated_need

    if est is None:
        return None
    c = calibrated_need(est.items, kind, R.TRANSFORMERS if kind == R.INFERENCE_MEMORY else R.PYTORCH_TRAINING,
                        location)
    return None if c is None else (int(c["low"]), int(c["high"]))  # type: ignore[call-overload]


def inference_rows(record: dict[str, Any], est: Estimate) -> list[Row]:
    m, s = record.get("measured", {}), record["settings"]
    split = m.get("peak_split") or {}
    cuda = s["device"] == "cuda"
    kind = MEMORY_KINDS["inference"]
    rows = [
        _row("weights", _item_bytes(est, "weights"), m.get("weights_bytes")),
        _row("kv_cache", _item_bytes(est, "kv_cache"), split.get("kv_cache"), note="KV live at the tensor peak"),
        _row("activations", _item_bytes(est, "activations", "dequant_buffer", "tied_copy_on_load"), split.get("activations"),
             note="live tensors at the peak besides weights and KV"),
    ]
    tensors = _item_bytes(est, "weights", "kv_cache", "activations", "dequant_buffer", "tied_copy_on_load")
    if cuda:
        rows.append(_row("peak tensors (tracker)", tensors, m.get("peak_tensor_bytes")))
        rows.append(_row("peak allocated", tensors, m.get("max_memory_allocated"), kind,
                         "torch.cuda.max_memory_allocated"))
        if m.get("max_memory_reserved") is not None:
            rows.append(_row("allocator cache", _item_bytes(est, "allocator_cache"),
                             m["max_memory_reserved"] - m["max_memory_allocated"], note="reserved - allocated"))
        rows.append(_row("cuda_context", _item_bytes(est, "cuda_context"), m.get("cuda_context_bytes"),
                         note="NVML process memory - torch reserved"))
        rows.append(replace(_row("device total", est.total("device"), m.get("device_peak_bytes"), kind,
                                 "CUDA context + max_memory_reserved (NVML)"), calibrated=_calibrated(est, kind)))
    else:
        rows.append(_row("peak tensors", tensors, m.get("peak_tensor_bytes"), kind, "live tensor bytes (tracker)"))
        rows.append(_row("host runtime", _item_bytes(est, "host_runtime"), m.get("baseline_rss_bytes"),
                         note="RSS after importing torch + transformers"))
        # no calibrated range: a CPU estimate prints none (estimate/inference/compose.py: calibrated_range only off
        # the CPU), so validate judges the RSS by none either (validation_cases.measured_cases); summarised only
        rows.append(_row("process RSS", est.total("host"), m.get("peak_rss_bytes"), kind,
                         "peak RSS (VmHWM); judged by no range: a CPU estimate prints none"))
    return rows


def training_rows(record: dict[str, Any], est: Estimate | None, why: str) -> list[Row]:
    m, s = record.get("measured", {}), record["settings"]
    split = m.get("peak_split") or {}
    cuda = s["device"] == "cuda"
    kind = MEMORY_KINDS["training"]
    groups: dict[str, list[int]] = {}
    if est is not None:
        for it in est.items:
            if it.location != "device":
                continue
            acc = groups.setdefault(_group(it.name), [0, 0, 0])
            for i, v in enumerate(it.range):
                acc[i] += v

    def group(name: str) -> tuple[int, int, int] | None:
        return (groups[name][0], groups[name][1], groups[name][2]) if name in groups else None

    rows = [_row(name, group(name), split.get(name), note=why if est is None else "at the tensor peak")
            for name in ("weights", "gradients", "activations")]
    # the optimizer's state as the run left it (measure/worker.py ``optimizer_state_bytes``, read after the tracked
    # steps): the tensor peak can fall inside the first step, before every state exists (a 64-token step of a tiny
    # model peaked with 13.4 of its 17.6 MB of AdamW state), and the estimate's term is the whole state
    state = m.get("optimizer_state_bytes")
    at_peak = split.get("optimizer_state")
    rows.insert(2, _row("optimizer_state", group("optimizer_state"), state if state is not None else at_peak,
                        note=why if est is None else "at the tensor peak" if state is None else
                        "after the tracked steps" + (f" ({at_peak:,} B at the tensor peak)"
                                                     if at_peak is not None and at_peak != state else "")))
    tensors = None
    if est is not None:
        parts = [groups[k] for k in groups if k != "overhead"]
        tensors = (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts))
    if cuda:
        rows.append(_row("peak tensors (tracker)", tensors, m.get("peak_tensor_bytes")))
        rows.append(_row("peak allocated", tensors, m.get("max_memory_allocated"), kind,
                         "torch.cuda.max_memory_allocated"))
        if m.get("max_memory_reserved") is not None and m.get("max_memory_allocated") is not None:
            rows.append(_row("allocator reserve", _item_bytes(est, "allocator_reserve") if est is not None else None,
                             m["max_memory_reserved"] - m["max_memory_allocated"], note="reserved - allocated"))
        rows.append(replace(_row("device total", est.total("device") if est is not None else None,
                                 m.get("device_peak_bytes"), kind, "CUDA context + max_memory_reserved (NVML)"),
                            calibrated=_calibrated(est, kind)))
    else:
        rows.append(_row("peak tensors", tensors, m.get("peak_tensor_bytes"), kind, "live tensor bytes (tracker)"))
        rows.append(Row("process RSS", None, m.get("peak_rss_bytes"), note="no CPU-side training estimate"))
    return rows


def throughput_rows(record: dict[str, Any], spec: ModelSpec) -> list[Row]:
    s, t, dev = record["settings"], record.get("timing", {}), record.get("device", {})
    device = _catalog_device(dev.get("name")) if s["device"] == "cuda" else None
    if device is None:
        return []
    name = device.id
    if s["kind"] == "inference":
        from ..estimate.speed import estimate_speed

        try:
            sp = estimate_speed(spec, device, weights_format=s.get("weights") or s["dtype"],
                                prompt_tokens=s["context"] - s["output_tokens"],
                                output_tokens=max(s["output_tokens"], 1), concurrency=s["concurrency"],
                                kv_dtype=s["dtype"], engine="transformers",  # the engine the run measured
                                decode_loop="forward",  # its loop: a bare forward + argmax (workloads._Forward)
                                attention=s.get("attention", "sdpa"))
        except LlmsizerError:
            return []
        # the worker prefills the b prompts in one forward (measure/workloads.py inference_pass): the transformers
        # estimate's prefill rate is that batch prefill's (SpeedEstimate.batch_prefill, eq. P1 at b), as fit shows it
        rows = [Row("prefill tokens/s", sp.prefill_tokens_per_second, t.get("prefill_tokens_per_second"), "tokens/s",
                    PREFILL,
                    note=f"{name}: {s['concurrency']} prompt(s) in one forward (eq. P1)")]
        if s["output_tokens"]:
            rows.append(Row("decode tokens/s", sp.decode_tokens_per_second, t.get("decode_tokens_per_second"), "tokens/s",
                            BATCHED if s["concurrency"] > 1 else DECODE,
                            note=f"{name}: aggregate over {s['concurrency']} sequences"))
        return rows
    from ..estimate.duration import training_duration_for
    from ..specs import TrainingWorkload

    if not t.get("tokens_per_second"):
        return []
    # the worker records every setting with its default filled in, the adapters' too: a full fine-tune's record
    # carries rank and targets, which the workload refuses for method 'full' (as training_estimate leaves them out)
    fields = {k: v for k, v in s.items() if k in TrainingWorkload.__dataclass_fields__ and v is not None
              and (s["method"] != "full" or k not in ADAPTER_FIELDS)}
    try:  # the one duration rule (estimate/duration.py), with the record's own settings
        d = training_duration_for(spec, device, int(fields.get("gpus", 1)), 1e6, fields)
    except LlmsizerError:
        return []
    if d.tokens_per_second is None:
        return []
    return [Row("training tokens/s", d.tokens_per_second, t["tokens_per_second"], "tokens/s", TRAINING_SPEED,
                note=f"{name}: {d.flops_formula} FLOPs/token at utilisation {d.utilization:.3f}", no_band=d.no_band)]


def compare_record(record: dict[str, Any]) -> dict[str, Any]:
    """The estimate for ``record``'s settings (made now) and the comparison rows; keys to merge into the record."""
    s = record.get("settings") or {}
    if record.get("status") == "error" and not record.get("measured"):
        return {"comparison": [], "estimate_note": "the run failed before measuring anything"}
    if s.get("device") not in ("cpu", "cuda"):
        return {"comparison": [], "estimate_note": "the worker did not report its device: nothing to compare"}
    try:
        spec = spec_of(record)
    except LlmsizerError as e:
        return {"comparison": [], "estimate_note": f"no estimate: {e}"}
    out: dict[str, Any] = {}
    if s["kind"] == "inference":
        try:
            est: Estimate | None = inference_estimate(spec, s)
            why = ""
        except LlmsizerError as e:
            est, why = None, f"no estimate: {e}"
        rows = inference_rows(record, est) if est is not None else []
    else:
        est, why = training_estimate(spec, s)
        rows = training_rows(record, est, why)
    if record.get("status") == "ok":
        rows += throughput_rows(record, spec)
    if est is not None:
        loc = est.primary_location
        lo, mid, hi = est.total(loc)
        out["estimate_total"] = {"location": loc, "low": lo, "bytes": mid, "high": hi}
        out["estimate"] = est.to_dict()
    if why:
        out["estimate_note"] = why
    out["comparison"] = [r.to_dict() for r in rows]
    return out


def rows_of(record: dict[str, Any]) -> list[Row]:
    """Comparison rows of a record, re-estimated with this llmsizer (for ``validate``)."""
    if record.get("status") != "ok":
        return []
    return [Row(d["component"], d["estimated"], d["measured"], d["unit"], d["kind"], d["low"], d["high"], d["note"],
                None if d.get("calibrated") is None else (d["calibrated"][0], d["calibrated"][1]),
                d.get("no_band", ""))
            for d in compare_record(record)["comparison"]]
