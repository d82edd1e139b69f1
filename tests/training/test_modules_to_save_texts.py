"""modules_to_save copies are kept in the base dtype (bf16): the gradient and optimizer texts say so and add up to the
items' bytes (probe25 C1: the texts said 4 B grads / 8 B states per trained param for them)."""

from __future__ import annotations

import re

from llmsizer import estimate_training

VOCAB, HIDDEN = 128256, 4096  # Llama-3.1-8B config.json
SAVE = 2 * VOCAB * HIDDEN  # untied embed_tokens + lm_head copies
BF16 = 2


def test_modules_to_save_texts_match_bytes() -> None:
    e = estimate_training("llama-3.1-8b", method="lora", modules_to_save=("embed", "lm_head"), device="h100-sxm")
    items = {i.name: i for i in e.items}
    g, o = items["gradients"].formula, items["optimizer_states"].formula
    assert "1.05B modules_to_save x 2 B" in g and "modules_to_save params' states at 4 B" in o
    adapters = int(e.details["params_trainable"])  # the LoRA parameters (41.94M)
    # AdamW: 2 moments per element (+ a few KB of per-tensor step counters the optimizer table counts)
    assert abs(items["optimizer_states"].bytes - (adapters * 8 + SAVE * 2 * BF16)) < 2**20
    full = re.search(r"full size ([\d.]+) GiB", g)
    assert full and abs(float(full.group(1)) * 2**30 - (adapters * 4 + SAVE * BF16)) < 0.01 * 2**30
