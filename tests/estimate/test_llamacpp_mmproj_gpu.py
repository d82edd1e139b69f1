"""llama.cpp loads the vision tower (mmproj) on the first GPU by default (probe9 #2).

mmproj_use_gpu = true (llama.cpp common/common.h:596) and clip.cpp:188-198 opens the first GPU device
(ggml-backend-reg.cpp:355-363): with every layer offloaded, host memory holds only token_embd (src/llama-model.cpp
:1603-1605). Truth: Qwen2.5-VL-7B's token_embd by hand from its config.json (vocab 152064 x hidden 3584, BF16).
"""

from __future__ import annotations

from llmsizer import estimate_inference

QWEN_VL_TOKEN_EMBD = 152064 * 3584 * 2  # config.json vocab_size x hidden_size, BF16 bytes


def _items(est):
    return {i.name: i for i in est.items}


def test_full_offload_keeps_only_token_embd_on_host():
    est = estimate_inference("qwen2.5-vl-7b-instruct", engine="llamacpp", device="gpu", images=2,
                             image_size="1280x720")
    assert _items(est)["weights_host"].bytes == QWEN_VL_TOKEN_EMBD
    mm = next(a for a in est.assumptions if a.name == "mmproj_device")
    assert mm.value == "GPU0" and mm.default


def test_mmproj_goes_to_gpu0_of_two():
    """Two GPUs, -ngl all: GPU0 holds the layers of its share plus the tower, so it outweighs GPU1 by about the
    tower's size; the host still holds only token_embd."""
    est = estimate_inference("qwen2.5-vl-7b-instruct", engine="llamacpp", device="gpu", gpus=2, images=1,
                             image_size="1280x720")
    devs = {d["device"]: d for d in est.details["split"]["devices"]}
    assert devs["host"]["weights"] == QWEN_VL_TOKEN_EMBD
    assert devs["GPU0"]["weights"] - devs["GPU1"]["weights"] > 512 * 1024**2  # ~1.3 GiB tower; without it GPU0 (15 layers) < GPU1 (13 + output)
    assert devs["GPU0"]["vision_compute_buffer"] > 0
