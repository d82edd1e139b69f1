"""Images and video in the prompt (issue #16): flags, request file and the one core give one answer.

The token counts themselves are tested against the real transformers processors in
tests/formulas/test_vision_tokens.py and the encoder peak against live tensors in test_vision_activations.py; here:
the image tokens are in the KV cache and the prompt as a user of every face sees them, and bad input is a one-line
exit-2 error.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from cli_capture import SRC, run_cli
from llmsizer.errors import InputError
from llmsizer.estimate.fit import fit
from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.models import load_model
from llmsizer.specs import InferenceWorkload

# Gemma 3: 256 soft tokens + <start_of_image> + <end_of_image> per image (processing_gemma3.py)
GEMMA_IMAGE = 258


@pytest.mark.parametrize("engine", ["transformers", "vllm", "llamacpp"])
def test_image_tokens_are_in_the_kv_cache(engine):
    spec = load_model("gemma-3-4b-it")
    # a long text context: the peak is the language model's, not the vision encoder's
    est = estimate_inference(spec, context=16384, concurrency=2, images=3, engine=engine)
    assert est.details["media_tokens"] == 3 * GEMMA_IMAGE
    assert est.details["context_with_media"] == 16384 + 3 * GEMMA_IMAGE
    text = estimate_inference(spec, context=16384 + 3 * GEMMA_IMAGE, concurrency=2, engine=engine)
    kv = {i.name: i.bytes for i in est.items}["kv_cache"]
    assert kv == {i.name: i.bytes for i in text.items}["kv_cache"]
    if engine == "transformers":  # DynamicCache at the end of decoding (the sliding layers keep their window)
        assert kv >= kv_cache(spec, 16384 + 3 * GEMMA_IMAGE, 2, "bf16").total_bytes
    assert any(a.name == "media_tokens" for a in est.assumptions)


def test_encoder_peak_is_a_phase_of_transformers():
    from llmsizer.formulas.vision_activations import encoder_activation_bytes
    spec = load_model("gemma-3-4b-it")
    assert spec.vision is not None
    patches = (896 // 14) ** 2  # every image resized to 896 px, 14 px patches
    # 16 images x 8 sequences at a short context: the SigLIP forward over all 128 images at once is the peak
    est = estimate_inference(spec, context=256, concurrency=8, images=16)
    assert est.details["peak_phase"].startswith("vision encoder (128 images)")
    act = {i.name: i for i in est.items}["activations"]
    assert "vision_activations.py" in act.source
    assert act.bytes == encoder_activation_bytes(spec.vision, 128, patches, 2, "sdpa").peak_bytes
    # llama.cpp's clip encodes one image at a time in f32, whatever the number of images
    cpp = {i.name: i for i in estimate_inference(spec, context=256, images=16, engine="llamacpp").items}
    assert cpp["vision_compute_buffer"].bytes == encoder_activation_bytes(spec.vision, 1, patches, 4).peak_bytes
    # vLLM's profile run encodes one request's images
    vllm = {i.name: i for i in estimate_inference(spec, context=256, images=16, engine="vllm").items}
    assert vllm["activations"].bytes >= encoder_activation_bytes(spec.vision, 16, patches, 2, "flash").peak_bytes


def test_the_qwen_encoder_peak_is_vllms_profile_peak_with_many_large_images():
    """16 full-HD images in one request: vLLM's profile run still encodes one dummy image of the processor's largest
    size (max_pixels; vllm/multimodal/encoder_budget.py _get_max_items: max(B, T) // T = 1 item), not them, and the
    Qwen2.5-VL tower's forward over every patch (formulas/vision_activations.py eqs. 5-8, checked against live tensors
    in test_vision_activations.py) is larger than the text forward over max_num_batched_tokens."""
    from llmsizer.formulas.vision_activations import qwen_encoder_activation_bytes
    from llmsizer.formulas.vision_tokens import image_tokens
    spec = load_model("qwen2.5-vl-7b-instruct")
    assert spec.vision is not None
    est = estimate_inference(spec, context=256, images=16, image_size=(1920, 1080), engine="vllm")
    # the largest image: the processor's max_pixels as a square (vLLM get_image_size_with_most_features)
    side = math.isqrt(spec.vision.max_pixels)
    patches = image_tokens(spec.vision, side, side).encoder_patches
    assert patches == (side // spec.vision.patch_size) ** 2 and patches // 4 > 2048  # one item: max(B, T) // T = 1
    want = qwen_encoder_activation_bytes(spec.vision, patches, patches, spec.hidden_size, 2, "flash")
    assert est.item("activations").bytes == want.peak_bytes


def test_the_llama4_encoder_peak_is_modelled_for_every_engine():
    """Llama 4's tower (eqs. 14-17, checked to the byte against live tensors in test_vision_activations.py): every
    tile and the global tile one sequence; llama.cpp's clip buffer is one tile in f32, transformers takes the
    tower's peak when it is larger than the text phase."""
    from llmsizer.formulas.vision_activations import llama4_encoder_activation_bytes
    from llmsizer.formulas.vision_tokens import image_tokens
    from llmsizer.readers.hf_config import spec_from_config
    text = {"vocab_size": 1024, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 128, "intermediate_size_mlp": 512,
            "num_local_experts": 4, "num_experts_per_tok": 1}
    spec = spec_from_config({"model_type": "llama4", "text_config": text, "vision_config": {}}, name="tiny-llama4")
    assert spec.vision is not None
    est = estimate_inference(spec, context=256, images=2, image_size=(1024, 768), engine="llamacpp")
    assert est.item("vision_compute_buffer").bytes == llama4_encoder_activation_bytes(spec.vision, 1, 4,
                                                                                      "flash").peak_bytes
    hf = estimate_inference(spec, context=256, concurrency=8, images=16, image_size=(1920, 1080), weights="bf16")
    tiles = 8 * 16 * image_tokens(spec.vision, 1920, 1080).encoder_sequences  # the tiles + the global tile
    assert hf.details["peak_phase"] == f"vision encoder ({tiles} images)"
    assert hf.item("activations").bytes == llama4_encoder_activation_bytes(spec.vision, tiles, 2, "sdpa").peak_bytes


def test_fit_infer_and_the_cli_agree():
    est = estimate_inference("gemma-3-27b-it", context=4096, concurrency=4, images=2, engine="vllm",
                             memory=80 * 2**30, headroom=0.1)
    r = fit("gemma-3-27b-it", "h100-sxm", engine="vllm", context=4096, concurrency=4, images=2)
    assert r.estimate.details["media_tokens"] == est.details["media_tokens"] == 2 * GEMMA_IMAGE
    cli = run_cli("infer", "gemma-3-27b-it", "--context", "4096", "--concurrency", "4", "--images", "2", "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["details"]["media_tokens"] == 2 * GEMMA_IMAGE
    plain = fit("gemma-3-27b-it", "h100-sxm", engine="vllm", context=4096, concurrency=4)
    assert r.speed is not None and plain.speed is not None
    assert r.speed.ttft_seconds > plain.speed.ttft_seconds  # image tokens are prompt tokens


@pytest.mark.parametrize(("args", "message"), [
    (["qwen2.5-7b", "--images", "1"], "has no vision encoder"),
    (["gemma-3-4b-it", "--video-frames", "8"], "takes no video input"),
    (["gemma-3-4b-it", "--images", "1", "--image-size", "1024"], "--image-size"),
    (["gemma-3-4b-it", "--images", "-1"], "--images"),
    (["gemma-3-4b-it", "--image-size", "640x480"], "images is 0"),
])
def test_bad_media_input_is_one_line_exit_2(args, message):
    r = run_cli("infer", *args)
    assert r.returncode == 2, r.stdout
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_workload_checks_sizes():
    with pytest.raises(InputError, match="image_size"):
        InferenceWorkload(images=1, image_size=(0, 10))
    assert InferenceWorkload(images=1, image_size=(640, 480)).image_size == (640, 480)


def test_request_file_media_reaches_the_plan(tmp_path):
    req = tmp_path / "vision.yaml"
    req.write_text("version: 1\njobs:\n  - name: vision-chat\n    kind: inference\n    model:\n      name: gemma-3-4b-it\n"
                   "    media:\n      images: 2\n      image_size: 1024x768\n    traffic:\n      concurrency: 4\n"
                   "      context: 2k\n    resources:\n      device: l4\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "plan", str(req), "--json"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    assert '"media_tokens": 516' in r.stdout.replace("\n", "")
    bad = tmp_path / "bad.yaml"
    bad.write_text(req.read_text(encoding="utf-8").replace("1024x768", "1024 by 768"), encoding="utf-8")
    r = run_cli("plan", str(bad))
    assert r.returncode == 2 and f"{bad}:9:" in r.stderr and "media.image_size" in r.stderr


def test_recommend_counts_the_image_tokens():
    from llmsizer.recommend import recommend_inference
    rec = recommend_inference("gemma-3-4b-it", context=4096, concurrency=4, media={"images": 4})
    assert any(a.name == "media_tokens" and a.value == 4 * GEMMA_IMAGE for a in rec.assumptions)
    plain = recommend_inference("gemma-3-4b-it", context=4096, concurrency=4)
    # the same target at the same weight format (images may push an option down the format ladder)
    mem = {(o.target, o.weights_format): o.memory_per_device for o in rec.options if o.memory_per_device}
    base = {(o.target, o.weights_format): o.memory_per_device for o in plain.options if o.memory_per_device}
    shared = [t for t in mem if t in base]
    assert shared and all(mem[t] >= base[t] for t in shared) and any(mem[t] > base[t] for t in shared)


def test_a_model_folder_reads_its_preprocessor_config(tmp_path):
    from llmsizer.catalog.models import entries
    from llmsizer.errors import ModelFileError
    from llmsizer.formulas.vision_tokens import image_tokens
    from llmsizer.readers.hf_folder import spec_from_folder
    (tmp_path / "config.json").write_text(json.dumps(entries()["qwen2.5-vl-7b-instruct"].config), encoding="utf-8")
    bare = spec_from_folder(tmp_path)
    assert bare.vision is not None and bare.vision.max_pixels == 28 * 28 * 1280  # the processor class default
    assert any(n.startswith("preprocessor_config.max_pixels=") for n in bare.notes)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"min_pixels": 3136, "max_pixels": 12845056}),
                                                       encoding="utf-8")
    spec = spec_from_folder(tmp_path)
    assert spec.vision is not None and spec.vision.max_pixels == 12845056
    # a 4K image: 1,224 tokens under the class default's 1,003,520-pixel bound, 10,551 under the published 12,845,056
    assert image_tokens(bare.vision, 3840, 2160).tokens < image_tokens(spec.vision, 3840, 2160).tokens
    (tmp_path / "preprocessor_config.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ModelFileError, match="preprocessor_config"):
        spec_from_folder(tmp_path)


def test_pan_and_scan_flag():
    # 1600 x 600: 3 crops (round(1600 / 600), image_processing_gemma3.py), each another 256 + 2 tokens
    r = run_cli("infer", "gemma-3-4b-it", "--images", "1", "--image-size", "1600x600", "--pan-and-scan", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["details"]["media_tokens"] == 4 * GEMMA_IMAGE
    r = run_cli("infer", "qwen2.5-vl-7b-instruct", "--images", "1", "--image-size", "1600x600", "--pan-and-scan")
    assert r.returncode == 2 and "no pan-and-scan" in r.stderr


@pytest.mark.parametrize(("text", "want"), [("1024x768", (1024, 768)), (" 640 X 480 ", (640, 480)), ("8*8", (8, 8)),
                                            ([1920, 1080], (1920, 1080))])
def test_image_size_parses_width_by_height(text, want):
    from llmsizer.units import parse_image_size
    assert parse_image_size(text) == want


@pytest.mark.parametrize("text", ["1024", "1024x", "x768", "-1x5", "0x10", "70000x10", "1.5x2", "axb", [1, 2, 3]])
def test_bad_image_sizes_are_input_errors(text):
    from llmsizer.units import parse_image_size
    with pytest.raises(InputError):
        parse_image_size(text)


def test_the_mllama_encoder_peak_is_modelled_without_a_warning():
    """Llama-3.2-Vision's tower (eqs. 9-13, checked to the byte against live tensors in test_vision_activations.py):
    images run as max_num_tiles tiles each, and the transformers estimate takes the tower's peak when it is larger."""
    from llmsizer.formulas.vision_activations import mllama_encoder_activation_bytes
    from llmsizer.readers.hf_config import spec_from_config
    text = {"vocab_size": 1024, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 96, "cross_attention_layers": [1]}
    vision = {"hidden_size": 128, "num_hidden_layers": 4, "num_global_layers": 2, "attention_heads": 4,
              "intermediate_size": 256, "vision_output_dim": 384, "image_size": 560, "patch_size": 14,
              "max_num_tiles": 4, "intermediate_layers_indices": [1, 3]}
    spec = spec_from_config({"model_type": "mllama", "text_config": text, "vision_config": vision}, name="tiny-mllama")
    assert spec.vision is not None and spec.vision.intermediate_features == 2
    est = estimate_inference(spec, context=256, concurrency=2, images=3, weights="bf16")
    want = mllama_encoder_activation_bytes(spec.vision, 6, 2, 2, "sdpa")
    assert est.details["peak_phase"].startswith("vision encoder")
    assert est.item("activations").bytes == want.peak_bytes


LIMIT = 2**31  # numbers.TOKENS: the largest context a sequence may have


def run_in(*argv: str) -> tuple[int, str, str]:
    from cli_capture import run as capture
    return capture(*argv)


@pytest.mark.parametrize("command", [["infer"], ["fit", "--device", "h100-sxm"], ["recommend"]])
def test_text_plus_image_tokens_past_the_context_limit_is_one_line(command):
    """A context just under 2^31 plus 3 Gemma 3 images (258 tokens each, processing_gemma3.py): the sum is the
    context the KV cache holds, so it has --context's limit. Before, the message named a context of 2,147,483,774
    the user never typed ("context: 2147483774 is out of range"); now it shows the sum and what to lower. At the
    limit exactly, it is answered."""
    over = LIMIT - 3 * GEMMA_IMAGE + 1
    code, out, err = run_in(*command[:1], "gemma-3-4b-it", *command[1:], "--context", str(over), "--images", "3")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "Traceback" not in err, err
    assert (f"context {over:,} + {3 * GEMMA_IMAGE:,} image/video tokens = {LIMIT + 1:,} tokens per sequence, "
            f"more than the {LIMIT:,} a context may hold") in err
    assert "lower the context or the media" in err
    with pytest.raises(InputError, match="image/video tokens"):
        estimate_inference("gemma-3-4b-it", context=over, images=3)
    est = estimate_inference("gemma-3-4b-it", context=over - 1, images=3)
    assert est.details["context_with_media"] == LIMIT


def test_the_web_answers_the_same_line_as_a_400():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    over = LIMIT - 3 * GEMMA_IMAGE + 1
    _, _, err = run_in("infer", "gemma-3-4b-it", "--context", str(over), "--images", "3")
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/infer", json={"model": "gemma-3-4b-it", "context": str(over), "images": 3})
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")
    assert "llmsizer: error: " + r.json()["detail"] + "\n" == err


def test_every_model_note_is_a_named_assumption():
    """A reader note is an assumption with a name, a value and a why: Qwen2.5-VL-7B-Instruct ships no
    video_preprocessor_config.json (its catalog row's source), so the video processor reads preprocessor_config;
    that is ``model.video_processor_config=preprocessor_config``, not the note's words as name and value. A note in
    words (a GGUF shape overriding its metadata, with an '=' inside) is one ``model.reader_note`` whose value is
    the whole note, inference and training alike."""
    import dataclasses

    from llmsizer.estimate.training import estimate_training
    from llmsizer.specs import TrainingWorkload

    spec = load_model("qwen2.5-vl-7b-instruct")
    est = estimate_inference(spec, InferenceWorkload(images=4, image_size=(1024, 768)))
    named = {a.name: a for a in est.assumptions if a.name.startswith("model.")}
    assert named["model.video_processor_config"].value.startswith("preprocessor_config (")
    assert all(" " not in n and ":" not in n for n in named), sorted(named)
    words = "config.json says tie_word_embeddings=True but the files hold lm_head.weight"
    spec = dataclasses.replace(load_model("qwen2.5-0.5b"), notes=("head_dim=64 (derived)", words))
    for est in (estimate_inference(spec, InferenceWorkload()), estimate_training(spec, TrainingWorkload())):
        got = [(a.name, a.value) for a in est.assumptions if a.name.startswith("model.")]
        assert got == [("model.head_dim", "64 (derived)"), ("model.reader_note", words)]
    r = run_cli("infer", "qwen2.5-vl-7b-instruct", "--images", "4", "--image-size", "1024x768")
    assert r.returncode == 0 and "model.video_processor_config=preprocessor_config (" in r.stdout
    assert "model.no video" not in r.stdout
