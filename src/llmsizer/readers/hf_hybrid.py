"""config.json of a hybrid or state-space model -> ModelSpec with a per-layer schedule.

Each family's rule for which layer gets attention, a recurrent mixer (Mamba-1, Mamba-2, Gated DeltaNet), a
feed-forward block and an MoE block is the one its transformers (v5.24.0) configuration and model classes apply:

- ``qwen3_next`` (Qwen3NextConfig.__post_init__): ``layer_types`` or, absent, every ``full_attention_interval``-th
  layer (default 4) attends, the others are Gated DeltaNet; every layer has an MoE / dense MLP as Qwen2-MoE.
- ``qwen3_5_text`` / ``qwen3_5_moe_text`` (Qwen3.5 / Qwen3.6's language model, the ``text_config`` of a
  ``qwen3_5`` / ``qwen3_5_moe`` config; transformers 5.24 models/qwen3_5/modular_qwen3_5.py,
  models/qwen3_5_moe/modular_qwen3_5_moe.py): Qwen3_5TextConfig subclasses Qwen3NextConfig, so the same schedule
  (``layer_types``, else every ``full_attention_interval``-th layer attends); the attention is Qwen3NextAttention
  (output gate, per-head q/k norms), the norms Qwen3NextRMSNorm. Qwen3_5GatedDeltaNet splits Qwen3-Next's
  in_proj_qkvz into in_proj_qkv [2 Hk dk + Hv dv, H] + in_proj_z [Hv dv, H] and in_proj_ba into in_proj_b +
  in_proj_a [Hv, H] each: the same elements. ``qwen3_5_text`` has a dense Qwen3_5MLP of ``intermediate_size`` on
  every layer (no experts), ``qwen3_5_moe_text`` Qwen3-Next's sparse block (routed experts, shared expert and its
  gate) on every layer (readers/hf_config.py ``_moe``). The rotary fraction is rope_parameters'
  partial_rotary_factor, 0.25 when absent (Qwen3_5TextConfig.__post_init__ ``kwargs.setdefault``).
- ``jamba`` (JambaConfig.layers_block_type / layers_num_experts): layer i attends when
  i % attn_layer_period == attn_layer_offset, else Mamba-1; MoE when i % expert_layer_period == expert_layer_offset.
- ``falcon_h1`` (FalconH1DecoderLayer): every layer runs attention and Mamba-2 side by side, then an MLP.
- ``nemotron_h`` (NemotronHConfig.__post_init__, NemotronHBlock): one mixer per layer from ``layers_block_type``
  or the ``hybrid_override_pattern`` string (M = Mamba-2, * = attention, - = MLP, E = MoE), one norm per layer.
- ``granitemoehybrid`` (GraniteMoeHybridDecoderLayer): ``layer_types`` (legacy "mamba"/"attention") picks Mamba-2
  or attention; every layer has the shared MLP and, with num_local_experts > 0, an MoE block.
- ``mamba2`` (Mamba2Block): every layer is one norm + a Mamba-2 mixer, no attention, no MLP.
- ``llama4_text`` (Llama4TextConfig.__post_init__, Llama4TextDecoderLayer): chunked local attention on the RoPE
  layers (``no_rope_layers[i]`` = 1; default: all but every ``no_rope_layer_interval``-th), global NoPE attention
  on the others; MoE (routed experts + a shared expert of ``intermediate_size``) on ``moe_layers`` (default every
  ``interleave_moe_layer_step``-th), a dense MLP of ``intermediate_size_mlp`` elsewhere. A chunked layer caches like
  a sliding one of ``attention_chunk_size`` tokens (transformers cache_utils.py L1471-1473: "From a cache point of
  view, sliding and chunked are the same"; llama.cpp LLAMA_SWA_TYPE_CHUNKED uses the same iSWA cache), so it is a
  "sliding" layer here; the multimodal ``llama4`` wrapper is not read here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..errors import InputError, ModelFileError
from ..numbers import EXPERTS_OR_ZERO, LAYER_INDEX, LAYERS, check_number
from ..specs import ModelSpec, MoESpec, RecurrentSpec
from .hf_config import _Cfg, _moe, rope_scaling_of, rotary_dim_of
from .safe_io import shown

# legacy layer names -> the current ones (transformers configuration_utils._LEGACY_LAYER_TYPE_REMAP)
_LEGACY = {"mamba": "linear_attention", "attention": "full_attention"}
_PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}  # NemotronHConfig._pattern_to_list


def _block_types(c: _Cfg, n_layers: int | None, allowed: set[str]) -> list[str]:
    """A per-layer block-type list from ``layers_block_type`` / ``layer_types``, legacy names remapped."""
    raw = c.cfg.get("layers_block_type", c.cfg.get("layer_types"))
    if raw is None:
        return []
    if not isinstance(raw, list) or (n_layers is not None and len(raw) != n_layers) or len(raw) > LAYERS.high:
        raise ModelFileError(f"{c.where}: layer_types must be a list of one entry per layer"
                             + (f" ({n_layers})" if n_layers else "") + f", got {shown(raw)}")
    out = [_LEGACY.get(t, t) if isinstance(t, str) else t for t in raw]
    bad = [t for t in out if t not in allowed]
    if bad:
        raise ModelFileError(f"{c.where}: unknown layer type {shown(bad[0])}; expected one of {', '.join(sorted(allowed))}")
    return out


def _head(c: _Cfg, key: str) -> int | str:
    """``mamba_d_head``: 'auto' (inner width / heads) or a positive integer."""
    v = c.get(key, "auto")
    if v != "auto" and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
        raise ModelFileError(f"{c.where}: {key} must be 'auto' or a positive integer, got {shown(v)}")
    return v  # type: ignore[no-any-return]


def _mamba2(c: _Cfg, d_inner: int, heads: int, **keys: str) -> RecurrentSpec:
    """A Mamba-2 mixer (Mamba2Mixer and its copies) from the family's config key names."""
    if heads < 1 or d_inner % heads:
        raise InputError(f"{c.where}: the Mamba heads ({heads}) must divide the inner width ({d_inner})")
    return RecurrentSpec(
        kind="mamba2", d_inner=d_inner, d_state=c.req(keys["d_state"]), d_conv=c.req(keys["d_conv"]),
        num_heads=heads, n_groups=c.req(keys["n_groups"]), conv_bias=bool(c.get(keys["conv_bias"], True)),
        in_proj_bias=bool(c.get(keys["in_bias"], False)), out_proj_bias=bool(c.get(keys["out_bias"], False)),
        gated_norm=bool(c.get(keys["norm"], True)) if "norm" in keys else True, chunk_size=c.req(keys["chunk"]))


def hybrid_spec(cfg: dict[str, Any], mt: str, *, name: str, where: str, source: str,
                published_params: int | None, published_active_params: int | None) -> ModelSpec:
    """Build the ModelSpec of a hybrid / state-space ``model_type`` (module docstring for each rule)."""
    c = _Cfg(cfg, mt, where)
    hidden = c.req("hidden_size")
    fields: dict[str, Any] = {}
    if mt == "nemotron_h":
        kinds = _block_types(c, None, {"linear_attention", "full_attention", "mlp", "moe"})
        if not kinds:
            pattern = cfg.get("hybrid_override_pattern")
            if pattern is not None:
                if not isinstance(pattern, str) or not pattern or len(pattern) > LAYERS.high \
                        or set(pattern) - set(_PATTERN):
                    raise ModelFileError(f"{where}: hybrid_override_pattern must be a string of M, *, - and E, "
                                         f"got {shown(pattern)}")
                kinds = [_PATTERN[ch] for ch in pattern]
            else:  # NemotronHConfig default
                kinds = ["linear_attention", "moe", "full_attention", "mlp"]
        n_layers = len(kinds)
        heads = c.req("num_attention_heads")
        mheads = c.req("mamba_num_heads")
        rec = _mamba2(c, mheads * c.req("mamba_head_dim"), mheads, d_state="ssm_state_size",
                      d_conv="mamba_d_conv" if "mamba_d_conv" in cfg else "conv_kernel",
                      n_groups="mamba_n_groups" if "mamba_n_groups" in cfg else "n_groups",
                      conv_bias="mamba_conv_bias" if "mamba_conv_bias" in cfg else "use_conv_bias",
                      in_bias="use_bias", out_bias="use_bias",
                      # NemotronHConfig.__post_init__ takes mamba_chunk_size for chunk_size (configuration line 166)
                      chunk="mamba_chunk_size" if "mamba_chunk_size" in cfg else "chunk_size")
        # vLLM NemotronHForCausalLMConfig keeps the SSM state in the config's mamba_ssm_cache_dtype, float32 when absent
        ssm_dtype = cfg.get("mamba_ssm_cache_dtype", "float32")
        if ssm_dtype not in ("float32", "bfloat16", "float16"):
            raise ModelFileError(f"{where}: mamba_ssm_cache_dtype must be float32, bfloat16 or float16, got "
                                 f"{shown(ssm_dtype)}")
        rec = dataclasses.replace(rec, ssm_cache_dtype=ssm_dtype)
        moe = None
        if "moe" in kinds:
            moe = MoESpec(c.req("n_routed_experts"), c.req("num_experts_per_tok"), c.req("moe_intermediate_size"),
                          shared_intermediate_size=c.get("moe_shared_expert_intermediate_size") or 0,
                          expert_gated=False, shared_expert_gated=False,
                          latent_size=c.get("moe_latent_size") or 0,
                          # NemotronHTopkRouter.forward (modeling_nemotron_h.py line 774); its
                          # e_score_correction_bias always (line 770)
                          router_fp32=True, score_correction_bias=True,
                          router_score="sigmoid")  # scores = router_logits.sigmoid() (line 775 @5.24.0)
        fields.update(
            num_heads=heads, num_kv_heads=c.get("num_key_value_heads") or heads, head_dim=c.req("head_dim"),
            intermediate_size=c.get("intermediate_size") or 0, mlp_gated=False, mlp_bias=bool(c.get("mlp_bias")),
            norms_per_layer=1, recurrent=rec, moe=moe, rope=False,  # NemotronHAttention: no rotary embedding
            # NemotronHRMSNorm (modeling_nemotron_h.py lines 626-633): ``(weight.to(float32) * x).to(dtype)`` keeps
            # the fp32 normalised tensor and the fp32 weight copy (training_activations.py eq. N3)
            norm_fp32_normalised=True,
            layer_types=tuple("full" if k == "full_attention" else "none" for k in kinds),
            recurrent_layers=tuple(k == "linear_attention" for k in kinds),
            ffn_layers=tuple(k in ("mlp", "moe") for k in kinds), moe_layers=tuple(k == "moe" for k in kinds))
    else:
        n_layers = c.req("num_hidden_layers")
    if mt == "mamba2":
        heads, hd = c.req("num_heads"), c.req("head_dim")
        d_inner = c.req("expand") * hidden
        if heads * hd != d_inner:  # Mamba2Config.validate_architecture
            raise InputError(f"{where}: hidden_size x expand ({d_inner}) must equal num_heads x head_dim ({heads * hd})")
        rec = _mamba2(c, d_inner, heads, d_state="state_size", d_conv="conv_kernel", n_groups="n_groups",
                      conv_bias="use_conv_bias", in_bias="use_bias", out_bias="use_bias", chunk="chunk_size")
        # no attention: the attention fields describe the SSM heads (activation and speed formulas read them)
        fields.update(num_heads=heads, num_kv_heads=heads, head_dim=hd, intermediate_size=0, norms_per_layer=1,
                      recurrent=rec, rope=False, layer_types=("none",) * n_layers, recurrent_layers=(True,) * n_layers,
                      ffn_layers=(False,) * n_layers)
    elif mt in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        kinds = _block_types(c, n_layers, {"linear_attention", "full_attention"})
        if not kinds:
            every = check_number(cfg.get("full_attention_interval", 4), "full_attention_interval", LAYERS, where)
            kinds = ["linear_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)]
        vh, vd = c.req("linear_num_value_heads"), c.req("linear_value_head_dim")
        kh = c.req("linear_num_key_heads")
        if vh % kh:
            raise InputError(f"{where}: linear_num_value_heads ({vh}) must be a multiple of linear_num_key_heads ({kh})")
        # vLLM's Qwen3_5ForConditionalGenerationConfig.verify_and_update_config sets mamba_ssm_cache_dtype 'auto' to
        # the text config's mamba_ssm_dtype (the published Qwen3.5 configs: float32; absent: the model dtype)
        # (vllm 0.19.1 wheel model_executor/models/config.py L663-686, 0.34.0 L1293-1306, both Qwen3.5 classes
        # mapped at L746-747 / L1604-1606); Qwen3-Next has no such hook
        ssm_dtype = cfg.get("mamba_ssm_dtype") if mt != "qwen3_next" else None
        if ssm_dtype not in (None, "float32", "bfloat16", "float16"):
            raise ModelFileError(f"{where}: mamba_ssm_dtype must be float32, bfloat16 or float16, got {shown(ssm_dtype)}")
        rec = RecurrentSpec(kind="gated_deltanet", d_inner=vh * vd, d_state=c.req("linear_key_head_dim"),
                            d_conv=c.req("linear_conv_kernel_dim"), num_heads=vh, n_groups=kh, conv_bias=False,
                            ssm_cache_dtype=ssm_dtype, split_in_proj=mt != "qwen3_next")
        moe, moe_layers = _moe(c, n_layers, hidden)
        heads = c.req("num_attention_heads")
        bias = bool(c.get("attention_bias", False))
        # Qwen3_5MoeTextConfig: ``intermediate_size = AttributeError()``, no dense MLP anywhere
        inter = 0 if mt == "qwen3_5_moe_text" else c.get("intermediate_size") or 0
        fields.update(num_heads=heads, num_kv_heads=c.get("num_key_value_heads") or heads, head_dim=c.req("head_dim"),
                      intermediate_size=inter, qk_norm="per_head",
                      attention_qkv_bias=bias, attention_out_bias=bias, attention_output_gate=True,
                      rotary_dim=rotary_dim_of(c, c.req("head_dim")),  # partial_rotary_factor 0.25
                      # Qwen3NextRMSNorm (modeling_qwen3_next.py lines 135-140): ``(x * (1 + w)).to(dtype)`` keeps
                      # the fp32 normalised tensor and the fp32 1 + w (training_activations.py eq. N3)
                      norm_fp32_normalised=True, norm_unit_offset=True,
                      recurrent=rec, moe=moe, moe_layers=moe_layers,
                      layer_types=tuple("full" if k == "full_attention" else "none" for k in kinds),
                      recurrent_layers=tuple(k == "linear_attention" for k in kinds))
    elif mt == "jamba":
        heads = c.req("num_attention_heads")
        a_per, a_off = c.req("attn_layer_period"), c.get("attn_layer_offset", 0)
        e_per, e_off = c.req("expert_layer_period"), c.get("expert_layer_offset", 0)
        for v, k in ((a_off, "attn_layer_offset"), (e_off, "expert_layer_offset")):
            check_number(v, k, LAYER_INDEX, where)
        n_exp = c.req("num_experts")
        attn = [i % a_per == a_off for i in range(n_layers)]
        moe_layers = tuple(n_exp > 1 and i % e_per == e_off for i in range(n_layers))
        rank = c.get("mamba_dt_rank", "auto")
        dt_rank = math.ceil(hidden / 16) if rank == "auto" else rank  # JambaConfig.__post_init__
        if not isinstance(dt_rank, int) or isinstance(dt_rank, bool) or dt_rank < 1:
            raise ModelFileError(f"{where}: mamba_dt_rank must be 'auto' or a positive integer, got {shown(rank)}")
        rec = RecurrentSpec(kind="mamba", d_inner=c.req("mamba_expand") * hidden, d_state=c.req("mamba_d_state"),
                            d_conv=c.req("mamba_d_conv"), dt_rank=dt_rank,
                            conv_bias=bool(c.get("mamba_conv_bias", True)),
                            in_proj_bias=bool(c.get("mamba_proj_bias", False)),
                            out_proj_bias=bool(c.get("mamba_proj_bias", False)), bcdt_norms=True)
        moe = MoESpec(n_exp, c.req("num_experts_per_tok"), c.req("intermediate_size")) if any(moe_layers) else None
        fields.update(num_heads=heads, num_kv_heads=c.get("num_key_value_heads") or heads, head_dim=hidden // heads,
                      intermediate_size=c.req("intermediate_size"), recurrent=rec, moe=moe, moe_layers=moe_layers,
                      rope=False,  # JambaAttention: no positional encoding (JambaModel builds no rotary embedding)
                      layer_types=tuple("full" if a else "none" for a in attn),
                      recurrent_layers=tuple(not a for a in attn))
    elif mt == "falcon_h1":
        heads = c.req("num_attention_heads")
        mheads = c.req("mamba_n_heads")
        d_inner = c.get("mamba_d_ssm") or c.req("mamba_expand") * hidden
        head = _head(c, "mamba_d_head")
        if isinstance(head, int) and head * mheads != d_inner:  # FalconH1Config.validate_architecture
            raise InputError(f"{where}: mamba_d_head x mamba_n_heads ({head} x {mheads}) must equal the Mamba inner "
                             f"width ({d_inner})")
        rec = _mamba2(c, d_inner, mheads, d_state="mamba_d_state", d_conv="mamba_d_conv", n_groups="mamba_n_groups",
                      conv_bias="mamba_conv_bias", in_bias="mamba_proj_bias", out_bias="projectors_bias",
                      norm="mamba_rms_norm", chunk="mamba_chunk_size")
        # FalconH1Mixer.forward: ``projected_states * self.mup_vector`` (modeling_falcon_h1.py line 690)
        rec = dataclasses.replace(rec, in_proj_multiplier=True)
        bias = bool(c.get("attention_bias", False))
        fields.update(num_heads=heads, num_kv_heads=c.get("num_key_value_heads") or heads,
                      head_dim=c.get("head_dim") or hidden // heads, intermediate_size=c.req("intermediate_size"),
                      mlp_bias=bool(c.get("mlp_bias", False)), attention_qkv_bias=bias, attention_out_bias=bias,
                      recurrent=rec, recurrent_layers=(True,) * n_layers)
    elif mt == "llama4_text":
        fields.update(_llama4_text(c, n_layers, hidden))
    elif mt == "granitemoehybrid":
        kinds = _block_types(c, n_layers, {"linear_attention", "full_attention"}) or ["linear_attention"] * n_layers
        heads = c.req("num_attention_heads")
        mheads = c.req("mamba_n_heads")
        d_inner = c.req("mamba_expand") * hidden
        head = _head(c, "mamba_d_head")
        if isinstance(head, int) and head * mheads != d_inner:  # GraniteMoeHybridConfig.validate_architecture
            raise InputError(f"{where}: mamba_d_head x mamba_n_heads ({head} x {mheads}) must equal "
                             f"mamba_expand x hidden_size ({d_inner})")
        rec = _mamba2(c, d_inner, mheads, d_state="mamba_d_state", d_conv="mamba_d_conv", n_groups="mamba_n_groups",
                      conv_bias="mamba_conv_bias", in_bias="mamba_proj_bias", out_bias="mamba_proj_bias",
                      chunk="mamba_chunk_size")
        # 0 experts is a dense Granite-4.0-H (GraniteMoeHybridDecoderLayer: "Accept 0 experts")
        raw = cfg["num_local_experts"] if "num_local_experts" in cfg else c.get("num_local_experts")
        n_local = int(check_number(raw if raw is not None else 0, "num_local_experts", EXPERTS_OR_ZERO, where))
        shared = c.req("shared_intermediate_size")
        bias = bool(c.get("attention_bias", False))
        if n_local:  # the shared MLP beside the routed experts
            moe = MoESpec(n_local, c.req("num_experts_per_tok"), c.req("intermediate_size"),
                          shared_intermediate_size=shared)
            fields.update(moe=moe, moe_layers=(True,) * n_layers, intermediate_size=0)
        else:  # no experts: the shared MLP is the layer's only feed-forward block
            fields.update(intermediate_size=shared)
        # GraniteMoeHybridMLP (the shared MLP): input_linear = Linear(H, 2 x shared I) holds gate and up
        # (modeling_granitemoehybrid.py lines 762-763): fused_gate_up
        fields.update(num_heads=heads, num_kv_heads=c.get("num_key_value_heads") or heads, head_dim=hidden // heads,
                      attention_qkv_bias=bias, attention_out_bias=bias, recurrent=rec, fused_gate_up=True,
                      # GraniteMoeHybridModel: rotary only with position_embedding_type "rope" (default None)
                      rope=c.get("position_embedding_type") == "rope",
                      layer_types=tuple("full" if k == "full_attention" else "none" for k in kinds),
                      recurrent_layers=tuple(k == "linear_attention" for k in kinds))
    heads, kv = fields["num_heads"], fields["num_kv_heads"]
    if heads % kv:
        raise InputError(f"{where}: num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv})")
    quant = cfg.get("quantization_config") or {}
    if not isinstance(quant, dict):
        raise ModelFileError(f"{where}: quantization_config must be an object")
    return ModelSpec(
        name=name, model_type=mt, vocab_size=c.req("vocab_size"), hidden_size=hidden, num_layers=n_layers,
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        max_position_embeddings=c.get("max_position_embeddings"), rope_scaling=rope_scaling_of(c),
        torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype"), quantization=tuple(sorted(quant.items())),
        published_params=published_params, published_active_params=published_active_params,
        source=source, notes=tuple(dict.fromkeys(c.used_defaults)), **fields)


def _llama4_text(c: _Cfg, n_layers: int, hidden: int) -> dict[str, Any]:
    """Llama 4's text stack (module docstring): chunked / global attention and interleaved MoE layers."""
    heads = c.req("num_attention_heads")
    moe_idx = c.layer_list("moe_layers", n_layers)
    if moe_idx is None:
        step = c.req("interleave_moe_layer_step")
        moe_idx = list(range(step - 1, n_layers, step))
    moe_set = {check_number(i, "moe_layers entry", LAYER_INDEX, c.where) for i in moe_idx}
    chunk = c.get("attention_chunk_size", 8192)
    # no_rope_layers[i] = 1: layer i rotates q/k (Llama4TextAttention.use_rope, modeling_llama4.py L318, L350), set
    # whatever layer_types says
    rope = c.layer_list("no_rope_layers", n_layers) or []
    if not rope:  # Llama4TextConfig.__post_init__: a NoPE (global) layer every no_rope_layer_interval layers
        every = c.req("no_rope_layer_interval")
        rope = [int((i + 1) % every != 0) for i in range(n_layers)]
    if len(rope) != n_layers:
        raise ModelFileError(f"{c.where}: no_rope_layers must have one entry per layer ({n_layers})")
    if any(r not in (0, 1) for r in rope):  # (True/False compare equal to 1/0)
        raise ModelFileError(f"{c.where}: no_rope_layers entries must be 1 (rotary) or 0 (no rotary), got "
                             f"{shown(next(r for r in rope if r not in (0, 1)))}")
    kinds = _block_types(c, n_layers, {"chunked_attention", "full_attention"}) if "layer_types" in c.cfg else []
    if not kinds:
        kinds = ["chunked_attention" if r and chunk is not None else "full_attention" for r in rope]
    n_exp = c.req("num_local_experts")
    inter = c.req("intermediate_size")
    # Llama4Router: top-k of the logits, then a sigmoid of them (no bias; modeling_llama4.py L141-152, the sigmoid
    # L151, transformers @5.24.0)
    moe = MoESpec(n_exp, c.req("num_experts_per_tok"), inter, shared_intermediate_size=inter, router_score="sigmoid")
    bias = bool(c.get("attention_bias", False))
    layer_types = tuple("sliding" if k == "chunked_attention" else "full" for k in kinds)
    return dict(num_heads=heads, num_kv_heads=c.get("num_key_value_heads") or heads,
                head_dim=c.get("head_dim") or hidden // heads, intermediate_size=c.req("intermediate_size_mlp"),
                attention_qkv_bias=bias, attention_out_bias=bias, moe=moe,
                moe_layers=tuple(i in moe_set for i in range(n_layers)), layer_types=layer_types,
                nope_layers=tuple(not r for r in rope),
                sliding_window=chunk if "sliding" in layer_types else None, chunked_attention="sliding" in layer_types)
