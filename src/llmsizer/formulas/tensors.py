"""The tensor inventory of a model: every weight tensor its definition creates, with its shape.

Parameter counts, weight bytes under any format, and per-layer offload all derive from this one list,
so they cannot disagree. Shapes follow the Hugging Face ``transformers`` module definitions
(``nn.Linear`` weight = [out_features, in_features]); the GGUF ``role`` names follow llama.cpp's
``LLM_TENSOR_*`` names (``src/llama-arch.cpp``) so GGUF mixture rules can address them.

References per block:
- GQA/MHA/MQA attention: Ainslie et al. 2023 (arXiv 2305.13245); transformers ``modeling_llama.py``
  ``LlamaAttention`` (q/k/v/o projections), ``modeling_qwen3.py`` (q_norm/k_norm over head_dim),
  ``modeling_gpt_oss.py`` (``sinks``: one learned logit per head).
- MLA: DeepSeek-V2 (arXiv 2405.04434) eqs. 9-19; transformers ``modeling_deepseek_v3.py``
  ``DeepseekV3Attention`` (q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm,
  kv_b_proj, o_proj); DSA lightning indexer: DeepSeek-V3.2-Exp report (DeepSeek_V3_2.pdf), ``modeling_deepseek_v32.py``
  ``DeepseekV32Indexer`` (wq_b, wk, k_norm, weights_proj).
- SwiGLU MLP: Shazeer 2020 (arXiv 2002.05202) eq. 6 -> gate, up, down.
- MoE: router [E, H], E experts, optional shared experts (DeepSeekMoE arXiv 2401.06066 eq. 3).
- ViT encoder: Dosovitskiy et al. 2021 (arXiv 2010.11929) eq. 1-4; transformers ``modeling_siglip.py``.
- Recurrent mixers (``RecurrentSpec``): Mamba-1 as transformers ``modeling_jamba.py`` ``JambaMambaMixer`` builds it
  (in_proj, conv1d, x_proj, dt_proj, A_log [d_inner, d_state], D, out_proj, dt/B/C RMSNorms); Mamba-2 as
  ``modeling_mamba2.py`` ``Mamba2Mixer`` and its copies in ``modeling_nemotron_h.py``, ``modeling_granitemoehybrid.py``,
  ``modeling_falcon_h1.py`` (in_proj to [z, xBC, dt], conv1d over xBC, dt_bias/A_log/D per head, gated RMSNorm,
  out_proj); Gated DeltaNet as ``modeling_qwen3_next.py`` ``Qwen3NextGatedDeltaNet`` (in_proj_qkvz, in_proj_ba,
  conv1d over qkv, dt_bias/A_log per value head, gated RMSNorm over the value head, out_proj; Qwen3.5's
  ``modular_qwen3_5.py`` ``Qwen3_5GatedDeltaNet`` splits in_proj_qkvz into in_proj_qkv + in_proj_z and in_proj_ba into
  in_proj_b + in_proj_a: two tensors of the same role each, ``RecurrentSpec.split_in_proj``). Roles follow
  llama.cpp's ``LLM_TENSOR_SSM_*`` names.
- Parallel-block families (``readers/hf_parallel.py``: Falcon, Phi, GPT-NeoX): the fused ``query_key_value`` is
  listed as its q, k and v parts (the same elements and bias), LayerNorms with bias, Phi's lm_head bias.
- T5 / mT5 encoder-decoders (``EncoderDecoderSpec``; transformers v5.24.0 ``models/t5/modeling_t5.py``): one
  ``shared`` embedding read by both stacks, bias-free q/k/v/o and FFN (``wi`` or ``wi_0``/``wi_1`` + ``wo``),
  weight-only RMS norms, each decoder block's cross-attention (``EncDecAttention``) and its norm, the two relative
  position bias tables (listed once, outside the layers: the first block of each stack holds them), the encoder's
  and the decoder's final norms, an untied ``lm_head`` (T5 v1.1, mT5).
- Gemma 3n (``Gemma3nSpec``; transformers v5.24.0 ``modeling_gemma3n.py``): per-layer input embeddings and their
  projections, AltUp's stream projections and per-layer router/coefficients, LAuReL's low-rank residual; a
  K/V-sharing layer (``Gemma3nTextAttention``, L1173-1182: "Layers sharing kv states don't need any weight
  matrices") has no k_proj, v_proj or k_norm, and ``v_norm`` is an RMSNorm without a weight (``with_scale=False``,
  L118-125).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import itemgetter
from typing import Literal

from ..specs import LayerKey, ModelSpec

# "per_layer_embedding": Gemma 3n's per-layer input table, a lookup a token reads one row of (never an output head,
# never quantized as a linear), apart from "embedding" so that a tied lm_head is token_embd alone
Component = Literal[
    "embedding", "attention", "recurrent", "mlp", "experts", "shared_experts", "router", "norm", "lm_head", "vision",
    "per_layer_embedding",
]
COMPONENTS: tuple[Component, ...] = (
    "embedding", "attention", "recurrent", "mlp", "experts", "shared_experts", "router", "norm", "lm_head", "vision",
    "per_layer_embedding",
)


class Tensor(tuple):  # type: ignore[type-arg]
    """``count`` identical tensors of ``shape`` (a matrix is [out, in]) playing ``role`` in ``layer``.

    ``layer`` is the decoder layer index, or -1 for tensors outside the layer stack; ``numel`` is the
    elements of all ``count`` tensors; ``matrix`` is True for 2-D weights of a linear map or embedding
    (what quantizers quantize; Mamba-1's 2-D A_log is not one). An immutable tuple: a model has hundreds of these and building them is
    the hot path of a cold estimate.
    """

    __slots__ = ()

    def __new__(cls, role: str, component: Component, shape: tuple[int, ...], count: int = 1,
                layer: int = -1) -> Tensor:
        n = count
        for d in shape:
            n *= d
        return tuple.__new__(cls, (role, component, shape, count, layer, n))

    role: str = property(itemgetter(0))  # type: ignore[assignment]
    component: Component = property(itemgetter(1))  # type: ignore[assignment]
    shape: tuple[int, ...] = property(itemgetter(2))  # type: ignore[assignment]
    count: int = property(itemgetter(3))  # type: ignore[assignment]
    layer: int = property(itemgetter(4))  # type: ignore[assignment]
    numel: int = property(itemgetter(5))  # type: ignore[assignment]

    def at(self, layer: int) -> Tensor:
        """The same tensor in layer ``layer`` (a layer of the same kind: formulas/tensors.py layer_groups)."""
        return tuple.__new__(Tensor, (*self[:4], layer, self[5]))

    @property
    def matrix(self) -> bool:
        # Mamba-1's A_log [d_inner, d_state] is 2-D but no linear map: never quantized
        return len(self.shape) == 2 and min(self.shape) > 1 and self[0] != "ssm_a"

    def __repr__(self) -> str:
        return f"Tensor({self.role!r}, {self.component!r}, {self.shape}, count={self.count}, layer={self.layer})"


def _linear(role: str, comp: Component, out_f: int, in_f: int, layer: int, bias: bool,
            count: int = 1) -> list[Tensor]:
    items = [Tensor(role, comp, (out_f, in_f), count, layer)]
    if bias:
        items.append(Tensor(role + ".bias", comp, (out_f,), count, layer))
    return items


def _norm(role: str, width: int, kind: str, layer: int, comp: Component = "norm") -> list[Tensor]:
    items = [Tensor(role, comp, (width,), 1, layer)]
    if kind == "layernorm":
        items.append(Tensor(role + ".bias", comp, (width,), 1, layer))
    return items


def _attention(spec: ModelSpec, i: int) -> list[Tensor]:
    h = spec.hidden_size
    out: list[Tensor] = []
    if spec.mla is not None:
        m = spec.mla
        qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            out += _linear("attn_q_a", "attention", m.q_lora_rank, h, i, spec.attention_qkv_bias)
            out += _norm("attn_q_a_norm", m.q_lora_rank, "rmsnorm", i, "attention")
            out += _linear("attn_q_b", "attention", spec.num_heads * qk_head, m.q_lora_rank, i, False)
        else:
            out += _linear("attn_q", "attention", spec.num_heads * qk_head, h, i, False)
        out += _linear("attn_kv_a_mqa", "attention", m.kv_lora_rank + m.qk_rope_head_dim, h, i,
                       spec.attention_qkv_bias)
        out += _norm("attn_kv_a_norm", m.kv_lora_rank, "rmsnorm", i, "attention")
        out += _linear("attn_kv_b", "attention", spec.num_heads * (m.qk_nope_head_dim + m.v_head_dim),
                       m.kv_lora_rank, i, False)
        out += _linear("attn_output", "attention", h, spec.num_heads * m.v_head_dim, i,
                       spec.attention_out_bias)
        if m.index_n_heads:
            # DSA lightning indexer (transformers modeling_deepseek_v32.py DeepseekV32Indexer; DeepSeek's reference
            # inference/model.py Indexer): wq_b [n_idx*d_idx, q_lora_rank], wk [d_idx, H], k_norm = LayerNorm(d_idx)
            # with bias, weights_proj [n_idx, H] -- all without bias
            d_idx = m.index_head_dim
            out += _linear("indexer_q_b", "attention", m.index_n_heads * d_idx, m.q_lora_rank or h, i, False)
            out += _linear("indexer_k", "attention", d_idx, h, i, False)
            out += _norm("indexer_k_norm", d_idx, "layernorm", i, "attention")
            out += _linear("indexer_proj", "attention", m.index_n_heads, h, i, False)
        return out
    hd = spec.attention_head_dim(i)  # Gemma 4: full-attention layers have their own head size (global_head_dim)
    shared = spec.kv_shared_layers[i]  # Gemma 3n/4: keys and values come from an earlier layer
    q_out = spec.num_heads * hd * (2 if spec.attention_output_gate else 1)  # Qwen3NextAttention: query + gate
    out += _linear("attn_q", "attention", q_out, h, i, spec.attention_qkv_bias)
    if not shared:
        out += _linear("attn_k", "attention", spec.num_kv_heads * hd, h, i, spec.attention_qkv_bias)
        out += _linear("attn_v", "attention", spec.num_kv_heads * hd, h, i, spec.attention_qkv_bias)
    out += _linear("attn_output", "attention", h, spec.num_heads * hd, i, spec.attention_out_bias)
    if spec.qk_norm == "each_head":
        # StableLM (transformers v5.24.0 models/stablelm/modeling_stablelm.py StableLmLayerNormPerHead, l.156-161,
        # built by StableLmAttention l.245-249 when config.qk_layernorm): a ModuleList of one
        # nn.LayerNorm(head_dim, bias=False) per query head and per K/V head; llama.cpp's converter stacks them into
        # one attn_q_norm / attn_k_norm of [n_head, head_dim] (convert_hf_to_gguf.py StableLMModel._stack_qk_norm)
        out.append(Tensor("attn_q_norm", "attention", (spec.num_heads, hd), 1, i))
        if not shared:
            out.append(Tensor("attn_k_norm", "attention", (spec.num_kv_heads, hd), 1, i))
    elif spec.qk_norm != "none":
        full = spec.qk_norm == "full"  # OLMo-2 normalises all heads at once; Qwen3/Gemma3 per head
        out += _norm("attn_q_norm", hd * (spec.num_heads if full else 1), spec.norm_kind, i, "attention")
        if not shared:
            out += _norm("attn_k_norm", hd * (spec.num_kv_heads if full else 1), spec.norm_kind, i, "attention")
    if spec.attention_sinks:
        out.append(Tensor("attn_sinks", "attention", (spec.num_heads,), 1, i))
    return out


def _cross_attention(spec: ModelSpec, i: int) -> list[Tensor]:
    """A T5 decoder block's cross-attention (``EncDecAttention``, transformers v5.24.0 models/t5/modeling_t5.py
    ``T5LayerCrossAttention``): q/k/v/o without bias over num_heads x d_kv channels (k and v read the encoder output)
    and its weight-only RMS norm ``layer_norm``.

    Llama-3.2-Vision's cross-attention block (transformers modeling_mllama.py MllamaTextCrossAttention,
    MllamaCrossAttentionDecoderLayer): q/k/v/o without bias (k and v read the image states, already projected to the
    text width), RMSNorm q_norm and k_norm over head_dim, and two tanh gates of one element (cross_attn_attn_gate,
    cross_attn_mlp_gate)."""
    h, hd = spec.hidden_size, spec.head_dim
    out = _linear("cross_attn_q", "attention", spec.num_heads * hd, h, i, False)
    if spec.encoder_decoder is not None:
        for role in ("cross_attn_k", "cross_attn_v"):
            out += _linear(role, "attention", spec.num_heads * hd, h, i, False)
        out += _linear("cross_attn_o", "attention", h, spec.num_heads * hd, i, False)
        return out + _norm("cross_attn_norm", h, "rmsnorm", i)
    out += _linear("cross_attn_k", "attention", spec.num_kv_heads * hd, h, i, False)
    out += _linear("cross_attn_v", "attention", spec.num_kv_heads * hd, h, i, False)
    out += _linear("cross_attn_o", "attention", h, spec.num_heads * hd, i, False)
    out += _norm("cross_attn_q_norm", hd, "rmsnorm", i, "attention")
    out += _norm("cross_attn_k_norm", hd, "rmsnorm", i, "attention")
    out += [Tensor("cross_attn_attn_gate", "attention", (1,), 1, i),
            Tensor("cross_attn_mlp_gate", "attention", (1,), 1, i)]
    return out


def _recurrent(spec: ModelSpec, i: int) -> list[Tensor]:
    """The tensors of layer ``i``'s recurrent mixer (module docstring: Mamba-1, Mamba-2, Gated DeltaNet)."""
    r, h = spec.recurrent, spec.hidden_size
    if r is None:
        return []
    c: Component = "recurrent"
    conv = r.conv_channels
    out: list[Tensor] = []
    if r.kind == "gated_deltanet":
        key_dim = r.n_groups * r.d_state
        if r.split_in_proj:  # Qwen3.5: in_proj_qkv + in_proj_z, in_proj_b + in_proj_a (same roles, two linears each)
            out += _linear("ssm_in", c, 2 * key_dim + r.d_inner, h, i, False)
            out += _linear("ssm_in", c, r.d_inner, h, i, False)
            out += _linear("ssm_ba", c, r.num_heads, h, i, False)
            out += _linear("ssm_ba", c, r.num_heads, h, i, False)
        else:
            out += _linear("ssm_in", c, 2 * key_dim + 2 * r.d_inner, h, i, False)  # in_proj_qkvz
            out += _linear("ssm_ba", c, 2 * r.num_heads, h, i, False)  # in_proj_ba: beta and the decay input
        out.append(Tensor("ssm_conv1d", c, (conv, 1, r.d_conv), 1, i))
        out.append(Tensor("ssm_dt", c, (r.num_heads,), 1, i))
        out.append(Tensor("ssm_a", c, (r.num_heads,), 1, i))
        out.append(Tensor("ssm_norm", c, (r.head_dim,), 1, i))
        out += _linear("ssm_out", c, h, r.d_inner, i, False)
        return out
    if r.kind == "mamba":
        out += _linear("ssm_in", c, 2 * r.d_inner, h, i, r.in_proj_bias)
        out.append(Tensor("ssm_conv1d", c, (conv, 1, r.d_conv), 1, i))
        if r.conv_bias:
            out.append(Tensor("ssm_conv1d.bias", c, (conv,), 1, i))
        out += _linear("ssm_x", c, r.dt_rank + 2 * r.d_state, r.d_inner, i, False)
        out += _linear("ssm_dt", c, r.d_inner, r.dt_rank, i, True)
        out.append(Tensor("ssm_a", c, (r.d_inner, r.d_state), 1, i))
        out.append(Tensor("ssm_d", c, (r.d_inner,), 1, i))
        out += _linear("ssm_out", c, h, r.d_inner, i, r.out_proj_bias)
        if r.bcdt_norms:
            out += [Tensor("ssm_dt_norm", c, (r.dt_rank,), 1, i), Tensor("ssm_b_norm", c, (r.d_state,), 1, i),
                    Tensor("ssm_c_norm", c, (r.d_state,), 1, i)]
        return out
    # mamba2: in_proj -> [z (d_inner), xBC (conv channels), dt (heads)]
    out += _linear("ssm_in", c, r.d_inner + conv + r.num_heads, h, i, r.in_proj_bias)
    out.append(Tensor("ssm_conv1d", c, (conv, 1, r.d_conv), 1, i))
    if r.conv_bias:
        out.append(Tensor("ssm_conv1d.bias", c, (conv,), 1, i))
    out += [Tensor("ssm_dt", c, (r.num_heads,), 1, i), Tensor("ssm_a", c, (r.num_heads,), 1, i),
            Tensor("ssm_d", c, (r.num_heads,), 1, i)]
    if r.gated_norm:
        out.append(Tensor("ssm_norm", c, (r.d_inner,), 1, i))
    out += _linear("ssm_out", c, h, r.d_inner, i, r.out_proj_bias)
    return out


# the recurrent mixer's linear maps in forward order, and how tensor parallelism splits each (Megatron's Mamba
# mixer: in-projections column-parallel, out_proj row-parallel): "out" divides the output width, "in" the input
RECURRENT_LINEARS = {"ssm_in": "out", "ssm_ba": "out", "ssm_x": "in", "ssm_dt": "out", "ssm_out": "in"}


def recurrent_linears(spec: ModelSpec, i: int) -> list[tuple[str, int, int, bool]]:
    """Layer ``i``'s recurrent-mixer linears in forward order: (role, input width, output width, has a bias), from
    :func:`_recurrent`'s tensors (the reference implementations' ``nn.Linear`` modules); [] without a mixer."""
    if not (spec.recurrent_layers[i] and spec.recurrent is not None):
        return []
    tensors = _recurrent(spec, i)
    biases = {t.role.removesuffix(".bias") for t in tensors if t.role.endswith(".bias")}
    return [(t.role, t.shape[1], t.shape[0], t.role in biases) for t in tensors
            if t.role in RECURRENT_LINEARS and len(t.shape) == 2]  # Mamba-2's ssm_dt is a per-head vector


def _mlp(prefix: str, comp: Component, h: int, inter: int, gated: bool, bias: bool, i: int,
         count: int = 1) -> list[Tensor]:
    out: list[Tensor] = []
    if gated:
        out += _linear(f"{prefix}_gate", comp, inter, h, i, bias, count)
    out += _linear(f"{prefix}_up", comp, inter, h, i, bias, count)
    out += _linear(f"{prefix}_down", comp, h, inter, i, bias, count)
    return out


def _feed_forward(spec: ModelSpec, i: int) -> list[Tensor]:
    h = spec.hidden_size
    if not spec.moe_layers[i] or spec.moe is None:
        return _mlp("ffn", "mlp", h, spec.ffn_size(i), spec.mlp_gated, spec.mlp_bias, i)
    moe = spec.moe
    out = _linear("ffn_gate_inp", "router", moe.num_experts, h, i, moe.router_bias)
    if moe.latent_size:
        # NemotronHMoE (transformers models/nemotron_h/modeling_nemotron_h.py): fc1_latent_proj H -> latent before
        # the experts, fc2_latent_proj latent -> H after them, bias=config.mlp_bias; always active, counted as
        # dense MLP weights; NemotronHExperts' up/down are [E, I, latent] / [E, latent, I]
        out += _linear("ffn_latent_in", "mlp", moe.latent_size, h, i, spec.mlp_bias)
        out += _linear("ffn_latent_out", "mlp", h, moe.latent_size, i, spec.mlp_bias)
    out += _mlp("ffn_exps", "experts", moe.latent_size or h, moe.expert_intermediate_size, moe.expert_gated,
                moe.expert_bias, i, count=moe.num_experts)
    if moe.shared_intermediate_size:
        # shared experts are plain MLPs: DeepseekV2MLP carries config.mlp_bias (ModelSpec.mlp_bias), the
        # Qwen2-MoE and DeepSeek-V3 ones hard-code bias=False (transformers modeling_deepseek_v2.py DeepseekV2Moe)
        out += _mlp("ffn_shexp", "shared_experts", h, moe.shared_intermediate_size, moe.shared_expert_gated,
                    spec.mlp_bias, i)
    if moe.shared_expert_gate:
        # Qwen2MoeSparseMoeBlock builds shared_expert_gate = Linear(H, 1) whatever the shared size
        # (transformers modeling_qwen2_moe.py)
        out.append(Tensor("ffn_gate_inp_shexp", "shared_experts", (1, h), 1, i))
    return out


def _gemma3n_layer(spec: ModelSpec, i: int) -> list[Tensor]:
    """Gemma 3n's per-layer AltUp, LAuReL and per-layer-input tensors (``Gemma3nSpec``; modeling_gemma3n.py
    Gemma3nTextAltUp L988-996, Gemma3nTextLaurelBlock L923-929, Gemma3nTextDecoderLayer L1266-1268). The linears
    are dense weights read by every token: component "mlp"; the RMSNorm weights "norm"."""
    g, h = spec.gemma3n, spec.hidden_size
    if g is None:
        return []
    n, r, p = g.altup_inputs, g.laurel_rank, g.per_layer_width
    out = [Tensor("altup_correct_scale", "norm", (h,), 1, i)]
    out += _linear("altup_correct_coef", "mlp", n, n, i, False)
    out += _linear("altup_predict_coef", "mlp", n * n, n, i, False)
    out += _linear("altup_router", "mlp", n, h, i, False)
    out += _norm("altup_router_norm", h, "rmsnorm", i)
    out += _linear("laurel_l", "mlp", r, h, i, False)
    out += _linear("laurel_r", "mlp", h, r, i, False)
    out += _norm("laurel_post_norm", h, "rmsnorm", i)
    return out + _per_layer_input_layer(p, h, i)


def _per_layer_input_layer(p: int, h: int, i: int) -> list[Tensor]:
    """A decoder layer's per-layer-input ("PLE") tensors, Gemma 3n and Gemma 4 alike (modeling_gemma3n.py
    L1266-1268, modeling_gemma4.py L1348-1350): the gate [p, H], the projection [H, p] and its RMSNorm [H]."""
    out = _linear("inp_gate", "mlp", p, h, i, False)
    out += _linear("proj", "mlp", h, p, i, False)
    out += _norm("per_layer_post_norm", h, "rmsnorm", i)
    return out


def _per_layer_input_model(n_layers: int, p: int, vocab: int, h: int) -> list[Tensor]:
    """The model-level per-layer-input tensors (Gemma3nTextModel L1589-1602, Gemma4TextModel L1563-1580): the table
    [vocab, L x p] (a lookup: a token reads one row), its projection from the hidden state [L x p, H] and norm [p]."""
    lp = n_layers * p
    out = [Tensor("per_layer_token_embd", "per_layer_embedding", (vocab, lp))]
    out += _linear("per_layer_model_proj", "mlp", lp, h, -1, False)
    out += _norm("per_layer_proj_norm", p, "rmsnorm", -1)
    return out


def _gemma4_layer(spec: ModelSpec, i: int) -> list[Tensor]:
    """Gemma 4's per-layer-input tensors (``Gemma4Spec``)."""
    g = spec.gemma4
    if g is None or not g.ple_width:
        return []
    return _per_layer_input_layer(g.ple_width, spec.hidden_size, i)


def _gemma4_model(spec: ModelSpec) -> list[Tensor]:
    g = spec.gemma4
    if g is None or not g.ple_width:
        return []
    return _per_layer_input_model(spec.num_layers, g.ple_width, g.ple_vocab, spec.hidden_size)


def _gemma4_towers(spec: ModelSpec) -> list[Segment]:
    """Gemma 4's vision and audio towers and their embedders (``Gemma4VisionTower`` / ``Gemma4AudioTower``, which cite
    the modules); component "vision" (the multimodal encoders: kept in the checkpoint dtype, not adapted)."""
    return [seg for segs in gemma4_tower_segments(spec).values() for seg in segs]


def gemma4_tower_params(spec: ModelSpec) -> dict[str, int]:
    """Parameters of each Gemma 4 tower ("vision", "audio"), each with its embedder, as ``_gemma4_towers`` lays
    them out; both are filed under component "vision" (the multimodal encoders), which this splits for display."""
    return {name: sum(t.numel * max(1, len(blocks)) for seg in segs for t in seg[0] for blocks in (seg[1],))
            for name, segs in gemma4_tower_segments(spec).items()}


def gemma4_tower_segments(spec: ModelSpec) -> dict[str, list[Segment]]:
    """The segments of each Gemma 4 tower present, vision first (its blocks numbered before the audio's)."""
    g = spec.gemma4
    if g is None:
        return {}
    towers: dict[str, list[Segment]] = {}
    c: Component = "vision"
    v = g.vision
    if v is not None:
        d, hd = v.hidden_size, v.head_dim

        def vblock(j: int) -> list[Tensor]:
            b = _linear("v_attn_q", c, v.num_heads * hd, d, j, False)
            b += _linear("v_attn_k", c, v.num_kv_heads * hd, d, j, False)
            b += _linear("v_attn_v", c, v.num_kv_heads * hd, d, j, False)
            b += _linear("v_attn_o", c, d, v.num_heads * hd, j, False)
            b += _norm("v_attn_q_norm", hd, "rmsnorm", j, c) + _norm("v_attn_k_norm", hd, "rmsnorm", j, c)
            b += _linear("v_ffn_gate", c, v.intermediate_size, d, j, False)
            b += _linear("v_ffn_up", c, v.intermediate_size, d, j, False)
            b += _linear("v_ffn_down", c, d, v.intermediate_size, j, False)
            for role in ("v_ln1", "v_ln2", "v_ln3", "v_ln4"):
                b += _norm(role, d, "rmsnorm", j, c)
            return b

        towers["vision"] = [_once([Tensor("v_patch_embd", c, (d, 3 * v.patch_size * v.patch_size)),
                                   Tensor("v_pos_embd", c, (2, v.position_embedding_size, d))]),
                            *_repeated(vblock, range(v.num_layers)),
                            _once([Tensor("mm_input_projection", c, (spec.hidden_size, d))])]
    a = g.audio
    first = v.num_layers if v is not None else 0  # the audio blocks numbered after the vision blocks
    if a is not None:
        ah, (c0, c1) = a.hidden_size, a.conv_channels

        def ablock(j: int) -> list[Tensor]:
            b: list[Tensor] = []
            for ff in ("a_ffn1", "a_ffn2"):
                b += _linear(ff + "_up", c, 4 * ah, ah, j, False) + _linear(ff + "_down", c, ah, 4 * ah, j, False)
                b += _norm(ff + "_pre_norm", ah, "rmsnorm", j, c) + _norm(ff + "_post_norm", ah, "rmsnorm", j, c)
            for role in ("a_attn_q", "a_attn_k", "a_attn_v", "a_attn_o", "a_attn_rel_k"):
                b += _linear(role, c, ah, ah, j, False)
            b.append(Tensor("a_attn_per_dim_scale", c, (ah // a.num_heads,), 1, j))
            b += _linear("a_conv_start", c, 2 * ah, ah, j, False) + _linear("a_conv_end", c, ah, ah, j, False)
            b.append(Tensor("a_conv_dw", c, (ah, 1, a.conv_kernel_size), 1, j))
            for role in ("a_conv_pre_norm", "a_conv_norm", "a_norm_pre_attn", "a_norm_post_attn", "a_norm_out"):
                b += _norm(role, ah, "rmsnorm", j, c)
            return b

        towers["audio"] = [_once([Tensor("a_subsample_conv0", c, (c0, 1, 3, 3)), Tensor("a_subsample_norm0", c, (c0,)),
                                  Tensor("a_subsample_conv1", c, (c1, c0, 3, 3)), Tensor("a_subsample_norm1", c, (c1,)),
                                  Tensor("a_input_proj", c, (ah, (c0 // 4) * c1))]),
                           *_repeated(ablock, range(first, first + a.num_layers)),
                           _once(_linear("a_output_proj", c, a.output_dims, ah, -1, True)
                                 + [Tensor("mm_audio_projection", c, (spec.hidden_size, a.output_dims))])]
    return towers


def _gemma3n_model(spec: ModelSpec) -> list[Tensor]:
    """Gemma 3n's model-level per-layer-input and AltUp tensors (``Gemma3nTextModel``, modeling_gemma3n.py
    L1589-1610): the per-layer embedding table [per_layer_vocab, L x p] (a lookup: a token reads one row),
    its projection from the hidden state [L x p, H] and norm [p], and altup_inputs - 1 projections into the extra
    streams and as many back out of them, each [H, H]."""
    g, h = spec.gemma3n, spec.hidden_size
    if g is None:
        return []
    out = _per_layer_input_model(spec.num_layers, g.per_layer_width, g.per_layer_vocab, h)
    if g.altup_inputs > 1:
        out.append(Tensor("altup_proj", "mlp", (h, h), g.altup_inputs - 1))
        out.append(Tensor("altup_unembd_proj", "mlp", (h, h), g.altup_inputs - 1))
    return out


# a run of the inventory: tensors once (``blocks`` empty), or the tensors of ``len(blocks)`` identical blocks (a
# vision tower's layers), as block ``blocks[0]`` holds them (``layer`` = that block's index)
Segment = tuple[tuple[Tensor, ...], tuple[int, ...]]


def _once(tensors: list[Tensor]) -> Segment:
    return tuple(tensors), ()


def _repeated(build: Callable[[int], list[Tensor]], blocks: range) -> list[Segment]:
    """The segment of ``blocks`` identical blocks (none when empty): ``build(j)`` differs between blocks only in the
    ``layer`` field, so it is built once, for the first."""
    return [(tuple(build(blocks[0])), tuple(blocks))] if blocks else []


def _qwen_vision(spec: ModelSpec) -> list[Segment]:
    """Qwen2.5-VL's vision tower (transformers modeling_qwen2_5_vl.py): Conv3d patch embedding without bias
    [d, C, t, p, p]; per block RMSNorm norm1/norm2, fused qkv Linear(d, 3d) and proj Linear(d, d) with biases,
    SwiGLU gate/up/down with biases. Qwen3-VL's (modeling_qwen3_vl.py Qwen3VLVisionModel): the Conv3d with a bias,
    a learned position table [num_position_embeddings, d], LayerNorms, a GELU fc1/fc2 MLP with biases. The patch
    mergers' parameters in ``projector_params``."""
    v = spec.vision
    assert v is not None
    d = v.hidden_size
    qwen3 = v.encoder == "qwen3_vl"
    out = [Tensor("v_patch_embd", "vision", (d, v.num_channels * v.temporal_patch_size * v.patch_size
                                             * v.patch_size))]
    if qwen3:
        out += [Tensor("v_patch_embd.bias", "vision", (d,)),
                Tensor("v_pos_embd", "vision", (v.position_embeddings, d))]

    def block(j: int) -> list[Tensor]:
        b: list[Tensor] = []
        for role in ("v_ln1", "v_ln2"):
            b += _norm(role, d, "layernorm" if qwen3 else "rmsnorm", j, "vision")
        b += _linear("v_attn_qkv", "vision", 3 * d, d, j, True)
        b += _linear("v_attn_o", "vision", d, d, j, True)
        b += _mlp("v_ffn", "vision", d, v.intermediate_size, not qwen3, True, j)
        return b

    return [_once(out), *_repeated(block, range(v.num_layers)),
            _once([Tensor("v_projector", "vision", (v.projector_params,))])]


def _vit_block(v_d: int, heads: int, inter: int, j: int, bias: bool) -> list[Tensor]:
    """One pre-LayerNorm ViT block of the Llama vision towers: input/post-attention LayerNorms, q/k/v/o over
    heads x (d // heads) channels, a GELU fc1/fc2 MLP with biases (modeling_mllama.py MllamaVisionEncoderLayer,
    modeling_llama4.py Llama4VisionEncoderLayer)."""
    inner = heads * (v_d // heads)
    out: list[Tensor] = []
    for role in ("v_ln1", "v_ln2"):
        out += _norm(role, v_d, "layernorm", j, "vision")
    for role in ("v_attn_q", "v_attn_k", "v_attn_v"):
        out += _linear(role, "vision", inner, v_d, j, bias)
    out += _linear("v_attn_o", "vision", v_d, inner, j, bias)
    out += _linear("v_ffn_up", "vision", inter, v_d, j, True)
    out += _linear("v_ffn_down", "vision", v_d, inter, j, True)
    return out


def _llama_vision(spec: ModelSpec) -> list[Segment]:
    """The Llama-3.2-Vision tower (modeling_mllama.py MllamaVisionModel): Conv2d patches without bias, a class
    token, the gated position embedding [patches + 1, d] with its tile table [aspect ratios, tiles x (patches + 1)
    x d], the gated pre- and post-tile aspect-ratio embeddings [aspect ratios, tiles x d], LayerNorms before and
    after, ``num_layers`` local blocks without attention bias and ``global_layers`` gated global blocks (two
    one-element tanh gates each). Llama 4's (modeling_llama4.py Llama4VisionModel): an unfolded Linear patch
    embedding without bias, a class token, a position table [patches + 1, d], LayerNorms before and after,
    ``num_layers`` blocks with attention biases. The projector (and Llama 4's pixel-shuffle MLP adapter) in
    ``projector_params``."""
    v = spec.vision
    assert v is not None
    d, patches = v.hidden_size, (v.image_size // v.patch_size) ** 2 + 1
    mllama = v.encoder == "mllama"
    out = [Tensor("v_patch_embd", "vision", (d, v.num_channels * v.patch_size * v.patch_size)),
           Tensor("v_class_embd", "vision", (d,)), Tensor("v_pos_embd", "vision", (patches, d))]
    if mllama:
        out += [Tensor("v_pos_gate", "vision", (1,)),
                Tensor("v_tile_pos_embd", "vision", (v.aspect_ratios, v.max_tiles * patches * d))]
        for role in ("v_pre_tile_embd", "v_post_tile_embd"):
            out += [Tensor(role, "vision", (v.aspect_ratios, v.max_tiles * d)), Tensor(role + ".gate", "vision", (1,))]
    out += _norm("v_ln_pre", d, "layernorm", -1, "vision") + _norm("v_ln_post", d, "layernorm", -1, "vision")

    def local(j: int) -> list[Tensor]:
        return _vit_block(d, v.num_heads, v.intermediate_size, j, not mllama)

    def gated(j: int) -> list[Tensor]:
        return _vit_block(d, v.num_heads, v.intermediate_size, j, False) + [
            Tensor("v_gate_attn", "vision", (1,), 1, j), Tensor("v_gate_ffn", "vision", (1,), 1, j)]

    return [_once(out), *_repeated(local, range(v.num_layers)),
            *_repeated(gated, range(v.num_layers, v.num_layers + v.global_layers)),
            _once([Tensor("v_projector", "vision", (v.projector_params,))])]


def _vision(spec: ModelSpec) -> list[Segment]:
    v = spec.vision
    if v is None:
        return []
    if v.encoder in ("qwen2_5_vl", "qwen3_vl"):
        return _qwen_vision(spec)
    if v.encoder in ("mllama", "llama4"):
        return _llama_vision(spec)
    d, n_patches = v.hidden_size, (v.image_size // v.patch_size) ** 2
    out = [
        Tensor("v_patch_embd", "vision", (d, v.num_channels * v.patch_size * v.patch_size)),
        Tensor("v_patch_embd.bias", "vision", (d,)),
        Tensor("v_pos_embd", "vision", (n_patches, d)),
    ]

    def block(j: int) -> list[Tensor]:
        b: list[Tensor] = []
        for role in ("v_ln1", "v_ln2"):
            b += _norm(role, d, "layernorm", j, "vision")
        for role in ("v_attn_q", "v_attn_k", "v_attn_v", "v_attn_o"):
            b += _linear(role, "vision", d, d, j, True)
        b += _linear("v_ffn_up", "vision", v.intermediate_size, d, j, True)
        b += _linear("v_ffn_down", "vision", d, v.intermediate_size, j, True)
        return b

    post = _norm("v_post_ln", d, "layernorm", -1, "vision")
    if v.projector_params:
        post.append(Tensor("v_projector", "vision", (v.projector_params,)))
    return [_once(out), *_repeated(block, range(v.num_layers)), _once(post)]


def expand(segments: tuple[Segment, ...]) -> list[Tensor]:
    """The tensors of ``segments`` one by one (each block of a repeated segment with its own ``layer``)."""
    out: list[Tensor] = []
    for tensors, blocks in segments:
        if not blocks:
            out += tensors
            continue
        out += tensors
        for j in blocks[1:]:
            out += [t.at(j) for t in tensors]
    return out


def model_tensors(spec: ModelSpec) -> tuple[Tensor, ...]:
    """Every weight tensor of ``spec``'s model definition (buffers such as rotary tables excluded)."""
    return model_layout(spec)[0]


Layout = tuple[tuple[Tensor, ...], tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]
# one kind of decoder layer (ModelSpec.layer_keys): the kind, its tensors as the first layer of that kind holds them
# (``layer`` = that layer's index), and the indexes of every layer of that kind, ascending
LayerGroup = tuple[LayerKey, tuple[Tensor, ...], tuple[int, ...]]
Groups = tuple[tuple[Tensor, ...], tuple[LayerGroup, ...], tuple[Segment, ...]]


@lru_cache(maxsize=256)
def layer_keys(spec: ModelSpec) -> tuple[LayerKey, ...]:
    """``spec.layer_keys()``, once per model (asked by the inventory, the weight bytes, the parameter count and the
    duration's per-kind sums)."""
    return spec.layer_keys()


@lru_cache(maxsize=256)
def layer_kind_firsts(spec: ModelSpec) -> tuple[int, ...]:
    """Each decoder layer's kind (``layer_keys``) named by the index of the first layer of that kind: layers alike
    share one int, so the per-kind loops over every layer (the duration's, once per estimate) hash ints, not the
    key tuples (a tuple's hash is not kept: each lookup hashes its seven fields again); once per model."""
    first: dict[LayerKey, int] = {}
    return tuple(first.setdefault(k, i) for i, k in enumerate(layer_keys(spec)))


@lru_cache(maxsize=256)
def layer_groups(spec: ModelSpec) -> Groups:
    """The inventory grouped: (tensors before the decoder layers, one :data:`LayerGroup` per kind of layer in the
    order the kinds first appear, the :data:`Segment` s after the layers: final norm and lm_head, then the vision
    tower, its identical blocks as one repeated segment). A layer's tensors depend on the layer only through its
    index and its kind (ModelSpec.layer_keys: attention, recurrent mixer, feed-forward, MoE, K/V sharing,
    feed-forward width), so DeepSeek-V3's 61 layers are two groups (3 dense, 58 MoE) of ~25 tensors each instead of
    ~1,500 rows, and Llama 4's 34 vision blocks one segment: what the parameter count and the weight bytes sum
    (count x shape); :func:`model_layout` expands it tensor by tensor for the consumers that walk layers."""
    h, v = spec.hidden_size, spec.vocab_size
    head: list[Tensor] = [Tensor("token_embd", "embedding", (v + spec.extra_embedding_rows, h))]
    if spec.position_embeddings:
        head.append(Tensor("position_embd", "embedding", (spec.position_embeddings, h)))
    head += _gemma3n_model(spec) + _gemma4_model(spec)
    if spec.encoder_decoder is not None:  # T5Attention.relative_attention_bias of each stack's first block
        head.append(Tensor("enc_attn_rel_b", "attention", (spec.encoder_decoder.relative_attention_buckets,
                                                           spec.num_heads)))
        head.append(Tensor("dec_attn_rel_b", "attention", (spec.encoder_decoder.relative_attention_buckets,
                                                           spec.num_heads)))
    templates: dict[LayerKey, tuple[list[Tensor], list[int]]] = {}
    for i, kind in enumerate(layer_keys(spec)):
        group = templates.get(kind)
        if group is None:
            tpl = (_attention(spec, i) if kind[0] else []) + (_cross_attention(spec, i) if kind[4] else []) \
                + (_recurrent(spec, i) if kind[1] else []) \
                + (_feed_forward(spec, i) if kind[2] else []) + _gemma3n_layer(spec, i) + _gemma4_layer(spec, i)
            for j in range(spec.norms_per_layer):
                tpl += _norm(f"layer_norm_{j}", h, spec.norm_kind, i)
            templates[kind] = (tpl, [i])
        else:
            group[1].append(i)
    tail = _norm("output_norm", h, spec.norm_kind, -1)
    if spec.encoder_decoder is not None:  # T5Stack.final_layer_norm of the encoder (the decoder's: output_norm)
        tail += _norm("enc_output_norm", h, spec.norm_kind, -1)
    if not spec.tie_word_embeddings:
        tail.append(Tensor("output", "lm_head", (v, h)))
    if spec.lm_head_bias:  # PhiForCausalLM: lm_head = nn.Linear(hidden_size, vocab_size, bias=True)
        tail.append(Tensor("output.bias", "lm_head", (v,)))
    return (tuple(head), tuple((kind, tuple(tpl), tuple(idx)) for kind, (tpl, idx) in templates.items()),
            (_once(tail), *_vision(spec), *_gemma4_towers(spec)))


def at_layer(group: LayerGroup, layer: int) -> tuple[Tensor, ...]:
    """The tensors of ``group`` as its layer ``layer`` holds them: the group's own rows for its first layer, the
    same rows with ``layer`` re-stamped for the others."""
    if layer == group[2][0]:
        return group[1]
    new = tuple.__new__
    return tuple([new(Tensor, (r, c, s, n, layer, e)) for r, c, s, n, _, e in group[1]])


@lru_cache(maxsize=256)
def model_layout(spec: ModelSpec) -> Layout:
    """``model_tensors(spec)`` and where its decoder layers sit in it: (tensors, indexes of the tensors before the
    layers, the [start, end) slice of each layer, indexes of the tensors after them: final norm, lm_head, vision).
    :func:`layer_groups` expanded layer by layer."""
    head, groups, tail = layer_groups(spec)
    out: list[Tensor] = list(head)
    before = tuple(range(len(out)))
    group_of = {i: g for g in groups for i in g[2]}
    ranges: list[tuple[int, int]] = []
    for i in range(spec.num_layers):
        start = len(out)
        out += at_layer(group_of[i], i)
        ranges.append((start, len(out)))
    first_after = len(out)
    out += expand(tail)
    return tuple(out), before, tuple(ranges), tuple(range(first_after, len(out)))
