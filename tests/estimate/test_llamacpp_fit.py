"""llama.cpp auto-fit (estimate/llamacpp_fit.py) against the rules of llama.cpp's common/fit.cpp and common.h.

Source: llama.cpp ggml-org/llama.cpp@0c1e57098 as vendored by llama-cpp-python 0.3.36. The answer is checked by
feeding its flags back into the one estimator (what `infer` reports for them) and by showing that each choice is
the boundary: one more layer, 256 more tokens of context or one layer fewer of experts on the CPU breaks a GPU's
target.
"""

from __future__ import annotations

import json

import pytest

import llmsizer
from cli_capture import run_cli
from llmsizer.errors import InputError
from llmsizer.estimate.llamacpp_fit import CTX_ALIGN, FIT_MIN_CTX, FIT_TARGET, fit_llamacpp
from llmsizer.units import GiB, MiB


def test_defaults_are_llama_cpps():
    """common/common.h:480 fit_params_min_ctx = 4096; :483 fit_params_target = 1024 MiB per device; common/fit.cpp
    rounds the context down to a multiple of 256 (x n_streams)."""
    assert (FIT_MIN_CTX, FIT_TARGET, CTX_ALIGN) == (4096, 1024 * MiB, 256)


def _gpu_totals(model, flags_fit, **kw):
    est = llmsizer.estimate_inference(model, engine="llamacpp", context=flags_fit.context, gpus=len(flags_fit.free),
                                      n_gpu_layers=flags_fit.n_gpu_layers,
                                      tensor_split=tuple(map(float, flags_fit.tensor_split)) or None,
                                      n_cpu_moe=flags_fit.n_cpu_moe or None, **kw)
    return [d["total"] for d in est.details["split"]["devices"] if d["device"] != "host"]


def test_context_is_reduced_to_the_largest_that_fits_two_gpus():
    free = [24 * GiB, 24 * GiB]
    r = fit_llamacpp("llama-3.1-70b-instruct", free, weights="q4_k_m")
    assert r.fits and r.full_offload and r.context % CTX_ALIGN == 0 and FIT_MIN_CTX <= r.context < 131072
    assert sum(r.tensor_split) == r.n_gpu_layers == 81
    used = _gpu_totals("llama-3.1-70b-instruct", r, weights="q4_k_m")
    assert all(u <= f - FIT_TARGET for u, f in zip(used, free, strict=True))
    # 256 more tokens break every way of placing the 81 layers (the fit tried all splits through the back-to-front
    # fill); shown here for the split found and its neighbours
    for ts in (r.tensor_split, (r.tensor_split[0] + 1, r.tensor_split[1] - 1),
               (r.tensor_split[0] - 1, r.tensor_split[1] + 1)):
        est = llmsizer.estimate_inference("llama-3.1-70b-instruct", engine="llamacpp", weights="q4_k_m",
                                          context=r.context + CTX_ALIGN, gpus=2, tensor_split=tuple(map(float, ts)))
        tot = [d["total"] for d in est.details["split"]["devices"][:2]]
        assert any(t > f - FIT_TARGET for t, f in zip(tot, free, strict=True))


def test_moe_experts_go_to_the_host_only_as_far_as_needed():
    free = [12 * GiB]
    r = fit_llamacpp("qwen3-30b-a3b", free, weights="q4_k_m")
    assert r.fits and r.full_offload and r.context == FIT_MIN_CTX and 0 < r.n_cpu_moe < 48
    assert "--n-cpu-moe" in r.flags() and str(r.n_cpu_moe) in r.flags()
    assert _gpu_totals("qwen3-30b-a3b", r, weights="q4_k_m")[0] <= free[0] - FIT_TARGET
    est = llmsizer.estimate_inference("qwen3-30b-a3b", engine="llamacpp", weights="q4_k_m", context=r.context,
                                      n_cpu_moe=r.n_cpu_moe - 1)
    assert est.details["split"]["devices"][0]["total"] > free[0] - FIT_TARGET


def test_dense_partial_offload_stops_at_the_last_layer_that_fits():
    free = [6 * GiB]
    r = fit_llamacpp("llama-3.1-8b", free, weights="q8_0", context=8192)
    assert r.context == 8192 and 0 < r.n_gpu_layers < 33 and not r.full_offload
    assert _gpu_totals("llama-3.1-8b", r, weights="q8_0")[0] <= free[0] - FIT_TARGET
    more = llmsizer.estimate_inference("llama-3.1-8b", engine="llamacpp", weights="q8_0", context=8192,
                                       n_gpu_layers=r.n_gpu_layers + 1)
    assert more.details["split"]["devices"][0]["total"] > free[0] - FIT_TARGET


def test_nothing_changes_when_the_defaults_fit():
    r = fit_llamacpp("qwen2.5-0.5b", [24 * GiB], weights="q8_0", context=8192)
    assert r.full_offload and r.context == 8192 and r.n_cpu_moe == 0 and "no changes needed" in r.steps[0]


def test_auto_fit_rejects_what_it_chooses():
    with pytest.raises(InputError, match="n_gpu_layers is what the auto-fit chooses"):
        fit_llamacpp("llama-3.1-8b", [8 * GiB], weights="q4_k_m", n_gpu_layers=10)
    with pytest.raises(InputError, match="free memory"):
        fit_llamacpp("llama-3.1-8b", [], weights="q4_k_m")


def test_cli_fit_auto_prints_flags_and_json():
    r = run_cli("fit", "llama-3.3-70b-instruct", "--device", "rtx-3090", "--engine", "llama.cpp", "--weights",
             "q4_k_m", "--auto", "--free", "23GiB,11GiB", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["kind"] == "llamacpp-fit" and data["flags"][-2:] == ["-fit", "off"]
    assert "-ts" in data["flags"] and len(data["tensor_split"]) == 2
    assert all(d["total"] <= d["target"] for d in data["devices"] if d["device"] != "host")
    text = run_cli("fit", "qwen3-30b-a3b", "--device", "rtx-3090", "--weights", "q4_k_m", "--auto", "--free", "12GiB")
    assert text.returncode == 0 and "flags: -c " in text.stdout and "--n-cpu-moe" in text.stdout
    bad = run_cli("fit", "llama-3.1-8b", "--device", "rtx-3090", "--count", "3", "--auto", "--free", "8GiB,8GiB")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--count" in bad.stderr
    small = run_cli("fit", "llama-3.1-70b-instruct", "--device", "rtx-3090", "--weights", "q4_k_m", "--auto",
                 "--free", "20GiB", "--host-memory", "8GiB")
    assert small.returncode == 1 and "host memory" in small.stdout


def test_flags_give_the_kv_cells_of_all_slots():
    """llama-server: -c is n_ctx, the KV cells of all -np slots together (each slot gets n_ctx / n_parallel)."""
    r = fit_llamacpp("qwen2.5-0.5b", [24 * GiB], weights="q8_0", context=8192, concurrency=4)
    f = r.flags()
    assert f[f.index("-c") + 1] == str(4 * 8192) and f[f.index("-np") + 1] == "4"
    assert r.estimate.details["n_ctx"] == 4 * 8192


def test_what_the_host_holds_is_named_when_its_memory_is_not_given():
    """-c 1,000,000,000 on Llama-3.3-70B: 1 of 81 layers on the GPUs, the KV of the other 80 on the host --
    80 layers x 1e9 tokens x 2 (K, V) x 8 KV heads x 128 x 2 B = 327.68e12 B (298 TiB). Before: 'FITS', exit 0,
    no word about the host; --host-memory (unset) is the only check of it."""
    r = fit_llamacpp("llama-3.3-70b-instruct", [24 * GiB, 24 * GiB], weights="q4_k_m", context=1_000_000_000)
    host_kv = 80 * 1_000_000_000 * 2 * 8 * 128 * 2
    host = r.estimate.details["split"]["devices"][-1]
    assert host["device"] == "host" and host["kv_cache"] >= host_kv
    assert any("--host-memory" in w and "298" in w for w in r.warnings), r.warnings
    checked = fit_llamacpp("llama-3.3-70b-instruct", [24 * GiB, 24 * GiB], weights="q4_k_m", context=1_000_000_000,
                           host_memory=512 * GiB)
    assert not checked.fits


def test_a_gpu_given_only_the_output_layer_says_so():
    """llama.cpp offloads the output layer first (src/llama-model.cpp:1589-1600, i_gpu_start = n_layer + 1 - N;
    :1912-1924 logs "offloading output layer to GPU" for any N > 0): with room for one layer, -ngl 1 puts the final
    norm and the output matrix, and nothing else, on the GPU. The table said "no layers" beside 1002 MiB of weights.
    Llama-3.1-8B at BF16: output.weight 128256 x 4096 x 2 B (GGUF F16/BF16) + output_norm 4096 x 4 B (F32)."""
    r = fit_llamacpp("llama-3.1-8b", [3 * GiB], context=4096)
    assert r.n_gpu_layers == 1 and not r.full_offload
    gpu, host = r.estimate.details["split"]["devices"]
    assert gpu["device"] == "GPU0" and gpu["layers"] == "output layer only" and gpu["n_layers"] == 1
    assert gpu["weights"] == 128256 * 4096 * 2 + 4096 * 4 and gpu["kv_cache"] == 0
    assert host["layers"] == "token embd, layers 0-31"  # the 32 repeating layers, not the output
    text = run_cli("fit", "llama-3.1-8b", "--device", "rtx-4090", "--auto", "--free", "3GiB")
    assert text.returncode == 0, text.stderr
    row = next(ln for ln in text.stdout.splitlines() if ln.startswith("GPU0"))
    assert "output layer only" in row and "no layers" not in text.stdout
    empty = fit_llamacpp("llama-3.1-8b", [2 * GiB], context=4096)  # no room even for the output layer
    assert empty.n_gpu_layers == 0 and empty.estimate.details["split"]["devices"][0]["layers"] == "no layers"
