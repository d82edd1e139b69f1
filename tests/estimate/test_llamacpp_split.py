"""llama.cpp multi-GPU placement (layer and row split, -ngl, --n-cpu-moe) against the rules of llama.cpp's source.

Source: llama.cpp ggml-org/llama.cpp@0c1e57098 as vendored by llama-cpp-python 0.3.36 (PyPI sdist); line numbers of
that tree. Expected values are derived by hand from those lines (written out in each test), and tensor bytes come
from GGUF files written with the ``gguf`` package (sizes from the ggml block layouts in readers_helpers, not from
llmsizer's reader).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readers"))
import readers_helpers as H  # noqa: E402

import llmsizer  # noqa: E402
from llmsizer.errors import InputError  # noqa: E402
from llmsizer.estimate.inference.llamacpp_split import CPU, layer_devices, split_points  # noqa: E402
from llmsizer.units import GiB  # noqa: E402


def _devices(n_layer: int, ngl: int, shares: list[float]) -> list[int]:
    return list(layer_devices(n_layer, ngl, split_points(shares)))


# --- rule (2), src/llama-model.cpp:1589-1614 ---------------------------------------------------------------------

def test_two_equal_gpus_all_layers():
    """n_layer 32, -ngl 33, -ts 1,1: i_gpu_start = 0, act = 33, points (0.5, 1). Layer j goes to
    upper_bound(points, j/33): j = 16 -> 0.485 < 0.5 -> GPU0; j = 17 -> 0.515 -> GPU1. So GPU0 holds layers 0-16
    (17), GPU1 layers 17-31 and the output layer (16)."""
    d = _devices(32, 33, [1, 1])
    assert d[:17] == [0] * 17 and d[17:] == [1] * 16


def test_ngl_counts_the_output_layer_first():
    """llama-model.cpp:1912-1921 logs "offloading output layer to GPU" as soon as n_gpu_layers > 0 and then
    n_gpu - 1 repeating layers (n_gpu = min(ngl, n_layer)): -ngl 1 offloads the output layer alone, -ngl 10 the
    output layer and the last 9 repeating layers."""
    assert _devices(32, 1, [1]) == [CPU] * 32 + [0]
    d = _devices(32, 10, [1])
    assert d[:23] == [CPU] * 23 and d[23:] == [0] * 10
    assert _devices(32, 0, [1]) == [CPU] * 33
    assert _devices(32, 999, [1]) == [0] * 33  # act = min(ngl, n_layer + 1)


def test_zero_share_gets_no_layer_and_proportions_hold():
    """-ts 0,3,1 over 41 layers (40 + output): points (0, 0.75, 1); GPU0 gets nothing; j/41 < 0.75 <=> j <= 30."""
    d = _devices(40, 41, [0, 3, 1])
    assert 0 not in d and d.count(1) == 31 and d.count(2) == 10


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=8), st.integers(1, 120))
def test_layer_counts_as_tensor_split_give_exactly_those_counts(counts, n_layer):
    """common/fit.cpp set_ngl_tensor_split_tbo writes tensor_split[id] = layers of device id and n_gpu_layers =
    their sum, relying on the split points putting exactly that many layers on each device."""
    total = sum(counts)
    if total == 0 or total > n_layer + 1:
        return
    d = _devices(n_layer, total, [float(c) for c in counts])
    assert [d.count(g) for g in range(len(counts))] == counts
    assert d.count(CPU) == n_layer + 1 - total
    on = [x for x in d if x != CPU]
    assert on == sorted(on)  # contiguous slices in device order


# --- weights, KV and compute per device on real GGUF files --------------------------------------------------------

@pytest.fixture
def llama4(tmp_path):
    pytest.importorskip("gguf")
    model = H.llama_gguf(layers=4)
    path = tmp_path / "tiny-llama.gguf"
    model.write(path)
    return path, model.expected_bytes()


def _layer_bytes(nbytes: dict[str, int], i: int, pattern: str = "") -> int:
    return sum(b for n, b in nbytes.items() if n.startswith(f"blk.{i}.") and re.search(pattern, n))


def _split(est) -> dict[str, dict]:
    return {d["device"]: d for d in est.details["split"]["devices"]}


def test_layer_split_weights_per_gpu_are_the_tensors_of_its_layers(llama4):
    """-ts 1,1 over 4 layers + output: points (0.5, 1), act 5: j/5 < 0.5 <=> j <= 2, so GPU0 holds layers 0-2 and
    GPU1 layer 3 + output (output.weight, output_norm); token_embd stays on the host (rule 3); rope_freqs is
    created per layer (src/models/llama.cpp:66, TENSOR_DUPLICATED after layer 0) in its layer's buffer type, one
    copy per device that holds layers (src/llama-model-loader.cpp:1370-1376): one on each GPU, none on the host."""
    path, nbytes = llama4
    est = llmsizer.estimate_inference(str(path), engine="llamacpp", context=256, gpus=2, tensor_split=(1, 1))
    dev = _split(est)
    rope = nbytes["rope_freqs.weight"]
    assert dev["GPU0"]["weights"] == sum(_layer_bytes(nbytes, i) for i in range(3)) + rope
    out = nbytes["output.weight"] + 4 * 64  # output_norm: F32 [64]
    assert dev["GPU1"]["weights"] == _layer_bytes(nbytes, 3) + out + rope
    assert dev["host"]["weights"] == nbytes["token_embd.weight"]
    # every byte of the file is on exactly one device, rope_freqs on both GPUs
    assert sum(d["weights"] for d in dev.values()) == sum(nbytes.values()) + rope


@pytest.mark.parametrize("ngl,holders", [(5, {"GPU0"}), (4, {"GPU0", "host"}), (1, {"host"}), (0, {"host"})])
def test_rope_freqs_is_on_every_device_holding_a_layer(tmp_path, ngl, holders):
    """One GPU, 4 layers + output. -ngl 5: every layer on GPU0, rope_freqs there only; -ngl 4: i_gpu_start 1, layer 0
    on the CPU, so a copy in host memory too; -ngl 1: only the output layer offloaded (LLM_TENSOR_LAYER_OUTPUT holds
    no rope_freqs), the table stays with the CPU layers; -ngl 0: CPU only. (llama.cpp src/llama-arch.cpp:743:
    ROPE_FREQS is LLM_TENSOR_LAYER_REPEATING.)"""
    pytest.importorskip("gguf")
    model = H.llama_gguf(layers=4)
    path = tmp_path / "tiny-llama.gguf"
    model.write(path)
    nbytes = model.expected_bytes()
    rope = nbytes["rope_freqs.weight"]
    est = llmsizer.estimate_inference(str(path), engine="llamacpp", context=256, device="gpu" if ngl else "cpu",
                                      **({"n_gpu_layers": ngl} if ngl else {}))
    dev = _split(est) if "split" in est.details else {"host": {"weights": est.item("weights").bytes}}
    layers_on = {name: sum(_layer_bytes(nbytes, i) for i in range(4) if (name == "GPU0") == (i >= 5 - min(ngl, 5)))
                 for name in ("GPU0", "host")}
    for name in ("GPU0", "host"):
        if name not in dev:
            continue
        extra = nbytes["token_embd.weight"] if name == "host" else 0
        if ngl and name == "GPU0":
            extra += nbytes["output.weight"] + 4 * 64
        elif not ngl:
            extra += nbytes["output.weight"] + 4 * 64
        assert dev[name]["weights"] == layers_on[name] + extra + (rope if name in holders else 0), name


def test_per_device_sums_equal_the_single_device_total(llama4):
    """Weights are conserved but for rope_freqs, which each device holding layers keeps a copy of (rule 3b): on one
    GPU one copy; in each split below two devices hold layers (-ts 2,0.5,1: GPU0 layers 0-2, GPU1 layer 3, GPU2
    the output layer only; -ngl 3: layers 0-1 on the CPU, 2-3 on GPU0, the output on GPU1), so one more copy."""
    path, nbytes = llama4
    one = llmsizer.estimate_inference(str(path), engine="llamacpp", context=256)
    rope = nbytes["rope_freqs.weight"]
    for kw in ({"gpus": 2}, {"gpus": 3, "tensor_split": (2, 0.5, 1)}, {"gpus": 2, "split_mode": "row"},
               {"gpus": 2, "n_gpu_layers": 3}):
        est = llmsizer.estimate_inference(str(path), engine="llamacpp", context=256, **kw)
        dev = est.details["split"]["devices"]
        assert sum(d["weights"] for d in dev) == one.item("weights").bytes + one.item("weights_host").bytes + rope
        assert sum(d["kv_cache"] for d in dev) == one.item("kv_cache").bytes  # rule (6): KV follows its layer
        assert est.item("weights").bytes + est.item("weights_host").bytes == sum(nbytes.values()) + rope
    assert one.item("weights").bytes + one.item("weights_host").bytes == sum(nbytes.values())


def test_kv_cache_follows_its_layer(llama4):
    """src/llama-kv-cache.cpp:216-219: K and V of layer il on model.dev_layer(il); 4 layers of 2 kv heads x 16 dims,
    f16 K and V, n_ctx 256: 256 x 2 x 2 x 16 x 2 B = 32 KiB per layer."""
    path, _ = llama4
    est = llmsizer.estimate_inference(str(path), engine="llamacpp", context=256, gpus=2, tensor_split=(1, 1),
                                      n_gpu_layers=4)  # i_gpu_start 1: layer 0 on the CPU
    dev = _split(est)
    per_layer = 256 * 2 * 2 * 16 * 2
    assert dev["host"]["kv_cache"] == per_layer
    assert dev["GPU0"]["kv_cache"] + dev["GPU1"]["kv_cache"] == 3 * per_layer
    assert est.item("kv_cache_host").bytes == per_layer


def test_row_split_spreads_the_matrices_by_the_shares(llama4):
    """Rule (5): in -sm row every GPU layer's 2-D matrices (and the output matrix) are divided by rows in the -ts
    proportions; 1-D norms stay on the layer's device. Layers follow rule (2) (points 0.75, 1: layers 0-3 on GPU0,
    the output layer on GPU1), so GPU0 alone holds repeating layers and the one copy of rope_freqs (rule 3b)."""
    path, nbytes = llama4
    est = llmsizer.estimate_inference(str(path), engine="llamacpp", context=256, gpus=2, split_mode="row",
                                      tensor_split=(3, 1))
    dev = _split(est)
    mats = sum(b for n, b in nbytes.items() if n.startswith("blk.") and "norm" not in n) + nbytes["output.weight"]
    norms = sum(b for n, b in nbytes.items() if n.startswith("blk.") and "norm" in n) + 4 * 64
    assert dev["GPU0"]["weights"] + dev["GPU1"]["weights"] == mats + norms + nbytes["rope_freqs.weight"]
    assert abs(dev["GPU0"]["weights"] - 3 * dev["GPU1"]["weights"]) < norms * 4  # 3:1 up to where the norms sit


def test_n_cpu_moe_keeps_the_experts_of_the_first_layers_on_the_host(tmp_path):
    """Rule (4), common/common.h:1198-1217: --n-cpu-moe 1 adds the override blk\\.0\\.ffn_(up|down|gate|gate_up)_
    (ch|)exps -> CPU; the tied output matrix is a device copy of token_embd (TENSOR_DUPLICATED)."""
    pytest.importorskip("gguf")
    model = H.qwen3moe_gguf()
    path = tmp_path / "moe.gguf"
    model.write(path)
    nbytes = model.expected_bytes()
    est = llmsizer.estimate_inference(str(path), engine="llamacpp", context=256, n_cpu_moe=1)
    dev = _split(est)
    experts0 = _layer_bytes(nbytes, 0, r"ffn_(up|down|gate|gate_up)_(ch|)exps")
    assert experts0 > 0
    assert dev["host"]["weights"] == nbytes["token_embd.weight"] + experts0
    # the GPU: every tensor but token_embd and the host's experts, plus the device copy of token_embd = total - experts
    assert dev["GPU0"]["weights"] == sum(nbytes.values()) - experts0
    with pytest.raises(InputError, match="no experts"):
        llmsizer.estimate_inference("llama-3.1-8b", engine="llamacpp", weights="q4_k_m", n_cpu_moe=1)


def test_verdict_is_the_fullest_gpu():
    est = llmsizer.estimate_inference("llama-3.1-70b-instruct", engine="llamacpp", weights="q4_k_m", context=8192,
                                      gpus=2, tensor_split=(3, 1), memory=24 * GiB)
    gpus = [d for d in est.details["split"]["devices"] if d["device"] != "host"]
    assert gpus[0]["total"] > gpus[1]["total"]
    assert not est.details["fits"] and "GPU0" in est.details["verdict"]


def test_bad_split_inputs_are_one_line_errors():
    for kw, msg in (({"gpus": 2, "tensor_split": (1, 1, 1)}, r"3 shares; give one share per GPU of one machine \(2 GPUs"),
                    ({"gpus": 2, "split_mode": "none"}, "one GPU"),
                    ({"tensor_split": (1, -1)}, "non-negative")):
        with pytest.raises(InputError, match=msg):
            llmsizer.estimate_inference("llama-3.1-8b", engine="llamacpp", weights="q4_k_m", **kw)
    with pytest.raises(InputError, match="appl(y|ies) to engine llamacpp"):
        llmsizer.estimate_inference("llama-3.1-8b", engine="vllm", gpus=2)


def test_n_cpu_moe_past_the_last_layer_is_every_layer():
    """llama.cpp takes any --n-cpu-moe N (common/arg.cpp: a name pattern per layer index < N); Qwen3-30B-A3B has 48
    layers (its config.json: num_hidden_layers 48), so N = 1000 keeps the same experts as N = 48. The placement
    said 'experts 0-999'."""
    from llmsizer.estimate.inference import estimate_inference

    kw = dict(engine="llamacpp", weights="q4_k_m", context=4096)
    all48 = estimate_inference("qwen3-30b-a3b", n_cpu_moe=48, **kw).details["split"]
    big = estimate_inference("qwen3-30b-a3b", n_cpu_moe=1000, **kw).details["split"]
    assert big["devices"] == all48["devices"] and big["n_cpu_moe"] == 48
    assert big["devices"][-1]["layers"] == "token embd, the experts of layers 0-47"
    # the assumption names the value llama.cpp acts on, and what was given (before: n_cpu_moe=1000, echoed)
    est = estimate_inference("qwen3-30b-a3b", n_cpu_moe=1000, **kw)
    a = next(a for a in est.assumptions if a.name == "n_cpu_moe")
    assert (a.value, a.default) == (48, False)
    assert f"{a.name}={a.value}{a.mark}" == "n_cpu_moe=48 (given as 1000; the model has 48 layers)"
    same = next(a for a in estimate_inference("qwen3-30b-a3b", n_cpu_moe=48, **kw).assumptions if a.name == "n_cpu_moe")
    assert f"{same.name}={same.value}{same.mark}" == "n_cpu_moe=48"
    from cli_capture import run_cli
    done = run_cli("fit", "qwen3-30b-a3b", "--engine", "llamacpp", "--weights", "q4_k_m", "--device", "rtx-3090",
                   "--n-cpu-moe", "100")
    assert done.returncode == 0 and "n_cpu_moe=48 (given as 100; the model has 48 layers)" in done.stdout
    assert "n_cpu_moe=100" not in done.stdout and "--n-cpu-moe 100" not in done.stdout
