"""Eq. F1 (formulas/training_activations.py ``layer_saved_terms``, ``input_grad``): under LoRA with a frozen embedding the
first decoder layer's input needs no gradient, so that layer keeps only what follows its first adapted projection.

Independent truth: the distinct non-parameter storages autograd saves while each decoder layer of a real PEFT LoRA
model runs its forward (``oracle_utils.saved_storages_by_layer``: ``saved_tensors_hooks``, each storage counted at the
first layer that saves it), a small Llama / Qwen3 (transformers 5.24, peft 0.21, torch 2.13 CPU, SDPA), B=2, T=128,
for target sets whose first adapter comes at different points of the layer. Measured, in [t, h] fp32 units, layer 0 /
the others (Llama fp32): q,v 12.22 / 13.10; all-linear 15.88 / 16.76; o 9.54 / 12.07; gate,up,down 11.09 / 15.63;
up 3.53 / 13.07; down 2.53 / 14.57; gate 6.03 / 13.07 (before eq. F1 every layer was counted as the others).
Phi-3 (fused qkv_proj / gate_up_proj, one PEFT adapter each): q,k,v,o,gate,up,down 18.035 / 18.914, the estimate
15.785 / 16.664 before its transformers layout (hf_config.py TRANSFORMERS_LAYOUT: V a slice of the qkv output, the
head-major attention output copied) was read.

The rotary cos/sin (``LlamaRotaryEmbedding``: [1, T, head_dim] each, in the embedding's dtype, made once before the
layers; the estimate counts them apart, ``shared_activations``) are saved by the first layer whose q or k needs a
gradient: they are added to that layer here.

Not covered: ``torch.autocast`` over an fp32 base. There the frozen linears before the first adapter keep no bf16
weight copy either, but the estimate still counts every layer's copies (``autocast weight copies``, states.py
``layer_copy_elements``): left as an over-count (an o,down run measured the first layer's activation terms and the
copies of the frozen gate/up/down and the adapters within 4 KiB of 2.7 MB).

The workload's activation setup and whether the first layer's input needs a gradient come from the estimator itself
(``training_context``, setup.py ``embedding_output_needs_grad``), so the composition's choice is what is checked.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.estimate.training.compose import training_context, training_workload
from llmsizer.estimate.training.setup import embedding_output_needs_grad
from llmsizer.formulas.training_activations import layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storages_by_layer, torch

peft = pytest.importorskip("peft")

pytestmark = pytest.mark.slow

B, T = 2, 128
LLAMA = {"model_type": "llama", "vocab_size": 3000, "hidden_size": 256, "intermediate_size": 640,
         "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 1024,
         "tie_word_embeddings": False}
QWEN3 = {"model_type": "qwen3", "vocab_size": 3000, "hidden_size": 256, "intermediate_size": 640,
         "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
         "max_position_embeddings": 1024, "tie_word_embeddings": False}
# Phi-3: one fused qkv_proj and one gate_up_proj (modeling_phi3.py Phi3Attention, Phi3MLP): one adapter, one input
PHI3 = {"model_type": "phi3", "vocab_size": 3000, "hidden_size": 256, "intermediate_size": 640, "num_hidden_layers": 3,
        "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 1024,
        "tie_word_embeddings": False, "pad_token_id": 0}
PEFT_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
              "down": "down_proj"}
FAMILY_NAMES = {"phi3": {**PEFT_NAMES, "q": "qkv_proj", "k": "qkv_proj", "v": "qkv_proj", "gate": "gate_up_proj",
                         "up": "gate_up_proj"}}
ATTN = {"q", "k", "v"}

# id: (config, targets, autocast bf16 over fp32 weights, lora dropout 0.1)
CASES: dict[str, tuple[dict[str, Any], str, bool, bool]] = {
    "q,v fp32": (LLAMA, "q,v", False, False),
    "all-linear fp32": (LLAMA, "q,k,v,o,gate,up,down", False, False),
    "o fp32": (LLAMA, "o", False, False),
    "gate,up,down fp32": (LLAMA, "gate,up,down", False, False),
    "up fp32": (LLAMA, "up", False, False),
    "down fp32": (LLAMA, "down", False, False),
    "gate fp32": (LLAMA, "gate", False, False),
    "o,up dropout fp32 (CPU noise)": (LLAMA, "o,up", False, True),
    "qwen3 q only (q_norm keeps, k_norm not)": (QWEN3, "q", False, False),
    "phi3 fused all fp32": (PHI3, "q,k,v,o,gate,up,down", False, False),
    "phi3 fused v,up dropout fp32 (one dropout per fused linear)": (PHI3, "v,up", False, True),
    "phi3 fused up,down fp32": (PHI3, "up,down", False, False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_first_layer_keeps_only_what_follows_its_first_adapter(name: str) -> None:
    cfg, targets, autocast, dropout = CASES[name]
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float32, attn="sdpa")
    names = list(dict.fromkeys(FAMILY_NAMES.get(cfg["model_type"], PEFT_NAMES)[x] for x in targets.split(",")))
    model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=names, lora_dropout=0.1 if dropout else 0.0))
    model.train()
    by_layer = saved_storages_by_layer(model, model.base_model.model.model.layers)
    ids = random_ids(cfg["vocab_size"], B, T)
    ctx_ac = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else torch.autocast("cpu", enabled=False)
    with ctx_ac:
        model(input_ids=ids, labels=ids, use_cache=False)

    spec = spec_from_config(cfg, name=name)
    w = training_workload(dict(method="lora", rank=8, targets=targets, micro_batch=B, seq_len=T, device="cpu",
                               precision="bf16-mixed" if autocast else "fp32", base_dtype="fp32",
                               lora_dropout="per-module" if dropout else "none"))
    ctx = training_context(spec, w)
    assert not embedding_output_needs_grad(w, ctx.lora)
    predicted = [sum(t.bytes for t in layer_saved_terms(spec, i, ctx.act, input_grad=i > 0))
                 for i in range(spec.num_layers)]
    rotary_layer = 0 if ATTN & set(targets.split(",")) else 1
    predicted[rotary_layer] += 2 * T * spec.head_dim * 4
    unit = B * T * spec.hidden_size * 4
    print(f"\n[{name}] saved per layer {[round(by_layer[i] / unit, 3) for i in range(spec.num_layers)]} [t, h] units; "
          f"terms {[round(p / unit, 3) for p in predicted]}")
    assert [by_layer[i] for i in range(spec.num_layers)] == predicted


@pytest.mark.parametrize("fields", [dict(method="full"), dict(modules_to_save="embed"), dict(targets="embed,q,v"),
                                    dict(grad_checkpointing="full")])
def test_the_first_layer_input_needs_a_gradient(fields: dict[str, Any]) -> None:
    """A trained embedding (full training, PEFT modules_to_save, a LoRA adapter on it), or transformers' checkpointing,
    which calls ``enable_input_require_grads`` (modeling_utils.py 5.24.0 lines 3190-3198): checked on the real
    objects, the embedding's output of a PEFT model."""
    spec = spec_from_config(LLAMA, name="llama")
    base = dict(method="lora", rank=8, targets="q,v", micro_batch=1, seq_len=16, device="cpu", precision="fp32")
    w = training_workload({**base, **fields})
    ctx = training_context(spec, w)
    torch.manual_seed(0)
    model = build(LLAMA, device="cpu", dtype=torch.float32, attn="sdpa")
    if fields.get("grad_checkpointing"):
        model.gradient_checkpointing_enable()
    if w.method != "full":
        save = ["embed_tokens"] if w.modules_to_save else None
        tm = [("embed_tokens" if x == "embed" else PEFT_NAMES[x]) for x in w.targets]
        model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=tm, modules_to_save=save))
    seen: list[bool] = []
    model.get_input_embeddings().register_forward_hook(lambda m, a, out: seen.append(out.requires_grad))
    model.train()
    model(input_ids=random_ids(LLAMA["vocab_size"], 1, 16), use_cache=False)
    assert seen == [True]
    assert embedding_output_needs_grad(w, ctx.lora)
