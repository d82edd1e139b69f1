"""GGUF files of the parallel-block families -> the config.json fields they encode -> readers/hf_parallel.py.

llama.cpp architectures ``falcon``, ``phi2``, ``gptneox`` and ``stablelm`` are the transformers ``falcon``, ``phi``,
``gpt_neox`` and ``stablelm`` models; one reader (hf_parallel.py) holds each family's rules, so a GGUF and the config.json it was converted from
give one ModelSpec (parameters, KV heads, norms, rotary channels). What the file says, at ggml-org/llama.cpp @0024aa74:

- convert_hf_to_gguf.py ``FalconModel.set_gguf_parameters``: head_count, head_count_kv (config ``num_kv_heads``, else
  ``n_head_kv``, else 1), context_length always 2048, feed_forward_length always 4 x hidden_size; ``modify_tensors``
  reorders query_key_value to all q heads, then k, then v (the shape is unchanged). ``Phi2Model``: head_count_kv =
  head_count, feed_forward_length 4 x hidden_size, rope.dimension_count = int(partial_rotary_factor x hidden_size) //
  heads. ``GPTNeoXModel``: feed_forward_length = intermediate_size, rope.dimension_count = int(rotary_pct x head_dim),
  use_parallel_residual; no head_count_kv (llama.cpp's default is head_count). ``StableLMModel``: head_count_kv,
  feed_forward_length = intermediate_size, rope.dimension_count = int(partial_rotary_factor x head_dim),
  use_parallel_residual (True when config.json lacks the key, whose transformers default is False), per-head q/k
  LayerNorms stacked into one attn_q_norm / attn_k_norm tensor.
- llama.cpp's StableLM graph (src/models/stablelm.cpp, ``llm_build_stablelm``) runs the parallel residual exactly
  where a layer has no ffn_norm (``if (model.layers[il].ffn_norm) ... else { // parallel residual``), so that, not the
  metadata key, says which block the file holds.
- gguf-py ``constants.MODEL_TENSORS``: FALCON token_embd, output_norm, output, attn_norm, attn_norm_2, attn_qkv,
  attn_output, ffn_up, ffn_down; PHI2 the same less attn_norm_2, with attn_qkv or attn_q/attn_k/attn_v; GPTNEOX the
  same with ffn_norm. ``tensor_mapping.py``: Falcon ``ln_mlp``/``input_layernorm`` -> attn_norm, ``ln_attn`` ->
  attn_norm_2; GPT-NeoX ``post_attention_layernorm`` -> ffn_norm; Phi ``lm_head`` -> output (with its bias).
- src/llama-model.cpp ``load_tensors`` (LLM_ARCH_FALCON): ``output`` optional (absent: the token embedding is used,
  i.e. tied), ``attn_norm_2`` optional (Falcon-40B's second norm).

So the feed-forward width is read from the ffn_up shape (the converter writes 4 x hidden for Falcon and Phi whatever
the model has), the rotary channels from rope.dimension_count, and Falcon's layout from what is stored: attn_norm_2
present -> new_decoder_architecture with two norms; 1 < kv heads < heads -> new architecture, one norm; one kv head
-> Falcon-7B multi-query; kv heads = heads -> multi-head attention. Biases are seen from the ``.bias`` tensors.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..errors import ModelFileError

if TYPE_CHECKING:
    from .gguf_file import _Meta, _Table

# GGUF general.architecture -> transformers model_type read by readers/hf_parallel.py parallel_spec
ARCHITECTURES: dict[str, str] = {"falcon": "falcon", "phi2": "phi", "gptneox": "gpt_neox", "stablelm": "stablelm"}


def _rotary_fraction(meta: _Meta, head_dim: int, notes: list[str]) -> float:
    """rope.dimension_count / head_dim, nudged up by one ulp where int(head_dim x fraction) would round below it
    (hf_config.rotary_dim_of computes the channels as int(head_dim x factor))."""
    rot = meta.int_("{arch}.rope.dimension_count")
    if rot is None:
        notes.append(f"rotary on all {head_dim} head channels (no rope.dimension_count; llama.cpp's default)")
        return 1.0
    if rot > head_dim:
        raise ModelFileError(f"{meta.path}: rope.dimension_count {rot} exceeds the head size {head_dim}")
    frac = rot / head_dim
    while int(head_dim * frac) < rot:
        frac = math.nextafter(frac, 2.0)
    return frac


def config_from_gguf(meta: _Meta, t: _Table, *, vocab: int, hidden: int, layers: int, heads: int, kv: int,
                     context: int | None, notes: list[str]) -> dict[str, Any]:
    """The config.json fields of ``meta.arch``'s transformers model that the file determines (every field
    hf_parallel.py reads is given, so no configuration-class default is applied)."""
    arch, b = meta.arch, "blk.0."
    ffn = t.dim(b + "ffn_up", 1)
    if ffn is None:
        raise ModelFileError(f"{meta.path}: missing tensor '{b}ffn_up.weight'")
    declared = meta.int_("{arch}.feed_forward_length")
    if declared is not None and declared != ffn:
        notes.append(f"feed_forward_length {declared} disagrees with the {b}ffn_up shape; {ffn} used")
    tied = not t.has("output")
    if tied:
        notes.append("tie_word_embeddings=True (no output.weight tensor)")
    cfg: dict[str, Any] = {"vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers,
                           "num_attention_heads": heads, "max_position_embeddings": context,
                           "tie_word_embeddings": tied}
    head_dim = hidden // heads if heads else 0
    if arch == "falcon":
        two_norms = t.has(b + "attn_norm_2")
        new_arch = two_norms or 1 < kv < heads
        cfg.update({"model_type": "falcon", "alibi": False, "ffn_hidden_size": ffn,
                    "bias": t.has(b + "attn_qkv.bias") or t.has(b + "ffn_up.bias"),
                    "new_decoder_architecture": new_arch, "parallel_attn": True})
        if new_arch:
            cfg.update({"num_kv_heads": kv, "num_ln_in_parallel_attn": 2 if two_norms else 1})
        else:
            cfg["multi_query"] = kv == 1
    elif arch == "phi2":
        cfg.update({"model_type": "phi", "intermediate_size": ffn, "num_key_value_heads": kv,
                    "partial_rotary_factor": _rotary_fraction(meta, head_dim, notes),
                    "qk_layernorm": t.has(b + "attn_q_norm"), "hidden_act": "gelu_new", "resid_pdrop": 0.0})
    elif arch == "stablelm":  # llama.cpp's graph runs the parallel residual where a layer has no ffn_norm
        cfg.update({"model_type": "stablelm", "intermediate_size": ffn, "num_key_value_heads": kv,
                    "partial_rotary_factor": _rotary_fraction(meta, head_dim, notes),
                    "use_parallel_residual": not t.has(b + "ffn_norm"), "use_qkv_bias": t.has(b + "attn_q.bias"),
                    "qk_layernorm": t.has(b + "attn_q_norm"), "hidden_act": "silu", "hidden_dropout": 0.0})
    else:  # gptneox
        parallel = meta.get("{arch}.use_parallel_residual")
        cfg.update({"model_type": "gpt_neox", "intermediate_size": ffn,
                    "rotary_pct": _rotary_fraction(meta, head_dim, notes),
                    "use_parallel_residual": parallel if isinstance(parallel, bool) else True,
                    "attention_bias": t.has(b + "attn_qkv.bias"), "hidden_act": "gelu", "hidden_dropout": 0.0})
    return cfg
