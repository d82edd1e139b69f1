"""Transient activation memory of an inference forward pass (no gradients kept).

Within one decoder layer the tensors alive at once are bounded by the larger of the attention block
and the MLP block, on top of the residual stream and its normalised copy (both [tokens, hidden]).
Counts follow the transformers modules (``modeling_llama.py``): ``LlamaMLP.forward`` evaluates
``down(act(gate(x)) * up(x))``, so act(gate), up and their product (3 x [tokens, intermediate]) coexist;
attention holds q, k, v and its output. Eager attention additionally materialises the score matrix
[batch, heads, q_len, kv_len] (``eager_attention_forward``: scores, + mask, ``softmax(..., dtype=torch.float32)
.to(q.dtype)``): measured with a live-tensor tracker (tests/formulas/test_activations_forward.py) it holds
2 x act_bytes per score, plus the fp32 softmax and its cast back for 16-bit models (10 B/score in bf16,
8 B/score in fp32), plus the additive causal mask [batch, 1, q_len, kv_len] in the activation dtype. SDPA/flash kernels never materialise it (Dao et al. 2022,
FlashAttention, arXiv 2205.14135, section 3.1).
When the model's forward keeps locals alive through the layer loop (``forward_locals``, transformers
``LlamaModel.forward`` and the other decoder-only models): ``inputs_embeds`` stays referenced while
``hidden_states = decoder_layer(hidden_states, ...)`` runs, and so do the rotary tables ``cos, sin =
position_embeddings`` ([batch, tokens, rope dim] each, in the activation dtype; Gemma 3 computes one pair per
layer type). While the MLP runs, the decoder layer also holds the post-attention sum as its next ``residual``
besides the layer input and the MLP's normalised input (``LlamaDecoderLayer.forward``: ``residual =
hidden_states`` after the first add). So the attention phase carries one more [tokens, hidden] tensor and the MLP
phase two more, both plus the rotary tables: traced on CPU, SmolLM2-135M at 4 x 2048 tokens holds 4
hidden-sized tensors and the two [4, 2048, 64] tables next to act(gate), up and their product at the peak.
With SDPA, a model with sliding-window layers also keeps the bool mask of ``create_sliding_window_causal_mask``
for the whole layer loop (:func:`sdpa_sliding_mask_bytes`): traced on a tiny Gemma 3 (6 layers, window 128, 2 x 512
tokens, bf16) it is live at the MLP peak, 17.51 [tokens, hidden] units measured against 17.0 without it.
Parallel-block families (``spec.parallel_block``: Falcon, Phi, GPT-NeoX): a GELU MLP holds fc1's output and the
activation's (2 x [tokens, intermediate]; transformers' Python ``gelu_new`` 4), and the attention branch's output
waits for the MLP's (``out = x + attn + mlp``: one more [tokens, hidden] in the MLP phase). transformers' Falcon
hands SDPA a materialised float causal mask [batch, 1, q_len, kv_len] (``spec.attention_mask_materialised``), and
its multi-query call (one K/V head, no ``enable_gqa``) runs torch's math kernel, which upcasts 16-bit q, k, v to
fp32 (``allow_fp16_bf16_reduction_math_sdp`` off, the default) and materialises the fp32 scores and their softmax
(8 B per score, ``spec.math_attention``); traced on CPU
(tests/formulas/test_parallel_block_prefill.py).
The last step of the model turns hidden states into logits [tokens_out, vocab] and ``generate`` upcasts
them to fp32: only the last position is computed (transformers ``logits_to_keep=1`` during generation).

Gemma 3n (``spec.gemma3n``, transformers v5.24.0 models/gemma3n/modeling_gemma3n.py) replaces the one residual
stream by n = ``altup_inputs`` AltUp streams and adds per-layer inputs; :func:`gemma3n_prefill_terms` counts the
tensors its forward holds (each with its line), traced with a live-tensor tracker on a tiny model
(tests/formulas/test_gemma3n_activations_forward.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import ModelSpec
from .recurrent_activations import (
    MAMBA1_RAW_MASK_TYPES,
    gated_deltanet_prefill_peak_bytes,
    mamba1_prefill_peak_bytes,
    mamba2_prefill_peak_bytes,
)
from .tensor_parallel import EVERY_BLOCK_SPLIT, ActivationSplit
from .vllm_mixer_profile import vllm_profile_mixer_bytes


@dataclass(frozen=True)
class PrefillActivations:
    residual_bytes: int  # residual stream + normalised copy
    attention_bytes: int  # q, k, v, attention output (+ score matrix for eager)
    mlp_bytes: int  # intermediate tensors of the (routed) MLP
    logits_bytes: int
    peak_bytes: int  # residual + max(attention, mlp, logits, mixer)
    mixer_bytes: int = 0  # a recurrent mixer's chunked scan (formulas/recurrent_activations.py), where counted


def prefill_activation_bytes(spec: ModelSpec, batch: int, q_tokens: int, kv_tokens: int, act_bytes: int = 2,
                             attention: str = "sdpa", logits_positions: int = 1,
                             logits_bytes_per_elem: int = 4, tp: int = 1,
                             forward_locals: bool = False, recurrent_scan: bool = False,
                             split: ActivationSplit = EVERY_BLOCK_SPLIT,
                             vllm_profile: bool = False) -> PrefillActivations:
    """Peak transient bytes of one forward over ``q_tokens`` new tokens per sequence.

    Parameters: batch [sequences], q_tokens [tokens processed now], kv_tokens [tokens attended to],
    act_bytes [bytes per activation element], attention ['sdpa' | 'flash' | 'eager'],
    logits_positions [positions per sequence whose logits are computed], tp [tensor-parallel degree:
    heads and intermediate width are split across devices, the residual stream is not], forward_locals [the
    forward keeps its input embeddings, rotary tables and the post-attention residual alive, as transformers does],
    recurrent_scan [the recurrent mixers' prefill peak of transformers' torch path is a layer kind of its own,
    :func:`recurrent_mixer_bytes`; it needs more than one token per sequence], split [which blocks ``tp`` divides
    (formulas/tensor_parallel.py ``activation_split``): the heads of attention, the intermediates of the MLP, the
    routed and the shared experts, the mixer's scan; a block left whole is counted whole on every rank],
    vllm_profile [the recurrent mixers' peak in vLLM's start-up profile run over ``batch x q_tokens`` tokens, a layer
    kind of its own: formulas/vllm_mixer_profile.py eqs. V1-V3, sharded over ``tp`` by vLLM's own rule].
    """
    t = batch * q_tokens
    h = spec.hidden_size
    if spec.gemma3n is not None and forward_locals:
        return gemma3n_prefill_terms(spec, batch, q_tokens, kv_tokens, act_bytes, attention, logits_positions,
                                     logits_bytes_per_elem, tp, split)
    residual = 2 * t * h * act_bytes
    if spec.mla is not None:
        m = spec.mla
        q_w = spec.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        kv_w = spec.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
        o_w = spec.num_heads * m.v_head_dim
    else:  # the widest layer's heads: Gemma 4's full-attention layers take full_head_dim (the attention peak is the
        # largest layer's)
        hd = max(spec.head_dim, spec.full_head_dim)
        q_w = spec.num_heads * hd
        kv_w = 2 * spec.num_kv_heads * hd
        o_w = q_w
    attn = _attention_core(spec, batch, q_tokens, kv_tokens, act_bytes, attention, split.ways("attention", tp),
                           q_w + kv_w + o_w)
    tp = max(1, tp)

    def whole(block: str) -> int:  # a block left whole counts tp shares of the tp-way total below
        return tp // split.ways(block, tp)

    if spec.is_moe and spec.moe is not None:
        moe = spec.moe
        # routed tokens: each token visits k experts; router logits in fp32, whole on every rank (the router is
        # replicated by every engine: formulas/tensor_parallel.py REPLICATED_MATRICES, no transformers plan splits it)
        routed = t * moe.experts_per_token
        mlp = 3 * routed * moe.expert_intermediate_size * act_bytes * whole("experts") + t * moe.num_experts * 4 * tp
        mlp += 3 * t * moe.shared_intermediate_size * act_bytes * whole("shared_experts")
        if spec.intermediate_size and not all(spec.moe_layers):
            mlp = max(mlp, 3 * t * spec.intermediate_size * act_bytes * whole("mlp"))
    elif spec.mlp_gated:
        mlp = 3 * t * spec.intermediate_size * act_bytes * whole("mlp")
    else:  # fc1's output and the activation's output (a Python gelu_new: its tanh and product temporaries too)
        mlp = (4 if spec.mlp_act_python else 2) * t * spec.intermediate_size * act_bytes * whole("mlp")
    if spec.parallel_block:  # the attention branch's output waits for the MLP's (out = x + attn + mlp): [t, h],
        # whole on every rank after the row-parallel output projection's all-reduce, whatever the MLP's split
        mlp += t * h * act_bytes * tp
    mlp //= tp
    if forward_locals:  # inputs_embeds, rotary cos/sin (+ the post-attention residual in the MLP): module docstring
        rope = 0
        if spec.rotary:  # a model with no rotary positions builds no cos/sin (Mamba2Model, NemotronHModel)
            # the tables are as wide as the rotated channels (a partial rotary: ModelSpec.rotary_dim)
            rope_dim = spec.mla.qk_rope_head_dim if spec.mla is not None else (spec.rotary_dim or spec.head_dim)
            pairs = len(set(spec.layer_types)) if spec.model_type.startswith("gemma3") else 1
            rope = 2 * pairs * t * rope_dim * act_bytes
        attn += t * h * act_bytes + rope
        mlp += 2 * t * h * act_bytes + rope
        residual += sdpa_sliding_mask_bytes(spec, q_tokens, kv_tokens, attention)
    mixer = recurrent_mixer_bytes(spec, batch, q_tokens, act_bytes) // split.ways("mixer", tp) if recurrent_scan else 0
    if vllm_profile:
        mixer = max(mixer, vllm_profile_mixer_bytes(spec, t, act_bytes, tp))
    if mixer and forward_locals:  # the same model-forward locals as beside attention
        mixer += t * h * act_bytes + rope
    logits = batch * min(logits_positions, q_tokens) * spec.vocab_size * (act_bytes + logits_bytes_per_elem)
    peak = residual + max(attn, mlp, logits, mixer)
    return PrefillActivations(residual, attn, mlp, logits, peak, mixer)


def recurrent_mixer_bytes(spec: ModelSpec, batch: int, q_tokens: int, act_bytes: int) -> int:
    """One recurrent mixer's prefill peak in transformers' torch path (formulas/recurrent_activations.py eqs. M4,
    G4, M5); 0 where that rule does not apply: one token per sequence (the one-step state update) or no recurrent
    layer. The whole model's channels (d_inner, all heads): whether a tensor-parallel rank holds all of it is
    ``activation_split``'s ``mixer`` (transformers 5.24's plans split none of a mixer's activations: Jamba,
    Nemotron-H, Falcon-H1, GraniteMoeHybrid name none of its linears; Qwen3-Next's in_proj_qkvz, in_proj_ba and
    out_proj are ``colwise_gather_output``, configuration_qwen3_next.py L76-78: each rank gathers all heads, so
    every rank runs the whole scan)."""
    r = spec.recurrent
    if q_tokens <= 1 or r is None or not spec.recurrent_layer_count:
        return 0
    if r.kind == "mamba2":
        return mamba2_prefill_peak_bytes(batch, q_tokens, r.num_heads, r.head_dim, r.d_state, r.n_groups,
                                         r.chunk_size, act_bytes)
    if r.kind == "gated_deltanet":
        return gated_deltanet_prefill_peak_bytes(batch, q_tokens, r.n_groups, r.num_heads, r.d_state, r.head_dim,
                                                 act_bytes)
    if r.kind == "mamba":
        return mamba1_prefill_peak_bytes(batch, q_tokens, spec.hidden_size, r.d_inner, r.d_state, r.dt_rank,
                                         act_bytes, r.bcdt_norms, spec.model_type in MAMBA1_RAW_MASK_TYPES)
    return 0


def sdpa_sliding_mask_bytes(spec: ModelSpec, q_tokens: int, kv_tokens: int, attention: str) -> int:
    """The bool mask transformers builds once for the sliding-window layers and keeps for the whole layer loop.

    transformers v5.24.0 masking_utils.py: ``sdpa_mask`` (L395) returns None when ``is_causal`` can stand in for the
    mask (full attention, no padding); a sliding window shorter than the keys cannot, so the mask is built by
    broadcasting the mask function over (batch, head, q, kv) aranges (L528-539). A padding mask of all ones is dropped
    first (``prepare_padding_mask`` L512, ``attention_mask.all()`` L658), so the batch index is unused and the mask is
    [1, 1, q, kv] bool, expanded (a view) to the batch: q x kv bytes. With padding it is [batch, 1, q, kv]: not
    modelled (generation of equal-length prompts has none). Flash kernels take the window natively; eager's
    additive mask is counted with its scores.
    """
    window = spec.sliding_window
    if attention != "sdpa" or window is None or window >= kv_tokens or "sliding" not in spec.layer_types:
        return 0
    return q_tokens * kv_tokens


def _attention_core(spec: ModelSpec, batch: int, q_tokens: int, kv_tokens: int, act_bytes: int, attention: str,
                    tp: int, widths: int) -> int:
    """q, k, v and the attention output (``widths`` per token), + eager's score matrix and additive mask, on a rank
    holding 1/``tp`` of the heads (``tp`` 1: all of them)."""
    attn = batch * q_tokens * widths * act_bytes // tp
    if spec.math_attention and attention == "sdpa":  # torch's math kernel: fp32 q/k/v copies, scores and softmax
        attn += batch * spec.num_heads // tp * q_tokens * kv_tokens * 2 * 4
        attn += 3 * batch * q_tokens * spec.num_heads * spec.head_dim * 4 // tp if act_bytes < 4 else 0
    if spec.attention_mask_materialised and attention == "sdpa":  # the float causal mask the module hands SDPA
        attn += batch * q_tokens * kv_tokens * act_bytes
    if attention == "eager":
        per_score = 2 * act_bytes + (4 + act_bytes if act_bytes < 4 else 0)
        attn += batch * spec.num_heads // tp * q_tokens * kv_tokens * per_score
        attn += batch * q_tokens * kv_tokens * act_bytes  # the additive causal mask
    return attn


def gemma3n_prefill_terms(spec: ModelSpec, batch: int, q_tokens: int, kv_tokens: int, act_bytes: int = 2,
                          attention: str = "sdpa", logits_positions: int = 1, logits_bytes_per_elem: int = 4,
                          tp: int = 1, split: ActivationSplit = EVERY_BLOCK_SPLIT) -> PrefillActivations:
    """Gemma 3n's activation peak in the transformers forward (v5.24.0 models/gemma3n/modeling_gemma3n.py, L = line).

    With t = batch x q_tokens, n AltUp streams, hidden h, the widest layer's intermediate size I, per-layer width P
    over N layers, rope width d and c = act_bytes, alive through the whole layer loop (``residual_bytes``):

    - ``Gemma3nTextModel.forward``: ``inputs_embeds`` (L1649, kept as ``hidden_states_0`` L1679): t h c; the list
      ``temp_hidden_states`` (L1684-1692) keeps the n - 1 rescaled stream projections (L1691) and the local
      ``altup_proj`` the last raw projection (L1687): n t h c; the per-layer inputs ``per_layer_inputs``
      [b, s, N, P] (L1652, ``project_per_layer_inputs`` L1770): t N P c; the streams a layer reads (``torch.stack``
      L1694, then each layer's output, ``altup.correct`` L1058-1059): n t h c; one (cos, sin) pair per layer type (L1696-1697): 2 x types x
      t d c; the sliding-window mask of ``create_sliding_window_causal_mask`` (L1675):
      :func:`sdpa_sliding_mask_bytes`.

    Inside ``Gemma3nTextDecoderLayer.forward`` (L1271-1322), on top of the n t h c predictions (``altup.predict`` L1282,
    ``.contiguous()`` L1029):

    - MLP phase (``mlp_bytes``), at ``down_proj``: six [t, h] locals -- ``active_prediction_normed`` (L1285),
      ``laurel_output`` (L1286, L935), the post-normed ``attn`` (L1297), ``attn_gated`` (L1299), ``attn_laurel``
      (L1300), ``attn_norm`` (L1302) -- and ``Gemma3nTextMLP.forward`` (L950-956) keeps ``gate_proj``,
      ``activations`` and ``up_proj`` as locals while the product and the down projection's output exist:
      4 t I c + t h c (Llama's MLP frees act's input: 3 t I). With activation sparsity ``_gaussian_topk`` (L959-973)
      holds at most 3 t I, below that.
    - Attention phase (``attention_bytes``): ``active_prediction_normed``, ``laurel_output`` and q, k, v, output.

    The tiny model's traced peak (bf16, t = 1024, h = 256, I = 4h) is the MLP phase at ``down_proj``: 38.27 [t, h]
    units measured, 38.25 counted here (the rest: per-token magnitudes and router logits).
    """
    assert spec.gemma3n is not None
    g = spec.gemma3n
    t = batch * q_tokens
    h, n, c = spec.hidden_size, g.altup_inputs, act_bytes
    types = set(spec.layer_types)
    rope = 2 * max(1, len(types)) * t * spec.head_dim * c if spec.rotary else 0
    mask = sdpa_sliding_mask_bytes(spec, q_tokens, kv_tokens, attention)
    projections = n * t * h * c if n > 1 else 0  # n - 1 rescaled streams + the last raw projection
    residual = (t * h * c + projections + t * spec.num_layers * g.per_layer_width * c + n * t * h * c + rope + mask)
    predictions = n * t * h * c
    widths = spec.num_heads * spec.head_dim * 2 + 2 * spec.num_kv_heads * spec.head_dim
    attn = predictions + 2 * t * h * c + _attention_core(spec, batch, q_tokens, kv_tokens, c, attention,
                                                         split.ways("attention", tp), widths)
    mlp = predictions + 7 * t * h * c + 4 * t * spec.intermediate_size * c // split.ways("mlp", tp)
    logits = batch * min(logits_positions, q_tokens) * spec.vocab_size * (act_bytes + logits_bytes_per_elem)
    return PrefillActivations(residual, attn, mlp, logits, residual + max(attn, mlp, logits))
