"""Multi-token-prediction (MTP) layers in the stored checkpoint (formulas/mtp.py) against independent truth.

- The MTP block: the decoder layer transformers builds at index num_hidden_layers (``DeepseekV3DecoderLayer`` /
  ``Glm4MoeDecoderLayer``, transformers 5.24, meta device), what vLLM's ``mtp_block`` is; the other tensors with the
  shapes a tensor listing of DeepSeek-R1's safetensors shows for ``model.layers.61`` (public GitHub file, search-index
  id 62464985633): eh_proj [7168, 14336], enorm / hnorm / shared_head.norm [7168], embed_tokens and
  shared_head.head [129280, 7168].
- DeepSeek-V3's README: "The total size of DeepSeek-V3 models on Hugging Face is 685B, which includes 671B of the
  Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights" (whole billions: within 1B each).
- The same listing's byte total of the DeepSeek-R1 checkpoint's tensors: 641.29 GiB ("张量累计大小 641.29 GB", GiB:
  its 1.73 "GB" per [129280, 7168] bf16 tensor is 1,853,358,080 B = 1.726 GiB), two decimals.
"""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference, estimate_training
from llmsizer.catalog.models import entries
from llmsizer.formulas.mtp import mtp_params, stored_file_bytes
from llmsizer.formulas.params import count_params
from llmsizer.formulas.weight_formats import stored_format, weight_bytes
from llmsizer.models import load_model
from oracle_utils import hf_config

GIB = 2**30


def _block_from_transformers(name: str) -> int:
    """Parameters of the decoder layer transformers builds at index num_hidden_layers (the MTP block)."""
    torch = pytest.importorskip("torch")
    cfg = entries()[name].config
    conf = hf_config(cfg)
    n = cfg["num_hidden_layers"]
    if cfg["model_type"] == "glm4_moe":
        from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeDecoderLayer as Layer
    else:
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer as Layer
    with torch.device("meta"):
        layer = Layer(conf, n)
    # e_score_correction_bias is a buffer in transformers (not a parameter): the main layers' count leaves it out too
    return sum(p.numel() for p in layer.parameters())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-r1", "glm-4.5", "glm-4.5-air", "glm-4.7"])
def test_mtp_params_are_one_transformers_layer_plus_the_listed_tensors(name):
    spec = load_model(name)
    h, v = spec.hidden_size, spec.vocab_size
    listed = h * 2 * h + 3 * h + 2 * v * h  # eh_proj [h, 2h], three norms [h], embed_tokens and head [V, h]
    assert mtp_params(spec) == _block_from_transformers(name) + listed


def test_deepseek_v3_total_is_the_readme_685b():
    spec = load_model("deepseek-v3")
    main, mtp = count_params(spec).total, mtp_params(spec)
    assert abs(main - 671e9) < 1e9 and abs(mtp - 14e9) < 1e9
    assert abs(main + mtp - 685e9) < 1e9


def test_deepseek_r1_checkpoint_bytes_are_the_listed_total():
    spec = load_model("deepseek-r1")
    fmt, group, _ = stored_format(spec)
    total, mtp = stored_file_bytes(spec, fmt, group)
    assert abs(total / GIB - 641.29) <= 0.005
    # without the MTP layer the checkpoint would be 14.36 GiB short of the listing
    assert abs((total - mtp) / GIB - 641.29) > 10


def test_no_mtp_without_the_config_field_or_in_another_format():
    kimi = load_model("kimi-k2-instruct")  # num_nextn_predict_layers 0
    assert mtp_params(kimi) == 0
    assert stored_file_bytes(kimi, "fp8-block", 128)[1] == 0
    ds = load_model("deepseek-v3")
    # a ready-made GGUF is not the published checkpoint: llama.cpp's DeepSeek converter drops layers >= 61
    total, mtp = stored_file_bytes(ds, "gguf:q4_k_m", 128)
    assert mtp == 0 and total == weight_bytes(ds, "gguf:q4_k_m", 128).total


def test_serving_and_training_do_not_load_them():
    spec = load_model("glm-4.5-air")
    est = estimate_inference(spec, engine="vllm", context=4096)
    weights = next(i.bytes for i in est.items if i.name == "weights")
    # the 46 decoder layers only (vLLM's own dtypes: its fp32 router, weight_formats.py ENGINE_MODEL_TENSOR_BYTES)
    assert weights == weight_bytes(spec, "bf16", engine="vllm").total
    assert any(a.name == "mtp_layers" for a in est.assumptions)
    tr = estimate_training(spec, method="lora")
    assert any(a.name == "mtp_layers" for a in tr.assumptions)
    plain = estimate_inference(load_model("kimi-k2-instruct"), engine="vllm", context=4096)
    assert not any(a.name == "mtp_layers" for a in plain.assumptions)
