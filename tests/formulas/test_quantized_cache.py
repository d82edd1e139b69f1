"""KV cache bytes of transformers' QuantizedCache and vLLM's per-token-head formats against the engines' own code.

Independent truth: a tiny random-weight Llama runs on the CPU with ``QuantizedCache`` (transformers 5.24.0
src/transformers/cache_utils.py), prefill of T tokens then decode steps, and the tensors each layer holds are
summed: the HQQ backend's quantized data and its per-group ``meta["scale"]`` / ``meta["zero"]``, the residual
``keys`` / ``values`` kept in the activation dtype, and the fp8 backend's data and scale. They are compared with
formulas/kv_cache.py eq. (6) under estimate/engines.py ``kv_layout`` (skipped where hqq is not installed; the fp8
backend needs torch alone). QuantizedCache's refusal of a model with sliding layers is the real constructor's
ValueError, matched by the estimate's FieldError. vLLM's int8_per_token_head page is the counting rule of
vllm/v1/kv_cache_interface.py ``AttentionSpec.page_size_bytes`` @001cabc1 (two float32 scales per token and KV
head beside the int8 K and V), written out below; no GPU here to allocate it.
"""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.errors import FieldError
from llmsizer.estimate import engines as E
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.readers.hf_config import spec_from_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 128, "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 16, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
BATCH, PROMPT = 2, 200


def _model():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**{k: v for k, v in CONFIG.items() if k not in ("model_type", "architectures", "torch_dtype")})
    torch.manual_seed(0)
    return cfg, LlamaForCausalLM(cfg).to(torch.bfloat16).eval()


def _nbytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, dict):
        return sum(_nbytes(v) for v in x.values() if isinstance(v, (torch.Tensor, dict, tuple, list)))
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    return 0


def _run(backend: str, decode_steps: int, **kw):
    from transformers.cache_utils import QuantizedCache
    cfg, model = _model()
    cache = QuantizedCache(backend=backend, config=cfg, **kw)
    with torch.no_grad():
        model(torch.randint(0, 128, (BATCH, PROMPT)), past_key_values=cache, use_cache=True)
        for _ in range(decode_steps):
            model(torch.randint(0, 128, (BATCH, 1)), past_key_values=cache, use_cache=True)
    return cache


def _held(cache) -> int:
    """Bytes the cache's layers hold: quantized K and V (with their scales) and the residual K and V."""
    total = 0
    for layer in cache.layers:
        total += _nbytes(layer._quantized_keys) + _nbytes(layer._quantized_values)
        if getattr(layer, "keys", None) is not None and layer.keys.dim() == 4:
            total += _nbytes(layer.keys) + _nbytes(layer.values)
    return total


def _spec():
    return spec_from_config(dict(CONFIG), name="tiny-llama")


@pytest.mark.parametrize("decode_steps", [0, 5, 127, 128, 140])
def test_hqq_int8_cache_is_eq6(decode_steps: int) -> None:
    """HQQ nbits=8: 1 B per value + a bf16 scale and zero per 64 values; the decoded tokens since the last flush
    (decode_steps mod 128) in bf16. Eq. (6) with r = that count equals the held bytes exactly; the estimate's r
    (residual_length - 1, the most it can hold) bounds them from above by at most 127 tokens x 1 B less."""
    pytest.importorskip("hqq")
    cache = _run("hqq", decode_steps, nbits=8)
    measured = _held(cache)
    tokens, layout = PROMPT + decode_steps, E.kv_layout("transformers", "int8", 2)
    assert layout == {"q_group_size": 64, "group_param_bytes": 4.0, "residual_tokens": 127, "residual_bytes": 2.0}
    residual = cache.layers[0].keys.shape[-2] if cache.layers[0].keys.dim() == 4 else 0
    assert residual == decode_steps % 128  # the flush rule read in cache_utils.py L854
    exact = kv_cache(_spec(), tokens, BATCH, "int8", window_extra=0, **{**layout, "residual_tokens": residual})
    assert exact.total_bytes == measured
    bound = kv_cache(_spec(), tokens, BATCH, "int8", window_extra=0, **layout).total_bytes
    elems = 2 * 2 * 16 * 2 * BATCH  # K+V x kv_heads x head_dim x layers x sequences
    assert measured <= bound <= measured + 127 * elems * (2 - 1.0625)
    plain = kv_cache(_spec(), tokens, BATCH, "int8", window_extra=0).total_bytes  # before: 1 B a value, nothing else
    assert plain < measured


def test_fp8_backend_is_one_byte_a_value_and_a_scale_a_tensor() -> None:
    """Fp8QuantizedLayer (cache_utils.py L1009-1076): (float8_e4m3fn data, one float32 scale) per K and per V,
    appended to, no residual (kv_layout: none); eq. (1) at 1 B counts the data, the scales are 8 B a layer."""
    cache = _run("fp8", 3)
    data = scales = 0
    for layer in cache.layers:
        for q, scale in (layer._quantized_keys, layer._quantized_values):
            assert q.dtype == torch.float8_e4m3fn and q.shape[-2] == PROMPT + 3 and scale.numel() == 1
            data, scales = data + _nbytes(q), scales + _nbytes(scale)
    assert E.kv_layout("transformers", "fp8", 2) == {}
    assert kv_cache(_spec(), PROMPT + 3, BATCH, "fp8", window_extra=0).total_bytes == data
    assert scales == 2 * 4 * len(cache.layers)


def test_quantized_cache_refuses_sliding_layers_as_the_estimate_does() -> None:
    from transformers import Gemma2Config
    from transformers.cache_utils import QuantizedCache
    cfg = Gemma2Config(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=32)
    with pytest.raises(ValueError, match="only full attention"):
        QuantizedCache(backend="fp8", config=cfg)
    for kvd in ("int8", "fp8", "fp8_e4m3"):
        with pytest.raises(FieldError, match="QuantizedCache, which refuses a model with layers other than full") as e:
            estimate_inference("gemma-2-2b", engine="transformers", kv_dtype=kvd, context=1024)
        assert e.value.field == "kv_dtype" and "13 sliding-window" in str(e.value)
    estimate_inference("gemma-2-2b", engine="transformers", kv_dtype="bf16", context=1024)  # DynamicCache: taken
    estimate_inference("llama-3.1-8b", engine="transformers", kv_dtype="int8", context=1024)  # all full: taken


def test_vllm_int8_per_token_head_page() -> None:
    """vllm/v1/kv_cache_interface.py @001cabc1: real_page_size_bytes = 2 x block x kv_heads x head_size x 1 (int8),
    page_size_bytes adds 2 x block x kv_heads x 4 (float32 scales) for a per-token-head mode (L143-155)."""
    block, heads, head, layers = 16, 8, 128, 32  # Llama-3.1-8B
    page = 2 * block * heads * head * 1 + 2 * block * heads * 4
    kv = kv_cache(_llama8b(), block, 1, "int8_per_token_head", block_size=16)
    assert kv.total_bytes == page * layers
    assert kv_cache(_llama8b(), block, 1, "fp8_per_token_head", block_size=16).total_bytes == page * layers
    assert kv_cache(_llama8b(), block, 1, "fp8", block_size=16).total_bytes == 2 * block * heads * head * layers


def _llama8b():
    from llmsizer.models import load_model
    return load_model("llama-3.1-8b")
