"""Kernels one Megatron-Core decoder layer with TransformerEngine modules launches per micro-step (eqs. K11/K12).

formulas/launch_overhead.py counts an eager transformers layer (eqs. K2/K3: 38 forward, 71 backward kernels for a
Llama layer, each norm, rotary and activation a chain of aten ops). A Megatron-Core layer built from the TE spec
(NVIDIA/Megatron-LM @d7288711, the commit Megatron-Bridge v0.4.1 pins, megatron/core/models/gpt/gpt_layer_specs.py
lines 132-151: ``linear_qkv`` a ``TELayerNormColumnParallelLinear``, ``q_layernorm`` / ``k_layernorm`` a ``TENorm``
when the model has q/k norms, ``core_attention`` TE's ``DotProductAttention``, ``linear_proj`` a
``TERowParallelLinear``, ``pre_mlp_layernorm`` a ``TENorm`` only in an MoE layer, the dense MLP's ``linear_fc1`` a
``TELayerNormColumnParallelLinear``) launches one kernel per fused operation. Read, per layer and pass (NVIDIA/
TransformerEngine v2.18 @27486e03 for TE's kernels):

- a norm: TE's RMSNorm / LayerNorm forward is one kernel (common/normalization/rmsnorm/rmsnorm_fwd_cuda_kernel.cu),
  its backward two: the main kernel and the finalize kernel that reduces the per-CTA weight-gradient partials
  (rmsnorm_bwd_semi_cuda_kernel.cu lines 50 and 68, tuned; 115 and 133, general). A ``LayerNormLinear`` runs its norm
  before the GEMM (module/layernorm_linear.py line 244 ``apply_normalization``), so the input norm and, in a dense
  layer, the pre-MLP norm cost a kernel each way beside their GEMMs;
- q/k norms (Qwen3's ``qk_layernorm``): a ``TENorm`` each on q and k, 1 forward, 2 backward each;
- rotary positions: with ``apply_rope_fusion`` (Megatron-Bridge @f9b6319e scripts/performance/utils/overrides.py
  line 65 sets it for the performance runs) TE's fused rotary kernel on the query and on the key (attention.py lines
  1106, 1119 ``apply_rotary_pos_emb``), 1 each way each;
- the attention: TE's fused attention, one kernel each way (as eqs. K2/K3 count it);
- the linears: one GEMM forward, dgrad and wgrad backward (with ``gradient_accumulation_fusion`` the wgrad
  accumulates into the fp32 main_grad: no add); a bias rides the GEMM's epilogue, its gradient the dgrad's
  (TE's cuBLASLt BGRADB / FP8 cast-dbias): no kernel of its own;
- each bias-dropout-add (transformer_layer.py line 646 ``self_attn_bda``, and ``mlp_bda``;
  fusions/fused_bias_dropout.py lines 11-83: the jit-fused kernel, or unfused a ``dropout`` that at the recipes'
  p = 0 returns its input and the ``add``): 1 forward; backward nothing of its own, but the residual stream forks
  into the norm and the residual add, so autograd sums the two gradients: 1 add per fork, 2 a layer;
- the dense MLP's activation with ``bias_activation_fusion`` (mlp.py lines 264-297 ``bias_swiglu_impl``: one
  jit-fused kernel each way; an MoE layer's is eq. K9's weighted SwiGLU);
- the query / key / value layout (review30 D2): Megatron-Bridge's performance runs leave ``fused_single_qkv_rope``
  unset, so ``split_qkv`` is True (attention.py lines 965-981 @d7288711) and q, k, v are split views of the fused
  q/k/v GEMM's output [s, b, g, (p + 2) d] (g query groups on the rank, p query heads per group, d the head size;
  lines 1458-1469, TE's ``SplitAlongDim``, pytorch/utils.py @27486e03). The query's reshape to [s, b, g p, d] (line
  1474) merges two dimensions whose strides do not nest when g > 1 and p > 1: a copy (torch's ``reshape``: clone).
  TE's ``DotProductAttention`` then reads the layout (dot_product_attention/utils.py lines 2337-2442
  ``get_qkv_layout``): where q, k, v fit none of its layouts it makes all three contiguous (lines 2440-2442). With
  rotary or q/k norms, q and k are those kernels' new tensors and v a strided view that fits no layout beside them:
  one copy (v); with neither, q, k, v are views of one buffer that TE reads in place as sbh3d only where p = 1 and g >
  1 (interleaved, equal strides), else all three are copied (a copy already made is not repeated). In the backward
  ``SplitAlongDim`` returns its gradients' buffer only where they tile it as the split did (pytorch/utils.py lines
  504-531), which only the sbh3d case's fused-attention gradients do (csrc/extensions/attention.cpp lines 405-415: one
  dQKV, sliced; the separate layouts allocate dQ, dK, dV apart, lines 448-454); else ``torch.cat`` (line 532): one
  kernel::

    c_f = [g > 1 and p > 1] + 1   (rotary or q/k norms)       c_b = 1
    c_f = 0, c_b = 0              (neither, p = 1, g > 1: sbh3d)
    c_f = 3, c_b = 1              (neither, otherwise)                                                      (K11c)

Per layer, with q = 1 for q/k norms, r = 1 for rotary positions, G the GEMM class (linears and attention) and O the
other kernels::

    dense   forward  G 5 (qkv, attention, proj, fc1, fc2)  O 5 + 2q + 2r + c_f   backward  G 9  O 7 + 4q + 2r + c_b
    MoE     forward  G 3 (qkv, attention, proj)            O 4 + 2q + 2r + c_f   backward  G 5  O 6 + 4q + 2r + c_b
                                                                                                           (K11)

and an MoE layer adds its block (router, dispatch, experts, combine) of eq. K9, whole (``moe_layer_kernels``
'megatron-te': it holds the weighted SwiGLU).

**FP8 current scaling** (Megatron-Bridge's fp8_cs: TE's ``Float8CurrentScaling``). Each quantization of a tensor
by a current-scaling quantizer is four kernels (csrc/quantizer.cpp lines 988-1007 ``Float8CurrentScalingQuantizer::
quantize_impl``: ``nvte_compute_amax_with_config``, which zeroes the amax and reduces it, common/recipe/
current_scaling.cu lines 76 and 98; ``nvte_compute_scale_from_amax``, line 331; ``nvte_quantize_v2``, the cast,
with its transpose for the wgrad in the same kernel). A linear quantizes its input in the forward (linear.py line
362, layernorm_linear.py line 303 or the quantized norm's output) and its output gradient in the backward (linear.py
lines 852-887, 1092-1160); the weights are FP8 already under ``fp8_param_gather`` (cast once per optimizer step, not
per micro-step)::

    + 4 n_lin forward, + 4 n_lin backward (n_lin: 4 dense, 2 in an MoE layer's attention)                    (K12)

**Gradient accumulation into main_grad** (Megatron-Core's DDP, distributed_data_parallel.py lines 441-444
@d7288711: each parameter's backward hook runs ``param.main_grad.add_(param.grad.data)`` unless its gradient was
already added). Under ``gradient_accumulation_fusion`` TE's wgrad GEMMs accumulate the linear weights in place and
mark them (linear.py lines 1287-1289, layernorm_linear.py lines 965-966, grouped_linear.py lines 1237-1239: one
weight per local expert, registered ``weight{i}``, line 1453), so only the other trained parameters of a layer add:
its norms' weights, the linears' biases (returned as gradients; GroupedLinear's ``bias{i}`` per local expert, line
1470), the router's weight and bias, attention sinks; without the fusion every weight too::

    + n_hook backward kernels, one per such parameter                                                      (K12h)

Outside the layers the same hook adds the word embedding's weight (a VocabParallelEmbedding: no wgrad GEMM to fuse),
a learned position table's and the final norm's, whatever the fusion, and the untied output layer's weight without it
(gpt_model.py lines 244-260: a ColumnParallelLinear, whose fused wgrad sets ``grad_added_to_main_grad``,
tensor_parallel/layers.py lines 553-600; a tied output layer uses the embedding's parameter, added once).

Not counted: a tensor-parallel run's collectives (all-gathers, reduce-scatters, the amax all-reduce of a
sequence-parallel input: communication kernels, as eqs. K2/K3 leave them out); the expert GEMMs' FP8 casts (eq. K9
counts the expert GEMMs); the fused attention's backward counted as one launch (FlashAttention-style backwards
launch a pre- and post-processing kernel beside the main one).
"""

from __future__ import annotations

SOURCE = ("NVIDIA/Megatron-LM @d7288711 gpt_layer_specs.py lines 132-151 (the TE layer), transformer_layer.py "
          "line 646, attention.py lines 965-981/1106/1119/1458-1474, mlp.py lines 264-297; NVIDIA/TransformerEngine "
          "@27486e03 rmsnorm_bwd_semi_cuda_kernel.cu lines 50/68, csrc/quantizer.cpp lines 988-1007, "
          "dot_product_attention/utils.py lines 2337-2442, pytorch/utils.py lines 504-530 (eqs. K11/K11c/K12)")

# eq. K11: (forward GEMMs, forward others, backward GEMMs, backward others) of the layer without q/k norms and rotary,
# by whether it is an MoE layer (the MoE block apart)
MEGATRON_LAYER_BASE: dict[bool, tuple[int, int, int, int]] = {False: (5, 5, 9, 7), True: (3, 4, 5, 6)}
# the linears a layer quantizes to FP8 (eq. K12): q/k/v, proj, fc1, fc2; an MoE layer's attention q/k/v and proj
MEGATRON_FP8_LINEARS: dict[bool, int] = {False: 4, True: 2}
# kernels of one current-scaling FP8 quantization (eq. K12)
CURRENT_SCALING_QUANTIZE_KERNELS = 4


def qkv_layout_copies(rotary_or_qk_norm: bool, groups: int, per_group: int) -> tuple[int, int]:
    """Eq. (K11c): (forward, backward) copy kernels of the split q / k / v layout in one Megatron-Core TE attention
    (``groups`` query groups on the rank, ``per_group`` query heads per group): the query's reshape copy, the copies
    TE's ``get_qkv_layout`` makes, and ``SplitAlongDim``'s backward ``torch.cat``.

    >>> qkv_layout_copies(True, 2, 8), qkv_layout_copies(True, 1, 16), qkv_layout_copies(False, 4, 1)
    ((2, 1), (1, 1), (0, 0))
    """
    if rotary_or_qk_norm:
        return (1 if groups > 1 and per_group > 1 else 0) + 1, 1
    return (0, 0) if per_group == 1 and groups > 1 else (3, 1)


def megatron_layer_kernels(moe: bool, qk_norm: bool = False, rotary: bool = True, float8: bool = False,
                           groups: int = 1, per_group: int = 1) -> tuple[int, int, int, int]:
    """Eqs. (K11)/(K11c)/(K12): (forward GEMMs and attention, forward other kernels, backward GEMMs and attention,
    backward other kernels) of one Megatron-Core TE decoder layer per micro-step, an MoE layer without its MoE block
    (eq. K9). ``qk_norm``: TE norms on q and k; ``rotary``: fused rotary on q and k; ``float8``: TE's current-scaling
    FP8 linears (their input and output-gradient casts); ``groups`` / ``per_group``: the query groups on one
    tensor-parallel rank and the query heads per group (eq. K11c's layout copies).

    >>> megatron_layer_kernels(False)
    (5, 8, 9, 10)
    >>> megatron_layer_kernels(True, qk_norm=True, float8=True, groups=4, per_group=8)
    (3, 18, 5, 21)
    """
    fg, fo, bg, bo = MEGATRON_LAYER_BASE[moe]
    q, r = (1 if qk_norm else 0), (1 if rotary else 0)
    cf, cb = qkv_layout_copies(bool(q or r), groups, per_group)
    cast = CURRENT_SCALING_QUANTIZE_KERNELS * MEGATRON_FP8_LINEARS[moe] if float8 else 0
    return fg, fo + 2 * q + 2 * r + cast + cf, bg, bo + 4 * q + 2 * r + cast + cb


def megatron_hook_adds(norms: int, biases: int, others: int = 0, weights: int = 0,
                       accumulation_fusion: bool = True) -> int:
    """Eq. (K12h): the backward hook's ``main_grad.add_`` kernels of one layer per micro-step: one per trained norm
    weight (``norms``), bias (``biases``) and other parameter (``others``: the router's weight, attention sinks), and
    per linear weight (``weights``, experts' included) only without ``accumulation_fusion``.

    >>> megatron_hook_adds(norms=2, biases=0), megatron_hook_adds(norms=2, biases=0, weights=4, accumulation_fusion=False)
    (2, 6)
    """
    return norms + biases + others + (0 if accumulation_fusion else weights)


def megatron_recompute_kernels(modules: tuple[str, ...], moe: bool) -> int:
    """Forward kernels Megatron's selective recomputation re-runs in one layer's backward, besides the MoE block
    (``recompute_modules``, transformer_layer.py lines 402-470 @d7288711): 'layernorm' the separate norms
    (``pre_mlp_layernorm`` in an MoE layer; the input norm is fused into ``linear_qkv`` there and in a dense layer
    both are: nothing to re-run), 'core_attn' the attention kernel, 'moe_act' an MoE layer's weighted SwiGLU ('moe',
    the whole MoE block, is eq. K10's second sync and eq. K9's block; 'mlp' and 'mla_up_proj' are not counted).

    >>> megatron_recompute_kernels(("layernorm", "moe_act"), moe=True)
    2
    """
    n = 1 if "core_attn" in modules else 0
    if moe:
        n += (1 if "layernorm" in modules else 0) + (1 if "moe_act" in modules else 0)
    return n
