"""Run in a subprocess by test_vision_tokens.py: token counts from the transformers reference code that needs
torchvision (the Llama 4 image processor and the Qwen video processors), which is not installed here.

torchvision is replaced by empty modules *in this process only*: the functions called below (llama4
``find_supported_resolutions`` / ``get_best_fit``, ``Llama4Processor._prompt_split_image``, the video processors'
``get_num_of_video_patches`` and ``smart_resize``, ``Qwen3VLProcessor.replace_video_token``) are plain torch /
Python and never touch it. Reads JSON cases on stdin, writes JSON.
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

import functools  # noqa: E402
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import regex  # noqa: E402
import torch  # noqa: E402
from transformers.image_processing_utils import SizeDict  # noqa: E402
from transformers.models.llama4.processing_llama4 import Llama4Processor  # noqa: E402
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX  # noqa: E402
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor  # noqa: E402
from transformers.video_utils import VideoMetadata  # noqa: E402


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
V3 = _load("models.qwen3_vl.video_processing_qwen3_vl")
Qwen3VLVideoProcessor = V3.Qwen3VLVideoProcessor


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


def video(kind: str, frames: int, height: int, width: int, size: dict[str, int] | None = None) -> int:
    cls = Qwen3VLVideoProcessor if kind == "qwen3_vl" else Qwen2VLVideoProcessor
    proc = cls(size=size) if size else cls()
    return int(proc.get_num_of_video_patches(frames, height, width, {"cap_pixels_per_frame": False}))


def qwen3_prompt(frames: int, height: int, width: int, size: dict[str, int]) -> int:
    """Context tokens of one Qwen3-VL video: the grid from Qwen3VLVideoProcessor's ``smart_resize`` (checked against
    its ``get_num_of_video_patches``), the placeholder text from ``Qwen3VLProcessor.replace_video_token`` itself
    (frames at the processor's fps, 2), put in the chat template's "<|vision_start|><|video_pad|><|vision_end|>"
    the way ProcessorMixin replaces the video token only; then counted as the tokenizer splits it: each special token
    one token, the text between them cut by the Qwen2 pre-tokenizer regex (``PRETOKENIZE_REGEX``)."""
    vp = Qwen3VLVideoProcessor(size=size)
    h, w = V3.smart_resize(frames, height, width, temporal_factor=vp.temporal_patch_size,
                           factor=vp.patch_size * vp.merge_size, min_pixels=size["shortest_edge"],
                           max_pixels=size["longest_edge"])
    grid = [-(-frames // vp.temporal_patch_size), h // vp.patch_size, w // vp.patch_size]
    assert grid[0] * grid[1] * grid[2] == video("qwen3_vl", frames, height, width, size)
    fake = types.SimpleNamespace(video_processor=vp, video_token="<|video_pad|>",
                                 vision_start_token="<|vision_start|>", vision_end_token="<|vision_end|>")
    fake._calculate_timestamps = functools.partial(Qwen3VLProcessor._calculate_timestamps, fake)
    meta = VideoMetadata(total_num_frames=frames, fps=2.0, frames_indices=list(range(frames)))
    text = Qwen3VLProcessor.replace_video_token(
        fake, {"video_grid_thw": torch.tensor([grid]), "video_metadata": [meta]}, 0)
    prompt = "<|vision_start|><|video_pad|><|vision_end|>".replace("<|video_pad|>", text)
    special = re.compile(r"<\|[a-z_]+\|>")
    pieces = [p for chunk in special.split(prompt) for p in regex.findall(PRETOKENIZE_REGEX, chunk)]
    return len(special.findall(prompt)) + len(pieces)


def folder_video_bounds(kind: str, folder: str) -> list[int]:
    """[shortest_edge, longest_edge] of the video processor transformers builds from a model folder: the dict
    ``get_video_processor_dict`` loads (video_preprocessor_config.json, else preprocessor_config.json) given to the
    family's video processor class."""
    from transformers.video_processing_utils import BaseVideoProcessor

    cls = Qwen3VLVideoProcessor if kind == "qwen3_vl" else Qwen2VLVideoProcessor
    d, _ = BaseVideoProcessor.get_video_processor_dict(folder, local_files_only=True)
    d = {k: v for k, v in d.items() if k not in ("image_processor_type", "video_processor_type", "processor_class")}
    proc = cls(**d)
    return [int(proc.size["shortest_edge"]), int(proc.size["longest_edge"])]


def main() -> None:
    cases = json.load(sys.stdin)
    out = []
    for c in cases:
        if c[0] == "llama4":
            out.append(llama4(c[1], c[2]))
        elif c[0] == "folder":
            out.append(folder_video_bounds(c[1], c[2]))
        elif c[0] == "qwen3_vl_prompt":
            out.append(qwen3_prompt(c[1], c[2], c[3], c[4]))
        else:
            out.append(video(c[0], c[1], c[2], c[3]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
