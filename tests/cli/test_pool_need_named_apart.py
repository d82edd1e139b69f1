"""One line, two "needs" named apart (probe33 D8).

`fit qwen3.5-397b-a17b --device h200 --count 2 --images 2 --image-size 1024x768`: vLLM's pool has no room for a KV
cache (its weights, activations and graphs exceed it), so the memory per device (the estimate's device total: its
kv_cache item is 0) holds no cache, while "this workload needs" (vllm.py ``_workload_bytes``) adds the cache its
sequences need. The line printed both as bare figures (380.54 GiB and 380.72 GiB). Now the need is said as that
total plus the cache, each figure from the answer's own fields."""

from __future__ import annotations

from cli_capture import run, run_json
from llmsizer.units import format_bytes

ARGS = ("qwen3.5-397b-a17b", "--device", "h200", "--count", "2", "--images", "2", "--image-size", "1024x768")


def test_need_beside_an_empty_pool_names_the_cache_it_adds() -> None:
    code, d = run_json("fit", *ARGS)
    det = d["memory"]["details"]
    kv = next(it for it in d["memory"]["items"] if it["name"] == "kv_cache")
    held, need = d["memory_per_device"], det["workload_bytes"]
    # the premise: no KV cache in the device total, the workload's need above it, vLLM does not start
    assert code == 1 and kv["bytes"] == 0 and det["pool_shortfall_bytes"] > 0 and need > held, (kv, det)
    assert held == sum(it["bytes"] for it in d["memory"]["items"] if it["location"] == "device")
    _, out, _ = run("fit", *ARGS)
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("memory per device"))
    named = (f"this workload needs {format_bytes(need)} of the {format_bytes(det['workload_budget_bytes'])} it "
             f"offers (with the CUDA context) (more than it offers): the {format_bytes(held)} it holds before the KV "
             f"cache + {format_bytes(need - held)} of KV cache for its sequences")
    assert line.strip().startswith(f"memory per device {format_bytes(held)} of") and named in line, line
    # infer's pool line says it alike (render/text.py pool_and_need, the one wording)
    _, out, _ = run("infer", "qwen3.5-397b-a17b", "--device", "h200", "--tp", "2", "--images", "2", "--image-size",
                    "1024x768")
    assert named in out, out
