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
The last step of the model turns hidden states into logits [tokens_out, vocab] and ``generate`` upcasts
them to fp32: only the last position is computed (transformers ``logits_to_keep=1`` during generation).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import ModelSpec


@dataclass(frozen=True)
class PrefillActivations:
    residual_bytes: int  # residual stream + normalised copy
    attention_bytes: int  # q, k, v, attention output (+ score matrix for eager)
    mlp_bytes: int  # intermediate tensors of the (routed) MLP
    logits_bytes: int
    peak_bytes: int  # residual + max(attention, mlp, logits)


def prefill_activation_bytes(spec: ModelSpec, batch: int, q_tokens: int, kv_tokens: int, act_bytes: int = 2,
                             attention: str = "sdpa", logits_positions: int = 1,
                             logits_bytes_per_elem: int = 4, tp: int = 1,
                             forward_locals: bool = False) -> PrefillActivations:
    """Peak transient bytes of one forward over ``q_tokens`` new tokens per sequence.

    Parameters: batch [sequences], q_tokens [tokens processed now], kv_tokens [tokens attended to],
    act_bytes [bytes per activation element], attention ['sdpa' | 'flash' | 'eager'],
    logits_positions [positions per sequence whose logits are computed], tp [tensor-parallel degree:
    heads and intermediate width are split across devices, the residual stream is not], forward_locals [the
    forward keeps its input embeddings, rotary tables and the post-attention residual alive, as transformers does].
    """
    t = batch * q_tokens
    h = spec.hidden_size
    residual = 2 * t * h * act_bytes
    if spec.mla is not None:
        m = spec.mla
        q_w = spec.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        kv_w = spec.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
        o_w = spec.num_heads * m.v_head_dim
    else:
        q_w = spec.num_heads * spec.head_dim
        kv_w = 2 * spec.num_kv_heads * spec.head_dim
        o_w = q_w
    attn = t * (q_w + kv_w + o_w) * act_bytes // tp
    if attention == "eager":
        per_score = 2 * act_bytes + (4 + act_bytes if act_bytes < 4 else 0)
        attn += batch * spec.num_heads // tp * q_tokens * kv_tokens * per_score
        attn += batch * q_tokens * kv_tokens * act_bytes  # the additive causal mask
    if spec.is_moe and spec.moe is not None:
        moe = spec.moe
        # routed tokens: each token visits k experts; router logits in fp32
        routed = t * moe.experts_per_token
        mlp = 3 * routed * moe.expert_intermediate_size * act_bytes + t * moe.num_experts * 4
        mlp += 3 * t * moe.shared_intermediate_size * act_bytes
        if spec.intermediate_size and not all(spec.moe_layers):
            mlp = max(mlp, 3 * t * spec.intermediate_size * act_bytes)
    else:
        mlp = 3 * t * spec.intermediate_size * act_bytes
    mlp //= tp
    if forward_locals:  # inputs_embeds, rotary cos/sin (+ the post-attention residual in the MLP): module docstring
        rope = 0
        if not spec.position_embeddings:
            rope_dim = spec.mla.qk_rope_head_dim if spec.mla is not None else spec.head_dim
            pairs = len(set(spec.layer_types)) if spec.model_type.startswith("gemma3") else 1
            rope = 2 * pairs * t * rope_dim * act_bytes
        attn += t * h * act_bytes + rope
        mlp += 2 * t * h * act_bytes + rope
    logits = batch * min(logits_positions, q_tokens) * spec.vocab_size * (act_bytes + logits_bytes_per_elem)
    peak = residual + max(attn, mlp, logits)
    return PrefillActivations(residual, attn, mlp, logits, peak)
