"""Llama-3.2-Vision's cross-attention K/V (formulas/kv_cache.py eq. 4) against the cache a real CPU forward leaves.

Independent truth: a tiny MllamaForConditionalGeneration (transformers 5.24) runs one forward over a batch of
prompts with images on CPU, ``use_cache=True``; the bytes of the cache layers transformers keeps for the
cross-attention layers are summed from the returned tensors. Ours: the image states per sequence from the processor
rule (formulas/vision_tokens.py ``image_tokens``, rule "mllama") through eq. (4), and the ``cross_attention_kv`` row of
``infer`` on the transformers engine.
"""

from __future__ import annotations

import pytest

from llmsizer.estimate.inference.compose import estimate_inference
from llmsizer.formulas.kv_cache import cross_attention_kv
from llmsizer.formulas.vision_tokens import image_tokens
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, torch

pytestmark = pytest.mark.slow

_CFG = {
    "model_type": "mllama", "image_token_index": 127,
    "text_config": {"vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "intermediate_size": 96, "cross_attention_layers": [1, 3],
                    "pad_token_id": 0},
    "vision_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_global_layers": 1, "attention_heads": 4,
                      "intermediate_size": 48, "vision_output_dim": 96, "image_size": 56, "patch_size": 14,
                      "max_num_tiles": 4, "intermediate_layers_indices": [0, 1]},
}


@pytest.mark.parametrize(("batch", "images", "dtype"), [(1, 1, torch.float32), (2, 2, torch.float32),
                                                        (3, 1, torch.bfloat16)])
def test_cross_attention_kv_equals_a_real_forward(batch, images, dtype):
    model = build(_CFG, device="cpu", dtype=dtype)
    spec = spec_from_config(_CFG, name="tiny-mllama")
    tiles, seq = 4, 9
    ids = torch.randint(1, 120, (batch, seq))
    ids[:, :images] = 127  # one <|image|> token per image
    with torch.no_grad():
        out = model(input_ids=ids, pixel_values=torch.randn(batch, images, tiles, 3, 56, 56, dtype=dtype),
                    aspect_ratio_ids=torch.ones(batch, images, dtype=torch.long),
                    aspect_ratio_mask=torch.ones(batch, images, tiles, dtype=torch.long),
                    cross_attention_mask=torch.ones(batch, seq, images, tiles, dtype=torch.long), use_cache=True)
    layers = out.past_key_values.layers
    real = sum(layers[i].keys.numel() * layers[i].keys.element_size()
               + layers[i].values.numel() * layers[i].values.element_size()
               for i, cross in enumerate(spec.cross_attention_layers) if cross)
    per_image = image_tokens(spec.vision, 56, 56)  # any size: the processor pads to max_num_tiles tiles
    kv_dtype = "fp32" if dtype == torch.float32 else "bf16"
    assert cross_attention_kv(spec, images * per_image.cross_tokens, batch, kv_dtype) == real
    est = estimate_inference(spec, context=seq, images=images, image_size=(56, 56), concurrency=batch,
                             engine="transformers", dtype=kv_dtype, device="cpu")
    assert est.item("cross_attention_kv").bytes == real
    # the self-attention layers hold the text tokens, the <|image|> tokens among them, and nothing of the images
    assert layers[0].keys.shape[2] == seq


def test_other_engines_refuse_cross_attention_images():
    spec = spec_from_config(_CFG, name="tiny-mllama")
    from llmsizer.errors import InputError
    with pytest.raises(InputError, match="transformers engine only"):
        estimate_inference(spec, context=64, images=1, engine="vllm")
