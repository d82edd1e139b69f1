"""What a Mamba layer's mixer keeps for its backward in training, by the code that runs it.

transformers v5.24.0 picks the implementation when a modeling module is imported
(``integrations/hub_kernels.py`` ``use_kernel_func_from_hub_with_fallback``, lines 990-1055): the ``mamba_ssm`` and
``causal_conv1d`` packages when they import, else the torch reference functions of the modeling file. The packages
need a CUDA GPU (or a ROCm one, built from source with HIP), so the two paths are named (``MAMBA_PATHS``) and the
estimate takes the kernels on CUDA and the torch path elsewhere, ROCm included unless asked
(``estimate/training/setup.py``, the ``mamba_path`` assumption).

Notation (bytes per layer and device): b sequences of s tokens, t = b s; h hidden; c compute element size (the
activations' dtype); Mamba-2: H heads of P channels (d = H P), G groups of state n, conv kernel K,
conv = d + 2 G n channels, in_proj output proj = d + conv + H, chunk C, N = ceil(s / C) chunks, s' = N C (the
torch path pads), Q = b H s' chunk positions; Mamba-1 (Jamba): d channels, state n, dt rank R. Inputs of the
in/out projections are counted only when those linears keep them (``in_input`` / ``out_input``: weight trained,
or adapted without dropout).

**Mamba-2, torch path** (``Mamba2Mixer.forward``, modeling_mamba2.py lines 461-606; ``NemotronHMamba2Mixer``,
``FalconH1Mixer`` and ``GraniteMoeHybridMambaLayer`` are copies, and ``mamba2_chunk_scan`` is the same function in
all four files, modeling_mamba2.py lines 258-372)::

    in_proj input                                     t h c
    conv input: a transposed view of the in_proj output, which keeps all of it    t proj c
    silu input: conv1d's padded output (causal_conv1d_fn, lines 148-168)           b (s + K - 1) conv c
    dt + dt_bias and its softplus                     2 t H c
    A = -exp(A_log.float()) and its copy in A * dt    2 H 4
    fp32 copies: x padded for the D residual (b s' d), x and dt (t d + 2 t H)        4 (b s' d + t d + 2 t H)
    segment_sum's two masks, twice                    2 C^2 + 2 (N + 1)^2 bytes
    chunked SSD, fp32: L, G and the einsum copy of G L (3 C); the einsum copies of C and B (2 n), of x (P), of
    B decayed (n) and of x again (P); B and C padded and repeated to H heads (2 n); C times the states (P);
    two decay exponentials (2)                        4 Q (3 C + 5 n + 3 P + 2)
    chunk-boundary decays and states, fp32            4 b H (N + 1)^2 + 4 b H (N + 1) P n + 4 b N H P n
    gated RMSNorm (fp32: silu(gate) input and output, the scan output -- a view of the padded output --, their
    product, 1/rms per group, the normalised tensor)  4 (4 t d + b s' d + t G)
    out_proj input                                    t d c                                               (M1)

  With one chunk (s <= C) torch's einsum reads some operands as views: with b > 1 the second copy of x is not
  made and the states operand is a view of all N + 1 chunk states (4 b H P n more, 4 Q P less); with b = 1 two
  more copies, of B- or C-wide operands, are views (8 Q n less); measured. Falcon-H1 without ``mamba_rms_norm`` (its default) gates
  with ``scan_output * silu(gate)`` instead of the norm: silu output (t d c) and the scan output (4 b s' d).

  Under torch.autocast (16-bit compute; measured on the CPU) bmm autocasts, so the einsums' operand copies and
  outputs are 16-bit: of the chunked SSD only L, the two decays and the padded B stay fp32, and the chunk-decay
  matrix gains a 16-bit copy. With fp32 weights conv1d also keeps its own 16-bit copy of the conv channels (t conv c
  instead of the whole in_proj output: ``causal_conv1d_fn`` first casts to the weight's dtype, modeling_mamba2.py
  lines 148-168); with 16-bit weights (bf16-mixed over bf16 weights, as LoRA's default) that cast copies nothing and
  conv1d keeps the whole in_proj output, as without autocast (measured)::

    4 Q (C + n + 2) + c Q (2 C + 4 n + 3 P) + 4 b H (N + 1)^2 + c (b H (N + 1) P n + b N H P n + b H (N + 1)^2)
                                                                                                          (M1a)

  Falcon-H1 multiplies the in_proj output by its ``mup_vector`` buffer (modeling_falcon_h1.py line 690), which the
  product keeps (proj elements of the weights' dtype, either path). Under autocast with fp32 weights that product is
  fp32, and so are the conv output (x.float() becomes a view of all t conv of it, 4 t conv instead of 4 t d), the
  gate (silu keeps the whole fp32 product, 4 t proj, instead of a gate copy of 4 t d) and, without the norm, the
  silu output (4 t d instead of c t d); with 16-bit weights the buffer and the product are 16-bit, and none of
  this applies                                                                                           (M1b)

  In pure fp32 (no autocast, c = 4) every ``.float()`` / ``.to(torch.float32)`` of the mixer returns its input, so
  three of M1's fp32 copies are tensors kept anyway: x.float() is a view of the silu output, all conv channels
  (4 t conv instead of 4 t d: ``mamba2_chunk_scan``, modeling_mamba2.py line 282); ``A.to(x.dtype) * dt.float()``
  (line 293) keeps the clamped dt that ``x * dt[..., None].float()`` (line 292) keeps (4 t H less); the gated norm's
  ``silu(gate.to(torch.float32))`` (line 117) keeps the gate, a view of the in_proj output conv1d keeps (4 t d
  less). Measured, every weight trained and all frozen (tests/training/test_mamba_saved_tensors.py; before, pure
  fp32 read 1.0083 Mamba-2, 1.0139-1.0215 the gated-norm copies, 0.9887 Falcon-H1 without the norm)       (M1c)

**Mamba-2, kernels** (mamba_ssm ``MambaSplitConv1dScanCombinedFn``, mamba_ssm/ops/triton/ssd_combined.py @
e9594ce lines 820-899, taken in training with no cache, modeling_mamba2.py lines 482-505): the Function runs the
conv, the chunked scan, the gated RMSNorm and out_proj inside one forward and keeps (``ctx.save_for_backward``,
lines 888-889) the in_proj output ``zxbcdt``, the scan output ``out_x`` (in x's dtype), the norm's fp32 ``rstd``
(one per token and group, ``_layer_norm_fwd``) and A; the norm output and out_proj's input are recomputed::

    in_proj input + zxbcdt + out_x + rstd + A (exp output, and A itself)     t h c + t proj c + t d c + 4 t G + 2 H 4
                                                                                                           (M2)

  The Function is ``@custom_fwd`` without ``cast_inputs`` (ssd_combined.py line 818), so it takes ``zxbcdt`` as it
  comes: Falcon-H1's fp32 ``projected_states * mup_vector`` under autocast with fp32 weights
  (modeling_falcon_h1.py line 690), whose conv output, and so ``out_x``, is fp32 too (``torch.empty_like``):
  4 t proj + 4 t d instead of c t proj + c t d (measured).

**Jamba (Mamba-1 with RMSNorms on dt, B and C), torch path** (``JambaMambaMixer.forward``, modeling_jamba.py lines
508-628, ``mamba_selective_scan`` lines 337-437: on a CPU the sequential loop; the associative scan only under
torch.compile)::

    in_proj input t h c; A = -exp(A_log.float()) and its broadcast in A dt, fp32      2 d n 4
    conv input (a view of the in_proj output) t 2 d c; silu input (padded conv output) b (s + K - 1) d c
    x_proj input (a copy of the transposed conv output; with b = 1 a view, which x D keeps anyway) t d c
    dt / B / C RMSNorms: fp32 input, 1/rms, normalised; dt_proj's matmul keeps the dt norm output; the scan's
    matmuls keep the C norm output           t R (4 + 2 c) + 2 t n (4 + c) + 3 t 4 + t n c
    softplus input and output                 2 t d c
    exp(A dt), fp32 B, fp32 x, dt B           t d n 4 + t n 4 + t d 4 + t d n 4
    the loop: the zero state, each step's state cast for the matmul (c) and, but the last, its fp32 state
                                              b d n (c (s + 1) + 4 (s - 1))
    D.float(), the silu output x (kept by x D), the fp32 sum y, silu(z)       d 4 + t d c + t d 4 + t d c
    out_proj input                            t d c                                                      (J1)

  In pure fp32 (c = 4, no autocast) the casts are no-ops: the zero state is fp32 and each step's
  ``ssm_state.to(input_dtype)`` (line 427) is the state the next step's product keeps, so the loop keeps s + 1 fp32
  states, not 2 s; ``hidden_states[..., None].float()`` (line 377) is x itself, which ``hidden_states * D`` keeps
  (line 432), and ``self.D.float()`` (line 607) is the parameter. Measured: before, pure fp32 read 1.22::

    J1 with the loop 4 b d n (s + 1), x once (4 t d: no t d c for x D) and no d 4 for D.float()          (J1a)

  Under torch.autocast with fp32 weights ``causal_conv1d_fn``'s ``x.to(weight.dtype)`` (line 254) is an fp32
  copy that autocast's conv1d casts back to 16 bits and keeps (convolution_backward saves its input whatever needs
  a gradient), while ``F.silu(z)`` still keeps the whole in_proj output z is a view of; D.float() is the parameter.
  Measured (before, 0.988)::

    J1 + t d c (conv1d's copy) - d 4                                                                       (J1b)

**Jamba, kernels** (mamba_ssm ``SelectiveScanFn``, mamba_ssm/ops/selective_scan_interface.py @ e9594ce lines 34-68,
and causal-conv1d ``CausalConv1dFn``, causal_conv1d/causal_conv1d_interface.py @ 0d2252d lines 9-64; transformers
5.24 calls ``selective_scan_fn``, not ``mamba_inner_fn``, from this mixer). CausalConv1dFn keeps x (a view of the
in_proj output); its output is channel-last (``torch.empty_like`` of the strided x), so x_proj keeps it without a
copy and SelectiveScanFn makes ``u.contiguous()``; with z it saves u, delta, A, B, C, D, z, delta_bias, the chunk
states x (``[b, d, ceil(s / 2048), 2 n]`` fp32, csrc/selective_scan/selective_scan.cpp lines 307-313) and its
output (delta's dtype); B and C (a transposed view of the norm outputs) and z (a strided chunk) are made
contiguous::

    in_proj input t h c; 2 d n 4 (A); t 2 d c (conv input); t d c (conv output); dt / B / C norms as (J1)
    less the C norm output; u, delta, z, out copies 4 t d c; B, C copies 2 t n c; D, delta_bias 2 d 4;
    chunk states b d ceil(s / 2048) 2 n 4; out_proj input t d c                                           (J2)

  Under torch.autocast with fp32 weights (measured on the stand-ins) JambaRMSNorm's ``weight * hidden.to(bf16)`` is
  fp32, so SelectiveScanFn's contiguous B and C copies are fp32, and D / delta_bias need no fp32 copy (so too in
  pure fp32, where c = 4 already: measured on the stand-ins)::

    J2 with 2 t n 4 for the B, C copies and no 2 d 4                                                     (J2a)

**Frozen mixer parameters (LoRA, QLoRA)**: A_log, D, dt_bias, the conv and the norm weights are no linears, so no
LoRA target adapts them; autograd then saves only what the other operands' gradients need (pytorch
tools/autograd/gen_variable_type.py: a saved operand used only by a frozen input's derivative is not saved). Measured
against a PEFT LoRA layer (tests/training/test_mamba_lora_saved_tensors.py): Mamba-2 loses ``A = -exp(A_log.float())``'s
output (modeling_mamba2.py line 481), the padded x of ``D[..., None] * pad_tensor_by_size(x)`` (line 289), the fp32 dt
of ``A.to(x.dtype) * dt.float()`` (line 293) and, with the gated norm, its normalised tensor of
``self.weight * hidden_states.to(input_dtype)`` (line 124)::

    M1 less  4 H + 4 b s' d + 4 t H (+ 4 t d gated norm);  M2 less 4 H (the Function saves the rest)      (M3)

and Jamba loses exp(A_log)'s output (modeling_jamba.py line 530), x of ``hidden_states * D`` (line 432) and the dt / B /
C norms' normalised tensors (JambaRMSNorm ``self.weight * hidden_states.to(input_dtype)``, line 78)::

    J1 less  d n 4 + t d c + t (R + 2 n) c;  J2 less  d n 4 + t (R + 2 n) c                              (J3)

  (J2's and M2's follow from the same operators outside the kernels' Functions, whose own ``save_for_backward`` is
  unconditional; measured on the kernels' stand-ins too: tests/training/test_mamba_kernel_saved_tensors.py.)
"""

from __future__ import annotations

from ..specs.training import MAMBA_PATHS

SCAN_CHUNK_MAMBA1 = 2048  # selective_scan.cpp: n_chunks = (seqlen + 2048 - 1) / 2048

Terms = list[tuple[str, int, str]]


def mamba2_saved_terms(batch: int, seq: int, hidden: int, heads: int, head_dim: int, d_state: int, groups: int,
                       d_conv: int, chunk: int, compute: int, path: str, gated_norm: bool = True,
                       in_input: bool = True, out_input: bool = True, autocast: bool = False,
                       multiplier: bool = False, fp32_weights: bool = False, params_trained: bool = True) -> Terms:
    """Eq. (M1) (``path`` 'torch') or (M2) ('cuda-kernels'): a Mamba-2 mixer's saved tensors, as (name, bytes,
    arithmetic). heads / groups are this device's (TP-split) counts; ``gated_norm``: the RMSNormGated (False:
    Falcon-H1's ``scan_output * silu(gate)``); ``autocast``: under torch.autocast (eq. M1a: the einsums);
    ``fp32_weights``: the weights (and buffers) are fp32 under that autocast (eq. M1a's conv copy, M1b; with 16-bit
    weights neither happens); ``compute`` 4 without autocast: pure fp32 (eq. M1c); ``multiplier``: Falcon-H1's
    in_proj output times its ``mup_vector`` buffer (eq. M1b);
    ``params_trained``: A_log, D and the gated norm's weight are trained (False under LoRA: eq. M3)."""
    if path not in MAMBA_PATHS:
        raise ValueError(f"mamba path {path!r}: expected one of {', '.join(MAMBA_PATHS)}")
    b, s, c, n, p_, g = batch, seq, compute, d_state, head_dim, groups
    t, d = b * s, heads * head_dim
    conv = d + 2 * g * n
    proj = d + conv + heads
    out: Terms = []
    if in_input:
        out.append(("Mamba in_proj input", t * hidden * c, f"{t} x {hidden} x {c} B"))
    mixed32 = autocast and fp32_weights  # fp32 weights, 16-bit compute
    wb = 4 if mixed32 else c  # the weights' (and so the mup_vector buffer's) element size
    # M1b: under autocast, the product with the fp32 buffer is fp32, and so is what the mixer takes from it
    f32_proj = multiplier and mixed32
    if multiplier:
        out.append(("Falcon-H1 mup_vector (kept by projected_states * mup_vector)", proj * wb, f"{proj} x {wb} B"))
    if path == "cuda-kernels":
        zb = 4 if f32_proj else c  # M2: the Function takes the fp32 product as it comes (custom_fwd, no cast_inputs)
        a_n = 2 if params_trained else 1  # eq. M3: exp(A_log) keeps its output only for A_log's gradient
        kept = t * proj * zb + t * d * zb + (4 * t * g if gated_norm else 0) + a_n * heads * 4
        out.append(("MambaSplitConv1dScanCombinedFn: zxbcdt, out_x, rstd, A", kept,
                    f"{t} x ({proj} + {d}) x {zb} B" + (f" + {t} x {g} x 4 B" if gated_norm else "")
                    + f" + {a_n} x {heads} x 4 B (eq. M2{'' if params_trained else ', M3'})"))
        return out
    n_ch = -(-s // chunk)
    sp = n_ch * chunk
    q = b * heads * sp
    conv_in = conv if mixed32 else proj  # M1a: conv1d keeps its own copy cast to the fp32 weight's dtype
    f32 = not autocast and c == 4  # eq. M1c: pure fp32, every .float() / .to(float32) of the mixer a no-op
    # M1b, M1c: x.float() is a view of the fp32 conv output (all conv channels)
    x_w = conv if f32_proj or f32 else d
    # eq. M3 (A_log, D frozen): no padded x for D's gradient, no fp32 dt for A's, no exp(A_log) output; eq. M1c: the
    # fp32 dt of A * dt.float() is the clamped dt that x * dt keeps
    d_pad, dt_n, a_n = (b * sp * d, 1 if f32 else 2, 2) if params_trained else (0, 1, 1)
    pre = (t * conv_in * c + b * (s + d_conv - 1) * conv * c + 2 * t * heads * c + a_n * heads * 4
           + 4 * (d_pad + t * x_w + dt_n * t * heads))
    out.append(("Mamba conv input, silu input, dt, fp32 x / dt copies", pre,
                f"{t} x {conv_in} x {c} + {b} x ({s} + {d_conv} - 1) x {conv} x {c} + 2 x {t} x {heads} x {c} + "
                f"4 x ({d_pad} + {t} x {x_w} + {dt_n} x {t} x {heads}) + {a_n} x {heads} x 4 B "
                f"(eq. M1{'' if params_trained else ', M3'})"))
    e = c if autocast else 4  # the einsums' operand copies and outputs (bmm autocasts: eq. M1a)
    per_q = 4 * (chunk + n + 2) + e * (2 * chunk + 4 * n + 3 * p_)
    decays, st_elems = b * heads * (n_ch + 1) ** 2, b * heads * (n_ch + 1) * p_ * n + b * n_ch * heads * p_ * n
    states = 4 * decays + e * st_elems + (c * decays if autocast else 0)
    core = 2 * chunk * chunk + 2 * (n_ch + 1) ** 2 + q * per_q + states
    how = (f"{q} positions x (4 x ({chunk} + {n} + 2) + {e} x (2 x {chunk} + 4 x {n} + 3 x {p_})) B + {states} B "
           f"chunk decays / states + masks")
    if n_ch == 1:  # one chunk: torch's einsum reads some operands as views (module docstring)
        core += e * (b * heads * p_ * n - q * p_ - (q * 2 * n if b == 1 else 0))
        how += " (one chunk: einsum views)"
    out.append(("Mamba-2 chunked scan, torch fallback (fp32)", core, how + " (eq. M1)"))
    gate_in = t * proj * 4 if f32_proj else 0  # M1b: silu keeps the fp32 product its gate is a view of
    if gated_norm:  # M1b: gate.to(float32) is then a no-op, so the gate's fp32 copy is that product; M1c: the gate
        # is a view of the in_proj output conv1d keeps (eq. M3: a frozen norm weight keeps no normalised tensor)
        k_td = (3 if f32_proj or f32 else 4) - (0 if params_trained else 1)
        out.append(("Mamba gated RMSNorm (fp32)", 4 * (k_td * t * d + b * sp * d + t * g) + gate_in,
                    f"4 B x ({k_td} x {t} x {d} + {b} x {sp} x {d} + {t} x {g})"
                    + (f" + {t} x {proj} x 4 B" if f32_proj else "")))
    else:
        sb = 4 if f32_proj else c
        out.append(("Mamba output gate: silu(gate), fp32 scan output", t * d * sb + 4 * b * sp * d + gate_in,
                    f"{t} x {d} x {sb} B + 4 B x {b} x {sp} x {d}" + (f" + {t} x {proj} x 4 B" if f32_proj else "")))
    if out_input:
        out.append(("Mamba out_proj input", t * d * c, f"{t} x {d} x {c} B"))
    return out


def jamba_mamba_saved_terms(batch: int, seq: int, hidden: int, d_inner: int, d_state: int, dt_rank: int,
                            d_conv: int, compute: int, path: str, in_input: bool = True, x_input: bool = True,
                            dt_input: bool = True, out_input: bool = True, params_trained: bool = True,
                            fp32_weights: bool = False) -> Terms:
    """Eq. (J1) (``path`` 'torch') or (J2) ('cuda-kernels'): Jamba's Mamba-1 mixer, as (name, bytes, arithmetic).
    ``x_input`` / ``dt_input``: x_proj / dt_proj keep their inputs (weights trained); ``params_trained``: A_log, D
    and the dt / B / C norm weights are trained (False under LoRA: eq. J3); ``fp32_weights``: fp32 weights, under
    torch.autocast or pure fp32 (eq. J2a, kernels only); ``compute`` 4: pure fp32 (eq. J1a; under autocast the
    activations are 16-bit)."""
    if path not in MAMBA_PATHS:
        raise ValueError(f"mamba path {path!r}: expected one of {', '.join(MAMBA_PATHS)}")
    b, s, c, d, n, r = batch, seq, compute, d_inner, d_state, dt_rank
    t = b * s
    f32 = c == 4  # pure fp32 (under autocast the activations are 16-bit): eq. J1a
    out: Terms = []
    if in_input:
        out.append(("Mamba in_proj input", t * hidden * c, f"{t} x {hidden} x {c} B"))
    # eq. J3: frozen norm weights keep no normalised tensors, a frozen A_log no exp output
    nc, a_n = (c, 2) if params_trained else (0, 1)
    norms = t * r * (4 + nc) + 2 * t * n * (4 + nc) + 3 * t * 4 + (t * r * c if dt_input else 0)
    out.append(("Mamba A, conv input, dt / B / C RMSNorms", a_n * d * n * 4 + t * 2 * d * c + norms,
                f"{a_n} x {d} x {n} x 4 + {t} x 2 x {d} x {c} + {t} x ({r} + 2 x {n}) x (4 + {nc}) + 3 x {t} x 4 B"
                + (f" + {t} x {r} x {c} B (dt_proj input)" if dt_input else "")
                + ("" if params_trained else " (eq. J3)")))
    if path == "cuda-kernels":
        n_sc = -(-s // SCAN_CHUNK_MAMBA1)
        # eq. J2a: with fp32 norm weights (under autocast, or pure fp32) the B / C norm outputs are fp32, and
        # D.float() / delta_bias.float() are the parameters themselves
        bc, dd = (4, 0) if fp32_weights else (c, 2 * d * 4)
        kept = (t * d * c if x_input else 0) + 4 * t * d * c + 2 * t * n * bc + dd + b * d * n_sc * 2 * n * 4
        out.append(("CausalConv1dFn output, SelectiveScanFn u / delta / z / out / B / C / D / states", kept,
                    f"{4 + x_input} x {t} x {d} x {c} + 2 x {t} x {n} x {bc} + {dd} + {b} x {d} x {n_sc} x 2 x {n} x 4 B"
                    f" (eq. J2{'a' if fp32_weights else ''})"))
    else:
        # x_proj reads the transposed conv output: a copy for b > 1; with b = 1 a view of it, kept anyway by x D
        x_copy = t * d * c if x_input and b > 1 else 0
        # x D and silu(z)'s product keep x and silu(z); eq. J3: x only for D's gradient; eq. J1a (pure fp32): x is
        # the fp32 x of dt B x (x.float() a no-op), counted there
        x_d = 1 if f32 or not params_trained else 2
        # the loop's states: J1 casts each for the matmul and keeps the fp32 one too; J1a keeps each once
        loop = b * d * n * 4 * (s + 1) if f32 else b * d * n * (c * (s + 1) + 4 * (s - 1))
        d_f = 0 if fp32_weights else d * 4  # J1a, J1b: D.float() is the parameter
        # eq. J1b (fp32 weights under autocast): conv1d keeps its own 16-bit copy of x (convolution_backward saves
        # its input whatever needs a gradient: measured with every weight frozen too)
        conv_copy = t * d * c if fp32_weights and not f32 else 0
        kept = (b * (s + d_conv - 1) * d * c + x_copy + conv_copy + t * n * c + 2 * t * d * c
                + 2 * t * d * n * 4 + t * n * 4 + t * d * 4 + loop + d_f + x_d * t * d * c + t * d * 4)
        loop_how = f"4 x {s + 1}" if f32 else f"{c} x {s + 1} + 4 x {s - 1}"
        n_td = 2 + x_d + bool(x_copy) + bool(conv_copy)
        eq = "J1a" if f32 else "J1b" if fp32_weights else "J1"
        out.append(("Mamba selective scan, torch fallback (sequential loop)", kept,
                    f"{b} x ({s} + {d_conv} - 1) x {d} x {c} + {t} x {d} x ({n_td} x {c} + 2 x {n} x 4 + 8) "
                    f"+ {t} x {n} x ({c} + 4) + {b} x {d} x {n} x ({loop_how}) + {d_f} B (eq. {eq})"))
    if out_input:
        out.append(("Mamba out_proj input", t * d * c, f"{t} x {d} x {c} B"))
    return out
