"""litgpt's own modules (validation_cases.litgpt_attention_layout; formulas/training_activations.py eqs. N3, Z1 and the
``kv_expanded_in_attention`` / ``value_view_of_qkv`` / ``attention_output_copy`` terms) against what autograd really
saves, issue #12 (the litgpt config-hub rows PM1100-PM1145).

Independent truth: the distinct non-parameter, non-buffer storages autograd saves (``saved_tensors_hooks``) in one
decoder block (its input requiring a gradient, as every block after the first) during a bf16 forward on the CPU,
torch 2.13, B=2 sequences of T=256 tokens, hidden 256, 8 heads of 32, SwiGLU width 688:

- ``test_litgpt_block_*``: litgpt's real ``litgpt.lora.GPT`` / ``litgpt.model.GPT`` at commit 00af8b0d (skipped where
  litgpt is not installed: it needs lightning, which CI does not install). Measured in a separate venv with the
  00af8b0d source tree (torch 2.13.0+cpu, lightning 2.4.0), bytes of one block, saved / terms: GQA 8/2 LoRA q+v
  4,839,424 / 4,839,424; MHA LoRA q+v 5,560,320 / 5,560,320; MQA LoRA q+v 4,872,192 / 4,872,192 (V a stride-0
  view of the fused output); GQA every target with dropout 0.05 7,796,736 / 7,796,736; GQA full 6,772,736 /
  6,772,736; MHA full 7,297,024 / 7,297,024. With the transformers layout the terms were 0.85 (GQA q+v), 0.81 (MHA
  q+v), 0.95 (GQA all), 0.83 (GQA full) and 0.82 (MHA full) of it.
- ``test_plain_torch_block_*``: the same lines written here with torch operators (so CI checks the mechanisms):
  RMSNorm ``(x.float() * rsqrt(mean(x^2) + eps) * weight.float()).to(dtype)`` (litgpt/model.py lines 564-571); the
  fused q/k/v output viewed as (B, groups, q_per_kv + 2, T, hs), split, K/V expanded to every head and reshaped
  (lines 247-262); rotary by ``torch.cat`` (lines 264-267, 502-515); SDPA with ``is_causal`` (line 319); the
  head-major output reshaped for ``proj`` (line 294); the LoRA q/k/v adapter padded to the fused width with
  ``index_copy_`` (litgpt/lora.py lines 329-346, 428-434).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from llmsizer.formulas.lora import adapted_roles  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.validation_cases import litgpt_attention_layout  # noqa: E402
from oracle_utils import saved_storages  # noqa: E402

B, T, H, HS, FFN, V, R = 2, 256, 256, 32, 688, 3000, 8
QV = ("q", "v")
ALL = ("q", "k", "v", "o", "gate", "up", "down")


def _terms(heads: int, groups: int, targets: tuple[str, ...], dropout: bool = False) -> int:
    """Bytes layer_saved_terms counts for one middle block (bf16, CPU dropout noise in bf16)."""
    cfg = dict(model_type="llama", hidden_size=H, intermediate_size=FFN, num_hidden_layers=3, num_attention_heads=heads,
               num_key_value_heads=groups, vocab_size=V, max_position_embeddings=512)
    spec = litgpt_attention_layout(spec_from_config(cfg, name="litgpt-tiny"))
    full = not targets
    st = ActivationSetup(batch=B, seq=T, residual=2, compute=2, expert=2, full=full,
                         adapted=frozenset() if full else adapted_roles(spec, targets), rank=0 if full else R,
                         attention="sdpa", dropout="fused-qkv" if dropout else "none", dropout_mask=2)
    return sum(t.bytes for t in layer_saved_terms(spec, 1, st))


def _saved_by(fn: Any, skip: set[int]) -> int:
    saved, hooks = saved_storages(skip)
    with hooks:
        fn()
    return sum(saved.values())


# -- litgpt itself (skipped unless installed) ---------------------------------------------------------------------

def _litgpt_block(heads: int, groups: int, targets: tuple[str, ...], dropout: float = 0.0) -> int:
    pytest.importorskip("litgpt")
    from litgpt import lora as lit_lora
    from litgpt import model as lit_model

    lora = dict(lora_r=R, lora_alpha=16, lora_dropout=dropout, lora_query="q" in targets, lora_key="k" in targets,
                lora_value="v" in targets, lora_projection="o" in targets, lora_mlp="gate" in targets)
    cfg: dict[str, Any] = dict(name="tiny", block_size=512, vocab_size=V, padded_vocab_size=V, n_layer=1, n_embd=H,
                               n_head=heads, n_query_groups=groups, head_size=HS, bias=False, rotary_percentage=1.0,
                               parallel_residual=False, norm_class_name="RMSNorm", norm_eps=1e-5,
                               mlp_class_name="LLaMAMLP", intermediate_size=FFN)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        if targets:
            model = lit_lora.GPT(lit_lora.Config(**cfg, **lora))
            lit_lora.mark_only_lora_as_trainable(model)
        else:
            model = lit_model.GPT(lit_model.Config(**cfg))
    finally:
        torch.set_default_dtype(torch.float32)
    block = model.transformer.h[0]
    x = torch.randn(B, T, H, dtype=torch.bfloat16, requires_grad=True)
    cos, sin = model.cos[:T], model.sin[:T]
    block(x, cos, sin, None, None)  # registers LoRAQKVLinear's lazy lora_ind buffer
    skip = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers(), x, cos, sin]}
    return _saved_by(lambda: block(x, cos, sin, None, None), skip)


@pytest.mark.parametrize(("heads", "groups", "targets", "dropout"), [
    (8, 2, QV, 0.0), (8, 8, QV, 0.0), (8, 1, QV, 0.0), (8, 2, ALL, 0.05), (8, 2, (), 0.0), (8, 8, (), 0.0)],
    ids=["gqa-lora-qv", "mha-lora-qv", "mqa-lora-qv", "gqa-lora-all-dropout", "gqa-full", "mha-full"])
def test_litgpt_block_saved_bytes(heads, groups, targets, dropout):
    measured = _litgpt_block(heads, groups, targets, dropout)
    assert _terms(heads, groups, targets, dropout > 0) == measured


# -- the same lines in plain torch (CI) ----------------------------------------------------------------------------

def _rms(x: Any, w: Any) -> Any:
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-5) * w.float()).to(x.dtype)


def _rope(x: Any, cos: Any, sin: Any) -> Any:
    half = x.size(-1) // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _plain_block(heads: int, groups: int, targets: tuple[str, ...]) -> int:
    torch.manual_seed(0)
    bf = dict(dtype=torch.bfloat16)
    full = not targets
    q_per_kv = heads // groups
    widths = {"q": heads * HS, "k": groups * HS, "v": groups * HS}
    qkv_out = sum(widths.values())
    p = {n: torch.randn(*s, **bf, requires_grad=full) * 0.02 for n, s in dict(
        n1=(H,), n2=(H,), qkv=(qkv_out, H), proj=(H, heads * HS), fc1=(FFN, H), fc2=(FFN, H), down=(H, FFN)).items()}
    p = {n: (t.detach().requires_grad_(full) if n not in ("n1", "n2") else (t + 1).detach().requires_grad_(full))
         for n, t in p.items()}
    enabled = [r for r in ("q", "k", "v") if r in targets]
    a = torch.randn(R * len(enabled), H, **bf, requires_grad=True)
    bmat = torch.randn(sum(widths[r] for r in enabled), R, **bf, requires_grad=True)
    # column indices of the enabled parts in the grouped (q.., k, v) layout of the fused output
    per = (q_per_kv + 2) * HS
    cols = [g * per + off for g in range(groups) for r, lo, n in (("q", 0, q_per_kv * HS), ("k", q_per_kv * HS, HS),
                                                                    ("v", (q_per_kv + 1) * HS, HS))
            if r in enabled for off in range(lo, lo + n)]
    ind = torch.tensor(cols)
    x = torch.randn(B, T, H, **bf, requires_grad=True)
    cos, sin = torch.randn(T, HS, **bf), torch.randn(T, HS, **bf)

    def block() -> Any:
        xn = _rms(x, p["n1"])
        qkv = F.linear(xn, p["qkv"])
        if enabled:
            # one rank-r slice of lora_A's output per enabled part (litgpt's grouped conv1d, lora.py lines 370-385)
            parts = F.linear(xn, a).chunk(len(enabled), dim=-1)
            after_b = torch.cat([F.linear(c, w) for c, w in
                                 zip(parts, bmat.split([widths[r] for r in enabled]), strict=True)], dim=-1)
            if len(enabled) < 3:
                after_b = xn.new_zeros(B, T, qkv_out).index_copy_(-1, ind, after_b)
            qkv = qkv + after_b * 2.0
        qkv = qkv.view(B, T, groups, q_per_kv + 2, HS).permute(0, 2, 3, 1, 4)
        q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
        if groups != heads:
            k = k.expand(B, groups, q_per_kv, T, HS)
            v = v.expand(B, groups, q_per_kv, T, HS)
        q, k, v = (t.reshape(B, -1, T, HS) for t in (q, k, v))
        q = torch.cat((_rope(q, cos, sin), q[..., HS:]), dim=-1)
        k = torch.cat((_rope(k, cos, sin), k[..., HS:]), dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(HS))
        h = F.linear(y.transpose(1, 2).reshape(B, T, heads * HS), p["proj"]) + x
        hn = _rms(h, p["n2"])
        return F.linear(F.silu(F.linear(hn, p["fc1"])) * F.linear(hn, p["fc2"]), p["down"]) + h

    skip = {t.untyped_storage()._cdata for t in [*p.values(), a, bmat, ind, x, cos, sin]}
    return _saved_by(block, skip)


@pytest.mark.parametrize(("heads", "groups", "targets"), [
    (8, 2, QV), (8, 8, QV), (8, 1, QV), (8, 2, ("q", "k", "v")), (8, 2, ()), (8, 8, ())],
    ids=["gqa-qv", "mha-qv", "mqa-qv", "gqa-qkv", "gqa-full", "mha-full"])
def test_plain_torch_block_saved_bytes(heads, groups, targets):
    """Plain-torch litgpt block (no LoRA on proj/MLP, no dropout) against the litgpt-layout terms."""
    assert _terms(heads, groups, targets) == _plain_block(heads, groups, targets)


def test_the_transformers_layout_undercounts_litgpt():
    """The mechanisms matter: without the litgpt layout the terms miss K/V expansion, V's view, zero_pad and N3."""
    cfg = dict(model_type="llama", hidden_size=H, intermediate_size=FFN, num_hidden_layers=3, num_attention_heads=8,
               num_key_value_heads=2, vocab_size=V, max_position_embeddings=512)
    spec = spec_from_config(cfg, name="hf")
    st = ActivationSetup(batch=B, seq=T, residual=2, compute=2, full=False, adapted=adapted_roles(spec, QV), rank=R)
    hf = sum(t.bytes for t in layer_saved_terms(spec, 1, st))
    # K/V expansion 2 t (q_w - kv_w) 2 B + zero_pad t (q_w + kv_w) 2 B + two fp32 norm weight copies
    t = B * T
    assert _terms(8, 2, QV) - hf == 2 * t * (256 - 64) * 2 + t * (256 + 64) * 2 + 2 * H * 4


# -- Gemma 2: soft-capped attention on litgpt's eager path ------------------------------------------------------------

_G2 = dict(model_type="gemma2", hidden_size=H, intermediate_size=FFN, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, head_dim=64, vocab_size=V, max_position_embeddings=512, sliding_window=4096,
           attn_logit_softcapping=50.0, final_logit_softcapping=30.0, query_pre_attn_scalar=64,
           hidden_activation="gelu_pytorch_tanh")


def _g2_terms(layer: int) -> int:
    spec = litgpt_attention_layout(spec_from_config(_G2, name="litgpt-gemma2-tiny"))
    st = ActivationSetup(batch=B, seq=T, residual=2, compute=2, expert=2, full=False, adapted=adapted_roles(spec, ALL),
                         rank=R, attention="eager")
    return sum(t.bytes for t in layer_saved_terms(spec, layer, st))


@pytest.mark.parametrize("layer", [0, 1], ids=["sliding", "global"])
def test_litgpt_gemma2_block_saved_bytes(layer):
    """litgpt's Gemma 2 block (post-norms, GemmaMLP, soft-capping 50, a 4096 window on every other layer), LoRA on
    every target: 10,752,000 B saved per block = the terms (the eager term without the kept tanh output and with the
    output copy counted twice: 9,965,568)."""
    pytest.importorskip("litgpt")
    from litgpt import lora as lit_lora

    cfg = dict(name="g2", block_size=512, vocab_size=V, padded_vocab_size=V, n_layer=2, n_embd=H, n_head=4,
               n_query_groups=2, head_size=64, bias=False, rotary_percentage=1.0, parallel_residual=False,
               norm_class_name="RMSNorm", mlp_class_name="GemmaMLP", gelu_approximate="tanh", intermediate_size=FFN,
               post_attention_norm=True, post_mlp_norm=True, attention_logit_softcapping=50.0,
               final_logit_softcapping=30.0, scale_embeddings=True, attention_scores_scalar=64,
               sliding_window_size=4096, sliding_window_layer_placing=2, lora_r=R, lora_alpha=16, lora_query=True,
               lora_key=True, lora_value=True, lora_projection=True, lora_mlp=True)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = lit_lora.GPT(lit_lora.Config(**cfg))
    finally:
        torch.set_default_dtype(torch.float32)
    lit_lora.mark_only_lora_as_trainable(model)
    block = model.transformer.h[layer]
    x = torch.randn(B, T, H, dtype=torch.bfloat16, requires_grad=True)
    cos, sin = model.cos[:T], model.sin[:T]
    block(x, cos, sin, None, None)
    skip = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers(), x, cos, sin]}
    assert _saved_by(lambda: block(x, cos, sin, None, None), skip) == _g2_terms(layer)


def test_plain_torch_softcapped_scores_keep_the_tanh_output():
    """litgpt/model.py lines 307-316 with torch operators: the scores' tanh output (c), the fp32 softmax (4) and its
    cast (c) are kept per score, on top of q, K and V: the eager term with ``attention_softcapping``."""
    heads, hd = 4, 64
    q, k, v = (torch.randn(B, heads, T, hd, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    mask = torch.ones(T, T, dtype=torch.bfloat16).triu(diagonal=1) * -1e4

    def attend() -> Any:
        scores = torch.tanh(q @ k.mT * (1 / 8) / 50.0) * 50.0 + mask
        return torch.softmax(scores, dim=-1, dtype=torch.float).to(torch.bfloat16) @ v

    skip = {t.untyped_storage()._cdata for t in (q, k, v, mask)}
    per_score = _saved_by(attend, skip) / (B * heads * T * T)
    spec = litgpt_attention_layout(spec_from_config(_G2, name="g2"))
    st = ActivationSetup(batch=B, seq=T, residual=2, compute=2, full=False, adapted=adapted_roles(spec, QV), rank=R,
                         attention="eager")
    scores = next(t for t in layer_saved_terms(spec, 1, st) if t.name == "attention scores (softmax)")
    assert per_score == 4 + 2 + 2 == scores.bytes / (B * heads * T * T)
