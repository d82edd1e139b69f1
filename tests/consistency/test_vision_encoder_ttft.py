"""An image prompt's time to first token includes the vision encoder (probe4 finding).

Before, estimate/speed.py timed the prefill of the language model alone over the prompt's text + image tokens (the
vision parameters were dropped from the products), so an image cost only its context tokens: Qwen2.5-VL-7B with one
1920x1080 image and 1k of text on an L40S (vLLM) gave a TTFT of 0.175 s, its tower's 10,764 patches left out
(0.235 s with them). Now fit (and through it recommend, plan and the web) adds the tower's FLOPs
(formulas/vision_compute.py) to the prefill.

Independent truth: torch's FlopCounterMode counts the products of the real transformers forward of the tower and its
merger (``get_image_features``) of a small Qwen2.5-VL on the image the processor rule makes of the request's; the
TTFT of the image prompt minus that of a text prompt of as many tokens must be those FLOPs at the device's bf16 peak
times the compute efficiency the estimate names (both prefills compute-bound).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import llmsizer
from cli_capture import run_json
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E

pytestmark = pytest.mark.slow

TINY_QWEN_VL = {
    "model_type": "qwen2_5_vl", "torch_dtype": "bfloat16",
    "text_config": {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
                    "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32768},
    "vision_config": {"hidden_size": 64, "intermediate_size": 128, "num_heads": 4, "depth": 4, "out_hidden_size": 64,
                      "spatial_merge_size": 2, "temporal_patch_size": 2, "patch_size": 14,
                      "fullatt_block_indexes": [1, 3], "window_size": 112, "in_channels": 3},
    "preprocessor_config": {"min_pixels": 1024, "max_pixels": 10 ** 7},
}
WIDTH, HEIGHT = 392, 168  # multiples of patch x merge (28): kept as they are, 28 x 12 patches, windows 4 + 2
CONTEXT = 2048


def _tower_flops() -> int:
    oracle_utils = pytest.importorskip("oracle_utils")
    torch = oracle_utils.torch
    from torch.utils.flop_counter import FlopCounterMode
    model = oracle_utils.build(TINY_QWEN_VL, device="cpu", dtype=torch.float32, attn="eager")
    rows, cols = HEIGHT // 14, WIDTH // 14
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.get_image_features(torch.zeros(rows * cols, 3 * 2 * 14 * 14), torch.tensor([[1, rows, cols]]))
    return int(counter.get_total_flops())


def test_the_prefill_of_an_image_prompt_adds_the_towers_flops(tmp_path: Path) -> None:
    cfg = tmp_path / "tiny-qwen-vl" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(TINY_QWEN_VL), "utf-8")
    model = str(cfg)
    image = llmsizer.fit(model, "h100-sxm", 1, engine="transformers", context=CONTEXT, output_tokens=1, images=1,
                         image_size=f"{WIDTH}x{HEIGHT}")
    assert image.estimate is not None
    media = int(image.estimate.details["media_tokens"])
    text = llmsizer.fit(model, "h100-sxm", 1, engine="transformers", context=CONTEXT + media, output_tokens=1)
    assert image.estimate is not None and image.speed is not None and text.speed is not None
    assert image.speed.prompt_tokens == text.speed.prompt_tokens
    # a one-layer model's prefill on eager transformers waits on its kernel launches (formulas/launch_overhead.py
    # eqs. K1, K4): the tower's FLOPs add to the device's compute time, which the launches hide
    assert image.speed.prefill.bound == text.speed.prefill.bound == "host"
    peak, _ = builtin_catalog().devices["h100-sxm"].peak_flops("bf16")
    assert peak is not None
    tower = _tower_flops()
    added = image.speed.prefill.compute_seconds - text.speed.prefill.compute_seconds
    assert added == pytest.approx(tower / (peak * E.COMPUTE.expected), rel=0.002)
    # the CLI's fit (and so the web's, the same JSON) says the same TTFT
    code, out = run_json("fit", model, "--device", "h100-sxm", "--engine", "transformers", "--context", str(CONTEXT),
                   "--output-tokens", "1", "--images", "1", "--image-size", f"{WIDTH}x{HEIGHT}")
    assert code == 0 and out["speed"]["ttft_seconds"] == pytest.approx(image.speed.ttft_seconds, rel=1e-12)
