"""config.json of the T5 encoder-decoder families -> ModelSpec: T5 / T5 v1.1 / T0 (``t5``) and mT5 / mT0 (``mt5``).

What transformers v5.24.0 builds from these keys (``models/t5/configuration_t5.py`` ``T5Config``,
``models/t5/modeling_t5.py`` ``T5ForConditionalGeneration``; ``models/mt5/`` is the same definition):

- ``shared`` = Embedding(vocab_size, d_model), read by both stacks (``encoder.embed_tokens`` and
  ``decoder.embed_tokens`` are the same tensor);
- ``num_layers`` encoder blocks and ``num_decoder_layers`` (None: ``num_layers``) decoder blocks; each attention
  (``T5Attention``) has q/k/v [num_heads x d_kv, d_model] and o [d_model, num_heads x d_kv], no bias; the first
  block of each stack adds ``relative_attention_bias`` = Embedding(relative_attention_num_buckets, num_heads);
- the FFN (``T5DenseActDense`` / ``T5DenseGatedActDense``): ``wi`` [d_ff, d_model] + ``wo``, or with
  ``feed_forward_proj`` 'gated-<act>' ``wi_0`` + ``wi_1`` + ``wo``; no bias. ``T5Config.__post_init__`` splits
  ``feed_forward_proj`` on '-': '<act>' or 'gated-<act>', anything else is refused; 'gated-gelu' runs
  ``gelu_new`` (NewGELUActivation);
- a weight-only RMS norm (``T5LayerNorm``) before each sub-layer (2 per encoder block, 3 per decoder block) and at
  the end of each stack;
- ``lm_head`` [vocab_size, d_model], tied to ``shared`` when ``tie_word_embeddings`` (original T5; T5 v1.1, mT5 and
  T0 set it false).

Model code is never imported or run; absent keys take the configuration class's default
(``catalog/data/config_defaults.json``), named in the spec's notes.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError, ModelFileError
from ..numbers import TOKENS, Range, check_number
from ..specs import EncoderDecoderSpec, ModelSpec
from .hf_config import _Cfg
from .safe_io import shown

DROPOUT = Range(0.0, 1.0, False, "a dropout probability")


def _feed_forward_proj(c: _Cfg) -> tuple[bool, str]:
    """(gated, activation) from ``feed_forward_proj`` as ``T5Config.__post_init__`` reads it."""
    v = c.get("feed_forward_proj")
    parts = v.split("-") if isinstance(v, str) else []
    if not parts or not all(parts) or len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
        raise ModelFileError(f"feed_forward_proj ({c.where}): expected '<act>' or 'gated-<act>' "
                             f"(e.g. 'relu', 'gated-gelu'), got {shown(v)}")
    act = parts[-1]
    gated = parts[0] == "gated" and len(parts) == 2
    return gated, "gelu_new" if v == "gated-gelu" else act  # T5Config: "for backwards compatibility"


def t5_spec(cfg: dict[str, Any], *, name: str, where: str, source: str = "",
            published_params: int | None = None) -> ModelSpec:
    mt = str(cfg.get("model_type"))
    c = _Cfg(cfg, mt, where)
    enc = c.req("num_layers")
    dec = c.get("num_decoder_layers")
    if dec is None:  # T5Config: num_decoder_layers if not None else num_layers
        dec = enc
    elif not isinstance(dec, int) or isinstance(dec, bool):
        raise ModelFileError(f"{where}: 'num_decoder_layers' must be an integer, got {shown(dec)}")
    gated, act = _feed_forward_proj(c)
    rate = c.get("dropout_rate", 0.0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise InputError(f"dropout_rate ({where}): expected a dropout probability, got {shown(rate)}")
    tied = c.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise InputError(f"tie_word_embeddings ({where}): expected true or false, got {shown(tied)}")
    npos = cfg.get("n_positions")  # stated by the original T5 configs (512), absent from T5 v1.1 / mT5 / T0 / mT0
    ed = EncoderDecoderSpec(
        encoder_layers=enc, decoder_layers=dec, relative_attention_buckets=c.req("relative_attention_num_buckets"),
        relative_attention_max_distance=c.req("relative_attention_max_distance"),
        dropout=float(check_number(float(rate), "dropout_rate", DROPOUT, where)),
        n_positions=int(check_number(npos, "n_positions", TOKENS, where)) if npos is not None else None)
    heads = c.req("num_heads")
    return ModelSpec(
        name=name, model_type=mt, vocab_size=c.req("vocab_size"), hidden_size=c.req("d_model"),
        num_layers=enc + dec, num_heads=heads, num_kv_heads=heads, head_dim=c.req("d_kv"),
        intermediate_size=c.req("d_ff"), tie_word_embeddings=tied, mlp_gated=gated, mlp_bias=False,
        norm_kind="rmsnorm", norms_per_layer=2, mlp_act_python=act == "gelu_new",
        cross_attention_layers=(False,) * enc + (True,) * dec, encoder_decoder=ed,
        rope=False,  # T5Attention: relative position buckets added to the scores, no rotary (modeling_t5.py)
        torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype"),
        published_params=published_params, source=source, notes=tuple(c.used_defaults))
