"""SGLang 0.5.6's DSA indexer (DeepSeek-V3.2) in an fp8 checkpoint, from the cited shapes and dtypes:
nsa_indexer.py:141-147 builds ``wk`` [index_head_dim, hidden] = [128, 7168] with the model's quant_config (fp8, 128 x 128
fp32 block scales, as the checkpoint stores it); :156 builds ``k_norm`` as LayerNorm(128, dtype=torch.float32): weight
and bias of 128 elements, 4 bytes each (layernorm.py:288-305), not the compute dtype's 2."""

from __future__ import annotations

import math

from llmsizer.formulas.tensors import model_tensors
from llmsizer.formulas.weight_formats import tensor_bytes
from llmsizer.models import load_model


def _indexer(role: str) -> list:  # type: ignore[type-arg]
    return [t for t in model_tensors(load_model("deepseek-v3.2")) if t.role == role]


def test_sglang_keeps_the_indexer_k_norm_in_fp32() -> None:
    spec = load_model("deepseek-v3.2")
    for role in ("indexer_k_norm", "indexer_k_norm.bias"):
        found = _indexer(role)
        assert len(found) == 61 and all(t.shape == (128,) for t in found)
        assert tensor_bytes(spec, "fp8-block", found[0], engine="sglang")[0] == 128 * 4
        assert tensor_bytes(spec, "fp8-block", found[0], engine="vllm")[0] == 128 * 2  # the model dtype elsewhere


def test_sglang_quantizes_the_indexer_wk_as_the_checkpoint() -> None:
    spec = load_model("deepseek-v3.2")
    wk = _indexer("indexer_k")
    assert len(wk) == 61 and wk[0].shape == (128, 7168)
    fp8_block = 128 * 7168 + 4 * math.ceil(128 / 128) * math.ceil(7168 / 128)
    assert tensor_bytes(spec, "fp8-block", wk[0], engine="sglang")[0] == fp8_block
