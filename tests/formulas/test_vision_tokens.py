"""Tokens per image and per video against the real transformers 5.24 processors, on CPU, for several sizes.

Independent truth: the image processors themselves (PIL backends: ``Qwen2VLImageProcessorPil``,
``Gemma3ImageProcessorPil``, ``MllamaImageProcessorPil``) run on blank images of each size and report the patch
grid / crops / tiles they produce; the Llama 4 canvas choice and prompt string and the Qwen video processors'
``get_num_of_video_patches`` come from the reference modules run in a subprocess (``vision_reference.py``: those
modules import torchvision, absent here, though the functions called never use it). Processors are built with
explicit keyword arguments (no files, no network), equal to the VisionSpec fields given to llmsizer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.vision_tokens import DELIMITERS, image_tokens, video_tokens
from llmsizer.specs import VisionSpec

np = pytest.importorskip("numpy")
PIL_Image = pytest.importorskip("PIL.Image")
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

# (width, height): square, landscape, portrait, tiny, huge, a panorama
SIZES = [(640, 480), (480, 640), (1024, 1024), (336, 336), (100, 60), (3840, 2160), (2000, 300), (300, 4000)]

# Qwen2.5-VL-7B-Instruct preprocessor_config.json: patch 14, merge 2, temporal 2, min_pixels 3136,
# max_pixels 12845056; video: Qwen2VLVideoProcessor defaults (video_processing_qwen2_vl.py L118)
QWEN25 = VisionSpec(1280, 3420, 32, 0, 14, token_rule="qwen2_vl", spatial_merge_size=2, temporal_patch_size=2,
                    min_pixels=3136, max_pixels=12845056, video_min_pixels=128 * 28 * 28,
                    video_max_pixels=28 * 28 * 768)
# Qwen3-VL: patch 16; video: Qwen3VLVideoProcessor defaults (video_processing_qwen3_vl.py L114)
QWEN3 = VisionSpec(1152, 4304, 27, 0, 16, token_rule="qwen3_vl", spatial_merge_size=2, temporal_patch_size=2,
                   min_pixels=65536, max_pixels=16777216, video_min_pixels=128 * 32 * 32,
                   video_max_pixels=32 * 32 * 768)
GEMMA3 = VisionSpec(1152, 4304, 27, 896, 14, token_rule="fixed", tokens_per_image=256)
GEMMA3_PAS = VisionSpec(1152, 4304, 27, 896, 14, token_rule="fixed", tokens_per_image=256, pan_and_scan=True)
LLAMA4 = VisionSpec(1408, 5632, 34, 336, 14, token_rule="llama4", spatial_merge_size=2, max_tiles=16)
MLLAMA = VisionSpec(1280, 5120, 32, 560, 14, token_rule="mllama", max_tiles=4)


def _image(w: int, h: int):  # noqa: ANN202
    return PIL_Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8))


@pytest.mark.parametrize(("w", "h"), SIZES)
@pytest.mark.parametrize("spec", [QWEN25, QWEN3], ids=["qwen2.5-vl", "qwen3-vl"])
def test_qwen_image_tokens_match_the_processor_grid(spec, w, h):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    proc = Qwen2VLImageProcessorPil(min_pixels=spec.min_pixels, max_pixels=spec.max_pixels,
                                    patch_size=spec.patch_size, merge_size=spec.spatial_merge_size,
                                    temporal_patch_size=spec.temporal_patch_size)
    grid = proc(images=[_image(w, h)], return_tensors="np")["image_grid_thw"][0]
    # processing_qwen2_vl.py: image_grid_thw.prod() // merge_size**2 <|image_pad|> tokens
    real = int(np.prod(grid)) // spec.spatial_merge_size**2
    got = image_tokens(spec, w, h)
    assert got.tokens - DELIMITERS["qwen2_vl"] == real
    assert got.encoder_patches == int(np.prod(grid))


@pytest.mark.parametrize(("w", "h"), SIZES)
def test_gemma3_image_tokens_are_fixed(w, h):
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
    proc = Gemma3ImageProcessorPil(size={"height": 896, "width": 896}, do_pan_and_scan=False)
    out = proc(images=[_image(w, h)], return_tensors="np")
    crops = int(np.asarray(out["num_crops"]).sum())
    assert out["pixel_values"].shape[-2:] == (896, 896)
    # processing_gemma3.py: image_seq_length (256) tokens for the image and for each crop
    assert image_tokens(GEMMA3, w, h).tokens - DELIMITERS["fixed"] == 256 * (1 + crops)


@pytest.mark.parametrize(("w", "h"), SIZES)
def test_mllama_cross_attention_states(w, h):
    from transformers.models.mllama.image_processing_pil_mllama import MllamaImageProcessorPil
    proc = MllamaImageProcessorPil(size={"height": 560, "width": 560}, max_image_tiles=4)
    pix = proc(images=[[_image(w, h)]], return_tensors="np")["pixel_values"]
    _, _, tiles, _, side, _ = pix.shape  # [batch, images, max_image_tiles, 3, 560, 560]: every image padded
    got = image_tokens(MLLAMA, w, h)
    assert got.tokens == 1
    assert got.cross_tokens == tiles * ((side // 14) ** 2 + 1)  # + the class token (modeling_mllama.py)


def _reference(cases: list[list]) -> list[int]:  # type: ignore[type-arg]
    script = Path(__file__).with_name("vision_reference.py")
    r = subprocess.run([sys.executable, str(script)], input=json.dumps(cases), capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_llama4_and_video_tokens_match_the_reference_code():
    cases: list[list] = [["llama4", h, w] for w, h in SIZES]  # type: ignore[type-arg]
    videos = [(4, 640, 480), (8, 1280, 720), (16, 1920, 1080), (2, 224, 224), (7, 640, 360), (64, 640, 480)]
    for kind in ("qwen2_vl", "qwen3_vl"):
        cases += [[kind, f, h, w] for f, w, h in videos]
    real = _reference(cases)
    ours = [image_tokens(LLAMA4, w, h).tokens for w, h in SIZES]
    # get_num_of_video_patches counts patches; Qwen2.5-VL's processor writes patches // merge^2 <|video_pad|>
    ours += [(video_tokens(QWEN25, f, w, h).tokens - DELIMITERS["qwen2_vl"]) * 4 for f, w, h in videos]
    ours += [video_tokens(QWEN3, f, w, h).encoder_sequences * video_tokens(QWEN3, f, w, h).encoder_patches
             for f, w, h in videos]
    assert ours == real


# Qwen3-VL's published video processor (catalog rows qwen3-vl-*: video_preprocessor_config size)
QWEN3_PUBLISHED = {"shortest_edge": 4096, "longest_edge": 25165824}


@pytest.mark.parametrize("size", [QWEN3_PUBLISHED, {"shortest_edge": 128 * 32 * 32, "longest_edge": 32 * 32 * 768}])
def test_qwen3_video_prompt_tokens_match_the_processor_string(size):
    """Placeholders, per-group timestamps and <|vision_start|>/<|vision_end|> against the string
    Qwen3VLProcessor.replace_video_token builds, cut as the Qwen2 pre-tokenizer cuts it (vision_reference.py);
    up to 300 frames, so timestamps of one, two and three integer digits."""
    videos = [(32, 640, 360), (4, 640, 480), (7, 640, 360), (64, 1280, 720), (300, 1920, 1080), (2, 224, 224)]
    spec = VisionSpec(1152, 4304, 27, 0, 16, token_rule="qwen3_vl", spatial_merge_size=2, temporal_patch_size=2,
                      min_pixels=65536, max_pixels=16777216, video_min_pixels=size["shortest_edge"],
                      video_max_pixels=size["longest_edge"])
    real = _reference([["qwen3_vl_prompt", f, h, w, size] for f, w, h in videos])
    assert [video_tokens(spec, f, w, h).tokens for f, w, h in videos] == real


def test_llama4_one_tile_and_many():
    assert image_tokens(LLAMA4, 336, 336).tokens == 144 + 3  # one tile, no global tile
    got = image_tokens(LLAMA4, 672, 672)  # 2 x 2 tiles + the global tile, 2 separators per row
    assert got.tokens == 5 * 144 + 4 + 3 and got.encoder_sequences == 5


def test_bad_media_are_one_line_errors():
    with pytest.raises(InputError, match="no video"):
        video_tokens(GEMMA3, 8, 640, 480)
    with pytest.raises(InputError, match="aspect ratio"):
        image_tokens(QWEN25, 20000, 10)


@pytest.mark.parametrize(("w", "h"), SIZES + [(1200, 480), (480, 1200), (600, 500), (5000, 1000), (700, 256)])
def test_gemma3_pan_and_scan_crops_match_the_processor(w, h):
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
    # the Gemma3Processor's pan-and-scan defaults (processing_gemma3.py L29-32), given explicitly
    proc = Gemma3ImageProcessorPil(size={"height": 896, "width": 896}, do_pan_and_scan=True,
                                   pan_and_scan_min_crop_size=256, pan_and_scan_max_num_crops=4,
                                   pan_and_scan_min_ratio_to_activate=1.2)
    crops = int(np.asarray(proc(images=[_image(w, h)], return_tensors="np")["num_crops"]).sum())
    got = image_tokens(GEMMA3_PAS, w, h, pan_and_scan=True)
    assert got.tokens == (1 + crops) * (256 + DELIMITERS["fixed"])
    assert got.encoder_sequences == 1 + crops
    with pytest.raises(InputError, match="pan-and-scan"):
        image_tokens(QWEN25, w, h, pan_and_scan=True)


def test_a_folder_without_a_video_processor_file_uses_its_preprocessor_config(tmp_path):
    """transformers builds the video processor from preprocessor_config.json when video_preprocessor_config.json is
    absent (Qwen2.5-VL-7B-Instruct ships none): the bounds the reader takes against those of the processor that
    transformers' own loader builds from the same folder; then with a video file of Qwen3-VL's published size."""
    from llmsizer.catalog.models import entries
    from llmsizer.readers.hf_folder import spec_from_folder

    q25, q3 = tmp_path / "q25", tmp_path / "q3"
    for folder, name, pre in ((q25, "qwen2.5-vl-7b-instruct", {"min_pixels": 3136, "max_pixels": 12845056}),
                              (q3, "qwen3-vl-4b-instruct", entries()["qwen3-vl-4b-instruct"].preprocessor)):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(entries()[name].config), encoding="utf-8")
        (folder / "preprocessor_config.json").write_text(json.dumps(pre), encoding="utf-8")
    (q3 / "video_preprocessor_config.json").write_text(json.dumps({"size": QWEN3_PUBLISHED}), encoding="utf-8")
    real = _reference([["folder", "qwen2_vl", str(q25)], ["folder", "qwen3_vl", str(q3)]])
    ours = []
    for folder in (q25, q3):
        v = spec_from_folder(folder).vision
        assert v is not None
        ours.append([v.video_min_pixels, v.video_max_pixels])
    assert ours == real == [[3136, 12845056], [4096, 25165824]]
