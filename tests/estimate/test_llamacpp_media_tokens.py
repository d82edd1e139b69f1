"""llama.cpp's image tokens reach every number that reads them: the KV cache, the vision compute buffer, fit, plan.

The per-image counts are derived by hand from llama.cpp's mtmd code in tests/formulas/test_vision_tokens_llamacpp.py;
here one of them, Qwen2.5-VL 4000x3000 -> 2044 x 1540 px (146 x 110 patches of 14 px, 73 x 55 = 4015 tokens + 2:
clip.cpp set_limit_image_tokens(8, 4096)), where the transformers processor (vLLM, SGLang) gives 15,301 + 2.
"""

from __future__ import annotations

import os
import subprocess
import sys

from cli_capture import SRC
from llmsizer.estimate.fit import fit
from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.vision_activations import qwen_encoder_activation_bytes
from llmsizer.models import load_model

MODEL = "qwen2.5-vl-7b-instruct"
SIZE = (4000, 3000)
LLAMACPP, PROCESSOR = 4017, 15303
PATCHES = 146 * 110  # the resized image's 14-px patches, all in one encoder sequence


def test_llamacpp_and_vllm_count_the_image_by_their_own_rules():
    cpp = estimate_inference(MODEL, images=1, image_size=SIZE, engine="llamacpp", weights="q4_k_m", context=4096)
    vllm = estimate_inference(MODEL, images=1, image_size=SIZE, engine="vllm", context=4096)
    assert cpp.details["media_tokens"] == LLAMACPP and vllm.details["media_tokens"] == PROCESSOR
    assert cpp.details["context_with_media"] == 4096 + LLAMACPP
    media = next(a for a in cpp.assumptions if a.name == "media")
    assert "llama.cpp" in media.why and "transformers processor" not in media.why


def test_the_kv_cache_and_the_vision_buffer_read_the_corrected_count():
    spec = load_model(MODEL)
    assert spec.vision is not None
    est = estimate_inference(spec, images=1, image_size=SIZE, engine="llamacpp", weights="q4_k_m", context=4096)
    text = estimate_inference(spec, engine="llamacpp", weights="q4_k_m", context=4096 + LLAMACPP)
    assert est.item("kv_cache").bytes == text.item("kv_cache").bytes
    # clip's f32 graph over the one resized image of 146 x 110 patches
    want = qwen_encoder_activation_bytes(spec.vision, PATCHES, PATCHES, spec.hidden_size, 4, "flash").peak_bytes
    assert est.item("vision_compute_buffer").bytes == want


def test_fit_and_plan_say_the_same_count():
    r = fit(MODEL, "l40s", engine="llamacpp", weights="q4_k_m", context=4096, images=1, image_size=SIZE)
    assert r.estimate.details["media_tokens"] == LLAMACPP
    req = ("version: 1\njobs:\n  - name: vision\n    kind: inference\n    model:\n      name: " + MODEL + "\n"
           "    engine: llamacpp\n    quantization: q4_k_m\n    media:\n      images: 1\n      image_size: 4000x3000\n"
           "    traffic:\n      concurrency: 1\n      context: 4k\n    resources:\n      device: l40s\n")
    r2 = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "plan", "-", "--json"], input=req,
                        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert r2.returncode in (0, 1), r2.stderr
    assert f'"media_tokens": {LLAMACPP}' in r2.stdout.replace("\n", "")


def test_llamacpp_video_frames_are_images_paired_between_timestamps():
    """mtmd's video (tools/mtmd/mtmd-helper.cpp L597, L764-839, L858-862 @ 0c1e5709) at the default 4 frames/s gives
    the parts "Video:", F0, "[0m0.00s]", F1 .. F20, "[0m5.00s]", F21 .. F40, "[0m10.00s]", F41, F42 for 43 frames;
    mtmd.cpp L1108-1125 pairs only adjacent frames: [F0], 10 pairs, 10 pairs, 1 pair = 22 image chunks. 1280x720 on
    Qwen2.5-VL: 1280 / 28 = 45.7 -> 46, 720 / 28 = 25.7 -> 26, 46 x 26 = 1196 tokens (inside 8 .. 4096) + 2
    (<|vision_start|>, <|vision_end|>) = 1198 per chunk. Text: "Video" ":" = 2, "[0m0.00s]" = 9, "[0m5.00s]" = 9,
    "[0m10.00s]" = 10 (one piece per character under the Qwen2 pre-tokenizer). 22 x 1198 + 30 = 26,386.
    The transformers video processor (vLLM): 22 groups of 2 frames (43 padded to 44) at its video pixel bounds."""
    cpp = estimate_inference(MODEL, video_frames=43, video_size=(1280, 720), engine="llamacpp", weights="q4_k_m",
                             context=4096)
    assert cpp.details["video_tokens"] == 22 * 1198 + 2 + 9 + 9 + 10
    media = next(a for a in cpp.assumptions if a.name == "media")
    assert "22 image chunks" in media.why and "llama.cpp" in media.why
    assert next(a for a in cpp.assumptions if a.name == "video_fps").value == 4.0
    vllm = estimate_inference(MODEL, video_frames=43, video_size=(1280, 720), engine="vllm", context=4096)
    assert vllm.details["video_tokens"] != cpp.details["video_tokens"]
    # the KV cache holds the text context + those tokens, as for images
    text = estimate_inference(MODEL, engine="llamacpp", weights="q4_k_m", context=4096 + cpp.details["video_tokens"])
    assert cpp.item("kv_cache").bytes == text.item("kv_cache").bytes
