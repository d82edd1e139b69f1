"""vLLM's and SGLang's weights of Gemma 4: the k/v projections and k_norm of the KV-sharing layers on top of
transformers'.

vLLM's Gemma4Attention (vllm/model_executor/models/gemma4.py @001cabc1) builds ``qkv_proj`` with its K and V shards
and ``k_norm`` in every layer, the last ``num_kv_shared_layers`` too (the sharing only sets the layer's
``kv_sharing_target_layer_name``); transformers builds none of them there (modeling_gemma4.py L1170-1184).
Independent truth: the tensors transformers itself builds for those layers when no layer shares (the same config with
``num_kv_shared_layers`` 0, on the meta device): every layer then has the k_proj, v_proj and k_norm vLLM allocates.
"""

from __future__ import annotations

import copy
import re

import pytest

from llmsizer.catalog.models import entries
from llmsizer.estimate.inference import estimate_inference
from oracle_utils import build

pytestmark = pytest.mark.slow

KV_TENSOR = re.compile(r"model\.language_model\.layers\.(\d+)\.self_attn\.(k_proj|v_proj|k_norm)\.")


def _own_kv_params(config: dict, first_shared: int) -> int:
    """Parameters of k_proj, v_proj and k_norm transformers builds in layers >= first_shared with no layer sharing."""
    cfg = copy.deepcopy(config)
    cfg["text_config"]["num_kv_shared_layers"] = 0
    return sum(p.numel() for n, p in build(cfg).named_parameters()
               if (m := KV_TENSOR.match(n)) and int(m.group(1)) >= first_shared)


def _weights(name: str, engine: str) -> tuple[int, list[str]]:
    est = estimate_inference(name, engine=engine, context=4096, concurrency=1)
    return est.item("weights").bytes, [a.value for a in est.assumptions if a.name.endswith("_kv_shared_weights")]


@pytest.mark.parametrize(("name", "millions"), [("gemma-4-e2b-it", "18.9"), ("gemma-4-e4b-it", "55.1")])
def test_vllm_adds_the_shared_layers_kv_projections(name, millions):
    entry = entries()[name]
    text = entry.config["text_config"]
    first_shared = text["num_hidden_layers"] - text["num_kv_shared_layers"]
    extra = _own_kv_params(entry.config, first_shared)
    vllm, said = _weights(name, "vllm")
    hf, hf_said = _weights(name, "transformers")
    assert vllm - hf == 2 * extra  # bf16: 2 B per parameter
    assert said == [f"+{millions}M params"] and hf_said == []


@pytest.mark.parametrize(("name", "millions"), [("gemma-4-e2b-it", "18.9"), ("gemma-4-e4b-it", "55.1")])
def test_sglang_adds_the_same_kv_projections(name, millions):
    # SGLang's Gemma4Attention (python/sglang/srt/models/gemma4_causal.py @03826cdd) builds qkv_proj (K and V
    # shards) and k_norm in every layer and load_weights fills every layer's k/v shards: the same tensors as vLLM's
    entry = entries()[name]
    text = entry.config["text_config"]
    first_shared = text["num_hidden_layers"] - text["num_kv_shared_layers"]
    extra = _own_kv_params(entry.config, first_shared)
    sglang, said = _weights(name, "sglang")
    hf, _ = _weights(name, "transformers")
    assert sglang - hf == 2 * extra
    assert said == [f"+{millions}M params"]
