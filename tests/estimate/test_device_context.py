"""The fixed context beside the tensors is the device's runtime's (render7 #4): an Apple chip was charged a
500 MiB "cuda_context" item (an NVIDIA driver's context, taken from CUDA tools' constants) and a CPU's answer said
"live tensors + CUDA context" in its metric. Now the CUDA context is added on CUDA GPUs only
(estimate/allocator.py ``device_context``, the one place), Apple names its absence (``device_context`` assumption),
and a CPU's default metric names the host total."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import estimate_inference, estimate_training
from llmsizer.errors import InputError
from llmsizer.estimate.fit import fit, fit_training
from llmsizer.result import Estimate

APPLE, CPU, NVIDIA = "apple-m1-pro-32gb", "intel-xeon-spr-8ch", "h100-sxm"


def _cuda_words(est: Estimate) -> list[str]:
    """Every item and assumption value that names CUDA."""
    return ([i.name for i in est.items if "cuda" in i.name.lower() or "cuda" in (i.formula or "").lower()]
            + [f"{a.name}={a.value}" for a in est.assumptions if "cuda" in str(a.value).lower()])


CASES: list[tuple[str, Any]] = [
    ("infer transformers", lambda d: estimate_inference("llama-3.2-1b", device=d, engine="transformers", context=4096)),
    ("infer llama.cpp", lambda d: estimate_inference("llama-3.2-1b", device=d, engine="llamacpp", context=4096)),
    ("train lora", lambda d: estimate_training("llama-3.2-1b", device=d, method="lora",
                                               memory=64 * 2**30 if d == CPU else None)),
    ("fit", lambda d: fit("llama-3.2-1b", d, memory=64 * 2**30 if d == CPU else None).estimate),
    ("fit --train", lambda d: fit_training("llama-3.2-1b", d, method="lora",
                                           memory=64 * 2**30 if d == CPU else None).estimate),
]


@pytest.mark.parametrize("what, make", CASES, ids=[c[0] for c in CASES])
def test_apple_and_cpu_name_no_cuda_context(what: str, make: Any) -> None:
    for device in (APPLE, CPU):
        est = make(device)
        assert _cuda_words(est) == [], (device, what)
    apple = make(APPLE)
    assert any(a.name == "device_context" and "Metal" in str(a.value) for a in apple.assumptions), what


@pytest.mark.parametrize("what, make", CASES, ids=[c[0] for c in CASES])
def test_a_cuda_gpu_keeps_its_context(what: str, make: Any) -> None:
    est = make(NVIDIA)
    assert "cuda_context" in [i.name for i in est.items], what
    assert not any(a.name == "device_context" for a in est.assumptions)


def test_apple_differs_from_a_cuda_gpu_by_the_context_alone() -> None:
    """The same workload on a CUDA GPU known only by its kind and on Metal: the same items but the context."""
    cuda = estimate_inference("llama-3.2-1b", device="gpu", engine="llamacpp", context=4096)
    metal = estimate_inference("llama-3.2-1b", device="gpu", gpu_runtime="metal", engine="llamacpp", context=4096)
    ctx = next(i for i in cuda.items if i.name == "cuda_context")
    assert [(i.name, i.bytes) for i in cuda.items if i is not ctx] == [(i.name, i.bytes) for i in metal.items]
    assert cuda.total("device")[1] - metal.total("device")[1] == ctx.bytes


def test_the_metric_words_follow_the_device() -> None:
    words = {d: next(str(a.value) for a in estimate_inference("llama-3.2-1b", device=d, context=4096).assumptions
                     if a.name == "metric") for d in (APPLE, CPU, NVIDIA)}
    assert "CUDA context" in words[NVIDIA]
    assert words[CPU].startswith("host total")
    assert "Metal" in words[APPLE]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llamacpp"])
def test_the_metric_words_name_what_the_engine_holds(engine: str) -> None:
    """A serving engine's default metric says what its device total holds (smalls2 #2: vLLM, SGLang and llama.cpp
    said "live tensors + allocator reserve (transformers inference)"): every device item of its estimate but the
    context is named in the words, and no allocator reserve of transformers'."""
    est = estimate_inference("llama-3.2-1b", device=NVIDIA, engine=engine, context=4096)
    words = next(str(a.value) for a in est.assumptions if a.name == "metric")
    plain = words.lower().replace("-", " ")
    held = [i.name for i in est.items if i.location == "device" and i.name != "cuda_context"]
    assert held and all(n.replace("_", " ") in plain for n in held), (held, words)
    assert "transformers" not in plain and "allocator_reserve" not in held
    assert words.endswith("+ CUDA context")


# An AMD GPU, an Intel Gaudi and a TPU are not CUDA devices (their vendors' runtimes: ROCm/HIP, SynapseAI, XLA), yet
# they were silently charged "the CUDA context" with no word of it. They keep CUDA's span (no measurement of their
# own exists) but say it stands in, on every engine's path (vLLM and SGLang added their own context item before).
NON_CUDA = {"mi300x": "ROCm", "gaudi2": "Gaudi", "tpu-v5e": "TPU"}
SERVING_ENGINES = ("vllm", "sglang", "transformers", "llamacpp")


@pytest.mark.parametrize("device", sorted(NON_CUDA))
@pytest.mark.parametrize("engine", SERVING_ENGINES)
def test_a_non_cuda_accelerator_names_the_stand_in(device: str, engine: str) -> None:
    if device.startswith("tpu") and engine == "sglang":  # SGLang 0.5.23 has no TPU backend: refused (specs/workload.py
        with pytest.raises(InputError, match="SGLang has no TPU backend"):  # refuse_sglang_tpu)
            estimate_inference("llama-3.2-1b", device=device, engine=engine, context=4096)
        return
    est = estimate_inference("llama-3.2-1b", device=device, engine=engine, context=4096)
    stand_in = [a for a in est.assumptions if a.name == "device_context"]
    assert len(stand_in) == 1 and NON_CUDA[device] in str(stand_in[0].value), (device, engine)
    ctx = [i for i in est.items if i.name == "cuda_context"]
    assert len(ctx) == 1 and NON_CUDA[device] in (ctx[0].formula or "")
    metric = next(str(a.value) for a in est.assumptions if a.name == "metric")
    assert NON_CUDA[device] in metric and "stand-in" in metric


@pytest.mark.parametrize("engine", SERVING_ENGINES)
def test_the_stand_in_is_cuda_s_span_and_nothing_else_moves(engine: str) -> None:
    """The same workload on a generic CUDA GPU and on ROCm: the same item bytes (the span is CUDA's), only words."""
    mem = 192 * 2**30
    cuda = estimate_inference("llama-3.2-1b", device="gpu", engine=engine, context=4096, memory=mem)
    rocm = estimate_inference("llama-3.2-1b", device="gpu", gpu_runtime="rocm", engine=engine, context=4096,
                              memory=mem)
    assert [(i.name, i.bytes, i.low, i.high) for i in cuda.items] == [(i.name, i.bytes, i.low, i.high)
                                                                       for i in rocm.items]
    assert not any(a.name == "device_context" for a in cuda.assumptions)


def test_every_catalog_device_runs_its_vendor_s_runtime() -> None:
    """The runtime follows the catalog row's vendor and kind: only NVIDIA GPUs are CUDA devices."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.device import device_fields

    expected = {("NVIDIA", "gpu"): "cuda", ("AMD", "gpu"): "rocm", ("Intel", "accelerator"): "hpu",
                ("Google", "tpu"): "xla", ("Apple", "apple"): "metal"}
    seen = set()
    for dev in builtin_catalog().devices.values():
        if dev.kind == "cpu":
            continue
        assert device_fields(dev)["gpu_runtime"] == expected[(dev.vendor, dev.kind)], dev.id
        seen.add((dev.vendor, dev.kind))
    assert seen == set(expected)


def test_training_on_rocm_names_the_stand_in() -> None:
    est = estimate_training("llama-3.2-1b", device="mi300x", method="lora")
    assert any(a.name == "device_context" and "ROCm" in str(a.value) for a in est.assumptions)


def test_vllm_s_context_warning_names_the_device_s_runtime() -> None:
    """vLLM's 'the context may not fit outside the pool' warning said 'CUDA' on an AMD GPU too."""
    def warning(device: str) -> str:
        est = estimate_inference("qwen3-0.6b", device=device, engine="vllm", gpu_memory_utilization=0.999)
        return next(x for x in est.warnings if "may not fit the" in x)
    assert warning("h100-sxm").startswith("the CUDA context")
    assert warning("mi300x").startswith("the rocm runtime context")
