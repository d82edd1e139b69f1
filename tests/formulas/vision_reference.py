"""Run in a subprocess by test_vision_tokens.py: token counts from the transformers reference code that needs
torchvision (the Llama 4 image processor and the Qwen video processors), which is not installed here.

torchvision is replaced by empty modules *in this process only*: the functions called below (llama4
``find_supported_resolutions`` / ``get_best_fit``, ``Llama4Processor._prompt_split_image``, the video processors'
``get_num_of_video_patches``) are plain torch / Python and never touch it. Reads JSON cases on stdin, writes JSON.
"""

from __future__ import annotations

import importlib.machinery
import json
import re
import sys
import types

# transformers' shared modules first, while torchvision is absent (they choose their backends at import)
import transformers.image_processing_utils  # noqa: F401
import transformers.image_utils  # noqa: F401
import transformers.video_utils  # noqa: F401

for _name in ("torchvision", "torchvision.transforms", "torchvision.transforms.v2",
              "torchvision.transforms.v2.functional"):
    _m = types.ModuleType(_name)
    _m.__spec__ = importlib.machinery.ModuleSpec(_name, None)
    sys.modules[_name] = _m
sys.modules["torchvision.transforms.v2.functional"].InterpolationMode = object  # type: ignore[attr-defined]
sys.modules["torchvision.transforms"].InterpolationMode = object  # type: ignore[attr-defined]

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from transformers.image_processing_utils import SizeDict  # noqa: E402
from transformers.models.llama4.processing_llama4 import Llama4Processor  # noqa: E402


def _load(module: str) -> types.ModuleType:
    """The reference module itself (transformers' lazy loader would hand out a "requires torchvision" dummy)."""
    path = Path(transformers.image_utils.__file__).parent / (module.replace(".", "/") + ".py")
    spec = importlib.util.spec_from_file_location("transformers." + module, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


L = _load("models.llama4.image_processing_llama4")
Qwen2VLVideoProcessor = _load("models.qwen2_vl.video_processing_qwen2_vl").Qwen2VLVideoProcessor
Qwen3VLVideoProcessor = _load("models.qwen3_vl.video_processing_qwen3_vl").Qwen3VLVideoProcessor


def llama4(height: int, width: int) -> int:
    """Tokens of one image: Llama4ImageProcessor's canvas choice (defaults: 336 px tiles, max_patches 16) and
    Llama4Processor's prompt string (patch 14, pixel_shuffle_ratio 0.5 -> 144 <|patch|> per tile)."""
    size = SizeDict(height=336, width=336)
    res = torch.tensor(L.find_supported_resolutions(max_num_chunks=16, patch_size=size))
    target = L.get_best_fit((height, width), res, resize_to_max_canvas=False)
    ratio = (int(target[0]) // 336, int(target[1]) // 336)
    per_chunk = (336 // 14) * (336 // 14) // int(round(1.0 / (0.5**2)))
    text = Llama4Processor._prompt_split_image(None, ratio, per_chunk)
    return len(re.findall(r"<\|[a-z_]+\|>", text))


def video(kind: str, frames: int, height: int, width: int) -> int:
    proc = Qwen3VLVideoProcessor() if kind == "qwen3_vl" else Qwen2VLVideoProcessor()
    return int(proc.get_num_of_video_patches(frames, height, width, {"cap_pixels_per_frame": False}))


def main() -> None:
    cases = json.load(sys.stdin)
    out = []
    for c in cases:
        if c[0] == "llama4":
            out.append(llama4(c[1], c[2]))
        else:
            out.append(video(c[0], c[1], c[2], c[3]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
