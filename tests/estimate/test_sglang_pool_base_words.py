"""SGLang's "does not fit" line names the base mem_fraction_static multiplies (probe33 D9).

It said "mem_fraction_static 0.83 of 79.65 GiB" (the device memory, nvidia-smi's total) while the pool is sized
from the memory free before the weights load. SGLang 0.5.23: ``measure_pre_model_load_memory``
(python/sglang/srt/distributed/bootstrap.py:193-223) takes ``get_available_gpu_memory`` (srt/utils/common.py:427-456:
torch.cuda.mem_get_info's free) after the parallel groups exist, and ``_profile_available_bytes``
(srt/mem_cache/kv_cache_configurator.py:2990-3039) gives the KV pool free-after-loading - pre_model_load_memory x
(1 - mem_fraction_static), i.e. mem_fraction_static x pre - what is resident (the weights). So the base is CUDA's
total (torch's, below nvidia-smi's) less the CUDA context. The test derives it from the answer's own items and checks
that the pool and the words both use it."""

from __future__ import annotations

from cli_capture import run_json
from llmsizer.units import format_bytes

ARGS = ("qwen3-30b-a3b", "--device", "h100", "--engine", "sglang", "--context", "8k", "--concurrency", "32")


def _bytes(text: str) -> int:
    """'79.18 GiB' -> bytes (the assumption's value as printed)."""
    value, unit = text.split()
    return int(float(value) * {"GiB": 2**30, "MiB": 2**20}[unit])


def test_share_is_said_of_cuda_total_less_context_as_the_pool_is_sized() -> None:
    code, d = run_json("fit", *ARGS)
    m = d["memory"]
    items = {it["name"]: it["bytes"] for it in m["items"]}
    said = {a["name"]: a["value"] for a in m["assumptions"]}
    cuda_total, device = _bytes(said["cuda_total_memory"]), _bytes(said["device_memory"])
    assert cuda_total < device  # the premise: the two bases differ (the driver's reserve)
    mfs = float(m["details"]["mem_fraction_static"])
    pre = m["details"]["workload_budget_bytes"] - items["cuda_context"]  # CUDA's total less the context (TP 1)
    assert abs(pre - (cuda_total - items["cuda_context"])) < 2**20 * 10  # (the printed total is rounded)
    # the pool SGLang gives: mem_fraction_static x pre - the weights (kv_cache_configurator _profile_available_bytes)
    assert abs(items["kv_cache"] - (int(mfs * pre) - items["weights"])) <= 1, (items, pre)
    (line,) = [w for w in d["warnings"] if w.startswith("does not fit: SGLang admits")]
    assert code == 1
    assert (f"mem_fraction_static {mfs} x {format_bytes(pre)} free before the weights load (CUDA's total "
            f"{format_bytes(m['details']['workload_budget_bytes'])} less the CUDA context) = "
            f"{format_bytes(int(mfs * pre))}") in line, line
    assert f"of {format_bytes(device)}" not in line, line
