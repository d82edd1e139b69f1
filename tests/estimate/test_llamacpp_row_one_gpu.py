"""llama.cpp ``-sm row`` on one GPU is warned about as on several (issues #12/#16). llama.cpp asks every device it
uses for its backend's split buffer type when the split mode is row, however many there are: ``load_tensors`` calls
``make_gpu_buft_list(dev, split_mode, tensor_split)`` in a loop over ``devices`` (no count test), and
``make_gpu_buft_list`` throws "device ... does not support split buffers" when the backend exports no
``ggml_backend_split_buffer_type`` (src/llama-model.cpp:1140-1165 at ggml-org/llama.cpp@0c1e57098). Before, only
``--gpus 2`` and more got the warning; one RTX 3090 with ``-sm row`` got none."""

from __future__ import annotations

import llmsizer

MOE = "qwen3-30b-a3b"


def _row_warnings(gpus: int) -> list[str]:
    est = llmsizer.estimate_inference(MOE, engine="llamacpp", weights="q4_k_m", split_mode="row", gpus=gpus)
    return [w for w in est.warnings if "split buffers" in w]


def test_one_gpu_with_row_split_gets_the_warning_several_get() -> None:
    several = _row_warnings(2)
    assert len(several) == 1
    assert _row_warnings(1) == several


def test_layer_split_on_one_gpu_gets_no_such_warning() -> None:
    est = llmsizer.estimate_inference(MOE, engine="llamacpp", weights="q4_k_m", gpus=1)
    assert not [w for w in est.warnings if "split buffers" in w]
