"""The prefill activation peak of one recurrent mixer in transformers' torch path (no gradients kept).

transformers v5.24.0 runs the recurrent mixers' prefill through its torch reference functions when the kernels
(``mamba_ssm`` / ``causal-conv1d`` for Mamba-2 and Mamba-1, ``fla`` for Gated DeltaNet) do not import
(``integrations/hub_kernels.py`` ``use_kernel_func_from_hub_with_fallback``): that path is what these equations
count, a named assumption of the estimate (with the kernels the scan's chunk tensors, or Mamba-1's discretised
[b, d, s, n] tensors, are never materialised, so the peak is lower). Every function name below runs with all its
locals alive until it returns, so the peak is where the most of them coexist. Counted by reading the code and checked
tensor by tensor against a live-storage tracker on the CPU (tests/formulas/test_recurrent_activations_forward.py:
equal to the byte in bf16 and fp32, padded and unpadded, one chunk and several). Only a prompt of more than one token
takes the chunked path (Mamba-1: the discretised scan; one token per sequence runs the one-step state update); the
mixer's input and its output are the caller's, and the cache's conv / recurrent state are the ``recurrent_state``
item's, so none of them is counted here.

Notation (bytes, one layer on one device): b sequences of s tokens, t = b s, c the activations' element size;
chunk C, N = ceil(s / C) chunks, s' = N C (the scans pad to whole chunks).

**Mamba-2** (``Mamba2Mixer.forward``, models/mamba2/modeling_mamba2.py L461-606, ``mamba2_chunk_scan`` L258-372;
``NemotronHMamba2Mixer`` (modeling_nemotron_h.py L274, L584), ``FalconH1Mixer`` (modeling_falcon_h1.py L473, L792) and
``GraniteMoeHybridMambaLayer`` run copies of both): H heads of P channels (d = H P), G groups of state n, conv =
d + 2 G n channels, in_proj output proj = d + conv + H; Q = b H s' positions. The mixer holds through the scan its
in_proj output (gate a view of it; Falcon-H1's product with ``mup_vector`` replaces it), the conv's silu output (the
padded conv1d output is freed), dt after bias / softplus / clamp and A = -exp(A_log) (fp32)::

    mixer = c t (proj + conv + H) + 4 H

The scan's fp32 locals at its end (``(Y_diag + Y_off).contiguous()``, L349): the D residual and the chunked x (P
each), A chunked and its cumsum, the two decay exponentials (1 each), B and C repeated to H heads and B decayed (n
each), L = exp(segment_sum), G and M = G L (C each), Y_diag (P); the zero initial state and the N + 1 chunk states
(b H P n each), the chunk-decay matrix b H (N + 1)^2; then C times the states, Y_off, their sum and its copy (4 P)::

    scan_end = 4 Q (3 C + 3 n + 7 P + 4) + 4 b H P n (N + 2) + 4 b H (N + 1)^2

With n > 3 P the peak is earlier, inside ``einsum("bclhn,bchpn->bclhp", C, states)`` (L343): einsum's contiguous
copies of C (4 Q n) and of the N chunk states (4 b N H P n) beside its output (4 Q P), before the last three::

    (M4)  mamba2 peak = mixer + 4 Q (3 C + 3 n + 3 P + 4) + 4 b H P n (N + 2) + 4 b H (N + 1)^2
                        + max(16 Q P, 4 Q n + 4 b N H P n + 4 Q P)

**Gated DeltaNet** (``Qwen3NextGatedDeltaNet.forward``, models/qwen3_next/modeling_qwen3_next.py L660-769,
``torch_chunk_gated_delta_rule`` L371-521, C = 64: the layer does not pass ``chunk_size``; qwen3_5 and qwen3_5_moe run
copies): Hk key heads of dk, Hv value heads of dv (Kd = Hk dk, Vd = Hv dv, conv = 2 Kd + Vd), P' = b Hv s' chunk
positions. The layer holds its two in_proj outputs (qkvz, ba), the conv's silu output, beta (sigmoid) and g (fp32);
with 1 < Hk < Hv ``fix_query_key_value_ordering`` (L629-656) copies z, b and a when it reshapes their strided splits::

    mixer = c t (2 Kd + 2 Vd + 2 Hv + conv + Hv + [Vd + 2 Hv if 1 < Hk < Hv]) + 4 t Hv

Then the most of three moments of the scan's fp32 locals (with the C^2 bool mask and the chunk decays 4 b Hv N):
(a) ``(query @ key^T) * decay`` (L460): q, k (dk), v (dv), beta, decay, k beta (dk), v beta (dv), the cumulative decay
and four C-wide tensors (the pairwise decay, the UT system, the bmm and its product)::

    a = 4 P' (4 C + 3 dk + 2 dv + 3)

and, with the UT system solved (new values, k cumdecay), decayed k beta, the output buffer (zeros_like of the
solve's column-major result) and the decayed q and k in place of the plain ones, base = 4 P' (3 C + 5 dk + 4 dv + 3)
+ 2 x 4 b Hv C dv (a chunk's v_new and its inter-chunk output); (loop) the state update of a chunk (L500): the old
state, its decayed copy, k^T v_new and their sum; (end) the output buffer's reshape (L505), a copy because the
buffer is not contiguous, beside the last state::

    (G4)  gated deltanet peak = mixer + max(a, base + 4 x 4 b Hv dk dv, base + 4 b Hv dk dv + 4 P' dv)

**Mamba-1** (``MambaMixer.forward``, models/mamba/modeling_mamba.py L360-484, ``mamba_selective_scan`` L175-280;
``JambaMambaMixer.forward`` modeling_jamba.py L508-624 and ``FalconMambaMixer.forward`` modeling_falcon_mamba.py
L383-522 run copies of both): d = d_inner channels, state n, dt rank R, h hidden. With neither mambapy (not a
dependency; ``use_mambapy`` is off by default) nor torch.compile (the associative scan), the scan discretises the
whole prompt at once, exp(A dt), dt B and dt B x: three fp32 [b, d, s, n] tensors (L214-216) alive to its return,
then loops over the s tokens (L248-268). Through the scan the mixer holds its in_proj output (x and the gate z are
views of it, L378, L402), the conv's silu output (L413-430, ``causal_conv1d_fn`` L82-102), dt_proj's output (L440:
the matmul returns a contiguous [b, d, s] tensor), A (fp32, L380) and, with 16-bit parameters, the fp32 copies of
dt_bias (L441) and D (L467); x_proj's output (L433-438: dt, B and C are views of it) or, for Jamba and FalconMamba,
the B and C RMSNorm outputs (modeling_jamba.py L572-573: dt's norm output and x_proj's output are freed once dt_proj
has run). The scan adds dt after softplus (L207). MambaModel and FalconMambaModel hand the mixer generate()'s
attention mask as it is (L685), so ``apply_mask_to_padding_states`` (L49-58) copies the mixer input (t h c, held to
the return; the conv output's masked copy replaces it, the same size); JambaModel's
``create_recurrent_attention_mask`` (masking_utils.py L1494-1524) is None for an unpadded batch::

    mixer = 12 t d n + 5 t d c + 4 d n + [8 d: 16-bit] + [t (R + 2 n) c: x_proj | 2 t n c: B, C norms]
            + [t h c: the masked input copy]

Then the larger of two moments: (end) ``scan_output + hidden_states * D`` (L271): the s per-token outputs the list
``scan_outputs`` keeps (L260-266, b d c each), their stack (L268), x D and the sum (fp32), beside the last state;
(loop) the last step's ``discrete_A[:, :, i] * ssm_state + deltaB_u[:, :, i]`` (L263): s - 1 outputs, the old state,
the product and the new state (fp32; it wins only for prompts shorter than about n tokens)::

    (M5)  mamba-1 peak = mixer + max(2 t d c + 8 t d + 4 b d n, (s - 1) b d c + 12 b d n)

``scan_output * F.silu(z)`` (L274) reaches the end moment's sum again (silu(z) and the product in place of the stack
and x D).
"""

from __future__ import annotations

GDN_CHUNK = 64  # torch_chunk_gated_delta_rule's default chunk_size; Qwen3NextGatedDeltaNet passes none (L743)
# Mamba-1 models whose model forward hands the mixer generate()'s attention mask as it is (MambaModel.forward
# modeling_mamba.py L685, FalconMambaModel.forward modeling_falcon_mamba.py L719): the mixer copies its input
MAMBA1_RAW_MASK_TYPES = frozenset({"mamba", "falcon_mamba"})


def mamba2_prefill_peak_bytes(batch: int, seq: int, heads: int, head_dim: int, d_state: int, groups: int,
                              chunk: int, compute: int) -> int:
    """Eq. (M4): peak bytes of one Mamba-2 mixer's prefill over ``seq`` tokens of ``batch`` sequences (> 1 token:
    the chunked scan), transformers' torch path. heads / groups: the mixer's, all of them (transformers' plans
    leave the mixer whole on every tensor-parallel rank: tensor_parallel.py ``activation_split``); compute: the
    activations' element size [bytes]."""
    b, s, p, n, c = batch, seq, head_dim, d_state, compute
    t, d = b * s, heads * head_dim
    conv = d + 2 * groups * n
    proj = d + conv + heads
    n_ch = -(-s // chunk)
    q = b * heads * n_ch * chunk
    mixer = c * t * (proj + conv + heads) + 4 * heads
    common = (4 * q * (3 * chunk + 3 * n + 3 * p + 4) + 4 * b * heads * p * n * (n_ch + 2)
              + 4 * b * heads * (n_ch + 1) ** 2)
    return mixer + common + max(16 * q * p, 4 * q * n + 4 * b * n_ch * heads * p * n + 4 * q * p)


def gated_deltanet_prefill_peak_bytes(batch: int, seq: int, key_heads: int, value_heads: int, key_dim: int,
                                      value_dim: int, compute: int, chunk: int = GDN_CHUNK) -> int:
    """Eq. (G4): peak bytes of one Gated DeltaNet layer's prefill (> 1 token: the chunked rule), transformers' torch
    path. key_dim / value_dim: per head (linear_key_head_dim, linear_value_head_dim); compute: the activations'
    element size [bytes]."""
    b, s, c, dk, dv, hk, hv = batch, seq, compute, key_dim, value_dim, key_heads, value_heads
    t, kd, vd = b * s, hk * dk, hv * dv
    conv = 2 * kd + vd
    n_ch = -(-s // chunk)
    pos = b * hv * n_ch * chunk
    copies = vd + 2 * hv if 1 < hk < hv else 0
    mixer = c * t * (2 * kd + 2 * vd + 2 * hv + conv + hv + copies) + 4 * t * hv
    moment_a = 4 * pos * (4 * chunk + 3 * dk + 2 * dv + 3)
    base = 4 * pos * (3 * chunk + 5 * dk + 4 * dv + 3) + 8 * b * hv * chunk * dv
    state = 4 * b * hv * dk * dv
    # the C^2 bool mask throughout; the chunk decays (4 b Hv N) once the system is solved
    return mixer + chunk * chunk + max(moment_a, 4 * b * hv * n_ch + base + 4 * state,
                                       4 * b * hv * n_ch + base + state + 4 * pos * dv)


def mamba1_prefill_peak_bytes(batch: int, seq: int, hidden: int, d_inner: int, d_state: int, dt_rank: int,
                              compute: int, bcdt_norms: bool = False, masked_input: bool = False) -> int:
    """Eq. (M5): peak bytes of one Mamba-1 mixer's prefill over ``seq`` tokens of ``batch`` sequences (> 1 token:
    the discretised sequential scan), transformers' torch path. d_inner: the mixer's channels, all of them (whole
    on every tensor-parallel rank: tensor_parallel.py ``activation_split``); compute: the activations' (and
    parameters') element size [bytes]; bcdt_norms: RMSNorms on dt, B and C (Jamba, FalconMamba);
    masked_input: the model hands the mixer an attention mask, so the mixer copies its input (Mamba, FalconMamba
    under generate())."""
    b, s, d, n, c = batch, seq, d_inner, d_state, compute
    t = b * s
    xproj = 2 * t * n * c if bcdt_norms else t * (dt_rank + 2 * n) * c
    mixer = (12 * t * d * n + 5 * t * d * c + 4 * d * n + (8 * d if c < 4 else 0) + xproj
             + (t * hidden * c if masked_input else 0))
    return mixer + max(2 * t * d * c + 8 * t * d + 4 * b * d * n, (s - 1) * b * d * c + 12 * b * d * n)
