"""SGLang's smaller default ``mem_fraction_static`` for a multimodal model: room kept for the vision encoder.

SGLang 0.5.23 (PyPI wheel; the same code at sgl-project/sglang @ 031ed82d8b5ec8db9cf88cffb057c2e91c964262)
``sglang/srt/arg_groups/memory_hook.py``: ``handle_gpu_memory_settings`` (L281-337) computes the default
``mem_fraction_static = round((M - reserved) / M, 3)`` (estimate/inference/sglang.py eq. 1) and then, "Multimodal
models need more memory for the image processing" (L330-337), when ``is_vlm`` (L283-288: the model config's
``is_multimodal``, not ``--language-only`` / ``--language-model-only``, not a disaggregated decode server) calls
``adjust_mem_fraction_for_vlm`` (L417-462). Without post-capture KV sizing (``SGLANG_ENABLE_POST_CAPTURE_KV_SIZING``,
off by default: environ.py L640) and with a ``vision_config`` in the HF config (L432-434)::

    ratio   = L_vit x H_vit^2 / (24 x 1024^2)                       (V1)  (L440-453; baseline ViT-L/14)
    dynamic = clamp(1 - 0.1 x (ratio - 1), 0.8, 1.05)               (V2)  (L456-459)
    mem_fraction_static' = mem_fraction_static x 0.95 x dynamic     (V3)  (L438, L461-462; not rounded again)

with ``L_vit = getattr(vision_config, "num_hidden_layers", 24)`` and ``H_vit = getattr(vision_config,
"hidden_size", 1024)`` (L440-441): a vision config that names its depth otherwise (Qwen2.5-VL's and Qwen3-VL's
``depth``) is counted as 24 layers. The composition (estimate/inference/sglang.py ``sglang_vlm_shape``) decides
which ``L_vit`` and ``H_vit`` SGLang reads; this module only computes.

Example (Qwen2.5-VL-7B: ``depth`` 32, not read, so L_vit 24; H_vit 1280): ratio = 1280^2 / 1024^2 = 1.5625,
dynamic = 0.94375, factor = 0.8965625.
"""

from __future__ import annotations

from ..errors import InputError

VLM_BASE_FACTOR = 0.95  # base_mem_fraction_reduction_ratio, memory_hook.py L438
VLM_BASELINE_LAYERS = 24  # baseline_vit_layers (ViT-L/14), L444; also getattr's default layers, L440
VLM_BASELINE_HIDDEN = 1024  # baseline_vit_hidden_size, L445; also getattr's default hidden size, L441
VLM_SENSITIVITY = 0.1  # sensitivity_scale, L457: "every time the complexity grows 100%, adjust final factor for 10%"
VLM_DYNAMIC_BOUNDS = (0.8, 1.05)  # the clamp of dynamic_adjustment_factor, L459


def vlm_fraction_factor(vit_layers: int, vit_hidden_size: int) -> float:
    """Eqs. (V1)-(V2): the factor SGLang multiplies its default ``mem_fraction_static`` by [1].

    ``vit_layers``: the vision config's ``num_hidden_layers`` as SGLang reads it (24 where absent);
    ``vit_hidden_size``: its ``hidden_size`` (1024 where absent)."""
    if vit_layers <= 0 or vit_hidden_size <= 0:
        raise InputError(f"vision encoder layers and hidden size must be positive, got {vit_layers}, {vit_hidden_size}")
    ratio = vit_layers * vit_hidden_size ** 2 / (VLM_BASELINE_LAYERS * VLM_BASELINE_HIDDEN ** 2)
    low, high = VLM_DYNAMIC_BOUNDS
    dynamic = max(low, min(high, 1.0 - VLM_SENSITIVITY * (ratio - 1.0)))
    return VLM_BASE_FACTOR * dynamic


def vlm_mem_fraction_static(mem_fraction_static: float, vit_layers: int, vit_hidden_size: int) -> float:
    """Eq. (V3): SGLang's default ``mem_fraction_static`` for a multimodal model [1]."""
    return mem_fraction_static * vlm_fraction_factor(vit_layers, vit_hidden_size)
