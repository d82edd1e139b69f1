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
from oracle_utils import HYBRID_TINY, TINY_CONFIGS, build

peft = pytest.importorskip("peft")

# our target names -> the module names PEFT matches in transformers models
PEFT_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
              "down": "down_proj", "embed": "embed_tokens", "lm_head": "lm_head"}
MIXTRAL_NAMES = {"gate": "w1", "up": "w3", "down": "w2"}  # Mixtral's v4 expert names, as PEFT expects them
# Falcon and GPT-NeoX (modeling_falcon.py, modeling_gpt_neox.py): one fused query_key_value, dense, dense_h_to_4h,
# dense_4h_to_h; Phi (modeling_phi.py): q/k/v_proj, dense, fc1, fc2
FUSED_NAMES = {"q": "query_key_value", "k": "query_key_value", "v": "query_key_value", "o": "dense",
               "up": "dense_h_to_4h", "down": "dense_4h_to_h"}
# Phi-3 (modeling_phi3.py Phi3Attention.qkv_proj, Phi3MLP.gate_up_proj), GPT-BigCode (modeling_gpt_bigcode.py
# attn.c_attn / attn.c_proj, mlp.c_fc / mlp.c_proj: PEFT's suffix match on c_proj takes both), Granite-4.0-H
# (modeling_granitemoehybrid.py shared_mlp.input_linear / output_linear): fused linears, one adapter each
PHI3_NAMES = {"q": "qkv_proj", "k": "qkv_proj", "v": "qkv_proj", "gate": "gate_up_proj", "up": "gate_up_proj"}
BIGCODE_NAMES = {"q": "c_attn", "k": "c_attn", "v": "c_attn", "o": "c_proj", "up": "c_fc", "down": "c_proj"}
GRANITE_H_NAMES = {"gate": "input_linear", "up": "input_linear", "down": "output_linear"}
FAMILY_NAMES = {"falcon": FUSED_NAMES, "gpt_neox": FUSED_NAMES, "phi": {"o": "dense", "up": "fc1", "down": "fc2"},
                "phi3": PHI3_NAMES, "gpt_bigcode": BIGCODE_NAMES, "gpt2": BIGCODE_NAMES, "granitemoehybrid": GRANITE_H_NAMES}
CONFIGS = {**TINY_CONFIGS, "granitemoehybrid": HYBRID_TINY["granitemoehybrid"]}

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
    # fused linears: a target naming any part adapts the whole nn.Linear once (formulas/lora.py 'Fused linears')
    ("phi3-sliding", "q,k,v,o,gate,up,down", 8, False),
    ("phi3-sliding", "v,up", 4, True),
    ("phi3-sliding", "q,down", 8, False),
    ("gpt-bigcode-mqa", "q,k,v,o,up,down", 8, True),
    ("gpt-bigcode-mqa", "k", 8, False),
    ("gpt2-mha", "q,k,v,o,up,down", 8, True),  # Conv1D modules: PEFT's lora.Linear with fan_in_fan_out
    ("gpt2-mha", "v,up", 4, False),
    ("granitemoehybrid", "q,k,v,o,gate,up,down", 8, False),
    ("granitemoehybrid", "up,down", 4, True),
    ("deepseek-v32-dsa", "o,gate,up,down", 4, False),
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
    cfg = CONFIGS[config]
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


# the fused linears' own module names as targets (specs/training.py aliases): what PEFT adapts for those names
MODULE_NAME_CASES = [("phi3-sliding", "qkv_proj,gate_up_proj"), ("phi3-sliding", "gate_up_proj,o_proj"),
                     ("gpt-bigcode-mqa", "c_attn,c_proj,c_fc"), ("gpt-bigcode-mqa", "c_proj"),
                     ("granitemoehybrid", "input_linear,output_linear"), ("falcon-mqa", "query_key_value")]


@pytest.mark.parametrize(("config", "targets"), MODULE_NAME_CASES)
def test_fused_module_names_adapt_what_peft_adapts(config: str, targets: str) -> None:
    cfg = CONFIGS[config]
    ours = lora_params(spec_from_config(cfg, name=config), 8, targets).total
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm = peft.get_peft_model(build(cfg), peft.LoraConfig(r=8, target_modules=targets.split(","), lora_dropout=0.0))
    assert ours == int(pm.get_nb_trainable_parameters()[0])


@pytest.mark.parametrize("config", ["phi3-sliding", "gpt-bigcode-mqa", "gpt2-mha"])
def test_fused_shapes_cover_every_trainable_tensor(config: str) -> None:
    """The adapter tensors the optimizer states and gradients are counted from (LoraParams.shapes) are PEFT's."""
    cfg = CONFIGS[config]
    lp = lora_params(spec_from_config(cfg, name=config), 4, "q,k,v,o,gate,up,down", dora=True)
    names = list(dict.fromkeys({**PEFT_NAMES, **FAMILY_NAMES[cfg["model_type"]]}[t]
                               for t in ("q", "k", "v", "o", "up", "down")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm = peft.get_peft_model(build(cfg), peft.LoraConfig(r=4, target_modules=names, use_dora=True))
    real = sorted(tuple(p.shape) for p in pm.parameters() if p.requires_grad)
    assert sorted(lp.shapes()) == real


def test_the_default_targets_on_a_fused_model_adapt_its_fused_linears_and_say_so() -> None:
    """The default q,k,v,o,gate,up,down on Phi-3 (no q_proj, no gate_proj) adapts qkv_proj, o_proj, gate_up_proj and
    down_proj, as PEFT's target_modules naming them does, not zero modules; the estimate's assumption names them."""
    from llmsizer.estimate.training import estimate_training

    cfg = CONFIGS["phi3-sliding"]
    spec = spec_from_config(cfg, name="phi3-sliding")
    est = estimate_training(spec, method="lora", rank=8, micro_batch=1, seq_len=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm = peft.get_peft_model(build(cfg), peft.LoraConfig(
            r=8, target_modules=["qkv_proj", "o_proj", "gate_up_proj", "down_proj"], lora_dropout=0.0))
    assert est.details["params_trainable"] == int(pm.get_nb_trainable_parameters()[0])
    why = next(a.why for a in est.assumptions if a.name == "lora")
    assert "the fused qkv_proj" in why and "the fused gate_up_proj" in why
