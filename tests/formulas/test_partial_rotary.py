"""Partial rotary (``partial_rotary_factor`` / ``rotary_pct``) against the real transformers modules, on CPU.

Independent truth: for each family with a partial rotary in the catalog (Qwen3-Next 0.25, GLM-4.5 0.5, Phi-4-mini
0.75, StableLM 2 0.25, Phi-2 0.4, GPT-NeoX / Pythia 0.25), a tiny transformers 5.24 config of that family with the
factor set, its own rotary module (``*RotaryEmbedding``: the cos / sin tables ``apply_rotary_pos_emb`` rotates by)
and, where the function slices and concatenates itself (Qwen3-Next, GLM-4.5, Phi-3), the family's
``apply_rotary_pos_emb`` run on random q and k: which channels of each head it changes, and the bytes of the aten ops
it dispatches (tests/formulas/test_elementwise_traffic.py's counter: every op not a view). llmsizer reads the
same config dict (readers/hf_config.py ``rotary_dim_of``, the one reading of the factor).
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_elementwise_traffic import _traced_bytes  # noqa: E402

from llmsizer.formulas.elementwise_traffic import model_layer_widths, rotary_forward_bytes  # noqa: E402
from llmsizer.models import load_model  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

_GQA = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2, vocab_size=256,
            intermediate_size=64)
# (config class, module, rotary class, config, whether apply_rotary_pos_emb slices and concatenates itself)
CASES: dict[str, tuple[str, str, str, dict[str, Any], bool]] = {
    "qwen3_next": ("Qwen3NextConfig", "qwen3_next", "Qwen3NextRotaryEmbedding",
                   dict(_GQA, head_dim=32, partial_rotary_factor=0.25, num_hidden_layers=4, moe_intermediate_size=32,
                        shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16,
                        linear_value_head_dim=16), True),
    "glm4_moe": ("Glm4MoeConfig", "glm4_moe", "Glm4MoeRotaryEmbedding",
                 dict(_GQA, head_dim=32, partial_rotary_factor=0.5, moe_intermediate_size=32, n_routed_experts=4,
                      num_experts_per_tok=2, first_k_dense_replace=1), True),
    "phi3": ("Phi3Config", "phi3", "Phi3RotaryEmbedding", dict(_GQA, partial_rotary_factor=0.75, pad_token_id=0,
                                                               eos_token_id=1, bos_token_id=1), True),
    "phi3_full": ("Phi3Config", "phi3", "Phi3RotaryEmbedding", dict(_GQA, pad_token_id=0, eos_token_id=1,
                                                                    bos_token_id=1), True),
    "stablelm": ("StableLmConfig", "stablelm", "StableLmRotaryEmbedding", dict(_GQA, partial_rotary_factor=0.25),
                 False),
    "phi": ("PhiConfig", "phi", "PhiRotaryEmbedding", dict(_GQA, num_key_value_heads=4, partial_rotary_factor=0.4),
            False),
    "gpt_neox": ("GPTNeoXConfig", "gpt_neox", "GPTNeoXRotaryEmbedding",
                 dict(_GQA, num_key_value_heads=4, rotary_pct=0.25), False),
}
TOKENS = 16


def _case(case: str) -> tuple[Any, Any, Any, Any]:
    conf_cls, mod, rot_cls, cfg, _ = CASES[case]
    conf = getattr(transformers, conf_cls)(**cfg)
    module = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
    with torch.no_grad():
        cos, sin = getattr(module, rot_cls)(conf)(torch.zeros(1, TOKENS, 1, dtype=torch.bfloat16),
                                                 torch.arange(TOKENS)[None])
    return conf, module, cos.to(torch.bfloat16), sin.to(torch.bfloat16)


@pytest.mark.parametrize("case", list(CASES))
def test_rotated_channels_are_the_modules(case: str) -> None:
    """The rotated channels of each head llmsizer reads from the config are the width of the family's cos / sin
    tables, and where the family's ``apply_rotary_pos_emb`` slices itself, exactly the channels it changes (the rest
    pass through bit for bit). Before: Qwen3-Next, GLM-4.5 and Phi-4-mini read no factor (all 256 / 128 / 128
    channels rotated)."""
    conf, module, cos, sin = _case(case)
    spec = spec_from_config(conf.to_dict(), name=case)
    rotated = spec.rotary_dim or spec.head_dim
    assert cos.shape[-1] == rotated
    if CASES[case][4]:
        torch.manual_seed(0)
        q = torch.randn(1, TOKENS, spec.num_heads, spec.head_dim, dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(1, TOKENS, spec.num_kv_heads, spec.head_dim, dtype=torch.bfloat16).transpose(1, 2)
        q_out, k_out = module.apply_rotary_pos_emb(q, k, cos, sin)
        changed = [bool((q_out[..., i] != q[..., i]).any()) for i in range(spec.head_dim)]
        assert changed == [True] * rotated + [False] * (spec.head_dim - rotated)
        assert torch.equal(k_out[..., rotated:], k[..., rotated:])


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][4]])
def test_rotary_bytes_equal_the_traced_ops(case: str) -> None:
    """Eq. (E1r) (formulas/elementwise_traffic.py ``rotary_forward_bytes``) per token, against the bytes of the aten
    ops the family's ``apply_rotary_pos_emb`` dispatches on bf16 q and k: the rotated channels' products, the cos /
    sin reads and the concatenation of the pass-through channels (Phi-3's even at full rotary)."""
    conf, module, cos, sin = _case(case)
    spec = spec_from_config(conf.to_dict(), name=case)
    q = torch.randn(1, TOKENS, spec.num_heads, spec.head_dim, dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(1, TOKENS, spec.num_kv_heads, spec.head_dim, dtype=torch.bfloat16).transpose(1, 2)
    traced = _traced_bytes(lambda: module.apply_rotary_pos_emb(q, k, cos, sin))
    layer = spec.rotary_layers.index(True)
    assert rotary_forward_bytes(model_layer_widths(spec, layer), 2) * TOKENS == traced
    # the case discriminates: the whole head's rotary (before) is another count
    full = 10 * 2 * (spec.num_heads + spec.num_kv_heads) * spec.head_dim + 4 * 2 * spec.head_dim
    assert full * TOKENS != traced


@pytest.mark.parametrize(("model_name", "rotated"), [("qwen3-next-80b-a3b-thinking", 64), ("glm-4.5-air", 64),
                                                      ("phi-4-mini-instruct", 96)])
def test_catalog_partial_rotary_is_read(model_name: str, rotated: int) -> None:
    """The catalog's configs state the factor (Qwen3-Next 0.25 of 256, GLM-4.5-Air 0.5 of 128, Phi-4-mini 0.75 of
    128): int(head_dim x factor) channels, as the modules' ``dim = int(head_dim * partial_rotary_factor)``."""
    spec = load_model(model_name)
    assert spec.rotary_dim == rotated


_KERNEL_BASE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                    vocab_size=128, max_position_embeddings=256, eos_token_id=None, pad_token_id=0)
KERNEL_CASES = {
    # GLM-4.5's dense layers (first_k_dense_replace covers both), StableLM 2, GPT-NeoX (Pythia)
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM",
                 dict(_KERNEL_BASE, head_dim=16, partial_rotary_factor=0.5, first_k_dense_replace=4,
                      moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(_KERNEL_BASE, partial_rotary_factor=0.25)),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(_KERNEL_BASE, num_key_value_heads=4, rotary_pct=0.25)),
}


@pytest.mark.parametrize("case", list(KERNEL_CASES))
def test_partial_rotary_decode_layer_kernels(case: str) -> None:
    """A partial rotary's two pass-through ``cat`` kernels (q and k) per layer: one decode step's kernels per layer
    (a 2-layer tiny model's ``generate()`` step less a 1-layer one's, counted by tests/formulas/
    test_inference_kernels.py's dispatch counter) equal eq. K4's per layer (estimate/launch.py ``layer_code``).
    Before: 2 short for each (40 of 42, 26 of 28, 22 of 24)."""
    from test_inference_kernels import _counted

    from llmsizer.estimate.launch import inference_kernels

    conf_cls, model_cls, cfg = KERNEL_CASES[case]
    steps, est = [], []
    for layers in (1, 2):
        torch.manual_seed(0)
        conf = getattr(transformers, conf_cls)(**cfg, num_hidden_layers=layers, attn_implementation="sdpa")
        model = getattr(transformers, model_cls)(conf).to(torch.bfloat16).eval()
        ids = torch.randint(1, cfg["vocab_size"], (1, 8))

        def gen(n: int, model: Any = model, ids: Any = ids) -> Any:
            return lambda: model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                          min_new_tokens=n, do_sample=False)

        steps.append((_counted(gen(8)) - _counted(gen(4))) / 4)
        est.append(inference_kernels(spec_from_config(model.config.to_dict(), name=f"tiny-{case}-{layers}"),
                                     half=True))
    assert steps[1] - steps[0] == est[1] - est[0]
