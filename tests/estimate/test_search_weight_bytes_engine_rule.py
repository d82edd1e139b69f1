"""smalls9 #5: the format search sizes a rung by the engine's per-tensor dtype rule (formulas/weight_formats.py
ENGINE_TENSOR_BYTES through ``weight_bytes(engine=)``), as the estimate does: before, ``rung_bytes`` (the search's
weights-alone check, recommend's and the plan's ranking) sized SGLang's fp32 DSA indexer ``weights_proj`` as the
checkpoint's fp8, 84 MB less than `fit` and `infer` hold for DeepSeek-V3.2 on SGLang."""

from __future__ import annotations

from llmsizer import estimate_inference
from llmsizer.estimate.fit import fit
from llmsizer.estimate.formats import rung_bytes, rung_group_size
from llmsizer.models import load_model


def test_deepseek_v32_sglang_fp8_tp8_search_and_estimate_hold_the_same_weight_bytes() -> None:
    spec = load_model("deepseek-v3.2")
    fmt = "fp8-block"  # the checkpoint's own format, the search's first rung on SGLang
    searched = rung_bytes(spec, fmt, rung_group_size(spec, fmt, None), "sglang")  # pick_format's weights-alone size
    fitted = fit("deepseek-v3.2", "h200", 8, engine="sglang", weights=fmt)
    assert fitted.speed is not None and fitted.tensor_parallel == 8
    assert fitted.speed.details["weights_bytes"] == searched  # the whole model the decode reads, at TP 8
    inferred = estimate_inference(spec, engine="sglang", weights=fmt, tensor_parallel=1, context=4096)
    assert inferred.details["weights_bytes"] == searched
    # the engine's own dtype is what differs from the plain format rule: 61 x [64, 7168] weights_proj at fp32 on
    # SGLang (nsa_indexer.py:149-155), at fp8 + fp32 128 x 128 block scales in the checkpoint
    plain = rung_bytes(spec, fmt, rung_group_size(spec, fmt, None), None)
    per_layer_fp8 = 64 * 7168 + 4 * 1 * (7168 // 128)
    assert searched - plain >= 61 * (64 * 7168 * 4 - per_layer_fp8)
