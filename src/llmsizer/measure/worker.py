"""The measuring process: ``python -m llmsizer.measure.worker`` reads one JSON job on stdin, runs it, and prints
one line ``@@result {json}`` on stdout (progress lines ``@@progress ...`` go to stderr).

It runs in a child process of its own so that the process figures (peak RSS, the CUDA context) belong to this
workload alone and an out-of-memory kill cannot take the caller down. The parent
(:mod:`llmsizer.measure.runner`) starts it with ``MALLOC_MMAP_THRESHOLD_=65536 MALLOC_TRIM_THRESHOLD_=0`` so
that on CPU the RSS follows the live tensors.

What is read, and when:

- ``baseline_rss_bytes``: RSS after importing torch/transformers (and peft/bitsandbytes when used), before the
  model exists: what ``engines.TORCH_HOST_RUNTIME`` estimates.
- ``weights_bytes``: bytes of the model's parameter, buffer and quantization-state storages after loading.
- ``peak_tensor_bytes`` and ``peak_split``: :class:`~llmsizer.measure.tracker.LiveTensorBytes` over the tracked
  pass (weights, KV cache / gradients / optimizer state, and the rest = activations and temporaries).
- CUDA: ``max_memory_allocated`` / ``max_memory_reserved`` over the untraced timed passes/steps when there are any
  (the tracker's dispatch mode turns autograd's in-place gradient sums into new tensors, ``tracker.py``, so the
  tracked pass's CUDA peaks are kept apart as ``tracked_max_memory_allocated`` / ``_reserved``, then the cache is
  emptied and the peak stats reset), else over the tracked pass (peak stats reset after loading),
  the device memory NVML attributes to the process at the end (its CUDA context, kernels and libraries plus
  what the caching allocator holds), ``cuda_context_bytes`` = that minus ``memory_reserved()``, and
  ``device_peak_bytes`` = ``cuda_context_bytes + max_memory_reserved``.
- CPU: ``peak_rss_bytes`` (``VmHWM`` over the whole process) and ``workload_peak_rss_bytes`` (``VmHWM`` reset
  through ``/proc/self/clear_refs`` just before the workload).
- Timing: the timed passes after the tracked one (the dispatch-mode tracker slows every operator). On CUDA the
  cache emptied after the tracked pass (above) is first refilled by one untimed warm-up pass or step
  (``warmup_passes`` / ``warmup_steps``): the caching allocator serves a request from its cached blocks and calls
  ``cudaMalloc`` only when none fits (c10/cuda/CUDACachingAllocator.cpp:58-59 @001074d2), so the first pass after
  ``empty_cache`` pays a ``cudaMalloc`` per segment that no steady-state pass, and no user's loop, pays. Training
  also records every timed step (``step_seconds_each``), the host's share of each (``host_seconds``: from the
  step's start until the host returns from ``zero_grad``, before the synchronisation; a step whose host time is
  its whole time is host-bound) and the host time of its phases (``host_phase_seconds``: forward, backward,
  optimizer + zero_grad), medians over the timed steps. Each step ends in ``torch.cuda.synchronize()``, as a
  transformers Trainer micro-step ends in a device read (trainer.py:1919-1922 @5.24.0: ``logging_nan_inf_filter``,
  on by default, tests ``torch.isnan(tr_loss_step)`` on the host).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import traceback
from typing import Any

from ..formulas.training_states import BNB_OPTIMIZERS
from . import probe
from .settings import INFER_WEIGHTS, MeasureSettings
from .workloads import Where, progress


def is_oom(e: BaseException, capped: bool = False) -> bool:
    """True for CUDA's OutOfMemoryError, MemoryError and the CPU allocator's 'can't allocate memory'. Under a CPU
    memory cap a SystemError counts too: a C extension whose malloc failed without setting MemoryError."""
    if isinstance(e, MemoryError) or (capped and isinstance(e, SystemError)):
        return True
    torch = sys.modules.get("torch")
    if torch is not None:
        cls = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
        if cls is not None and isinstance(e, cls):
            return True
    msg = str(e).lower()
    return isinstance(e, RuntimeError) and any(k in msg for k in ("can't allocate memory", "out of memory",
                                                                    "not enough memory", "cannot allocate memory"))


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


class _Cap:
    """The memory cap of a job: CUDA's per-process fraction, or RLIMIT_DATA on the CPU (restored on exit)."""

    def __init__(self, cap: int | None, device: str) -> None:
        self.cap, self.device = cap, device
        self.saved: tuple[int, int] | None = None

    def __enter__(self) -> _Cap:
        if self.cap is None:
            return self
        if self.device == "cuda":
            import torch

            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, self.cap / total))
        else:
            soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
            self.saved = (soft, hard)
            now = probe.data_bytes() or 0
            limit = now + self.cap
            resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard),
                                                      hard))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            resource.setrlimit(resource.RLIMIT_DATA, self.saved)
            self.saved = None


def _imports(s: MeasureSettings) -> None:
    import torch  # noqa: F401
    import transformers  # noqa: F401

    if s.kind == "training" and s.method != "full":
        import peft  # noqa: F401
    if (s.kind == "training" and (s.method == "qlora" or s.optimizer in BNB_OPTIMIZERS)) or \
            (s.kind == "inference" and s.weights in INFER_WEIGHTS):
        import bitsandbytes  # noqa: F401


def run(job: dict[str, Any]) -> dict[str, Any]:
    t_start = time.perf_counter()
    s = MeasureSettings.from_dict(job["settings"])
    ref = job["model"]
    out: dict[str, Any] = {"status": "ok", "warnings": []}
    dm = None
    used_before = None
    if s.device in ("auto", "cuda"):
        dm = probe.DeviceMemory(0)
        used_before = dm.used()  # before this process has a CUDA context
    _imports(s)
    import torch

    if s.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device cuda asked but torch sees no CUDA device")
    device = "cuda" if s.device == "cuda" or (s.device == "auto" and torch.cuda.is_available()) else "cpu"
    s, defaults = s.resolved(device)
    out["settings"] = s.to_dict()
    out["defaults"] = [{"name": n, "value": v, "why": w} for n, v, w in defaults]
    if s.threads:
        torch.set_num_threads(s.threads)
    m: dict[str, Any] = {"baseline_rss_bytes": probe.rss_bytes(),
                         "rss_malloc_settings": all(os.environ.get(k) == v for k, v in probe.MALLOC_ENV.items())}
    dev: dict[str, Any] = {"type": device}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        dev.update({"name": props.name, "total_memory_bytes": int(props.total_memory),
                    "capability": f"{props.major}.{props.minor}", "count": torch.cuda.device_count()})
        if dm is not None:
            dev.update(dm.info())
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        if used_before is not None and dm is not None:
            after = dm.used()
            if after is not None:
                m["cuda_context_initial_bytes"] = after - used_before - torch.cuda.memory_reserved()
    else:
        dev.update({"name": probe.cpu_name(), "threads": torch.get_num_threads(), "logical_cpus": os.cpu_count()})
    out["device"] = dev
    out["versions"] = probe.versions()
    where = Where()
    timing: dict[str, Any] = {}
    try:
        with _Cap(s.memory_cap, device):
            if s.kind == "inference":
                _inference(s, ref, device, where, m, timing, out["warnings"])
            else:
                _training(s, ref, device, where, m, timing, out["warnings"])
    except Exception as e:  # noqa: BLE001 - every failure becomes a result the caller records
        if is_oom(e, capped=s.memory_cap is not None):
            out["status"] = "oom"
            out["oom_at"] = where.text()
            out["error"] = _short(e)
        else:
            out["status"] = "error"
            out["error"] = _short(e)
            out["traceback"] = traceback.format_exc(limit=8)[-4000:]
    _final_readings(device, dm, used_before, m)
    timing["total_seconds"] = round(time.perf_counter() - t_start, 3)
    out["measured"] = m
    out["timing"] = timing
    return out


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 600 else text[:600] + "..."


def _final_readings(device: str, dm: Any, used_before: int | None, m: dict[str, Any]) -> None:
    import torch

    m["peak_rss_bytes"] = max(probe.peak_rss_bytes(), m.get("load_peak_rss_bytes") or 0)
    if device == "cpu":
        if m.get("hwm_reset"):
            m["workload_peak_rss_bytes"] = probe.peak_rss_bytes()
        return
    torch.cuda.synchronize()
    m["max_memory_allocated"] = int(torch.cuda.max_memory_allocated())
    m["max_memory_reserved"] = int(torch.cuda.max_memory_reserved())
    reserved_now = int(torch.cuda.memory_reserved())
    if dm is None:
        return
    proc = dm.process_used()
    used = dm.used()
    if proc is not None:
        m["device_process_bytes"], m["device_reading"] = proc, "process (NVML compute processes)"
    elif used is not None and used_before is not None:
        proc = used - used_before
        m["device_process_bytes"], m["device_reading"] = proc, "device used minus the reading before start"
    if proc is not None:
        m["cuda_context_bytes"] = proc - reserved_now
        m["device_peak_bytes"] = m["cuda_context_bytes"] + m["max_memory_reserved"]


def _untraced_peaks_from_here(device: str, s: MeasureSettings, m: dict[str, Any]) -> bool:
    """After the tracked pass: keep its CUDA peaks apart and measure the device peaks over the untraced timed
    passes, so that the tracker's out-of-place gradient sums never reach ``max_memory_*`` (module docstring).
    True when it emptied the allocator's cache: the caller then runs one untimed warm-up pass before timing."""
    if device == "cpu" or s.timed_steps == 0:
        return False
    import torch

    torch.cuda.synchronize()
    m["tracked_max_memory_allocated"] = int(torch.cuda.max_memory_allocated())
    m["tracked_max_memory_reserved"] = int(torch.cuda.max_memory_reserved())
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    m["cuda_peaks_over"] = "untraced warm-up and timed steps"
    return True


def _model(s: MeasureSettings, ref: dict[str, Any], device: str, where: Where, m: dict[str, Any],
           warnings: list[str]) -> Any:
    import torch

    from .build import build_model, quant_state_tensors, quantize_4bit

    where("load")
    t = time.perf_counter()
    quant = (s.kind == "training" and s.method == "qlora") or (s.kind == "inference" and s.weights in INFER_WEIGHTS)
    if s.kind == "inference":
        build_dtype = s.dtype
    else:
        build_dtype = {"fp32": "fp32", "bf16-mixed": "fp32", "fp16-mixed": "fp32", "bf16": "bf16",
                       "fp16": "fp16"}[s.precision or "fp32"]
        if s.method != "full":  # frozen base (QLoRA: the tensors left unquantized: embeddings, norms, lm_head)
            build_dtype = s.base_dtype or "bf16"
    model = build_model(ref, device=device, dtype=build_dtype or "fp32", attention=s.attention, seed=s.seed,
                        warnings=warnings)
    if quant:
        m["quantized_linears"] = quantize_4bit(model, device=device, compute_dtype="bf16" if s.kind == "training"
                                               else (s.dtype or "bf16"),
                                               double_quant=s.kind == "training" or s.weights == "nf4-dq")
    from .workloads import sync, tensor_bytes

    sync(device)
    m["load_seconds"] = round(time.perf_counter() - t, 3)
    weights = [*model.parameters(), *model.buffers(), *quant_state_tensors(model)]
    m["weights_bytes"] = tensor_bytes(weights)
    m["buffer_bytes"] = tensor_bytes(list(model.buffers()))
    m["params"] = sum(p.numel() for p in model.parameters())
    m["weights_dtype"] = build_dtype
    if device == "cuda":
        m["load_max_allocated"] = int(torch.cuda.max_memory_allocated())
        m["allocated_after_load"] = int(torch.cuda.memory_allocated())
        torch.cuda.reset_peak_memory_stats()
    m["load_peak_rss_bytes"] = probe.peak_rss_bytes()
    m["rss_after_load_bytes"] = probe.rss_bytes()
    m["hwm_reset"] = _reset_hwm()
    return model


def _inference(s: MeasureSettings, ref: dict[str, Any], device: str, where: Where, m: dict[str, Any],
               timing: dict[str, Any], warnings: list[str]) -> None:
    import torch

    from .build import quant_state_tensors
    from .tracker import LiveTensorBytes
    from .workloads import inference_pass, kv_tensors, tensor_bytes

    model = _model(s, ref, device, where, m, warnings)
    conf = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    gen = torch.Generator().manual_seed(s.seed)
    ids = torch.randint(0, conf.vocab_size, (s.concurrency, s.prompt_tokens), generator=gen).to(device)
    holder: dict[str, Any] = {"cache": None}
    weights = [*model.parameters(), *model.buffers(), *quant_state_tensors(model)]
    tracker = LiveTensorBytes(lambda: {"weights": weights, "kv_cache": kv_tensors(holder["cache"])})
    tracker.track_all(weights)
    tracker.track(ids)
    with tracker:
        tracked = inference_pass(model, s, ids, where, holder, progress)
    m["kv_cache_bytes_end"] = tensor_bytes(kv_tensors(holder["cache"]))
    m["peak_tensor_bytes"] = tracker.peak
    m["peak_split"] = dict(tracker.peak_split)
    holder["cache"] = None
    if _untraced_peaks_from_here(device, s, m):
        where("warm-up pass")
        inference_pass(model, s, ids, where, holder)  # refills the emptied allocator cache, untimed
        holder["cache"] = None
        timing["warmup_passes"] = 1
    runs = []
    for r in range(s.timed_steps):
        where(f"timed pass {r + 1}")
        runs.append(inference_pass(model, s, ids, where, holder))
        holder["cache"] = None
        progress(r + 1, s.timed_steps, "timed passes")
    timed = runs or [tracked]
    pre = statistics.median(x["prefill_seconds"] for x in timed)
    dec = statistics.median(x["decode_seconds"] for x in timed) if s.output_tokens else None  # 0: prefill only
    timing.update({"prefill_seconds": pre, "decode_seconds": dec, "timed_with_tracker": not runs,
                   "prefill_tokens_per_second": s.concurrency * s.prompt_tokens / pre if pre > 0 else None,
                   "decode_tokens_per_second": s.concurrency * s.output_tokens / dec if dec else None})


def _training(s: MeasureSettings, ref: dict[str, Any], device: str, where: Where, m: dict[str, Any],
              timing: dict[str, Any], warnings: list[str]) -> None:
    import torch

    from .build import quant_state_tensors
    from .tracker import LiveTensorBytes
    from .workloads import (
        make_optimizer,
        optimizer_state_tensors,
        prepare_training,
        sync,
        tensor_bytes,
        trainable,
        training_step,
    )

    model = _model(s, ref, device, where, m, warnings)
    model = prepare_training(model, s)
    params = trainable(model)
    m["trainable_params"] = sum(p.numel() for p in params)
    m["trainable_bytes"] = tensor_bytes(params)
    m["weights_bytes"] = tensor_bytes([*model.parameters(), *model.buffers(), *quant_state_tensors(model)])
    opt = make_optimizer(s.optimizer, params, s.optimizer_impl)
    scaler = torch.amp.GradScaler("cuda") if s.precision == "fp16-mixed" and device == "cuda" else None
    conf = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    gen = torch.Generator().manual_seed(s.seed)
    ids = torch.randint(0, conf.vocab_size, (s.micro_batch, s.seq_len), generator=gen).to(device)
    weights = [*model.parameters(), *model.buffers(), *quant_state_tensors(model)]
    tracker = LiveTensorBytes(lambda: {
        "weights": weights, "gradients": [p.grad for p in params if p.grad is not None],
        "optimizer_state": optimizer_state_tensors(opt)})
    tracker.track_all(weights)
    tracker.track(ids)
    tracked_steps = 2
    total = tracked_steps + s.timed_steps
    with tracker:
        for k in range(tracked_steps):
            training_step(model, opt, ids, s, where, k + 1, scaler)
            progress(k + 1, total, "tracked steps")
    m["peak_tensor_bytes"] = tracker.peak
    m["peak_split"] = dict(tracker.peak_split)
    m["optimizer_state_bytes"] = tensor_bytes(optimizer_state_tensors(opt))
    sync(device)
    first = tracked_steps + 1
    if _untraced_peaks_from_here(device, s, m):
        training_step(model, opt, ids, s, where, first, scaler)  # refills the emptied allocator cache, untimed
        sync(device)
        timing["warmup_steps"] = 1
        first += 1
    times, host, phases = [], [], []
    for k in range(s.timed_steps):
        marks: list[float] = []
        t = time.perf_counter()
        training_step(model, opt, ids, s, where, first + k, scaler, marks)
        host.append(time.perf_counter() - t)
        sync(device)
        times.append(time.perf_counter() - t)
        phases.append((marks[0] - t, marks[1] - marks[0], marks[2] - marks[1]))
        progress(tracked_steps + k + 1, total, "timed steps")
    if times:
        step = statistics.median(times)
        timing.update({"step_seconds": step, "tokens_per_second": s.micro_batch * s.seq_len / step,
                       "step_seconds_each": times, "host_seconds": statistics.median(host),
                       "host_phase_seconds": {name: statistics.median(p[i] for p in phases)
                                              for i, name in enumerate(("forward", "backward", "optimizer"))}})


def main() -> int:
    job = json.loads(sys.stdin.read())
    try:
        result = run(job)
    except Exception as e:  # noqa: BLE001 - a failure before the workload (imports, bad device) is a result too
        result = {"status": "error", "error": _short(e), "traceback": traceback.format_exc(limit=8)[-4000:]}
    sys.stdout.write("@@result " + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
