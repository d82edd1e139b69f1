"""Liger-Kernel's fused Triton kernels: what each keeps for the backward, in place of the eager modules' tensors [bytes].

Read from linkedin/Liger-Kernel @ ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c (2026-08-21). ``apply_liger_kernel_to_<model>``
(src/liger_kernel/transformers/monkey_patch.py; for Llama lines 221-226: ``rope=True, cross_entropy=False,
fused_linear_cross_entropy=True, rms_norm=True, swiglu=True``) swaps transformers' modules for Liger's:

- ``LigerRMSNorm`` (ops/rms_norm.py line 657: ``ctx.save_for_backward(X, W, RSTD)``; line 452: RSTD fp32 in the
  Llama and Gemma casting modes): the norm input X as it comes (the residual stream's dtype r, no fp32 copy) and one
  fp32 1/rms per row. The weight gradient is rebuilt from X and RSTD in the backward kernel, so no normalised tensor
  is kept even when the norm weight trains, and Gemma's ``1 + weight`` is formed inside the kernel (no fp32 weight
  copy). Every RMSNorm class of the model is swapped (the final norm and Qwen3's q/k norms too)::

      t w r + 4 t   per norm of width w, in place of  t w 4 + 4 t (+ t w r normalised, + the weight copy)   (LG1)

- ``LigerSiLUMulFunction`` (ops/swiglu.py line 262: ``ctx.save_for_backward(a, b)``; transformers/swiglu.py line 21:
  ``down_proj(LigerSiLUMulFunction.apply(gate_proj(x), up_proj(x)))``) and ``LigerGELUMulFunction`` (ops/geglu.py
  line 138, the same two tensors; transformers/geglu.py line 22): the gate and up outputs; ``silu(a)`` / ``gelu(a)``
  is recomputed in the backward, so the activation output the eager ``act_fn(gate) * up`` keeps is gone. The product
  is down_proj's input, kept by that matmul as before::

      2 t I c (+ t I c, the product, when down_proj keeps its input)   in place of  3 (+ 1) t I c          (LG2)

  Their backward writes d(gate) and d(up) into those saved tensors (ops/swiglu.py lines 94-95, 295-296; ops/geglu.py
  lines 83-84, 146): the MLP's backward transient is eq. A3l of ``training_activations.layer_backward_transient``.

- ``LigerRopeFunction`` (ops/rope.py line 226: ``ctx.save_for_backward(cos, sin)``): the shared cos/sin tables, which
  the eager ``q * cos + rotate_half(q) * sin`` keeps as well (``mul`` saves the other operand, the tables); no
  per-layer term changes.

- ``LigerFusedLinearCrossEntropyFunction`` (ops/fused_linear_cross_entropy.py): the lm_head runs inside the loss over
  row chunks of the t = b s hidden states (lines 68-70)::

      inc_factor = ceil(V / h),   chunk = next_power_of_2(ceil(t / inc_factor)),   chunks = ceil(t / chunk)   (LG3)

  so one [chunk, V] logits tensor exists at a time, in the matmul's dtype c (line 114); the cross-entropy kernel
  writes its gradient in place (lines 162-163, 212). The forward computes the gradients: grad_input [t, h] in the
  input's dtype (line 72) and, with the lm_head trained, grad_weight [V, h] in the weight's dtype (line 77), and saves
  them for the backward (lines 431-435), which only scales them (lines 292-330). Nothing else is saved: no logits,
  no log-softmax, no lm_head input. Per token, fp32 loss (line 86). With bf16 weights the weight gradient is summed
  through ``torch.mm(...).float()`` (line 257): a [V, h] product in c and its fp32 cast beside grad_weight, while a
  chunk runs (fp32 weights under autocast take line 249's in-place ``addmm`` on torch >= 2.8, sm80+)::

      kept:  t h c (+ V h w, lm_head trained) + 4 t        forward: chunk V c (+ V h (c + 4), w = c)       (LG4)

Step time (the memory-bound kernels; formulas/elementwise_traffic.py eqs. E20-E22 count the per-token bytes of the
layer kernels and the loss kernel). The GEMM FLOPs are unchanged: the lm_head's forward, input-gradient and
weight-gradient products run chunk by chunk inside the forward (lines 114, 231, 249/257) in place of the eager
lm_head's forward and backward. What is new is per chunk, on the [V, h] weight gradient, with the lm_head trained:
half-precision weights (grad_weight in the weight's dtype w, ``accum_dtype`` None: the transformers integration
passes none, transformers/model/loss_utils.py line 37) take line 257's ``grad_weight += torch.mm(...).float()``:
the product written in c, read by ``.float()`` and written in fp32, then grad_weight and it read and grad_weight
written; fp32 weights with a half-precision compute dtype take line 249's ``addmm(..., out_dtype=float32,
out=grad_weight)`` (torch >= 2.8 on sm80+, line 18, 236-238), which reads and writes the fp32 grad_weight; fp32
throughout is ``mm`` in fp32 then the same in-place add::

    weight-gradient sums = chunks x V h x (2c + 8 + 2w  [w < 4],  8  [w = 4, c < 4],  16  [c = w = 4])   (LG5)

per micro-batch (chunks from eq. LG3: 32 for Llama 3's V / h at a power-of-two token count). The per-chunk sum
depends on the release (``LG5_PATHS``, read from the file's history in the same repository): up to v0.6.1
(2025-07-28; e.g. v0.4.2 lines 129-136, v0.6.1 lines 126-135) ``torch.addmm(input=grad_weight, ..., out=grad_weight)``
into grad_weight in the weight's dtype, 2w per element; v0.6.2 (2025-08-21, commit 2845fe83 "accum_dtype") to v0.8.0
the legacy ``grad_weight += torch.mm(...).float()`` for every dtype (c + (c + 4 if c < 4) + 4 + 2w); v0.8.1
(2026-07-22, commit c9fc646f) and v0.8.2 (2026-08-18, the newest release; ead96b6 the same loop) eq. LG5 as above;
a later, unreleased commit (00eba634, fused_linear_cross_entropy.py, its "Low-precision accumulator" branch) also
sums a bf16/fp16 grad_weight with ``addmm(..., out=grad_weight)`` on sm80+: 2w when w = c < 4. ``LIGER_RELEASE``
names the release the estimate takes (the newest release) and the step-time assumption states it. Measured against
Liger-Kernel's own speed rows (benchmark/data/all_benchmark_data.csv; tests/formulas/test_liger_speed.py).

Applies to the model types ``MODEL_TYPE_TO_APPLY_LIGER_FN`` lists (monkey_patch.py lines 3534-3585); ``check``
refuses the rest. Terms not named above (LayerNorms, MoE experts, attention) keep their eager value.
"""

from __future__ import annotations

from ..errors import InputError
from ..specs import ModelSpec
from .training_activations import ActivationSetup, Term, _div

SOURCE = ("linkedin/Liger-Kernel @ ead96b6 src/liger_kernel/ops/rms_norm.py, swiglu.py, geglu.py, rope.py, "
          "fused_linear_cross_entropy.py (formulas/liger_kernels.py)")
# monkey_patch.py @ ead96b6 lines 3534-3585: the model types apply_liger_kernel_to_* patches
MODEL_TYPES = frozenset({
    "deepseek_v4", "gemma", "gemma2", "gemma3_text", "gemma3", "gemma4_text", "gemma4", "glm4", "glm4v", "glm4v_moe",
    "gpt_oss", "internvl", "llama", "llama4_text", "llama4", "llava", "granite", "mllama", "mllama_text_model",
    "ministral", "mistral", "mixtral", "nemotron", "olmo2", "pixtral", "olmo3", "qwen2", "qwen3", "qwen3_moe",
    "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "qwen3_next", "qwen3_5", "qwen3_5_text",
    "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "smollm3",
    "phi3", "paligemma", "falcon_h1", "smolvlm", "hunyuan_v1_dense", "hunyuan_v1_moe", "exaone4"})


# Which of Liger's SwiGLU modules ``apply_liger_kernel_to_<model>`` swaps in, per model type (monkey_patch.py
# @ ead96b6), read by the memory side (``layer_terms``, eq. LG2) and the time side (estimate/duration.py ->
# formulas/elementwise_traffic.py eqs. E20/E21) alike. ``swiglu`` False: the function's own default is
# ``swiglu=False`` (gpt_oss line 1792, "GPT-OSS has custom expert implementation"; deepseek_v4, its docstring: routed
# experts apply swiglu_limit), so no MLP of the model is Liger's. Routed experts: most MoE types swap their experts
# module for ``LigerExperts`` (mixtral line 846, qwen3_moe line 1762, qwen3_vl_moe 2175, glm4v_moe 2620, qwen3_next
# 3015, qwen3_5_moe, hunyuan_v1_moe), which runs ``LigerFusedMoEFunction`` (transformers/swiglu.py line 76), a fused
# MoE whose saved tensors and bytes are not counted here; llama4 patches only the shared expert (line 506), gemma4
# guards its experts out. So both sides keep every routed expert's eager value, and the assumption names the
# fused experts where Liger has them.
LIGER_NO_SWIGLU = frozenset({"gpt_oss", "deepseek_v4"})
LIGER_FUSED_EXPERTS = frozenset({"mixtral", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text",
                                 "qwen3_vl_moe", "qwen3_vl_moe_text", "glm4v_moe", "hunyuan_v1_moe"})


def swiglu_applies(spec: ModelSpec) -> bool:
    """Whether Liger's SwiGLU/GeGLU replaces ``spec``'s dense and shared-expert MLPs (``LIGER_NO_SWIGLU``); routed
    experts keep their eager value on both sides (``LIGER_FUSED_EXPERTS``: Liger's fused MoE, not counted)."""
    return spec.model_type not in LIGER_NO_SWIGLU


def modules_note(spec: ModelSpec) -> str:
    """The Liger modules the estimate takes for ``spec``'s model type (the table above), for the assumption."""
    mlp = "SwiGLU/GeGLU on the dense and shared-expert MLPs" if swiglu_applies(spec) else (
        f"no SwiGLU (apply_liger_kernel_to_{spec.model_type} defaults swiglu=False)")
    if spec.moe is None:
        return f"RMSNorm, RoPE, {mlp}"
    experts = ("Liger swaps the routed experts for LigerExperts (a fused MoE kernel not counted here: their eager "
               "value kept)" if spec.model_type in LIGER_FUSED_EXPERTS else "routed experts stay transformers'")
    return f"RMSNorm, RoPE, {mlp}; {experts}"


def check(spec: ModelSpec, what: str) -> None:
    """InputError unless ``apply_liger_kernel_to_*`` patches ``spec``'s model type (``what``: the setting named)."""
    if spec.model_type not in MODEL_TYPES:
        raise InputError(f"{what}: Liger-Kernel patches model types {', '.join(sorted(MODEL_TYPES))} "
                         f"(monkey_patch.py MODEL_TYPE_TO_APPLY_LIGER_FN), not {spec.model_type!r}")


def _gated_names() -> tuple[tuple[str, str, int, int], ...]:
    # eager term suffix -> Liger's, and the tensor counts (eq. LG2)
    return (("act input, act output, up output, product", "gate, up (Liger SiLU/GELU-mul), product", 4, 3),
            ("act input, act output, up output", "gate, up (Liger SiLU/GELU-mul)", 3, 2))


def layer_terms(spec: ModelSpec, st: ActivationSetup, eager: tuple[Term, ...]) -> tuple[Term, ...]:
    """A decoder layer's saved terms under Liger's layer kernels, from its eager terms ``eager``
    (``training_activations.layer_saved_terms``; also the head's final norm): eqs. (LG1), (LG2)."""
    t, r, c, h = st.tokens, st.residual, st.compute, spec.hidden_size
    ts = _div(t, st.tp) if st.sp else t
    out: list[Term] = []
    for term in eager:
        n = term.name
        if n.endswith((" normalised", " fp32 weight copy", " fp32 weight copies")) and (
                n.startswith(("attention norm", "mlp norm", "final norm", "extra norm", "q/k norms"))):
            continue  # eq. LG1: the weight gradient and Gemma's 1 + weight are formed in the kernel
        if n.endswith(" fp32 input + 1/rms") and n.startswith(("attention norm", "mlp norm", "final norm",
                                                               "extra norm")):
            ib = c if n.startswith("extra norm") else r  # the residual stream, or a sub-block's output (dtype c)
            out.append(Term(n.replace(" fp32 input + 1/rms", " input + 1/rms (LigerRMSNorm)"), ts * h * ib + ts * 4,
                            f"{ts} tokens x {h} x {ib} B (X as it comes) + 4 B per token (fp32 RSTD, eq. LG1)"))
            continue
        if n == "q/k norms fp32 inputs":  # Qwen3's per-head norms over the q/k projections' outputs (dtype c)
            q_w, k_w = _div(spec.num_heads * spec.head_dim, st.tp), _div(spec.num_kv_heads * spec.head_dim, st.tp)
            heads = _div(spec.num_heads, st.tp) + max(1, spec.num_kv_heads // st.tp)
            if term.bytes == t * (q_w + k_w) * 4 + t * heads * 4:  # both norms run (else: the eager term kept)
                out.append(Term("q/k norms inputs + 1/rms (LigerRMSNorm)", t * (q_w + k_w) * c + t * heads * 4,
                                f"{t} x ({q_w} + {k_w}) x {c} B + 4 B per token and head (eq. LG1)"))
                continue
        for eager_s, liger_s, n_eager, n_liger in _gated_names():
            if n.endswith(eager_s) and not n.startswith("routed") and swiglu_applies(spec):
                out.append(Term(n[: -len(eager_s)] + liger_s, term.bytes * n_liger // n_eager,
                                term.formula.replace(f"{n_eager} x", f"{n_liger} x") + ", act recomputed: eq. LG2"))
                break
        else:
            out.append(term)
    return tuple(out)


def flce_chunk_rows(tokens: int, hidden: int, vocab: int) -> int:
    """Eq. (LG3): rows of one logits chunk of the fused linear cross-entropy (at most ``tokens``)."""
    if tokens < 1 or hidden < 1 or vocab < 1:
        raise InputError("tokens, hidden and vocab must be >= 1")
    inc_factor = -(-vocab // hidden)
    chunk = 1 << max(0, (-(-tokens // inc_factor) - 1).bit_length())  # triton.next_power_of_2
    return min(chunk, tokens)


LIGER_RELEASE = "0.8.2"  # the newest Liger-Kernel release tag (2026-08-18); eq. LG5's default
LIGER_UNRELEASED = "00eba634"  # a later commit of main with the bf16 addmm(out=grad_weight) path (module docstring)
# (first release of the path, the path) in release order; eq. LG5 per release (module docstring)
LG5_PATHS = (((0, 0, 0), "addmm into grad_weight"), ((0, 6, 2), "mm().float() then +="),
             ((0, 8, 1), "addmm out_dtype fp32 (fp32 grad_weight), else mm().float() then +="))


def _release_key(release: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in release.removeprefix("v").split("."))
    except ValueError:
        raise InputError(f"Liger-Kernel release {release!r}: expected a version like {LIGER_RELEASE} "
                         f"or the commit {LIGER_UNRELEASED}") from None


def flce_weight_grad_element_bytes(compute: int, weight_bytes: int, release: str = LIGER_RELEASE) -> int:
    """Eq. (LG5) per [V, h] element and chunk at Liger-Kernel ``release`` (a version, or ``LIGER_UNRELEASED``)."""
    if compute < 1 or weight_bytes < 1:
        raise InputError("element sizes must be >= 1")
    c, w = compute, weight_bytes
    legacy = c + (c + 4 if c < 4 else 0) + 4 + 2 * w  # mm written in c, .float(), += reads both and writes w
    if release == LIGER_UNRELEASED:
        return 2 * w if (w == c < 4 or (w == 4 and c < 4)) else legacy
    key = _release_key(release)
    if key < LG5_PATHS[1][0]:
        return 2 * w
    if key < LG5_PATHS[2][0]:
        return legacy
    return 8 if (w == 4 and c < 4) else legacy


def flce_weight_grad_bytes(tokens: int, hidden: int, vocab: int, compute: int, weight_bytes: int,
                           release: str = LIGER_RELEASE) -> float:
    """Eq. (LG5): bytes the fused linear cross-entropy moves per micro-batch of ``tokens`` summing the lm_head's
    weight gradient chunk by chunk at Liger-Kernel ``release`` (the lm_head trained; module docstring)."""
    per = flce_weight_grad_element_bytes(compute, weight_bytes, release)
    chunk = flce_chunk_rows(tokens, hidden, vocab)
    chunks = -(-tokens // chunk)
    return float(chunks * vocab * hidden * per)


def flce_terms(tokens: int, hidden: int, vocab: int, compute: int, weight_bytes: int,
               lm_head_trained: bool) -> tuple[tuple[Term, ...], int]:
    """Eq. (LG4): (the terms the fused linear cross-entropy keeps from its forward to its backward, the bytes alive
    beside them while its forward runs a chunk)."""
    t, h, v, c = tokens, hidden, vocab, compute
    kept = [Term("FLCE hidden-states gradient (computed in the forward)", t * h * c + t * 4,
                 f"{t} x {h} x {c} B grad_input + 4 B fp32 loss per token (eq. LG4)")]
    if lm_head_trained:
        kept.append(Term("FLCE lm_head weight gradient (computed in the forward)", v * h * weight_bytes,
                         f"{v} x {h} x {weight_bytes} B grad_weight (eq. LG4)"))
    chunk = flce_chunk_rows(t, h, v)
    fwd = chunk * v * c
    if lm_head_trained and weight_bytes != 4:  # torch.mm(...).float() beside a bf16/fp16 grad_weight
        fwd += v * h * (c + 4)
    elif lm_head_trained and c == 4:  # fp32 throughout: torch.mm's fp32 product (.float() is a no-op)
        fwd += v * h * 4
    return tuple(kept), fwd
