"""The plan's context line states the text tokens and the image tokens of a multimodal request (render7 #1): it said
"peak 8 requests x 4096 tokens" for prompts of 4096 text tokens and two 1024x768 images, while the KV cache held
6,098 tokens per sequence. The image tokens are worked here by hand from the Qwen2-VL processor's rule, not read
from llmsizer: transformers ``image_processing_qwen2_vl.smart_resize`` rounds each side to a multiple of
patch_size x merge_size = 28 (768 -> 756, 1024 -> 1036), the vision tower cuts 14-pixel patches (54 x 74 = 3,996),
the merger joins 2 x 2 of them into one token (999), and the chat template wraps them in <|vision_start|> and
<|vision_end|> (+2)."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run

REQUEST = """\
version: 1
jobs:
  - name: chat
    kind: inference
    model: {name: qwen2.5-vl-7b-instruct}
    media: {images: 2, image_size: 1024x768}
    traffic:
      concurrency: {typical: 4, peak: 8}
      context: {typical: 4096, peak: 4096}
    resources: {device: h100-sxm}
"""


def _image_tokens(width: int, height: int) -> int:
    side = lambda x: round(x / 28) * 28  # noqa: E731 - smart_resize within min/max pixels
    return (side(width) // 14) * (side(height) // 14) // 4 + 2


def test_the_context_line_splits_text_and_image_tokens(tmp_path: Path) -> None:
    each = _image_tokens(1024, 768)
    assert each == 1001
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    line = f"peak 8 requests x (4,096 text + 2 x {each:,} image tokens = {4096 + 2 * each:,} tokens)"
    code, out, err = run("plan", str(req), "--no-alternatives")
    assert code == 0, err
    assert line in out.splitlines()[out.splitlines().index("") + 1]  # the job's first line: its summary
    code, _, err = run("plan", str(req), "--no-alternatives", "-o", str(tmp_path / "p.md"), "-q")
    assert code == 0, err
    md = (tmp_path / "p.md").read_text()
    assert line in md
    assert f"sequences of (4096 text + {2 * each} image/video) tokens the KV pool has room for" in md


def test_a_text_request_keeps_its_line(tmp_path: Path) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST.replace("    media: {images: 2, image_size: 1024x768}\n", ""))
    code, out, err = run("plan", str(req), "--no-alternatives")
    assert code == 0, err
    # the context line says text tokens only (vLLM's start-up profile warning may still name images: it profiles the
    # vision encoder whatever the requests send)
    (line,) = [ln for ln in out.splitlines() if "peak 8 requests x 4096 tokens" in ln]
    assert "image" not in line, line
