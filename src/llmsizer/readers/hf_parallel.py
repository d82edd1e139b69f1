"""config.json of the parallel-block families -> ModelSpec: Falcon (``falcon``), Phi-1/1.5/2 (``phi``), GPT-NeoX /
Pythia / StableLM-Alpha (``gpt_neox``), StableLM-2 / StableLM-3B-4E1T (``stablelm``, parallel or sequential).

Each layer computes attention and MLP from the same input and adds both to the residual (``ModelSpec.parallel_block``;
the GPT-J / PaLM parallel formulation, Chowdhery et al. 2022, arXiv 2204.02311, section 2). What each transformers
5.24 definition builds (models/<type>/modeling_<type>.py):

- Falcon (``FalconDecoderLayer``, ``FalconAttention``, ``FalconMLP``): ``query_key_value`` one linear of
  (heads + 2 kv_heads) x head_dim outputs, kv_heads = 1 with ``multi_query`` (Falcon-7B), ``num_kv_heads`` with
  ``new_decoder_architecture`` (Falcon-40B/180B), else heads; ``dense``, ``dense_h_to_4h`` / ``dense_4h_to_h``
  (``ffn_hidden_size``, default 4 H), all with ``bias`` (default False); GELU; LayerNorms with bias: one
  ``input_layernorm`` shared by both branches with ``parallel_attn`` (Falcon-7B), ``ln_attn`` + ``ln_mlp`` with
  ``new_decoder_architecture`` (``num_ln_in_parallel_attn`` 2, the default there), ``input_layernorm`` +
  ``post_attention_layernorm`` for a sequential block; ``ln_f``; lm_head tied (``tie_word_embeddings`` default True).
  With ``new_decoder_architecture`` ``_split_heads`` broadcasts key/value to every query head before the cache
  update, so transformers caches num_heads heads (``ModelSpec.kv_repeated_in_transformers``); vLLM and llama.cpp
  cache num_kv_heads.
- Phi (``PhiDecoderLayer``): q/k/v_proj and ``dense`` with bias, fc1/fc2 with bias, one ``input_layernorm``
  (LayerNorm) read by both branches, ``resid_dropout`` on both branch outputs, optional ``q_layernorm`` /
  ``k_layernorm`` (LayerNorm over head_dim), ``final_layernorm``; ``PhiForCausalLM.lm_head`` with bias, untied;
  rotary on ``partial_rotary_factor`` x head_dim channels.
- StableLM (``StableLmDecoderLayer``, StableLM-2 and StableLM-3B-4E1T): q/k/v_proj with ``use_qkv_bias`` (default
  False), ``o_proj`` and the gated SiLU MLP (gate/up/down_proj) without bias; ``input_layernorm`` (LayerNorm with
  bias) and, unless ``use_parallel_residual`` (default False), ``post_attention_layernorm``; ``hidden_dropout`` on the
  MLP output; final ``norm`` LayerNorm; lm_head untied (default); rotary on ``partial_rotary_factor`` (default 0.25)
  x head_dim channels. ``qk_layernorm`` (StableLM-2-12B): ``StableLmLayerNormPerHead`` on the queries and keys, one
  bias-free LayerNorm over head_dim per head (``ModelSpec.qk_norm`` "each_head").
- GPT-NeoX (``GPTNeoXLayer``): ``query_key_value`` [3 H, H] and ``dense`` with ``attention_bias`` (default True),
  ``dense_h_to_4h`` / ``dense_4h_to_h`` with bias, ``input_layernorm`` and ``post_attention_layernorm`` (both read
  the layer input with ``use_parallel_residual``), ``final_layer_norm``, ``embed_out`` untied; rotary on
  ``rotary_pct`` x head_dim channels.

Model code is never imported or run; absent keys take the configuration class's default
(``catalog/data/config_defaults.json``), named in the spec's notes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InputError, UnsupportedArchitectureError
from ..numbers import Range, check_number
from ..specs import ModelSpec
from .hf_config import _Cfg, dropout_on, rope_scaling_of, rotary_dim_of

_dropout = dropout_on  # the one dropout-probability check (readers/hf_config.py)


def _flag(c: _Cfg, key: str, default: bool) -> bool:
    v = c.get(key, default)
    if not isinstance(v, bool):
        raise InputError(f"{key} ({c.where}): expected true or false, got {v!r}")
    return v


def _heads(c: _Cfg, hidden: int) -> tuple[int, int]:
    heads = c.req("num_attention_heads", "n_head")
    if hidden % heads:  # each attention module computes head_dim = hidden_size // num_attention_heads
        raise InputError(f"{c.where}: hidden_size ({hidden}) is not divisible by num_attention_heads ({heads})")
    return heads, hidden // heads


def _kv_heads(c: _Cfg, heads: int) -> int:
    """``num_key_value_heads``, else one per query head; it must divide ``num_attention_heads``."""
    kv = c.get("num_key_value_heads") or heads
    if heads % kv:
        raise InputError(f"{c.where}: num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv})")
    return kv


def _falcon(c: _Cfg, hidden: int, heads: int, hd: int) -> dict[str, Any]:
    new_arch = _flag(c, "new_decoder_architecture", False)
    parallel = _flag(c, "parallel_attn", True)
    if new_arch:  # FalconAttention: qkv_out_dim = (num_kv_heads * 2 + num_attention_heads) * head_dim
        kv = c.req("num_kv_heads", "n_head_kv")
        norms = c.get("num_ln_in_parallel_attn") or 2  # FalconDecoderLayer: None -> 2 with the new architecture
        if norms not in (1, 2):
            raise InputError(f"num_ln_in_parallel_attn ({c.where}): expected 1 or 2, got {norms!r}")
        parallel = True  # the new architecture always adds both branches to the residual
    else:
        kv = 1 if _flag(c, "multi_query", True) else heads
        norms = 1 if parallel else 2
    if heads % kv:
        raise InputError(f"{c.where}: num_attention_heads ({heads}) is not a multiple of num_kv_heads ({kv})")
    bias = _flag(c, "bias", False)
    inter = c.get("ffn_hidden_size") or 4 * hidden
    check_number(inter, "ffn_hidden_size", Range(1, 2**24, True, "a feed-forward width"), c.where)
    return dict(
        vocab_size=c.req("vocab_size"), num_layers=c.req("num_hidden_layers", "n_layer"), num_kv_heads=kv,
        intermediate_size=inter, tie_word_embeddings=bool(c.get("tie_word_embeddings", True)), mlp_gated=False,
        mlp_bias=bias, attention_qkv_bias=bias, attention_out_bias=bias, norm_kind="layernorm",
        norms_per_layer=norms, parallel_block=parallel, fused_qkv=True,
        kv_repeated_in_transformers=new_arch and kv != heads, kv_expanded_in_attention=new_arch and kv != heads,
        math_attention=not new_arch and kv != heads, attention_mask_materialised=True)


def _phi(c: _Cfg, hidden: int, heads: int, hd: int) -> dict[str, Any]:
    kv = _kv_heads(c, heads)
    act = c.get("hidden_act", "gelu_new")
    return dict(
        vocab_size=c.req("vocab_size"), num_layers=c.req("num_hidden_layers"), num_kv_heads=kv,
        intermediate_size=c.req("intermediate_size"), tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        mlp_gated=False, mlp_bias=True, attention_qkv_bias=True, attention_out_bias=True, norm_kind="layernorm",
        norms_per_layer=1, parallel_block=True, lm_head_bias=True,
        qk_norm="per_head" if _flag(c, "qk_layernorm", False) else "none",
        rotary_dim=(rot := rotary_dim_of(c, hd, ("partial_rotary_factor",), required=True)), attention_output_copy=rot < hd,
        mlp_act_python=act == "gelu_new",
        residual_dropout=_dropout(c, "resid_pdrop"))


def _gpt_neox(c: _Cfg, hidden: int, heads: int, hd: int) -> dict[str, Any]:
    bias = _flag(c, "attention_bias", True)
    act = c.get("hidden_act", "gelu")
    return dict(
        vocab_size=c.req("vocab_size"), num_layers=c.req("num_hidden_layers"), num_kv_heads=heads,
        intermediate_size=c.req("intermediate_size"), tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        mlp_gated=False, mlp_bias=True, attention_qkv_bias=bias, attention_out_bias=bias, norm_kind="layernorm",
        norms_per_layer=2, parallel_block=_flag(c, "use_parallel_residual", True), fused_qkv=True,
        value_view_of_qkv=True,
        rotary_dim=(rot := rotary_dim_of(c, hd, ("rotary_pct", "partial_rotary_factor"), required=True)), attention_output_copy=rot < hd,
        mlp_act_python=act == "gelu_new",
        residual_dropout=_dropout(c, "hidden_dropout"))


def _stablelm(c: _Cfg, hidden: int, heads: int, hd: int) -> dict[str, Any]:
    kv = _kv_heads(c, heads)
    parallel = _flag(c, "use_parallel_residual", False)
    return dict(
        vocab_size=c.req("vocab_size"), num_layers=c.req("num_hidden_layers"), num_kv_heads=kv,
        intermediate_size=c.req("intermediate_size"), tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        mlp_gated=True, mlp_bias=False, attention_qkv_bias=_flag(c, "use_qkv_bias", False), attention_out_bias=False,
        norm_kind="layernorm", norms_per_layer=1 if parallel else 2, parallel_block=parallel,
        qk_norm="each_head" if _flag(c, "qk_layernorm", False) else "none",
        rotary_dim=(rot := rotary_dim_of(c, hd, ("partial_rotary_factor",), required=True)), attention_output_copy=rot < hd,
        residual_dropout=_dropout(c, "hidden_dropout"))


# model_type -> (its layout's fields, the flag refused before anything is read and why)
_FAMILIES: dict[str, tuple[Callable[[_Cfg, int, int, int], dict[str, Any]], str, str]] = {
    "falcon": (_falcon, "alibi",
               "Falcon with alibi: true (the Falcon-RW models: ALiBi attention biases instead of rotary) is not "
               "supported; only the rotary Falcon models (alibi: false)"),
    "phi": (_phi, "", ""),
    "gpt_neox": (_gpt_neox, "", ""),
    "stablelm": (_stablelm, "", ""),
}


def parallel_spec(cfg: dict[str, Any], model_type: str, *, name: str, where: str, source: str = "",
                  published_params: int | None = None) -> ModelSpec:
    """config.json of a parallel-block family (``model_type`` falcon, phi, gpt_neox or stablelm) -> ModelSpec."""
    layout, refused, why = _FAMILIES[model_type]
    c = _Cfg(cfg, model_type, where)
    if refused and _flag(c, refused, False):
        raise UnsupportedArchitectureError(f"{where}: {why}")
    hidden = c.req("hidden_size")
    heads, hd = _heads(c, hidden)
    fields = layout(c, hidden, heads, hd)
    return ModelSpec(name=name, model_type=model_type, hidden_size=hidden, num_heads=heads, head_dim=hd, **fields,
                     max_position_embeddings=c.get("max_position_embeddings"), rope_scaling=rope_scaling_of(c),
                     torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype"),
                     published_params=published_params, source=source, notes=tuple(c.used_defaults))
