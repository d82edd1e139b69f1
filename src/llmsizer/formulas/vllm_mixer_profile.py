"""The activation peak of one recurrent mixer (Mamba-2, Gated DeltaNet, Mamba-1) in vLLM's start-up profile run.

vLLM sizes its KV pool from the torch peak of one forward over ``max_num_batched_tokens`` T tokens (vllm.py eq. 1).
That forward runs with no attention metadata: ``gpu_model_runner.profile_run`` calls ``_dummy_run(
self.max_num_tokens, is_profile=True)`` (vllm-project/vllm v0.23.0 wheel, vllm/v1/worker/gpu_model_runner.py
L6228-6230), whose ``attn_metadata`` stays None unless ``force_attention`` or a FULL CUDA graph asks for it
(L5753, L5775). Each recurrent mixer then takes its profile branch, which skips the chunked scan at T tokens: the
SSD / delta-rule kernels are only warmed up on one chunk (Mamba-2: ``_warmup_ssd_kernels``, ``seqlen = chunk_size``,
mamba_mixer2.py L571-667, ending in ``empty_cache``; Gated DeltaNet: ``_warmup_prefill_kernels``, ``T =
FLA_CHUNK_SIZE`` 64, qwen_gdn_linear_attn.py L1068-1195). So the chunk states, dA/dt cumsums and the C^T B matrices of
the triton kernels (ssd_combined.py L92-150) are *not* in the profiled peak, and neither are fla's chunk buffers:
what the profile sees is the projections around the mixer's custom op, counted here (the one-chunk warm-up, a few
tens of MB on the first layer only, is left out). The same code is in v0.34.0 (mamba_mixer2.py L719-727 there,
gpu/model_runner.py ``skip_attn=True`` L1086-1090).

vLLM compiles the model by default (torch.compile, piecewise: every mixer's custom op is a splitting op,
vllm/config/compilation.py ``_attention_ops`` L756-770), so outside the custom ops Inductor frees each buffer after
its last use and folds view / copy chains into the kernels that read them; the custom op's body runs eagerly.
The moments below are those at which the most of a layer's own tensors coexist; [t, hidden] tensors passed in and
the residual stream are the caller's (formulas/activations.py ``residual_bytes``), and the out_proj output is not
counted, as the attention rule does not count o_proj's. Notation (elements per token on one of ``tp`` GPUs,
times c = activation bytes and t = tokens): vLLM shards every mixer over the tensor-parallel GPUs (column-parallel
in_proj, row-parallel out_proj).

**Mamba-2** (``MambaMixer2``, mamba_mixer2.py @v0.23.0; Nemotron-H, Granite-4.0-H, Falcon-H1, Mamba-2 models):
H heads of P channels (d = H P), G groups of state n, G' = G + extra groups (``extra_groups_for_head_shards``
L307: tp - G where tp does not divide G), conv = d + 2 G' n, proj = d + conv + H (in_proj's output, L536; Falcon-H1's
``* mup_vector`` L537-538 replaces it). ``forward`` allocates ``ssm_output`` [t, d/tp] (L541-548) and calls the
custom op (L553-557), whose profile branch (L719-727) copies the conv channels once:
``hidden_states_B_C.transpose(0, 1).clone()`` keeps the stride order of its strided input (``preserve_format``
follows the input's stride permutation), so it is [conv/tp, t] laid out as [t, conv/tp], and the
``.transpose(0, 1).contiguous()`` after it is a no-op (measured on live storages,
tests/formulas/test_vllm_mixer_profile.py). The gated norm (L563-564) and out_proj come after, with fewer alive
(proj + 2 d <= proj + d + conv; with n_groups 1 under tensor parallelism the norm's fp32 product around its
all-reduce, mamba_mixer2.py L116-127, may be materialised: not counted)::

    (V1)  mamba2 = c t (proj + d + conv) / tp = c t (2 d + 2 conv + H) / tp

**Gated DeltaNet** (``QwenGatedDeltaNetAttention.forward_cuda``, qwen_gdn_linear_attn.py L908-966 @v0.23.0,
Qwen3-Next's interleaved layout ``gqa_interleaved_layout=True``, qwen3_next.py L346): Hk key heads of dk,
Hv value heads of dv (Kd = Hk dk, Vd = Hv dv). in_proj_qkvz [t, 2 Kd + 2 Vd], in_proj_ba [t, 2 Hv] (L923-924);
``fix_query_key_value_ordering`` (L644-693) splits them per key head, so with more than one key head on a GPU
(Hk / tp > 1) z, b and a are reshapes of strided slices, which copy (L689-691; v's copy, L688, folds into the
cat); mixed_qkv = cat(q, k, v) is a new [t, 2 Kd + Vd] (L931-934); ``core_attn_out`` is a zeros [t, Vd] (L950-954)
and the decoder layer's ``self_attention_output`` an ``empty_like`` [t, hidden] (qwen3_next.py L416, whole on every
GPU). Compiled, all of this up to the custom op (L956-962, whose profile branch returns at once, L1276-1280) is one
Inductor graph, which allocates its outputs -- mixed_qkv, z, b, a, core_attn_out, the output -- before the one
fused kernel that writes them from qkvz and ba, freed when the graph returns (read from Inductor's own wrapper code
for this graph on the CPU, tests/formulas/test_vllm_mixer_profile.py). With one key head per GPU z, b and a are
views of qkvz and ba, which they keep. The gated norm after the op (L866) holds fewer (core_attn_out, z, its
[t, Vd] output). With Kd, Vd and Hv the widths on one GPU (/ tp) and the hidden buffer whole::

    copies = Vd + 2 Hv if Hk / tp > 1 else 0
    (V2)  gated deltanet = c t (2 Kd + 2 Vd + 2 Hv + 2 Kd + Vd + copies + Vd + hidden)

**Mamba-1** (``MambaMixer.forward_impl``, mamba_mixer.py @v0.23.0; Jamba): d = d_inner channels. The decoder layer
preallocates the output [t, hidden] (jamba.py L180-181, ``torch.empty_like``); inside the custom op in_proj's output
[t, 2 d/tp] (L287-288), the profile branch's ``hidden_states_BC.contiguous()`` [d/tp, t] and out_proj's result
[t, hidden] (L295-298: returned, then dropped) coexist::

    (V3)  mamba1 = c t (3 d / tp + 2 hidden)

**What the profile does not see** (Mamba-2): the first step that prefills ``max_num_batched_tokens`` for real runs
the chunked scan (mamba_mixer2.py L792-872: ``causal_conv1d_fn`` L810, ``mamba_chunk_scan_combined_varlen`` L848;
ssd_combined.py L92-150 @v0.23.0) after the KV pool has been sized without it. Beside V1's in_proj output and ssm_output it holds the conv output (``causal_conv1d_fn``:
``torch.empty_like(x)`` of the [conv/tp, t] view, causal_conv1d.py L545, in place of V1's copy), dt and dA_cumsum
(fp32 [H/tp, N, C] each, ssd_chunk_state.py L317-322) and, at the state passing (ssd_state_passing.py L114), the
fp32 chunk states [N, H/tp, P, n] (ssd_chunk_state.py L368-370) with their passed copy in the state dtype s; after
it the fp32 states are freed and C^T B (fp32 [N, G'/tp, C, C], ssd_bmm.py L170-172) comes. N = ceil(t / C) chunks
for one sequence (each sequence starts its own chunks: + sequences - 1 at most)::

    (V4)  mamba2 step = V1 + 8 (H/tp) N C + (H/tp) P n N (s + 4)            (the state passing)
                        max. V1 + 8 (H/tp) N C + (H/tp) P n N s + 4 N (G'/tp) C^2   (the chunk scan)

vLLM 0.23 takes it from the (1 - gpu_memory_utilization) margin (estimate/inference/vllm.py warns where it does not
fit); v0.34.0 adds a sizing warm-up for its extensible KV cache that runs such a step (v1/worker/gpu/warmup.py
``run_kv_cache_sizing_warmup`` L483-530), not modelled.
"""

from __future__ import annotations

from ..specs import ModelSpec
from .recurrent_state import extra_groups

# model types whose vLLM Gated DeltaNet layer unpacks Qwen3-Next's interleaved per-key-head qkvz / ba layout
# (qwen3_next.py L346 ``gqa_interleaved_layout=True``; Qwen3.5's contiguous layout, qwen3_5.py L142, is not read here)
GDN_INTERLEAVED_TYPES = frozenset({"qwen3_next"})


def vllm_mamba2_profile_bytes(tokens: int, heads: int, head_dim: int, d_state: int, groups: int, compute: int,
                              tp: int = 1) -> int:
    """Eq. (V1): one Mamba-2 mixer's peak in vLLM's profile run over ``tokens`` tokens, on one of ``tp`` GPUs.
    heads / groups: the model's; compute: the activations' element size [bytes]."""
    extra = extra_groups(groups, tp)
    d = heads * head_dim
    conv = (d + 2 * (groups + extra) * d_state) // tp
    d_r, h_r = d // tp, heads // tp
    proj = d_r + conv + h_r
    return compute * tokens * (proj + d_r + conv)


def vllm_mamba2_step_bytes(tokens: int, heads: int, head_dim: int, d_state: int, groups: int, chunk: int,
                           compute: int, state_bytes: int, tp: int = 1, sequences: int = 1) -> int:
    """Eq. (V4): one Mamba-2 mixer's peak in a real prefill step of ``tokens`` tokens over ``sequences`` sequences
    (the chunked scan the profile run skips), on one of ``tp`` GPUs. chunk: the SSD chunk length; state_bytes: the
    SSM state's element size (the cache dtype); compute: the activations' element size [bytes]."""
    h_r, g_r = heads // tp, (groups + extra_groups(groups, tp)) // tp
    n_chunks = -(-tokens // chunk) + max(sequences, 1) - 1
    held = vllm_mamba2_profile_bytes(tokens, heads, head_dim, d_state, groups, compute, tp)
    cumsums = 8 * h_r * n_chunks * chunk
    states = h_r * head_dim * d_state * n_chunks
    return held + cumsums + max(states * (state_bytes + 4), states * state_bytes + 4 * n_chunks * g_r * chunk * chunk)


def vllm_gated_deltanet_profile_bytes(tokens: int, key_heads: int, value_heads: int, key_dim: int, value_dim: int,
                                      hidden: int, compute: int, tp: int = 1) -> int:
    """Eq. (V2): one Gated DeltaNet layer's peak in vLLM's profile run (Qwen3-Next's interleaved layout) over
    ``tokens`` tokens, on one of ``tp`` GPUs. key_dim / value_dim: per head; hidden: the model's [t, hidden] output
    buffer, whole on every GPU; compute: the activations' element size [bytes]."""
    kd, vd, hv = key_heads * key_dim // tp, value_heads * value_dim // tp, value_heads // tp
    copies = vd + 2 * hv if key_heads // tp > 1 else 0
    return compute * tokens * (2 * kd + 2 * vd + 2 * hv + 2 * kd + vd + copies + vd + hidden)


def vllm_mamba1_profile_bytes(tokens: int, d_inner: int, hidden: int, compute: int, tp: int = 1) -> int:
    """Eq. (V3): one Mamba-1 mixer's peak in vLLM's profile run over ``tokens`` tokens, on one of ``tp`` GPUs."""
    return compute * tokens * (3 * (d_inner // tp) + 2 * hidden)


def vllm_profile_mixer_modelled(spec: ModelSpec) -> bool:
    """Whether eqs. V1-V3 size ``spec``'s recurrent mixer: Mamba-1, Mamba-2 and Qwen3-Next's Gated DeltaNet (another
    Gated DeltaNet layout is not read: the attention-layer rule stands for it)."""
    r = spec.recurrent
    if r is None or not spec.recurrent_layer_count:
        return False
    return r.kind in ("mamba", "mamba2") or (r.kind == "gated_deltanet" and spec.model_type in GDN_INTERLEAVED_TYPES)


def vllm_profile_mixer_bytes(spec: ModelSpec, tokens: int, compute: int, tp: int = 1) -> int:
    """The recurrent mixer's profile-run peak of ``spec`` (eqs. V1-V3) on one of ``tp`` GPUs; 0 where
    :func:`vllm_profile_mixer_modelled` says no."""
    r = spec.recurrent
    if r is None or not vllm_profile_mixer_modelled(spec) or tokens <= 0:
        return 0
    tp = max(1, tp)
    if r.kind == "mamba2":
        return vllm_mamba2_profile_bytes(tokens, r.num_heads, r.head_dim, r.d_state, r.n_groups, compute, tp)
    if r.kind == "gated_deltanet":
        return vllm_gated_deltanet_profile_bytes(tokens, r.n_groups, r.num_heads, r.d_state, r.head_dim,
                                                 spec.hidden_size, compute, tp)
    return vllm_mamba1_profile_bytes(tokens, r.d_inner, spec.hidden_size, compute, tp)
