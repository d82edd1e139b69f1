"""The llama.cpp layer split against a published start-up log of two GPUs.

xorbitsai/inference#1202 (https://github.com/xorbitsai/inference/issues/1202, comment of 2024-04-09): Qwen1.5-72B-Chat
Q3_K_M on 2 x RTX 3090, all 81 layers offloaded (-ngl 81, default tensor split), n_ctx 32768, f16 KV:

    llm_load_tensors: offloaded 81/81 layers to GPU
    llm_load_tensors:  CUDA_Host buffer size =   510.47 MiB
    llm_load_tensors:      CUDA0 buffer size = 16854.41 MiB
    llm_load_tensors:      CUDA1 buffer size = 16892.66 MiB
    ggml_backend_cuda_buffer_type_alloc_buffer: allocating 41984.00 MiB on device 0: cudaMalloc failed: out of memory

The config is Qwen1.5-72B-Chat's config.json (Qwen2 architecture, MHA: 64 query and 64 KV heads of 128).
"""

from __future__ import annotations

import json

import pytest

from llmsizer.estimate.inference import estimate_inference
from llmsizer.units import MiB

QWEN15_72B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192,
              "intermediate_size": 24576, "num_attention_heads": 64, "num_key_value_heads": 64,
              "num_hidden_layers": 80, "vocab_size": 152064, "max_position_embeddings": 32768,
              "tie_word_embeddings": False, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "torch_dtype": "bfloat16",
              "hidden_act": "silu", "use_sliding_window": False}


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen15") / "config.json"
    path.write_text(json.dumps(QWEN15_72B))
    est = estimate_inference(str(path), engine="llamacpp", weights="q3_k_m", gpus=2, context=32768)
    return {d["device"]: d for d in est.details["split"]["devices"]}


def test_kv_of_device_0_is_the_logged_allocation(split):
    # layers 0-40 on CUDA0: 41 x 32768 cells x 2 (K, V) x 64 heads x 128 x 2 B = 41,984 MiB
    assert split["GPU0"]["layers"].startswith("layers 0-40")
    assert split["GPU0"]["kv_cache"] == 41984 * MiB


def test_host_buffer_is_the_logged_token_embedding(split):
    assert split["host"]["weights"] == pytest.approx(510.47 * MiB, abs=0.005 * MiB)


def test_weights_per_gpu_within_2_percent_of_the_log(split):
    # measured -1.9 % on each GPU (16,538 / 16,579 MiB), not explained yet: the logged file was quantized by an
    # April 2024 build whose Q3_K_M type mix may differ from the rules the estimate follows; the layer split is the
    # same (GPU1 holds more: +38 MiB logged, +41 MiB estimated)
    for dev, logged in (("GPU0", 16854.41), ("GPU1", 16892.66)):
        assert split[dev]["weights"] == pytest.approx(logged * MiB, rel=0.02)
    assert split["GPU1"]["weights"] > split["GPU0"]["weights"]
