"""torchtune's MultiHeadAttention expands K and V to every query head before SDPA / FlexAttention
(the torchtune framework profile's model rule 'gqa', catalog/data/frameworks.json, applied by
estimate/framework.py: ``kv_expanded_in_attention``), issue #12.

Independent truth: the distinct non-parameter, non-buffer storages autograd saves (``saved_tensors_hooks``) in the
attention of one decoder layer (its input requiring a gradient, every weight trained) during a bf16 forward on the
CPU, torch 2.13, B=2 sequences of T=128 tokens, hidden 256, 8 query heads of 32. torchtune is not installed here,
so its lines are written with torch operators, in the order of each commit the validation rows cite:

- @0217d44c2 / @20747cd87 (torchtune/modules/attention.py lines 166-214, the 2024-04/05 rows): q/k/v projections,
  K and V viewed (b, s, n_kv, 1, h_d), ``expand`` to (b, s, n_kv, q_per_kv, h_d) (lines 182-184), ``reshape`` to
  (b, s, n_h, h_d) (lines 189-191: merging a stride-0 dim, a copy), RoPE on q and on the expanded k (lines 194-195),
  transpose, SDPA with ``is_causal`` (lines 207-214);
- @30b8519 (lines 258-304, the Llama 3.1 table): RoPE on k at its own width (line 265), then view, expand,
  reshape (lines 272-283: the copy), transpose, ``_attention_call``;
- @1814feb / @bd2a0fc (lines 262-299, the optimization-flags table): RoPE on k at its own width, transpose, then
  ``k.unsqueeze(2).expand(b, n_kv, q_per_kv, -1, h_d).flatten(1, 2)`` (lines 287-290: ``flatten`` merging the
  stride-0 dim with n_kv, a copy), ``_attention_call``.

RoPE is torchtune's RotaryPositionalEmbeddings (position_embeddings.py @1814feb lines 95-122: ``x.float()``, the
products with the cache buffer, ``torch.stack``, ``type_as(x)``), which saves only its cache; the output goes through
``transpose(1, 2).contiguous().view(b, s, -1)`` into output_proj (attention.py @1814feb line 302).

Measured (bytes of q, k, v, output and log-sum-exp; the formula's terms with the torchtune layout / with the
transformers layout): GQA 8/2 at every commit 532,480 / 532,480 / 335,872 (K and V saved at 8 heads:
2 t (q_w - kv_w) c = 196,608 B more). MQA 8/1 @1814feb and @30b8519: expanding and reshaping a size-1 dim is a view
(stride 0), nothing is copied, K and V stay one head wide: 303,104, the transformers layout's count, which the
torchtune layout keeps for MQA (@0217d44c2 RoPE on the expanded k makes K alone q-wide, 417,792: no row runs it).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from llmsizer.estimate.framework import with_framework  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs import TrainingWorkload  # noqa: E402
from oracle_utils import saved_storages  # noqa: E402

B, T, H, HEADS, HD = 2, 128, 256, 8, 32
BF = dict(dtype=torch.bfloat16)
ATTENTION_TERMS = ("attention q, k, v, output", "attention log-sum-exp")  # what SDPA and output_proj keep


def _spec(kv: int, torchtune: bool) -> Any:
    cfg = dict(model_type="llama", hidden_size=H, intermediate_size=688, num_hidden_layers=3, num_attention_heads=HEADS,
               num_key_value_heads=kv, vocab_size=3000, max_position_embeddings=512)
    spec = spec_from_config(cfg, name="torchtune-tiny")
    return with_framework(spec, TrainingWorkload(framework="torchtune"))[0] if torchtune else spec


def _attention_terms(kv: int, torchtune: bool) -> int:
    """The formula's attention terms (q, k, v, output; log-sum-exp) for one middle layer, full fine-tune in bf16."""
    st = ActivationSetup(batch=B, seq=T, residual=2, compute=2, expert=2, full=True, attention="sdpa")
    return sum(t.bytes for t in layer_saved_terms(_spec(kv, torchtune), 1, st) if t.name in ATTENTION_TERMS)


def _rope(x: Any, cache: Any) -> Any:
    """torchtune RotaryPositionalEmbeddings.forward (position_embeddings.py @1814feb lines 95-122)."""
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    c = cache[: x.size(1)].view(-1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * c[..., 0] - xs[..., 1] * c[..., 1],
                       xs[..., 1] * c[..., 0] + xs[..., 0] * c[..., 1]], -1)
    return out.flatten(3).type_as(x)


def _measured(kv: int, commit: str) -> int:
    torch.manual_seed(0)
    qpk = HEADS // kv
    w = {n: (torch.randn(o, H, **BF) * 0.02).requires_grad_() for n, o in
         (("q", HEADS * HD), ("k", kv * HD), ("v", kv * HD), ("o", H))}
    cache = torch.randn(512, HD // 2, 2)  # the module's rope cache buffer (fp32)
    x = torch.randn(B, T, H, **BF, requires_grad=True)

    def attention() -> Any:
        q, k, v = F.linear(x, w["q"]), F.linear(x, w["k"]), F.linear(x, w["v"])
        if commit == "0217d44c2":  # lines 176-200
            q = q.view(B, T, kv, qpk, HD)
            k = k.view(B, T, kv, 1, HD).expand(B, T, kv, qpk, HD)
            v = v.view(B, T, kv, 1, HD).expand(B, T, kv, qpk, HD)
            q, k, v = (t.reshape(B, T, -1, HD) for t in (q, k, v))
            q, k = _rope(q, cache), _rope(k, cache)
        elif commit == "30b8519":  # lines 232-287
            q = _rope(q.view(B, T, HEADS, HD), cache)
            k = _rope(k.view(B, T, -1, HD), cache).view(B, T, kv, 1, HD).expand(B, T, kv, qpk, HD)
            v = v.view(B, T, kv, 1, HD).expand(B, T, kv, qpk, HD)
            k, v = k.reshape(B, T, -1, HD), v.reshape(B, T, -1, HD)
        else:  # 1814feb / bd2a0fc, lines 234-290: expand after the transpose
            q = _rope(q.view(B, T, HEADS, HD), cache)
            k = _rope(k.view(B, T, -1, HD), cache)
            v = v.view(B, T, -1, HD)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if commit == "1814feb":
            k = k.unsqueeze(2).expand(B, kv, qpk, -1, HD).flatten(1, 2)
            v = v.unsqueeze(2).expand(B, kv, qpk, -1, HD).flatten(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.linear(out.transpose(1, 2).contiguous().view(B, T, -1), w["o"])

    saved, hooks = saved_storages({t.untyped_storage()._cdata for t in [*w.values(), cache, x]})
    with hooks:
        attention()
    return sum(saved.values())


@pytest.mark.parametrize("commit", ["0217d44c2", "30b8519", "1814feb"])
def test_torchtune_gqa_saves_expanded_kv(commit):
    """GQA: SDPA keeps K and V at every query head's width, as the torchtune layout counts."""
    measured = _measured(2, commit)
    assert _attention_terms(2, torchtune=True) == measured
    # the transformers layout (K/V at their own width: enable_gqa) misses 2 t (q_w - kv_w) c
    assert measured - _attention_terms(2, torchtune=False) == 2 * B * T * (HEADS - 2) * HD * 2


def test_torchtune_mqa_expand_is_a_view():
    """MQA @1814feb / @30b8519: one K/V head expanded and flattened is a stride-0 view, no copy: K/V stay one head wide."""
    assert _attention_terms(1, torchtune=True) == _measured(1, "1814feb") == _attention_terms(1, torchtune=False)
    assert _measured(1, "30b8519") == _attention_terms(1, torchtune=True)
    # @0217d44c2 RoPE runs on the expanded k: K alone q-wide, V a view (no torchtune row is MQA)
    assert _measured(1, "0217d44c2") - _attention_terms(1, torchtune=True) == B * T * (HEADS - 1) * HD * 2


def test_torchtune_layout_leaves_mha_alone():
    assert not _spec(HEADS, torchtune=True).kv_expanded_in_attention
    assert _spec(2, torchtune=True).kv_expanded_in_attention and not _spec(1, torchtune=True).kv_expanded_in_attention
