"""The vision encoder's activation peak (formulas/vision_activations.py) against live tensors of a real CPU forward.

Independent truth: ``torch.distributed._tools.mem_tracker.MemTracker`` follows every storage created during
``Gemma3ForConditionalGeneration.get_image_features`` (SigLIP encoder + multimodal projector) of a small Gemma 3
(vision: hidden 64, intermediate 256, 4 heads, 2 layers, 224 px images of 14 px patches = 256 patches) on images
built in the model dtype before the tracker starts; parameters are subtracted and the pixel tensor added back.

Measured (transformers 5.24, torch 2.13 CPU; bytes incl. pixels, 1 image; 2 images: twice), all predicted exactly:
    mlp-bound        fp32 sdpa 1,388,544   fp32 eager 3,092,480   bf16 sdpa 694,272   bf16 eager 3,119,104
    attention-bound  fp32 sdpa 1,650,688   fp32 eager 5,582,848   bf16 sdpa 825,344   bf16 eager 5,937,152
(The attention-bound shape showed that q, k, v and the attention output are all alive when out_proj writes:
8 T d, not the 7 T d first written from the MLP-bound trace alone.)
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.vision_activations import encoder_activation_bytes
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, torch

mem_tracker = pytest.importorskip("torch.distributed._tools.mem_tracker")

pytestmark = pytest.mark.slow

CONFIG = {"model_type": "gemma3",
          "text_config": {"model_type": "gemma3_text", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
                          "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32},
          "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 64, "intermediate_size": 256,
                            "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 224, "patch_size": 14,
                            "vision_use_head": False},
          "mm_tokens_per_image": 64}
# a second shape where the attention phase (eq. 1) is the larger: intermediate = hidden, 8 heads, 3 layers
WIDE = {**CONFIG, "vision_config": {**CONFIG["vision_config"], "hidden_size": 128, "intermediate_size": 128,
                                    "num_attention_heads": 8, "num_hidden_layers": 3}}
DTYPES = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}
TOLERANCE = 0.05


def _measure(cfg: dict, dtype: str, attention: str, images: int) -> int:  # type: ignore[type-arg]
    dt, _ = DTYPES[dtype]
    model = build(cfg, device="cpu", dtype=dt, attn=attention)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    params += sum(b.numel() * b.element_size() for b in model.buffers())
    pixels = torch.zeros(images, 3, 224, 224, dtype=dt)
    tracker = mem_tracker.MemTracker()
    tracker.track_external(model)
    with torch.no_grad(), tracker:
        model.get_image_features(pixels)
    peak = int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])
    return peak - params + pixels.numel() * pixels.element_size()


@pytest.mark.parametrize("images", [1, 2])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("cfg", [CONFIG, WIDE], ids=["mlp-bound", "attention-bound"])
def test_encoder_peak_matches_live_tensors(cfg, dtype, attention, images, capsys):
    spec = spec_from_config(cfg, name="tiny-gemma3")
    assert spec.vision is not None
    patches = (224 // 14) ** 2
    pred = encoder_activation_bytes(spec.vision, images, patches, DTYPES[dtype][1], attention).peak_bytes
    real = _measure(cfg, dtype, attention, images)
    with capsys.disabled():
        print(f"\n[{dtype} {attention} x{images}] measured {real:,} B, predicted {pred:,} B, ratio {pred / real:.3f}")
    assert abs(pred / real - 1) <= TOLERANCE


# --- Qwen2.5-VL and Qwen3-VL towers, eqs. (5)-(8) ----------------------------------------------------------------
# Independent truth: tests/training/measure_step.py's LiveTensorBytes (a TorchDispatchMode registering the storage of
# every tensor an operator returns, dropped when freed; the method of MemTracker) follows ``get_image_features`` of a
# small Qwen2.5-VL / Qwen3-VL on packed pixel_values built in the model dtype beforehand; parameters, buffers and the
# pixel tensor are not counted by it, and the pixel tensor (held by the caller) is added once.
# Measured (transformers 5.24, torch 2.13 CPU, one 16x16-patch image unless noted), predicted within 140 B of each
# (the small index tensors of cu_seqlens and the like) except eager with several images, where eq. (6) charges the
# other images' outputs as if the largest came last (+0.55 % for 16x16 then 8x12):
#   Qwen2.5-VL fp32 sdpa 1,897,048  fp32 eager 2,593,356  bf16 sdpa 1,196,616  bf16 eager 2,888,268
#              wide MLP fp32 3,011,144 - 1,204,224 px; two images 16x16 + 8x12 fp32 sdpa 2,608,460
#   Qwen3-VL   fp32 sdpa 2,375,716  bf16 sdpa 1,474,592  wide MLP bf16 1,540,128
# The bf16 attention phase is apply_rotary_pos_emb_vision (q and k upcast to fp32, six fp32 T d tensors live), the
# fp32 one the proj after the per-window outputs are concatenated; eager adds the score matrix of the longest image.

def _live_tracker():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "training" / "measure_step.py"
    spec = importlib.util.spec_from_file_location("measure_step", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.LiveTensorBytes


def _qwen(kind: str, hidden: int = 64, inter: int = 128, heads: int = 4, depth: int = 4) -> dict:  # type: ignore[type-arg]
    text = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1}
    vision = {"hidden_size": hidden, "intermediate_size": inter, "num_heads": heads, "depth": depth,
              "out_hidden_size": 64, "spatial_merge_size": 2, "temporal_patch_size": 2}
    if kind == "qwen2_5_vl":
        vision.update(patch_size=14, fullatt_block_indexes=[1, 3], window_size=112)
    else:
        text["head_dim"] = 32
        vision.update(patch_size=16, deepstack_visual_indexes=[1, 2], num_position_embeddings=144)
    return {"model_type": kind, "text_config": text, "vision_config": vision}


def _measure_qwen(cfg: dict, dtype: str, attention: str, grids: list) -> int:  # type: ignore[type-arg]
    dt, _ = DTYPES[dtype]
    model = build(cfg, device="cpu", dtype=dt, attn=attention)
    p = cfg["vision_config"]["patch_size"]
    pixels = torch.zeros(sum(t * h * w for t, h, w in grids), 3 * 2 * p * p, dtype=dt)
    known = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers(), pixels]}
    tracker = _live_tracker()(lambda live: {})
    follow = tracker.track
    tracker.track = lambda t: None if t.untyped_storage()._cdata in known else follow(t)  # weights, pixels: not counted
    with torch.no_grad(), tracker.mode:
        model.get_image_features(pixels, torch.tensor(grids))
    return tracker.peak + pixels.numel() * pixels.element_size()


QWEN_CASES = [
    ("qwen2_5_vl", {}, [(1, 16, 16)]),
    ("qwen2_5_vl", {"hidden": 128, "inter": 64, "heads": 8}, [(1, 16, 16)]),
    ("qwen2_5_vl", {"inter": 512}, [(1, 16, 16)]),
    ("qwen2_5_vl", {}, [(1, 16, 16), (1, 8, 12)]),
    ("qwen3_vl", {}, [(1, 16, 16)]),
    ("qwen3_vl", {"inter": 512}, [(1, 16, 16)]),
    ("qwen3_vl", {"hidden": 128, "inter": 64, "heads": 8}, [(1, 8, 12), (1, 8, 12)]),
]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("kind", "shape", "grids"), QWEN_CASES,
                         ids=[f"{k}-{'-'.join(map(str, s.values())) or 'base'}-{len(g)}img" for k, s, g in QWEN_CASES])
def test_qwen_encoder_peak_matches_live_tensors(kind, shape, grids, dtype, attention, capsys):
    from llmsizer.formulas.vision_activations import qwen_encoder_activation_bytes
    cfg = _qwen(kind, **shape)
    spec = spec_from_config(cfg, name=f"tiny-{kind}")
    assert spec.vision is not None
    patches = [t * h * w for t, h, w in grids]
    pred = qwen_encoder_activation_bytes(spec.vision, sum(patches), max(patches), spec.hidden_size,
                                         DTYPES[dtype][1], attention).peak_bytes
    real = _measure_qwen(cfg, dtype, attention, grids)
    with capsys.disabled():
        print(f"\n[{kind} {shape} {grids} {dtype} {attention}] measured {real:,} B, predicted {pred:,} B, "
              f"ratio {pred / real:.4f}")
    assert abs(pred / real - 1) <= 0.01


# --- Llama-3.2-Vision (mllama) tower, eqs. (9)-(13) ---------------------------------------------------------------
# Independent truth: the same LiveTensorBytes follows ``MllamaVisionModel.forward`` and the multi-modal projector of a
# small Llama-3.2-Vision on pixel_values [1, images, max_num_tiles, 3, size, size] built in the model dtype beforehand
# (every tile used: aspect ratio id 1, mask all ones); weights, pixels and the aspect-ratio tensors are not counted by
# it and the pixels are added once. Measured (transformers 5.24, torch 2.13 CPU), every case below predicted to the
# byte, e.g. base shape 1 image: fp32 sdpa 330,752, fp32 eager 601,088, bf16 sdpa 165,376, bf16 eager 521,728;
# 2 images exactly twice. The first case is bound by the tail (eq. 12), "wide-mlp" by the MLP (eq. 11; in eager by
# the attention probabilities the layer keeps through it), the others by attention (eq. 10).

def _mllama(d: int = 32, nl: int = 3, ng: int = 2, heads: int = 4, inter: int = 48, img: int = 56, tiles: int = 4,
            idx: tuple = (0, 2)) -> dict:  # type: ignore[type-arg]
    vision = {"hidden_size": d, "num_hidden_layers": nl, "num_global_layers": ng, "attention_heads": heads,
              "intermediate_size": inter, "vision_output_dim": d * (1 + len(idx)), "image_size": img,
              "patch_size": 14, "max_num_tiles": tiles, "intermediate_layers_indices": list(idx)}
    if tiles != 4:
        vision["supported_aspect_ratios"] = [[1, 1], [1, 2], [2, 1]]
    return {"model_type": "mllama", "vision_config": vision,
            "text_config": {"vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "intermediate_size": 96, "cross_attention_layers": [1],
                            "pad_token_id": 0}}


MLLAMA_CASES = {"tail-bound": {"nl": 4, "ng": 1, "idx": (0, 1, 2, 3)}, "base": {}, "wide-mlp": {"inter": 256},
                "two-tiles-112px": {"img": 112, "tiles": 2}, "8-heads": {"d": 64, "heads": 8, "nl": 2, "ng": 1,
                                                                        "idx": (1,)}}


def _measure_mllama(cfg: dict, dtype: str, attention: str, images: int) -> int:  # type: ignore[type-arg]
    dt, _ = DTYPES[dtype]
    model = build(cfg, device="cpu", dtype=dt, attn=attention)
    v = cfg["vision_config"]
    pixels = torch.zeros(1, images, v["max_num_tiles"], 3, v["image_size"], v["image_size"], dtype=dt)
    ratio_ids = torch.ones(1, images, dtype=torch.long)
    ratio_mask = torch.ones(1, images, v["max_num_tiles"], dtype=torch.long)
    known = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers(), pixels, ratio_ids, ratio_mask]}
    tracker = _live_tracker()(lambda live: {})
    follow = tracker.track
    tracker.track = lambda t: None if t.untyped_storage()._cdata in known else follow(t)
    with torch.no_grad(), tracker.mode:
        states = model.model.vision_model(pixel_values=pixels, aspect_ratio_ids=ratio_ids,
                                          aspect_ratio_mask=ratio_mask).last_hidden_state
        model.model.multi_modal_projector(states)
    return tracker.peak + pixels.numel() * pixels.element_size()


@pytest.mark.parametrize("images", [1, 2])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(MLLAMA_CASES))
def test_mllama_encoder_peak_matches_live_tensors(case, dtype, attention, images, capsys):
    from llmsizer.formulas.vision_activations import mllama_encoder_activation_bytes
    cfg = _mllama(**MLLAMA_CASES[case])
    spec = spec_from_config(cfg, name="tiny-mllama")
    assert spec.vision is not None and spec.vision.intermediate_features == len(cfg["vision_config"]
                                                                                 ["intermediate_layers_indices"])
    pred = mllama_encoder_activation_bytes(spec.vision, images, spec.vision.intermediate_features,
                                           DTYPES[dtype][1], attention)
    if case == "tail-bound" and attention == "sdpa":  # the case exercises eq. (12)
        assert pred.tail_bytes > max(pred.attention_bytes, pred.mlp_bytes)
    real = _measure_mllama(cfg, dtype, attention, images)
    with capsys.disabled():
        print(f"\n[mllama {case} {dtype} {attention} x{images}] measured {real:,} B, predicted {pred.peak_bytes:,} B")
    assert pred.peak_bytes == real


# --- Llama 4 tower, eqs. (14)-(17) ---------------------------------------------------------------------------------
# Independent truth: LiveTensorBytes follows ``Llama4ForConditionalGeneration.get_image_features`` (the tower and its
# pixel-shuffle adapter) of a small Llama 4 on pixel_values [tiles, 3, size, size] built in the model dtype
# beforehand; weights, buffers (the complex RoPE table) and the pixels are not counted by it, the pixels are added
# once. Measured (transformers 5.24, torch 2.13 CPU), every case predicted to the byte, e.g. base shape 1 tile:
# fp32 sdpa 211,968 (MLP-bound), fp32 eager 279,568, bf16 sdpa 139,264 (the fp32/complex64 rotary upcast),
# bf16 eager 139,784; 3 tiles exactly three times. Patches are small (4-8 px) so that d exceeds the unfolded
# patch width 3 p^2, as at real size (d 1408 > 588).

def _llama4(d: int = 64, heads: int = 4, inter: int = 256, img: int = 32, layers: int = 2, patch: int = 4) -> dict:  # type: ignore[type-arg]
    text = {"model_type": "llama4_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
            "intermediate_size_mlp": 96, "num_local_experts": 4, "num_experts_per_tok": 1, "attention_chunk_size": 16,
            "pad_token_id": 0}
    # the adapter's fc1 reads the pixel-shuffled width d / ratio^2, which must be intermediate_size (= 4 d here)
    vision = {"hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": inter,
              "vision_output_dim": 48, "image_size": img, "patch_size": patch, "pixel_shuffle_ratio": 0.5,
              "projector_input_dim": 48, "projector_output_dim": 48}
    return {"model_type": "llama4", "text_config": text, "vision_config": vision}


LLAMA4_CASES = {"base": {}, "8-heads-3-layers": {"d": 128, "heads": 8, "inter": 512, "img": 48, "layers": 3},
                "one-layer": {"d": 96, "heads": 2, "inter": 384, "img": 64, "patch": 8, "layers": 1},
                "16-heads-long": {"heads": 16, "img": 64}}


def _measure_llama4(cfg: dict, dtype: str, attention: str, tiles: int) -> int:  # type: ignore[type-arg]
    dt, _ = DTYPES[dtype]
    model = build(cfg, device="cpu", dtype=dt, attn=attention)
    size = cfg["vision_config"]["image_size"]
    pixels = torch.zeros(tiles, 3, size, size, dtype=dt)
    known = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers(), pixels]}
    tracker = _live_tracker()(lambda live: {})
    follow = tracker.track
    tracker.track = lambda t: None if t.untyped_storage()._cdata in known else follow(t)
    with torch.no_grad(), tracker.mode:
        model.get_image_features(pixels)
    return tracker.peak + pixels.numel() * pixels.element_size()


@pytest.mark.parametrize("tiles", [1, 3])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(LLAMA4_CASES))
def test_llama4_encoder_peak_matches_live_tensors(case, dtype, attention, tiles, capsys):
    from llmsizer.formulas.vision_activations import llama4_encoder_activation_bytes
    cfg = _llama4(**LLAMA4_CASES[case])
    spec = spec_from_config(cfg, name="tiny-llama4")
    assert spec.vision is not None
    pred = llama4_encoder_activation_bytes(spec.vision, tiles, DTYPES[dtype][1], attention).peak_bytes
    real = _measure_llama4(cfg, dtype, attention, tiles)
    with capsys.disabled():
        print(f"\n[llama4 {case} {dtype} {attention} x{tiles}] measured {real:,} B, predicted {pred:,} B")
    assert pred == real
