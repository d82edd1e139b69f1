"""``estimate.caches.clear_caches`` is the one list of the core's memos: the speed benchmarks call it to measure a
"cold" estimate, so a memo it forgets makes a cold figure a memo hit. Every functools cache defined in
``llmsizer.formulas`` and ``llmsizer.estimate`` must be empty after it (data-file loaders apart: loading a catalog
is start-up, not estimation); ``estimates_only`` keeps the model's own inventory."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import llmsizer
import llmsizer.estimate
import llmsizer.formulas
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.formats import format_ladder
from llmsizer.models import load_model

DATA_LOADERS = {"llmsizer.formulas.weight_formats.ggml_types"}  # reads catalog/data/ggml_types.json once


def _memos() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pkg in (llmsizer.formulas, llmsizer.estimate):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            mod = importlib.import_module(info.name)
            for name, obj in vars(mod).items():
                if hasattr(obj, "cache_info") and getattr(obj, "__module__", "") == mod.__name__:
                    out[f"{mod.__name__}.{name}"] = obj
    return out


def _fill() -> None:
    llmsizer.fit_training("qwen3-30b-a3b", "h100-sxm", 8, tokens=1e9, method="lora", float8=False)
    llmsizer.fit_training("llama-3.1-8b", "h100-sxm", 2, tokens=1e9, method="full", pp=2,
                          grad_checkpointing="full", float8=True)
    llmsizer.fit_training("llama-3.1-8b", "rtx-4090", tokens=1e9, method="qlora", grad_checkpointing="full")
    llmsizer.fit_training("llama-3.1-8b", "h100-sxm", 2, tokens=1e9, method="full", tp=2,  # the TP/SP memos
                          sequence_parallel=True, tp_backward_overlap=True, grad_checkpointing="selective")
    llmsizer.fit("gemma-2-9b-it", "rtx-4090", engine="llamacpp", weights="q4_k_m", context=16384, concurrency=4)
    llmsizer.fit("deepseek-v2-lite", "h100-sxm", 2, engine="vllm", context=8192)
    llmsizer.recommend_training("qwen2.5-0.5b", method="lora", tokens=1e8)
    llmsizer.fit("t0_3b", "h100-sxm", engine="transformers", context=1024, weights="fp16")  # the T5 serving memo
    format_ladder(load_model("qwen2.5-0.5b"), "vllm")  # a catalog search's weight formats
    # a ModelOpt NVFP4 checkpoint keeping layers in bf16 (formulas/modelopt_exclusions.py's matcher memos)
    llmsizer.estimate_inference("deepseek-v3.1-nvfp4", engine="vllm", device="b200", tensor_parallel=4)
    # an FP8-block checkpoint's TP check (eq. TP5's linears per spec) and a LoRA reaching a vision tower's linears
    llmsizer.estimate_inference("minimax-m2.7", engine="vllm", device="h200", tensor_parallel=4)
    llmsizer.fit_training("qwen2.5-vl-7b-instruct", "h100-sxm", tokens=1e8, method="lora")


def test_clear_caches_empties_every_memo_of_the_core() -> None:
    memos = _memos()
    _fill()
    filled = {k for k, f in memos.items() if f.cache_info().currsize}
    assert len(filled) >= 10  # the estimates above went through the memoized paths
    clear_caches()
    left = {k for k, f in memos.items() if f.cache_info().currsize and k not in DATA_LOADERS}
    assert not left, f"memos clear_caches() does not clear (add them to estimate/caches.py): {sorted(left)}"


def test_estimates_only_keeps_the_model_inventory() -> None:
    memos = _memos()
    _fill()
    clear_caches(estimates_only=True)
    assert memos["llmsizer.formulas.tensors.model_layout"].cache_info().currsize
    assert memos["llmsizer.estimate.duration._adapted_linears"].cache_info().currsize  # per model and LoRA targets
    assert not memos["llmsizer.formulas.lora.lora_params"].cache_info().currsize  # keyed on the LoRA rank
    clear_caches()
