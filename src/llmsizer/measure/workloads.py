"""The workloads a measurement runs (worker side; torch imported inside the functions).

Inference mirrors transformers ``generate()`` with greedy decoding and the default DynamicCache, written out
so prefill and decode can be timed apart: one forward over the ``prompt_tokens`` of every sequence with
``logits_to_keep=1``, the next-token logits upcast to fp32 (``GenerationMixin``: ``next_token_logits.to(
torch.float32)``), then ``output_tokens`` one-token forwards, after which the cache holds ``context`` tokens per
sequence. Its memory mirrors generate()'s; its host work does not: a bare forward + argmax loop (no generate()
bookkeeping, no per-step stop-check sync) launches eq. K4 less 13 kernels a step (formulas/launch_overhead.py
WORKER_STEP_KERNELS), the count its measured speed rows are timed with (measure/compare.py, decode_loop 'forward').

Training runs optimizer steps on random tokens with ``labels = input_ids`` (transformers' causal-LM loss):
forward under ``torch.autocast`` for the mixed recipes, backward, ``optimizer.step()``,
``zero_grad(set_to_none=True)``. Gradient checkpointing is transformers' ``gradient_checkpointing_enable``
(non-reentrant); LoRA/DoRA are PEFT ``LoraConfig`` adapters; QLoRA puts them on an NF4 double-quantized base.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import time
from collections.abc import Callable
from typing import Any

from .settings import ALL_LINEAR, MeasureSettings


class Where:
    """Which step the workload is in (reported when it runs out of memory)."""

    def __init__(self) -> None:
        self.step = 0
        self.phase = "start"

    def __call__(self, phase: str, step: int | None = None) -> None:
        self.phase = phase
        if step is not None:
            self.step = step

    def text(self) -> str:
        return f"step {self.step} ({self.phase})" if self.step else self.phase


def progress(done: int, total: int, what: str) -> None:
    """One progress line on stderr for the parent (``@@progress DONE TOTAL WHAT``)."""
    sys.stderr.write(f"@@progress {done} {total} {what}\n")
    sys.stderr.flush()


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def tensor_bytes(ts: Any) -> int:
    seen: set[int] = set()
    total = 0
    for t in ts:
        st = t.untyped_storage()
        if st._cdata not in seen:
            seen.add(st._cdata)
            total += st.nbytes()
    return total


# -- inference --------------------------------------------------------------------------------------------------

def kv_tensors(cache: Any) -> list[Any]:
    """Key/value tensors of a transformers cache (``layers[i].keys/values`` >= 4.56; ``key_cache`` lists before)."""
    import torch

    if cache is None:
        return []
    out: list[Any] = []
    for layer in getattr(cache, "layers", None) or ():
        for attr in ("keys", "values"):
            t = getattr(layer, attr, None)
            if isinstance(t, torch.Tensor):
                out.append(t)
    for attr in ("key_cache", "value_cache"):
        for t in getattr(cache, attr, None) or ():
            if isinstance(t, torch.Tensor) and t.numel():
                out.append(t)
    return out


def new_cache(model: Any) -> Any:
    """An empty DynamicCache for ``model`` (None where this transformers release makes it inside forward)."""
    try:
        from transformers import DynamicCache
    except ImportError:
        return None
    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


class _Forward:
    """Keyword names of this transformers release: ``cache`` (5.x) or ``past_key_values``; ``logits_to_keep``
    or ``num_logits_to_keep``."""

    def __init__(self, model: Any) -> None:
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.logits_kw = "logits_to_keep" if "logits_to_keep" in params else "num_logits_to_keep"
        self.model = model

    def __call__(self, ids: Any, cache: Any) -> tuple[Any, Any]:
        kw: dict[str, Any] = {"use_cache": True, self.logits_kw: 1}
        if cache is not None:
            kw[self.cache_kw] = cache
        out = self.model(input_ids=ids, **kw)
        new_cache = out.get("cache", None) if hasattr(out, "get") else None
        if new_cache is None:
            new_cache = out.past_key_values
        nxt = out.logits[:, -1, :].float().argmax(-1, keepdim=True)
        return nxt, new_cache


def inference_pass(model: Any, s: MeasureSettings, ids: Any, where: Where, holder: dict[str, Any],
                   report: Callable[[int, int, str], None] | None = None) -> dict[str, float]:
    """One prefill + decode pass. ``holder['cache']`` is kept pointing at the live cache (the tracker's split
    reads it). Returns seconds for prefill and decode (no decode with ``output_tokens`` 0: prefill only)."""
    import torch

    fwd = _Forward(model)
    device = s.device
    total = 1 + s.output_tokens
    with torch.no_grad():
        where("prefill", 1)
        holder["cache"] = new_cache(model)  # made before prefill so the tracker sees the prompt's KV as KV
        sync(device)
        t0 = time.perf_counter()
        nxt, holder["cache"] = fwd(ids, holder["cache"])
        sync(device)
        t1 = time.perf_counter()
        if report:
            report(1, total, "prefill")
        if not s.output_tokens:  # prefill only (embeddings, scoring): no decode step to time
            return {"prefill_seconds": t1 - t0}
        for i in range(s.output_tokens):
            where("decode", 2 + i)
            nxt, holder["cache"] = fwd(nxt, holder["cache"])
            if report and (i + 1) % max(1, s.output_tokens // 20) == 0:
                report(2 + i, total, "decode")
        sync(device)
        t2 = time.perf_counter()
    return {"prefill_seconds": t1 - t0, "decode_seconds": t2 - t1}


# -- training ---------------------------------------------------------------------------------------------------

def make_optimizer(name: str, params: list[Any], impl: str | None = None) -> Any:
    import torch

    kw: dict[str, Any] = {}
    if impl == "fused":
        kw["fused"] = True
    elif impl in ("foreach", "for-loop"):
        kw["foreach"] = impl == "foreach"
    if name in ("adamw", "adam"):
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        return cls(params, lr=1e-5, **kw)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-5, **kw)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9, **kw)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-5, **{k: v for k, v in kw.items() if k == "foreach"})
    import bitsandbytes as bnb

    return {"adamw-8bit": bnb.optim.AdamW8bit, "paged-adamw": bnb.optim.PagedAdamW,
            "paged-adamw-8bit": bnb.optim.PagedAdamW8bit, "lion": bnb.optim.Lion, "lion-8bit": bnb.optim.Lion8bit,
            "paged-lion": bnb.optim.PagedLion,
            "paged-lion-8bit": bnb.optim.PagedLion8bit}[name](params, lr=1e-5)


def prepare_training(model: Any, s: MeasureSettings) -> Any:
    """Adapters, checkpointing and train mode; returns the model to train."""
    model.train()
    if s.grad_checkpointing == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if hasattr(model, "config"):
        model.config.use_cache = False
    if s.method in ("lora", "dora", "qlora"):
        import peft

        # 'all-linear' goes to PEFT as its own shorthand (settings.ALL_LINEAR)
        modules: Any = s.targets[0] if s.targets == ALL_LINEAR else list(s.targets)
        cfg = peft.LoraConfig(r=s.rank, lora_alpha=s.alpha or 2 * s.rank, target_modules=modules,
                              lora_dropout=0.0, bias="none", use_dora=s.method == "dora", task_type="CAUSAL_LM")
        # PEFT keeps adapters in fp32 under a half-precision base unless told otherwise (autocast_adapter_dtype);
        # pure bf16/fp16 recipes keep them in the base dtype.
        keep_fp32 = s.precision in ("bf16-mixed", "fp16-mixed", "fp32")
        try:
            model = peft.get_peft_model(model, cfg, autocast_adapter_dtype=keep_fp32)
        except TypeError:  # older PEFT
            model = peft.get_peft_model(model, cfg)
        if s.grad_checkpointing == "full" and hasattr(model, "enable_input_require_grads"):
            model.enable_input_require_grads()
    return model


def autocast_for(s: MeasureSettings) -> Any:
    import torch

    if s.precision in ("bf16-mixed", "fp16-mixed"):
        dt = torch.bfloat16 if s.precision == "bf16-mixed" else torch.float16
        return torch.autocast(s.device, dtype=dt)
    return contextlib.nullcontext()


def training_step(model: Any, opt: Any, ids: Any, s: MeasureSettings, where: Where, step: int,
                  scaler: Any = None, marks: list[float] | None = None) -> None:
    """One optimizer step. ``marks``, when given, receives the host clock (``time.perf_counter``) as the forward,
    the backward and the optimizer step + ``zero_grad`` return: host time only, no device synchronisation added (on
    CUDA a phase's mark is when the host has queued its kernels, not when the device has run them)."""
    where("forward", step)
    with autocast_for(s):
        loss = model(input_ids=ids, labels=ids).loss
    if marks is not None:
        marks.append(time.perf_counter())
    where("backward", step)
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    del loss
    if marks is not None:
        marks.append(time.perf_counter())
    where("optimizer", step)
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    opt.zero_grad(set_to_none=True)
    if marks is not None:
        marks.append(time.perf_counter())


def trainable(model: Any) -> list[Any]:
    return [p for p in model.parameters() if p.requires_grad]


def optimizer_state_tensors(opt: Any) -> list[Any]:
    import torch

    return [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
