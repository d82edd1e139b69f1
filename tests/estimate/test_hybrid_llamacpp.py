"""llama.cpp with a hybrid model offloaded in part: the KV of the attention layers and the recurrent state of the
Mamba layers follow their layers to the device that holds them (src/llama-memory-recurrent.cpp and
src/llama-kv-cache.cpp allocate each layer's cache on ``model.dev_layer(i)``); arithmetic written out here."""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference

# Jamba-1.5-Mini: 32 layers, attention at i % 8 == 4 (4, 12, 20, 28), Mamba elsewhere; 8 KV heads x 128;
# Mamba d_inner 8192, d_state 16, d_conv 4
KV_CELL_LAYER = 2 * 8 * 128 * 2  # K and V, f16 (llama.cpp default)
STATE_LAYER_SEQ = (8192 * (4 - 1) + 8192 * 16) * 4  # n_embd_r + n_embd_s, F32


@pytest.mark.parametrize("gpus", [1, 2])
def test_partial_offload_splits_kv_and_state_by_layer(gpus):
    est = estimate_inference("jamba-1.5-mini", engine="llamacpp", weights="gguf:q4_k_m", context=8192,
                             concurrency=2, n_gpu_layers=20, gpus=gpus)
    n_ctx = 16384  # 8192 x 2 sequences, a multiple of 256
    # -ngl 20 counts the output layer: i_gpu_start = n_layer + 1 - ngl = 13 (src/llama-model.cpp), so layers
    # 13..31 are offloaded: attention layers 20 and 28 and 17 Mamba layers; 4 and 12 and 11 Mamba layers stay
    assert est.item("kv_cache").bytes == 2 * n_ctx * KV_CELL_LAYER
    assert est.item("kv_cache_host").bytes == 2 * n_ctx * KV_CELL_LAYER
    assert est.item("recurrent_state").bytes == 17 * 2 * STATE_LAYER_SEQ
    assert est.item("recurrent_state_host").bytes == 11 * 2 * STATE_LAYER_SEQ
    # the per-device split lists each device's share of the state, in its total
    devices = est.details["split"]["devices"]
    assert sum(d["recurrent_state"] for d in devices) == 28 * 2 * STATE_LAYER_SEQ
    assert next(d for d in devices if d["device"] == "host")["recurrent_state"] == 11 * 2 * STATE_LAYER_SEQ


def test_on_the_cpu_the_state_and_the_attention_kv_are_host_items():
    est = estimate_inference("jamba-1.5-mini", engine="llamacpp", weights="gguf:q8_0", context=4096, device="cpu")
    assert {i.location for i in est.items if i.name in ("kv_cache", "recurrent_state")} == {"host"}
    assert est.item("recurrent_state").bytes == 28 * STATE_LAYER_SEQ
    assert est.item("kv_cache").bytes == 4 * 4096 * KV_CELL_LAYER


def test_split_decode_moves_each_devices_share_of_the_state():
    """The split decode (formulas/speed.py eq. 8) streams, per device, its weights, its KV share and -- for a hybrid
    model -- its share of one sequence's recurrent state twice (read + write)."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.speed import split_decode
    from llmsizer.models import load_model

    spec = load_model("jamba-1.5-mini")
    est = estimate_inference(spec, engine="llamacpp", weights="gguf:q4_k_m", context=8192, concurrency=2,
                             n_gpu_layers=20, gpus=2)
    split = est.details["split"]
    cat = builtin_catalog()
    gpu, host = cat.devices["rtx-4090"], cat.find("epyc-9654")
    res = split_decode(spec, split, gpu, host, "gguf:q4_k_m", 4096, est.details["n_ctx"], None)
    for row in res["devices"]:
        d = next(x for x in split["devices"] if x["device"] == row["device"])
        frac_kv = 4096 / est.details["n_ctx"]
        base = d["weights"] - d.get("experts", 0) * (1 - 2 / 16) + d["kv_cache"] * frac_kv
        if d["device"] == "host":
            base -= split["embedding"]
        assert row["bytes"] == pytest.approx(base + 2 * d["recurrent_state"] / 2)
