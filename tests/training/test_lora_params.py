"""LoRA / DoRA trainable parameters equal PEFT's own count for the same targets.

Truth: ``peft.get_peft_model(model, LoraConfig(...)).get_nb_trainable_parameters()[0]`` on the real transformers
model built on the meta device (shapes only; ``with torch.device("meta")`` keeps tied weights tied).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from llmsizer.formulas.lora import lora_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_CONFIGS, build

peft = pytest.importorskip("peft")

# our target names -> the module names PEFT matches in transformers models
PEFT_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
              "down": "down_proj", "embed": "embed_tokens", "lm_head": "lm_head"}
MIXTRAL_NAMES = {"gate": "w1", "up": "w3", "down": "w2"}  # Mixtral's v4 expert names, as PEFT expects them
# Falcon and GPT-NeoX (modeling_falcon.py, modeling_gpt_neox.py): one fused query_key_value, dense, dense_h_to_4h,
# dense_4h_to_h; Phi (modeling_phi.py): q/k/v_proj, dense, fc1, fc2
FUSED_NAMES = {"q": "query_key_value", "k": "query_key_value", "v": "query_key_value", "o": "dense",
               "up": "dense_h_to_4h", "down": "dense_4h_to_h"}
FAMILY_NAMES = {"falcon": FUSED_NAMES, "gpt_neox": FUSED_NAMES, "phi": {"o": "dense", "up": "fc1", "down": "fc2"}}

CASES: list[tuple[str, str, int, bool]] = [
    ("llama-gqa", "q,v", 8, False),
    ("llama-gqa", "q,k,v,o,gate,up,down", 16, False),
    ("llama-gqa", "q,k,v,o,gate,up,down", 4, True),
    ("llama-gqa", "q,v,embed,lm_head", 8, False),
    ("llama-gqa", "q,embed", 4, True),
    ("llama-mha-bias-tied", "q,k,v,o,gate,up,down", 8, False),
    ("llama-mqa-headdim", "k,v,down", 3, True),
    ("qwen2-bias", "q,k,v,o", 8, False),
    ("qwen3-qknorm", "q,k,v,o,gate,up,down", 8, True),
    ("mistral-sliding", "q,k,v,o,gate,up,down", 16, False),
    ("gemma2-alternating", "q,k,v,o,gate,up,down", 8, False),
    ("qwen2-moe-shared", "q,k,v,o,gate,up,down", 8, False),
    ("qwen3-moe", "q,k,v,o,gate,up,down", 4, False),
    ("mixtral-moe", "q,v,o", 8, True),
    ("mixtral-moe", "q,k,v,o,gate,up,down", 4, False),
    ("deepseek-v3-mla", "o,gate,up,down", 4, False),
    ("deepseek-v2-no-q-lora", "q,o", 8, False),
    ("falcon-mqa", "q,v", 8, False),
    ("falcon-mqa", "q,k,v,o,up,down", 4, True),
    ("falcon-new-arch", "k", 8, False),
    ("gpt-neox-parallel", "q,v,o,up,down", 8, False),
    ("phi-partial-rotary", "q,k,v,o,up,down", 8, True),
]


def _peft_count(cfg: dict[str, Any], targets: str, rank: int, dora: bool) -> int:
    model = build(cfg)  # meta device
    names = {**PEFT_NAMES, **(MIXTRAL_NAMES if cfg["model_type"] == "mixtral" else {}),
             **FAMILY_NAMES.get(cfg["model_type"], {})}
    modules = list(dict.fromkeys(names[t] for t in targets.split(",")))
    conf = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=modules,
                           use_dora=dora, lora_dropout=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm = peft.get_peft_model(model, conf)
    trainable, _ = pm.get_nb_trainable_parameters()
    return int(trainable)


@pytest.mark.parametrize(("config", "targets", "rank", "dora"), CASES)
def test_trainable_params_match_peft(config: str, targets: str, rank: int, dora: bool) -> None:
    cfg = TINY_CONFIGS[config]
    spec = spec_from_config(cfg, name=config)
    ours = lora_params(spec, rank, targets, dora=dora).total
    assert ours == _peft_count(cfg, targets, rank, dora)


def test_shapes_cover_every_trainable_tensor() -> None:
    cfg = TINY_CONFIGS["llama-gqa"]
    spec = spec_from_config(cfg, name="llama-gqa")
    lp = lora_params(spec, 4, "q,v", dora=True)
    model = build(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], use_dora=True))
    real = sorted(tuple(p.shape) for p in pm.parameters() if p.requires_grad)
    assert sorted(lp.shapes()) == real
