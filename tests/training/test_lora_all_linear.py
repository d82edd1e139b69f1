"""``targets='all-linear'`` adapts what PEFT's ``target_modules='all-linear'`` adapts: every nn.Linear but the output
head (peft 0.21.2 tuners/tuners_utils.py ``_maybe_include_all_linear_layers``, lines 2430-2489), routers, MLA and
recurrent projections and the vision tower included.

Truth: ``peft.get_peft_model(model, LoraConfig(target_modules='all-linear'))`` on the real transformers model (meta).
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.lora import lora_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import (
    HYBRID_TINY,
    TINY_CONFIGS,
    TINY_GEMMA3_TEXT,
    TINY_QWEN3_5,
    TINY_QWEN3_5_MOE,
    TINY_SIGLIP_VISION,
    build,
)

peft = pytest.importorskip("peft")

_Q25_VISION = {"model_type": "qwen2_5_vl", "depth": 2, "hidden_size": 32, "intermediate_size": 48, "num_heads": 4,
               "in_chans": 3, "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2,
               "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [1]}
MULTIMODAL = {
    "gemma3-siglip": {"model_type": "gemma3", "text_config": TINY_GEMMA3_TEXT, "vision_config": TINY_SIGLIP_VISION,
                      "mm_tokens_per_image": 4},
    # Qwen3.5: in_proj_qkv + in_proj_z and in_proj_b + in_proj_a, two adapters each (RecurrentSpec.split_in_proj);
    # the MoE router an nn.Parameter (lora.PARAMETER_ROUTERS)
    "qwen3.5": TINY_QWEN3_5, "qwen3.5-moe": TINY_QWEN3_5_MOE,
    "qwen2.5-vl": {"model_type": "qwen2_5_vl", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "vision_config": _Q25_VISION},
}
MAMBA_REFUSED = ("falcon_h1", "nemotron_h", "mamba2")  # PEFT refuses all-linear on these (out_proj)
CONFIGS = {**TINY_CONFIGS, **{k: v for k, v in HYBRID_TINY.items() if k not in MAMBA_REFUSED}, **MULTIMODAL}


def _peft_count(cfg: dict[str, Any], targets: Any, rank: int) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm = peft.get_peft_model(build(cfg), peft.LoraConfig(r=rank, target_modules=targets, lora_dropout=0.0))
    return int(pm.get_nb_trainable_parameters()[0])


@pytest.mark.parametrize("name", CONFIGS)
def test_all_linear_matches_peft(name: str) -> None:
    cfg = CONFIGS[name]
    ours = lora_params(spec_from_config(cfg, name=name), 8, "all-linear").total
    assert ours == _peft_count(cfg, "all-linear", 8)


PEFT_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
              "down": "down_proj", "in_proj": "in_proj"}


@pytest.mark.parametrize("name", MAMBA_REFUSED)
def test_mamba_all_linear_refused_with_a_list_that_works(name: str) -> None:
    cfg = HYBRID_TINY[name]
    with pytest.raises(ValueError, match="incompatible with Mamba"):
        _peft_count(cfg, "all-linear", 8)
    spec = spec_from_config(cfg, name=name)
    with pytest.raises(InputError, match="e.g. targets ") as err:
        lora_params(spec, 8, "all-linear")
    m = re.search(r"e.g. targets (\S+)", str(err.value))
    assert m is not None
    named = m.group(1)
    assert lora_params(spec, 8, named).total == _peft_count(cfg, [PEFT_NAMES[t] for t in named.split(",")], 8)
