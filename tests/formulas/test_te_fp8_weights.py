"""TransformerEngine's float8 weight copies (formulas/float8_training.py eq. T1, ``fp8_weight_copies``).

TE does not run on a CPU, so the truth is a hand count from TE's own rules (NVIDIA/TransformerEngine @d0067d0d):
the weight is quantized from the parameter with a rowwise copy (1 B per element) and, on a GPU without non-TN FP8
GEMMs (Hopper: quantizer.cpp lines 361-375, transformer_engine.cpp lines 1191-1203), a transposed one (1 B); that
copy is saved from a layer's forward to its backward (linear.py lines 641-648), none under FSDP2; it would be kept
in ``_fp8_workspaces`` across micro-batches only if the loop passed ``is_first_microbatch`` (lines 1958-1960,
2068-2071), which llm-foundry's blocks (the recipe sized) do not (llmfoundry/models/layers/ffn.py @63d37d79).
The element counts come from Llama-3.1-8B's config.json numbers, written out here, not from llmsizer's tables.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.float8_training import te_weight_copy_bytes
from llmsizer.readers.hf_config import spec_from_config

# meta-llama/Llama-3.1-8B config.json
H, HEADS, KV, HEAD_DIM, FFN, LAYERS, V = 4096, 32, 8, 128, 14336, 32, 128256
LLAMA_8B = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=H, num_attention_heads=HEADS,
                num_key_value_heads=KV, intermediate_size=FFN, num_hidden_layers=LAYERS, vocab_size=V,
                max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
                torch_dtype="bfloat16", hidden_act="silu", rope_theta=500000.0)
# te.Linear weights of one layer: q [H, H], k and v [KV*d, H], o [H, H], gate and up [I, H], down [H, I]
LAYER_ELEMENTS = H * HEADS * HEAD_DIM + 2 * H * KV * HEAD_DIM + HEADS * HEAD_DIM * H + 3 * H * FFN
HOPPER_BYTES = 2 * LAYER_ELEMENTS  # rowwise + transpose, 1 B each


def _item(est, name: str) -> int:
    return next((i.bytes for i in est.items if i.name == name), 0)


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(LLAMA_8B, name="llama-3.1-8b-hand")


def test_bytes_per_arch():
    assert te_weight_copy_bytes(LAYER_ELEMENTS, 90) == HOPPER_BYTES
    assert te_weight_copy_bytes(LAYER_ELEMENTS, 89) == HOPPER_BYTES  # Ada: TN-only too
    assert te_weight_copy_bytes(LAYER_ELEMENTS, 100) == LAYER_ELEMENTS  # B200: one buffer serves both layouts
    assert te_weight_copy_bytes(LAYER_ELEMENTS, 120) == HOPPER_BYTES  # consumer Blackwell: TN-only
    assert te_weight_copy_bytes(LAYER_ELEMENTS, 90, columnwise=False) == LAYER_ELEMENTS


@pytest.mark.parametrize("precision", ["bf16", "bf16-mixed"])
def test_saved_every_layer_without_checkpointing(spec, precision):
    est = estimate_training(spec, precision=precision, float8=True, float8_recipe="transformer-engine",
                            grad_checkpointing="none", seq_len=2048)
    assert _item(est, "fp8_weight_copies") == LAYERS * HOPPER_BYTES
    # no autocast copy of a te.Linear weight: under bf16-mixed only the lm_head's bf16 copy (2 B per element)
    assert _item(est, "autocast_weight_copies") == (2 * V * H if precision == "bf16-mixed" else 0)


def test_checkpointed_layers_hold_only_the_recomputed_one(spec):
    est = estimate_training(spec, precision="bf16", float8=True, float8_recipe="transformer-engine",
                            grad_checkpointing="full", seq_len=2048)
    # the peak falls in a layer's backward: its recompute's copy alone, the other layers' forwards kept none
    assert str(est.details["peak_phase"]).startswith("backward layer")
    assert _item(est, "fp8_weight_copies") == HOPPER_BYTES


def test_no_workspace_cache_under_gradient_accumulation(spec):
    # llm-foundry's blocks call the te modules without is_first_microbatch (ffn.py @63d37d79 MPTMLP.forward), so
    # gradient accumulation keeps no _fp8_workspaces copy: one recomputed layer's, as with one micro-batch
    est = estimate_training(spec, precision="bf16", float8=True, float8_recipe="transformer-engine",
                            grad_checkpointing="full", grad_accumulation=4, seq_len=2048)
    # at most the recomputed layer's copy (the peak here falls in the loss's backward, before any recompute: none);
    # a workspace cache would hold every layer's, LAYERS x HOPPER_BYTES, at every phase
    assert _item(est, "fp8_weight_copies") in (0, HOPPER_BYTES)


def test_none_under_fsdp2(spec):
    est = estimate_training(spec, precision="bf16", float8=True, float8_recipe="transformer-engine",
                            grad_checkpointing="none", grad_accumulation=4, gpus=8, fsdp="full", fsdp_version=2,
                            seq_len=2048)
    assert _item(est, "fp8_weight_copies") == 0


def test_torchao_path_has_no_fp8_copies(spec):
    est = estimate_training(spec, precision="bf16-mixed", float8=True, float8_recipe="torchao",
                            grad_checkpointing="none", seq_len=2048)
    assert _item(est, "fp8_weight_copies") == 0
    assert _item(est, "autocast_weight_copies") in (0, 2 * V * H)  # the lm_head's only, where the peak holds it
    assert not any("te.Linear" in a.value for a in est.assumptions if a.name == "bytes_per_param")


# compute capability -> whether TE's Float8Quantizer keeps the transpose: TransformerEngine @d0067d0d
# common/transformer_engine.cpp lines 1191-1203 (non-TN FP8 GEMMs on 10.x, 11.x and >= 13.0) and quantizer.cpp line
# 375 (``with_transpose = columnwise_usage && !is_non_tn_fp8_gemm_supported``); the capabilities are NVIDIA's table's
# (B200/GB200 10.0, B300 10.3, H100 9.0, L40S 8.9, RTX 5090 12.0), written out here
CATALOG_CAPABILITY = {"b200": 100, "gb200": 100, "b300": 103, "h100-sxm": 90, "l40s": 89, "rtx-5090": 120}


@pytest.mark.parametrize("device_id,capability", sorted(CATALOG_CAPABILITY.items()))
def test_catalog_rows_carry_the_capability(device_id, capability):
    assert builtin_catalog().device(device_id).capability == capability


def test_b200_holds_one_byte_per_element_h100_two(spec):
    # the same workload on a named device: the copies follow the device's generation through the one place a
    # training workload reads its device (estimate/device.py training_device_fields)
    got = {}
    for dev in ("h100-sxm", "b200", "b300", "rtx-5090"):
        est = estimate_training(spec, precision="bf16", float8=True, float8_recipe="transformer-engine",
                                grad_checkpointing="none", seq_len=2048, device=dev)
        got[dev] = _item(est, "fp8_weight_copies")
        line = next(a.value for a in est.assumptions if a.name == "bytes_per_param")
        per = 1 if dev in ("b200", "b300") else 2
        assert f"({per} B per element on compute capability" in line, (dev, line)
    assert got["h100-sxm"] == LAYERS * HOPPER_BYTES
    assert got["rtx-5090"] == LAYERS * HOPPER_BYTES  # 12.0: TN-only FP8 GEMMs, as Hopper
    assert got["b200"] == got["b300"] == LAYERS * LAYER_ELEMENTS  # rowwise data only
