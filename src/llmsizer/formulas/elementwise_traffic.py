"""Memory-bound (non-GEMM) traffic of a training step: the bytes the elementwise, normalisation and loss kernels
read and write, eager PyTorch against ``torch.compile`` (inductor).

A training step is not only GEMMs (formulas/gemm_shapes.py). Around them run kernels that do a few FLOPs per
element and are bound by the device memory: RMSNorm, rotary embeddings, SwiGLU's ``act(gate) * up``, the residual
adds, the cross-entropy over the vocabulary, and their backward passes. Each kernel reads its inputs from and writes
its outputs to device memory, so its time is bytes / memory bandwidth, whatever the tensor peak.

**Eager** (one kernel per aten op). Counted op by op from transformers 5 ``models/llama/modeling_llama.py``
(``LlamaRMSNorm.forward`` lines 62-67: ``to(float32)``, ``pow(2).mean(-1)``, ``+ eps``, ``rsqrt``, ``*``,
``to(input_dtype)``, ``weight *``; ``apply_rotary_pos_emb`` lines 145-149 with ``rotate_half`` lines 119-123:
``q * cos``, ``neg``, ``cat``, ``* sin``, ``+``, the same for k; ``LlamaMLP.forward`` line 164:
``act_fn(gate) * up``; the decoder layer's two residual adds) and, for the backward, the derivative ops autograd
runs for them (tools/autograd/derivatives.yaml: ``mul`` -> two ``mul``, ``silu`` -> ``silu_backward``, ``pow``,
``mean`` -> ``div`` of the expanded gradient, ``cat``/``slice`` -> ``slice_backward``, ``_to_copy`` back). With
t tokens, element sizes c (compute dtype) and f = 4 (fp32), widths h, I (intermediate), q_w = heads x head_dim,
k_w = kv_heads x head_dim, d_h = head_dim, per token and decoder layer::

    RMSNorm forward    N_f = (4c + 7f) h + 6f
    RMSNorm backward   N_b = (8c + 19f) h + 10f          (N_b - 4c h when the norm weight is frozen: no
                                                          ``grad * normalised`` product and no sum over tokens)
    forward   F_e = 2 N_f + 6c h + 10c (q_w + k_w) + 4c d_h + 5c I                              (E1)
    backward  B_e = 2 N_b + 15c h + 16c (q_w + k_w) + 4c d_h + 9c I                              (E2)

(6c h: two residual adds; 15c h: the two residual-gradient adds, the q/k/v and gate/up input-gradient sums; the
16c (q_w + k_w) of the backward include the contiguous copies of the rotated q and k gradients before their
projections' GEMMs. A partial rotary, or one that concatenates its pass-through channels, replaces the forward's
10c (q_w + k_w) + 4c d_h by eq. (E1r), ``rotary_forward_bytes``; the backward and the compiled counts keep the
whole head's.) The loss: ``ForCausalLMLoss`` upcasts the logits (``logits.float()``), ``cross_entropy`` runs
``_log_softmax`` and ``nll_loss``; the backward ``nll_loss_backward``, ``_log_softmax_backward_data`` and the cast
back: (2c + 10f) V per token (E3). A LoRA adapter on a linear (in -> out) adds its scaling ``mul`` and the ``add``
to the base output (5c out forward), the scaled gradient and the input-gradient sum (2c out + 3c in backward)
(PEFT ``lora/layer.py`` ``Linear.forward``: ``result + lora_B(lora_A(dropout(x))) * scaling``; torchtune
``LoRALinear.forward`` the same; dropout 0 is the identity, aten ``dropout`` returns its input for p = 0).

**Compiled** (``torch.compile``, inductor; torchtune ``compile_model`` and torchtitan ``apply_compile`` compile each
decoder layer): inductor's scheduler fuses every chain of pointwise ops and reductions into one kernel, which reads
only the buffers that cross the kernel's boundary (GEMM outputs, the layer input, saved tensors) and writes only the
ones a later kernel or the backward needs. Read from inductor's own byte count of its fused kernels
(``GraphLowering.count_bytes``, torch/_inductor/graph.py, over ``get_read_write_buffers_sizes``; extern GEMM and
attention kernels left out) on a transformers Llama decoder layer::

    forward   F_c = (2c h + f) [attention norm] + 5c (q_w + k_w) + 4c d_h [rotate_half's cat materialised,
              then q cos + rot sin] + (3c h + f) [x + attention recomputed, mlp norm] + 3c I [SwiGLU]
              + 4c h [x + attention + mlp: the layer output]
            = 9c h + 2f + 5c (q_w + k_w) + 4c d_h + 3c I                                         (E4)
    backward  B_c = 12c h + 2f [two norm backwards fused with the residual and input-gradient sums]
              + 2c (q_w + k_w) + 4c d_h [rotary backward] + 5c I [SwiGLU backward]
              + 7c h when the norm weights train (their gradient reduction over tokens)             (E5)

and the compiled loss (upcast, log-softmax, NLL and their backward fused) reads the half-precision logits three
times (the row maximum, then the exponential sum in the forward; once in the backward) and writes their gradient
once: 4c V per token (E6), against (E3)'s 44 B per logit in bf16. A LoRA adapter's scale-and-add fuses into its
consumer: the fused kernel after the base projection (rotary, SwiGLU, the residual add) reads the
adapter's output beside the base output, c out more forward; backward, the scaled gradient is written for the
adapter's GEMMs (2c out) and the fused input-gradient sum reads one more tensor (c in).

**Sequence parallelism** (Korthikanti et al. 2022, arXiv 2205.05198, section 4.2.2 and Figure 5): tensor
parallelism splits the GEMMs, the attention heads and the MLP's intermediate width over the t ranks, but leaves the
layer-norms, dropouts and residual adds replicated: every rank runs them on all T tokens (the hidden-width terms of
(E1)/(E2), (E4)/(E5), (E8)/(E9), h unchanged by ``model_layer_widths``). Under sequence parallelism each rank holds
T/t tokens of that region (operators g and g-bar: all-gather before the column-parallel linear, reduce-scatter after
the row-parallel one; Megatron-LM @9aad920 ``megatron/mpu/layers.py`` lines 218-231 and 521-522, torchtitan's
``SequenceParallel()`` on the norms), so those kernels move 1/t of the bytes. With F_h, B_h the hidden-width terms
(norms with their fp32 statistics, the residual adds, the input-gradient sums) and F_r, B_r the rest (rotary,
activation, LoRA scale-and-add: head and intermediate widths, already per device)::

    F = F_h / t + F_r,   B = B_h / t + B_r   (t = 1 without sequence parallelism)                 (E10)

**Sequence-dimension collectives under torch.compile** (eq. (E14)). PyTorch's sequence parallelism shards the
[b, s, h] residual stream on dimension 1 (torchtitan @820504e ``parallelize_llama.py`` lines 178-197:
``SequenceParallel`` norms, ``PrepareModuleInput`` Shard(1) -> Replicate, row-parallel outputs Shard(1); its note at
lines 175-177 that folding the batch and sequence dimensions would "accelerate Sequence Parallel"). NCCL gathers and
scatters along dimension 0, so torch's functional collectives move the data between the two layouts
(torch 2.13 ``torch/distributed/_functional_collectives.py``: ``all_gather_single`` lines 207-223,
``all_gather_into_tensor`` then ``_maybe_view_chunk_cat``, a view only when the leading dimension is the group
size, else ``torch.cat``; ``reduce_scatter_single`` lines 276-277, ``_chunk_or_narrow_cat`` of the input onto
dimension 0). Each such copy reads and writes the whole [T, h] tensor, on every rank: 2c h per token of the
micro-batch's T tokens, not T/t. And the input gradient of a column-parallel block of n_b separate linears
(torchtitan's q/k/v, gate/up) is the sum of n_b partial [T, h] matmul outputs, summed on the full T before its
reduce-scatter (the reduce-scatter splits the fused norm-backward kernel that (E5) counts on T/t): inductor writes the
sum in the layout the reduce-scatter wants, (n_b + 1) c h per token. Per token of T and decoder layer, for blocks b
with n_b linears (2 blocks: attention, MLP)::

    F_x = sum_b 4c h   (all-gather copy + reduce-scatter copy; micro-batch of one sequence: 2c h, the
                        all-gather's only)
    B_x = sum_b [2c h (the output gradient's all-gather copy; 0 for one sequence)
                 + (n_b + 1) c h (n_b > 1: the input-gradient sum; n_b = 1: the copy 2c h, 0 for one sequence)]
                                                                                                  (E14)

and a layer whose backward gathers its block inputs again (op-level selective checkpointing, formulas/
model_parallel_time.py eq. (T1''') or recomputes its forward copies them again (2c h per block, the all-gathers'
share of F_x). Under async tensor parallelism (torchtitan ``enable_async_tp``) inductor's micro-pipeline pass
replaces each fused all-gather + matmul and matmul + reduce-scatter by symmetric-memory ops that restride the shard
(torch 2.13 ``torch/distributed/_symmetric_memory/__init__.py`` ``restride_A_shard_for_fused_all_gather_matmul``,
lines 1192-1202: a copy of the T/t shard) and move the gathered dimension by views (``movedim``, line 587); what
layout copies their consumers then make was not measured (symmetric memory needs CUDA) and is not counted: only the
unfused reduce-scatters' input-gradient sums, (n_b + 1) c h each, are, so async TP's gain over the vanilla count is an
upper bound (tests/formulas/test_async_tp_time.py). Measured: inductor's own byte count of the compiled forward and
backward of a torchtitan-style Llama block on rank 0 of 8 (a fake process group), one and two sequences, within 5 %
(tests/formulas/test_sequence_parallel_copies.py; the count keeps (E5)'s T/t norm-backward terms, about 6c h / t more
than inductor's split kernels read). Eager runs (and their view for one sequence) are not counted.

(The hidden dropouts after the attention and MLP blocks, Megatron's ``bias_dropout_add`` with its GPT default
``--hidden-dropout 0.1``, are not counted in (E1)/(E2) at all, with or without sequence parallelism: a mask write
forward and a masked read backward per hidden element, about 12 B x h per token and layer in fp16.)

Checked against the paper's own measurement: Table 4 (22B, one layer, t = 8, micro-batch 4 x 2048 on an A100 80GB)
has the forward fall from 7.7 to 7.2 ms with sequence parallelism, "from the layer-norm and dropout layers being
performed on 1/t of the data" (section 6.2); tests/formulas/test_sequence_parallel_time.py. On two real gloo ranks
with PyTorch's SequenceParallel styles each rank's norms and residual adds move exactly 1/t of the one-rank bytes
(tests/training/test_sequence_parallel_bytes.py).

Recomputation (activation checkpointing) runs each checkpointed layer's forward kernels again in the backward.
Time at the device memory bandwidth B_mem times the efficiency eta that memory-bound kernels reach::

    t_elementwise = T (L_c (F + B) + c_ckpt F + loss) / (eta B_mem)                                (E7)

**Unsloth** (``kernels='unsloth'``: its Triton kernels and fused LoRA autograd functions, unslothai/unsloth
@015bdef), counted from each kernel's ``tl.load`` / ``tl.store``: ``_rms_layernorm_forward`` reads X and writes Y
and the fp32 inverse RMS (kernels/rms_layernorm.py lines 48-59: 2c h + 4), its backward reads dY, X and the inverse
RMS and writes dX (lines 97-112: 3c h + 4; no weight gradient, line 240); ``_rope_embedding_QK`` rotates q and k in
place (kernels/rope_embedding.py lines 77-89: 2c (q_w + k_w) each way); ``_fg_kernel`` reads e and g and writes h
(kernels/swiglu.py lines 37-47: 3c I), ``_DWf_DW_dfg_kernel`` reads DW, e, g and writes three results in place
(lines 86-109: 6c I); the decoder layer's residual adds stay PyTorch adds (models/llama.py lines 837 and 844: 3c h
each, and the backward's two residual-gradient sums); ``matmul_lora`` adds the adapter inside ``out.addmm_`` (kernels/
utils.py line 1167: the GEMM reads and writes its output again, 2c out), and the fused LoRA backward sums every
input gradient with ``dX.addmm_`` (kernels/fast_lora.py lines 197-204 and 501-517: 2c h for the k, v and gate base
products and 2c in per adapter); ``fast_cross_entropy_loss`` reads the logits once forward and reads and overwrites
them backward (kernels/cross_entropy_loss.py lines 78, 246 and 276: 3c V)::

    forward   F_u = 10c h + 8 + 2c (q_w + k_w) + 3c I + 2c sum(adapter out)                       (E8)
    backward  B_u = 18c h + 8 + 2c (q_w + k_w) + 6c I + 2c sum(adapter in)                        (E9)

**Liger-Kernel** (``kernels='liger'``, ``loss='liger-flce'``; linkedin/Liger-Kernel @ead96b6, counted from each
kernel's ``tl.load`` / ``tl.store``): ``_rms_norm_forward_kernel`` reads X and writes Y and the fp32 1/rms
(ops/rms_norm.py lines 91, 124, 140: 2c h + 4; the weight row once per program), its backward reads dY, X and
1/rms and writes dX (lines 192-196, 231: 3c h + 4; the weight gradient is one fp32 row per SM, line 234, summed once
per step); ``_triton_rope`` rotates q and k in place and reads the half-width cos and sin rows (ops/rope.py lines
67-112: 2c (q_w + k_w) + c d_h each way, full rotary only; ``rope_forward``'s ``transpose`` / ``contiguous`` are
views of transformers' [b, s, heads, d] projections); ``_swiglu_forward_kernel`` / ``_geglu_tanh_forward_kernel``
read gate and up and write the product (ops/swiglu.py lines 62-65, ops/geglu.py lines 35-46: 3c I), their backward
reads dc, gate and up and writes both gradients in place (swiglu.py lines 82-95, geglu.py lines 61-84: 5c I). The
residual adds, the input-gradient sums and PEFT's adapters stay eager (E1/E2's terms); a LayerNorm, a partial or
concatenating rotary and a plain MLP are not Liger's and keep their eager count::

    forward   F_l = 10c h + 8 + 2c (q_w + k_w) + c d_h + 3c I                                     (E20)
    backward  B_l = 21c h + 8 + 2c (q_w + k_w) + c d_h + 5c I                                     (E21)

The fused linear cross-entropy (ops/fused_linear_cross_entropy.py) runs ``liger_cross_entropy_kernel``
(ops/cross_entropy.py) over each chunk of logits the chunk's GEMM wrote: one pass reading the row for its maximum
and sum (lines 151-153), one reading it again and writing the gradient in place (lines 206-208, 252)::

    loss = 3c V per token                                                                          (E22)

(the logits' write is the GEMM's, as in (E3)); its per-chunk weight-gradient sums are formulas/liger_kernels.py
eq. LG5. Checked against Liger-Kernel's own speed rows (A100; tests/formulas/test_liger_speed.py).

**flash-attn's fused cross-entropy** (``loss='fused-xentropy'``: llm-foundry's default ``loss_fn``): the forward
kernel ``cunn_SoftMaxXEntropyForward`` reads each row of the half-precision logits twice (the max-and-sum pass and
the exp-sum pass: flash-attn v1.0.9 csrc/xentropy/xentropy_kernel.cu lines 452 and 466) and writes two fp32
numbers per token; the backward kernel reads the logits once and writes their gradient once (``apply``, lines
503-513), in the logits' dtype::

    loss = 4c V per token                                                                          (E11)

(the upcast, log-softmax and their fp32 gradients of (E3) are never written). flash-attn 2.x's Triton kernel reads
the row once in the forward, 3c V; of the llm-foundry tables only the 'Large Scale' H100 one ran it (llm-foundry
5e85bd62d installs '.[gpu-flash2]', flash-attn 2.4.2), counted as (E11) too: c V per token more.

**Training-metric passes** (``train_metric_passes``: Composer's train metrics, 2 for llm-foundry's MPT): after
each micro-batch's backward Composer runs ``_eval_train_metrics`` under ``torch.no_grad()`` and the run's precision
context (composer v0.16.4 trainer/trainer.py lines 2166-2175, called at lines 2472-2475), which hands the kept
logits (``state.outputs``, line 2403) to each metric; LanguageCrossEntropy and LanguagePerplexity (the latter
inherits ``update``) each run ``torch.nn.CrossEntropyLoss(reduction='sum')`` over all of them (metrics/nlp.py
lines 100, 119-121, 188). Under ``torch.autocast`` (Composer's amp_bf16 / amp_fp16 context, core/precision.py
lines 58-65) ``log_softmax`` runs with dtype fp32 (autocast's fp32_set_opt_dtype policy); aten's
``log_softmax(input, dim, dtype)`` (aten/src/ATen/native/SoftMax.cpp) fuses the upcast into the kernel
(``half_to_float``) for fp16 on CUDA only: bf16 logits are copied to fp32 first (``toType``). ``nll_loss`` then
gathers one log-probability per token. No backward. Per pass and token, c the logits' element size::

    metric pass = (c + 3f) V  [bf16 under autocast: c read + f written (copy), f read + f written (log_softmax)]
                = (c + f) V   [fp16 under autocast: the fused half_to_float kernel]
                = 2c V        [no torch autocast: Composer's amp_fp8 context is transformer-engine's fp8_autocast
                               only, lines 69-81, so log_softmax runs on the bf16 logits]                 (E12)

28 B per logit for llm-foundry's two passes in bf16, beside the fused loss's 8 B (E11). Measured on a real CPU
no_grad cross-entropy of bf16 logits under autocast (tests/formulas/test_train_metric_traffic.py).

No Unsloth throughput row with its settings is published in a form the validation can use, and the kernels need
Triton on a CUDA device, so E8/E9 are read from the code, not measured.

**Megatron** (``megatron=True``: Megatron-LM / Megatron-Core, every ``megatron-*`` precision). Megatron's layer
is not transformers' eager one. Read at NVIDIA/Megatron-LM @d7288711 (the commit Megatron-Bridge v0.4.1 pins) and
TransformerEngine @d0067d0d:

- the norms are one fused kernel each way, inside ``TELayerNormColumnParallelLinear`` (gpt_layer_specs.py: the q/k/v
  and fc1 linears fuse their input norm) or apex's/TE's LayerNorm: the forward reads x and writes the norm's bf16
  output and its fp32 statistics (``rmsnorm_fwd``: rsigma; LayerNorm: mu and rsigma; TE module/layernorm_linear.py
  lines 257-268 ``apply_normalization``, csrc/extensions/normalization.cpp); under FP8 current scaling the amax is
  fused into it and the cast to FP8 is eq. F3c's (formulas/float8_training.py), not counted here. The backward reads
  dy, x and the statistics and writes dx (2c h + n_s f forward, 3c h + n_s f backward, n_s = 1 RMSNorm, 2 LayerNorm;
  the per-CTA fp32 partial sums of dgamma are per block, not per token);
- q, k and v come from one fused linear (``linear_qkv``) and gate and up from one (``linear_fc1``): no input-gradient
  sums of separate linears. The residual-stream gradient still meets the norm's dx once per block (two adds of 3c h);
  the split of the fused q/k/v output is views (``SplitAlongDim``, transformer/attention.py lines 1466-1471), whose
  backward concatenates dq, dk, dv (TE pytorch/utils.py lines 386-470: 2c (q_w + 2 k_w)); with grouped queries
  (fewer kv heads than q heads) the query's ``reshape`` (attention.py line 1474) cannot be a view of the split and
  copies it (2c q_w forward);
- rotary: TE's fused RoPE (``apply_rope_fusion``: Megatron-LM's default, training/arguments.py ``--no-rope-fusion``;
  Megatron-Bridge sets it, models/llama/llama_bridge.py @f9b6319e lines 65-69 with bias_activation_fusion,
  bias_dropout_fusion and persist_layer_norm, and scripts/performance/utils/overrides.py line 65) on q and
  k, one kernel each way that reads the tensor and the fp32 angles of its position and writes the result (TE
  common/fused_rope/fused_rope.cu lines 50-75): 2c (q_w + k_w) + 2 f d_h each way;
- SwiGLU: ``bias_swiglu_impl`` (``bias_activation_fusion``, Megatron-LM's default ``--no-bias-swiglu-fusion``;
  transformer/mlp.py lines 264-300), one fused kernel reading the fc1 output [2I] and writing [I] (3c I), its backward
  reading dy and the saved input and writing d(input) (5c I); a plain MLP's ``bias_gelu_impl`` 2c I and 3c I;
- the residual adds: ``bias_dropout_add`` (3c h each, as (E1)); its dropout is not counted, as in (E1)/(E2)::

    forward   F_m = 2 (2c h + n_s f) + 6c h + 2c (q_w + k_w) + 2f d_h [rotary] + 2c q_w [q_w > k_w] + a_f c I  (E15)
    backward  B_m = 2 (3c h + n_s f) + 6c h + 2c (q_w + k_w) + 2f d_h [rotary] + 2c (q_w + 2 k_w) + a_b c I  (E16)

(a_f, a_b = 3, 5 gated; 2, 3 plain; the q/k/v terms only in layers with attention). The loss is not changed here:
``megatron-ce`` stays (E3) (Megatron-Bridge's recipes run TE's fused cross-entropy, ``cross_entropy_fusion_impl
'te'``, which reads the logits twice and writes an fp32 gradient, (4c + 16) V per token with its backward: not yet
expressed as a loss of its own). Megatron's other fusions are counted where they act: the FP8 cast's amax fused
into the norm (eq. F3c), ``gradient_accumulation_fusion`` (the wgrad GEMM accumulating into the fp32 main_grad: no
accumulation pass for those weights, formulas/optimizer_step.py after eq. O3m), ``masked_softmax_fusion`` (only on the unfused attention path: formulas/
eager_attention_traffic.py reads Megatron's fused softmax kernels), ``persist_layer_norm`` (apex's persistent
LayerNorm kernel: the same bytes as any one-kernel norm).

**MoE token permutation** (eqs. E17/E18, :func:`moe_dispatch_bytes`, in each Megatron MoE layer's terms, on the
tokens the layer's rank holds, so on T/t under sequence parallelism). Megatron-Core's dispatchers with
``moe_permute_fusion`` (every Megatron-Bridge MoE recipe, e.g. recipes/gpt_oss/h100/gpt_oss.py line 106,
recipes/qwen/h100/qwen3_moe.py line 86 @067f987d) run TE's Triton permutation kernels (TransformerEngine @d0067d0d
pytorch/permutation.py, common/triton/permutation.py), read at NVIDIA/Megatron-LM @d7288711 moe/moe_utils.py
``permute`` lines 302-428, ``unpermute`` 431-530, ``sort_chunks_by_idxs`` 533-566 and moe/token_dispatcher.py
``MoEAlltoAllTokenDispatcher.dispatch_preprocess`` 594-649 (permute with the probabilities), ``dispatch_postprocess``
680-749 and ``combine_preprocess`` 751-790 (the chunk sorts, only with more than one local expert),
``combine_postprocess`` 820-854 (unpermute without merging probabilities: the experts' activation applies them,
experts.py ``weighted_bias_swiglu_impl``). Per token, k routed copies, E experts, element size c, probabilities of
p bytes (the router's dtype: the input's unless ``moe_router_dtype``, router.py lines 100-106), int32 maps (4 B):

- ``make_row_id_map``, three passes: reads the bool routing map [T, E] (E) and writes its int32 columns (4E), reads
  and rewrites them (8E), reads them and writes the k destination rows, the k expert indices and the count
  (4E + 4(2k + 1)): 17E + 8k + 4;
- ``_permute_kernel`` (one program per token and hidden block): reads the token once and the map's 2k + 1 words,
  writes its k copies; reads the k probabilities and writes them permuted: c h + k c h + 2k p + 8k + 4;
- ``_unpermute_kernel`` without merging probabilities: reads the k expert outputs and the count and k source rows,
  writes their sum: k c h + c h + 4k + 4;
- backward: the unpermute's is ``_permute_kernel`` on the gradient (c h + k c h + 4k + 4); the permute's is
  ``_unpermute_kernel`` with the probabilities' gradient: it writes a zero row of the dense [T, E] gradient (E p) and
  the k gradients read from the permuted ones (2k p), reads the 2k + 1 map words: k c h + c h + E p + 2k p + 8k + 4;
- with more than one local expert ('alltoall'), ``sort_chunks_by_map`` twice forward (the received chunks by local
  expert, with the probabilities; and back), each after ``make_chunk_sort_map`` writes a row map (4k), each kernel
  reading it (4k) and reading and writing the k rows (2k c h; probabilities 2k p); backward the same kernels on the
  saved maps::

    forward   P_f = 2c h (1 + k) + 2k p + 17E + 20k + 12 [+ 4k c h + 2k p + 16k, chunk sorts]        (E17)
    backward  P_b = 2c h (1 + k) + 2k p + E p + 12k + 8 [+ 4k c h + 2k p + 8k, chunk sorts]          (E18)

Counted for the 'alltoall' dispatcher only. 'flex' with HybridEP (Bridge's flex recipes) permutes inside its
dispatch and combine kernels (token_dispatcher.py ``_HybridEPManager.get_permuted_hidden_states_by_experts`` returns
the dispatched tensor as it is, lines 1083-1087): communication kernels, not counted here; DeepEP's separate
permute (lines 1287-1332) and 'allgather''s permute of the gathered tokens (lines 280-328) are not modelled. Not
counted either: the all-to-alls (communication,
formulas/expert_parallel_time.py), the router's ops over [T, E] (the unfused router's, formulas/moe_router.py eq.
E19, are added apart where the workload's ``moe_router_fusion`` is off, Megatron-Core's default:
estimate/duration.py ``unfused_router_bytes_per_token``; Megatron-Bridge's GPT-OSS and Qwen3 performance configs
turn it on, scripts/performance/configs/gpt_oss/gpt_oss_llm_pretrain.py line 34, configs/qwen/qwen3_llm_pretrain.py
line 36 @f9b6319e), and the probabilities' reads in the weighted SwiGLU.

**Inference** (eq. E13, ``inference_forward_bytes_per_token``): an eager transformers forward without autograd runs
the same forward ops (E1) in every layer, plus the DynamicCache append of the new keys and values, the embedding
gather and the final norm; measured on a real CPU forward of a transformers Llama (tests/formulas/
test_inference_traffic.py).

A LayerNorm is torch's one fused ``native_layer_norm`` kernel each way (2c h + 2f forward, 3c h + 2f backward,
read from a transformers GPTBigCode layer's trace); a GeLU MLP runs one ``gelu`` (2c I) and one ``gelu_backward``
(3c I); models with learned positions, ALiBi or no positions run no rotary kernels, and neither does a layer that
applies no rotary (ModelSpec.applies_rotary): the 10c (q_w + k_w) + 4c d_h forward and 16c (q_w + k_w) + 4c d_h
backward of (E1)/(E2) (and their terms in (E4)/(E5), (E8)/(E9)) are counted only in layers whose attention calls
``apply_rotary_pos_emb`` (not Qwen3-Next's Gated DeltaNet layers, Llama-3.2-Vision's cross-attention layers or
Llama 4's NoPE layers, ``Llama4TextAttention.use_rope`` False). MoE layers are counted with the activation
width of their top-k routed experts, an approximation. The counts are those
of half-precision layers (torchtune's bf16 recipes, FSDP's bf16 parameters); under ``torch.autocast`` with fp32
weights the residual stream is fp32 and each linear casts its input and weight, traffic not counted here. The
embedding lookup, the final norm and the dense embedding gradient are left out (one layer's norm or less).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import repeat
from operator import itemgetter

from ..errors import InputError
from ..frozen import fast_init
from ..specs import ModelSpec
from .gemm_shapes import running_sum
from .tensor_parallel import EVERY_BLOCK_SPLIT, ActivationSplit
from .tensors import layer_kind_firsts
from .training_activations import _head_dims

F32 = 4.0
SOURCE_EAGER = ("transformers models/llama/modeling_llama.py LlamaRMSNorm.forward L62-67, apply_rotary_pos_emb "
                "L145-149, rotate_half L119-123, LlamaMLP.forward L164; autograd derivatives.yaml")
SOURCE_COMPILED = ("inductor fused kernels' bytes (torch/_inductor/graph.py GraphLowering.count_bytes) of a "
                   "compiled transformers Llama decoder layer")


@fast_init
@dataclass(frozen=True)
class LayerWidths:
    """The widths of one decoder layer's memory-bound ops, per device (after tensor parallelism)."""

    hidden: int
    intermediate: int  # the activation width: the MLP's, or k x the routed expert's for an MoE layer
    q_width: int
    kv_width: int
    head_dim: int
    gated: bool = True
    rotary: bool = True  # rotary q/k (False: learned absolute positions or ALiBi)
    layernorm: bool = False  # torch's fused native_layer_norm instead of the composite RMSNorm
    rotary_dim: int = 0  # the rotated channels of each head (a partial rotary); 0: all head_dim of them
    rotary_cat: bool = False  # the rotary concatenates its pass-through channels back (eq. E1r)
    attends: bool = True  # the layer has (self-)attention: q/k/v-width kernels (Megatron's split, eqs. E15/E16)
    topk: int = 0  # an MoE layer's routed copies per token (0: a dense layer; Megatron's dispatcher, eqs. E17/E18)
    experts: int = 0  # an MoE layer's routed experts (the routing map's and row-id map's width)
    permuted: bool = False  # Megatron's 'alltoall' dispatcher permutes and unpermutes the MoE layer's tokens (E17/E18)
    chunk_sorts: bool = False  # the 'alltoall' dispatcher's sort of the received chunks by local expert, and back
    routed: int = 0  # the routed experts' share of ``intermediate`` (an MoE layer; Liger's SwiGLU leaves it eager)


def _check(c: float, *widths: float) -> None:
    if c <= 0 or any(w < 0 for w in widths):
        raise InputError("element size must be positive and widths not negative")


def rmsnorm_bytes(hidden: int, c: float, compiled: bool, weight_trained: bool) -> tuple[float, float]:
    """(forward, backward) bytes per token of one eager RMSNorm (N_f, N_b); compiled norms are counted inside
    (E4)/(E5), so this is the eager count only."""
    _check(c, hidden)
    if compiled:
        raise InputError("a compiled RMSNorm fuses with its neighbours: use layer_bytes")
    fwd = (4 * c + 7 * F32) * hidden + 6 * F32
    bwd = (8 * c + 19 * F32) * hidden + 10 * F32 - (0.0 if weight_trained else 4 * c * hidden)
    return fwd, bwd


def layernorm_bytes(hidden: int, c: float) -> tuple[float, float]:
    """(forward, backward) bytes per token of one eager LayerNorm: torch's fused ``native_layer_norm`` reads the
    input and writes the output, mean and rstd (2c h + 2f); ``native_layer_norm_backward`` reads the gradient, the
    input, mean and rstd and writes the input gradient, the weight and bias gradients reduced inside (3c h + 2f)."""
    _check(c, hidden)
    return 2 * c * hidden + 2 * F32, 3 * c * hidden + 2 * F32


def layer_bytes(w: LayerWidths, c: float, compiled: bool, norms_trained: bool,
                adapters: tuple[tuple[int, int], ...] = (), unsloth: bool = False,
                seq_shards: int = 1, megatron: bool = False, liger: bool = False,
                liger_swiglu: bool = True) -> tuple[float, float]:
    """(forward, backward) memory-bound bytes per token of one decoder layer: eqs. (E1)/(E2) eager, (E4)/(E5)
    compiled, (E8)/(E9) Unsloth's kernels, (E15)/(E16) Megatron's fused layer (``megatron``), (E20)/(E21)
    Liger-Kernel's RMSNorm, RoPE and SwiGLU/GeGLU (``liger``; ``liger_swiglu`` False: its SwiGLU off, the MLP
    PyTorch's, as ArcticTraining sets it under TiledMLP); ``adapters``: (in,
    out) of each LoRA-adapted linear; ``seq_shards``: the tensor-parallel degree t under sequence parallelism, whose
    ranks each run the hidden-width kernels (norms, residual adds, input-gradient sums) on 1/t of the tokens (eq.
    (E10)), else 1.

    >>> layer_bytes(LayerWidths(8, 16, 8, 4, 2), 2.0, False, True, megatron=True)  # 168 + 64 + 32 + 96; 200 + 64 + 64 + 160
    (360.0, 488.0)
    >>> layer_bytes(LayerWidths(8, 16, 8, 4, 2), 2.0, False, True, ((8, 4),), megatron=True)  # + 5c o; + 2c o + 3c n
    (400.0, 552.0)
    """
    if megatron:  # Megatron-Bridge's LoRALinear adds the adapter's output unfused, as PEFT does (eager terms)
        fwd, bwd = _megatron_terms(w, c)
        lora_f, lora_b = _eager_adapter_terms(adapters, c)
        fwd, bwd = fwd + (lora_f,), bwd + (lora_b,)
    else:
        fwd, bwd = _layer_terms(w, c, compiled, norms_trained, adapters, unsloth, liger, liger_swiglu)
    return _sum_terms(fwd, seq_shards), _sum_terms(bwd, seq_shards)


def _eager_adapter_terms(adapters: tuple[tuple[int, int], ...], c: float
                         ) -> tuple[tuple[float, bool], tuple[float, bool]]:
    """Eq. (E1)/(E2)'s LoRA addends, eager: per adapted linear of (in n, out o) the scaling ``* scale`` (2c o) and
    the add to the base output (3c o) forward; the scaling's gradient (2c o) and the input-gradient sum of the adapter
    with the base linear (3c n) backward. Megatron-Bridge's LoRALinear runs the same unfused ops:
    ``combined = linear_output + adapter_output`` (NVIDIA-NeMo/Megatron-Bridge @067f987df
    src/megatron/bridge/peft/lora_layers.py lines 80-85)."""
    return ((sum(5 * c * o for _, o in adapters), False),
            (sum(2 * c * o + 3 * c * n for n, o in adapters), False))


def _sum_terms(terms: tuple[tuple[float, bool], ...], seq_shards: int) -> float:
    """The addends of one pass in order (the same floats as the equation written out), the hidden-width ones on
    1/``seq_shards`` of the tokens (eq. (E10))."""
    if seq_shards < 1:
        raise InputError(f"sequence shards must be >= 1, got {seq_shards}")
    total = 0.0
    for x, hidden in terms:
        total += x / seq_shards if hidden and seq_shards > 1 else x
    return total


def _layer_terms(w: LayerWidths, c: float, compiled: bool, norms_trained: bool,
                 adapters: tuple[tuple[int, int], ...], unsloth: bool, liger: bool = False,
                 liger_swiglu: bool = True) -> tuple[tuple[tuple[float, bool], ...], tuple[tuple[float, bool], ...]]:
    """(forward, backward) addends per token of one decoder layer, each marked True when it is a hidden-width
    kernel of the sequence-parallel region (norms with their fp32 statistics, residual adds, input-gradient sums:
    eq. (E10)); False for the rotary, activation and LoRA scale-and-add kernels (head / intermediate widths)."""
    h, i, q, k, d = w.hidden, w.intermediate, w.q_width, w.kv_width, w.head_dim
    _check(c, h, i, q, k, d)
    if unsloth:
        rot = 2 * c * (q + k) if w.rotary else 0.0
        act_f, act_b = (3.0, 6.0) if w.gated else (2.0, 3.0)
        return (((10 * c * h + 2 * F32, True), (rot, False), (act_f * c * i, False),
                 (sum(2 * c * o for _, o in adapters), False)),
                ((18 * c * h + 2 * F32, True), (rot, False), (act_b * c * i, False),
                 (sum(2 * c * n for n, _ in adapters), False)))
    if liger and not compiled:
        return _liger_terms(w, c, norms_trained, adapters, liger_swiglu)
    act_f, act_b = (5.0, 9.0) if w.gated else (2.0, 3.0)  # gated: act + mul; plain: act only
    act_fc, act_bc = (3.0, 5.0) if w.gated else (2.0, 3.0)
    if compiled:
        rot = 1.0 if w.rotary else 0.0
        return (((9 * c * h + 2 * F32, True), (rot * (5 * c * (q + k) + 4 * c * d), False), (act_fc * c * i, False),
                 (sum(c * o for _, o in adapters), False)),
                ((12 * c * h + 2 * F32, True), (rot * (2 * c * (q + k) + 4 * c * d), False), (act_bc * c * i, False),
                 (7 * c * h if norms_trained else 0, True), (sum(2 * c * o + c * n for n, o in adapters), False)))
    nf, nb = layernorm_bytes(h, c) if w.layernorm else rmsnorm_bytes(h, c, False, norms_trained)
    rot = 1.0 if w.rotary else 0.0
    lora_f, lora_b = _eager_adapter_terms(adapters, c)
    return (((2 * nf + 6 * c * h, True), (rot * rotary_forward_bytes(w, c), False), (act_f * c * i, False), lora_f),
            ((2 * nb + 15 * c * h, True), (rot * (16 * c * (q + k) + 4 * c * d), False), (act_b * c * i, False),
             lora_b))


def _liger_terms(w: LayerWidths, c: float, norms_trained: bool, adapters: tuple[tuple[int, int], ...],
                 swiglu: bool = True) -> tuple[tuple[tuple[float, bool], ...], tuple[tuple[float, bool], ...]]:
    """Eqs. (E20)/(E21): (forward, backward) addends per token of one transformers decoder layer with Liger-Kernel's
    modules swapped in (module docstring, "Liger-Kernel"), marked as :func:`_layer_terms` marks them. A LayerNorm, a
    partial or concatenating rotary and a plain (ungated) MLP are not Liger's: their eager terms stay."""
    h, i, q, k, d = w.hidden, w.intermediate, w.q_width, w.kv_width, w.head_dim
    nf, nb = layernorm_bytes(h, c) if w.layernorm else rmsnorm_bytes(h, c, False, norms_trained)
    norm_f = nf if w.layernorm else 2 * c * h + F32  # _rms_norm_forward_kernel: X read, Y and RSTD written
    norm_b = nb if w.layernorm else 3 * c * h + F32  # _rms_norm_backward_kernel: dY, X, RSTD read, dX written
    liger_rope = w.rotary and not w.rotary_cat and not 0 < w.rotary_dim < d
    rot_f = (2 * c * (q + k) + c * d if liger_rope else rotary_forward_bytes(w, c)) if w.rotary else 0.0
    rot_b = (2 * c * (q + k) + c * d if liger_rope else 16 * c * (q + k) + 4 * c * d) if w.rotary else 0.0
    act_f, act_b = (3.0, 5.0) if w.gated and swiglu else (5.0, 9.0) if w.gated else (2.0, 3.0)
    eager_f, eager_b = (5.0, 9.0) if w.gated else (2.0, 3.0)  # routed experts: eager (liger_kernels.swiglu_applies)
    mlp_f = c * (act_f * (i - w.routed) + eager_f * w.routed)
    mlp_b = c * (act_b * (i - w.routed) + eager_b * w.routed)
    lora_f, lora_b = _eager_adapter_terms(adapters, c)
    return (((2 * norm_f + 6 * c * h, True), (rot_f, False), (mlp_f, False), lora_f),
            ((2 * norm_b + 15 * c * h, True), (rot_b, False), (mlp_b, False), lora_b))


def rotary_forward_bytes(w: LayerWidths, c: float) -> float:
    """Eq. (E1)'s rotary term, per token, eager: ``apply_rotary_pos_emb`` on q and k. Over the r rotated channels of
    each head (``w.rotary_dim``, all d_h of them when 0) it runs ``q_rot * cos``, ``rotate_half`` (``neg`` of half,
    ``cat``), ``* sin`` and the ``+``: 10c over the rotated widths and 4c r for the cos / sin read; a partial rotary
    then concatenates the pass-through channels back (``torch.cat([q_embed, q_pass])``: q and k read and written
    whole), and so does Phi-3's at any factor (``w.rotary_cat``)::

        R = 10c (q_w + k_w) r / d_h + 4c r + [2c (q_w + k_w) where it concatenates]              (E1r)

    (transformers 5.24 modeling_qwen3_next.py / modeling_glm4_moe.py / modeling_phi3.py ``apply_rotary_pos_emb``:
    ``rotary_dim = cos.shape[-1]``, ``q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]``; modeling_phi.py,
    modeling_stablelm.py and modeling_gpt_neox.py slice and concatenate in the attention forward). Full rotary
    without the concatenation is (E1)'s 10c (q_w + k_w) + 4c d_h. Traced on the real functions
    (tests/formulas/test_partial_rotary.py)."""
    q, k, d = w.q_width, w.kv_width, w.head_dim
    r = w.rotary_dim if 0 < w.rotary_dim < d else d
    rotated = q + k if r == d else (q + k) * r / d
    return 10 * c * rotated + 4 * c * r + (2 * c * (q + k) if w.rotary_cat or r < d else 0.0)


def _megatron_terms(w: LayerWidths, c: float
                    ) -> tuple[tuple[tuple[float, bool], ...], tuple[tuple[float, bool], ...]]:
    """Eqs. (E15)/(E16): (forward, backward) addends per token of one Megatron decoder layer (module docstring),
    marked as :func:`_layer_terms` marks them (True: the hidden-width kernels of eq. (E10))."""
    h, i, q, k, d = w.hidden, w.intermediate, w.q_width, w.kv_width, w.head_dim
    _check(c, h, i, q, k, d)
    stats = (2.0 if w.layernorm else 1.0) * F32  # the norm's fp32 statistics per token: mu and rsigma, or rsigma
    rot = 2 * c * (q + k) + 2 * F32 * d if w.rotary else 0.0
    attends = w.attends and q > 0
    copy = 2 * c * q if attends and q > k else 0.0  # the grouped query's reshape of the split view
    cat = 2 * c * (q + 2 * k) if attends else 0.0  # SplitAlongDim's backward: dq, dk, dv concatenated
    act_f, act_b = (3.0, 5.0) if w.gated else (2.0, 3.0)
    disp_f, disp_b = (moe_dispatch_bytes(h, w.topk, w.experts, c, c, w.chunk_sorts) if w.topk and w.permuted
                      else (0.0, 0.0))
    return (((2 * (2 * c * h + stats) + 6 * c * h, True), (rot + copy, False), (act_f * c * i, False),
             (disp_f, True)),
            ((2 * (3 * c * h + stats) + 6 * c * h, True), (rot + cat, False), (act_b * c * i, False),
             (disp_b, True)))


INDEX = 4.0  # TE's row-id and chunk-sort maps are int32


def moe_dispatch_bytes(hidden: int, topk: int, experts: int, c: float, p: float, chunk_sorts: bool
                       ) -> tuple[float, float]:
    """Eqs. (E17)/(E18): (forward, backward) bytes per token entering one MoE layer of Megatron-Core's token
    dispatcher with ``moe_permute_fusion`` (TE's fused permute kernels): ``topk`` = k routed copies of the token,
    ``experts`` = E, element size ``c``, routing probabilities of ``p`` bytes, ``chunk_sorts``: the 'alltoall'
    dispatcher's two sorts by local expert (module docstring, "MoE token permutation").

    >>> moe_dispatch_bytes(8, 2, 4, 2.0, 4.0, False)  # 96 + 16 + 68 + 40 + 12; 96 + 16 + 16 + 24 + 8
    (232.0, 160.0)
    """
    _check(c, hidden, topk, experts)
    if p <= 0:
        raise InputError("probability element size must be positive")
    h, k, e = float(hidden), float(topk), float(experts)
    rows = 2 * c * h * (1 + k)  # permute: read the token once, write k copies; unpermute: read k, write one sum
    fwd = rows + 2 * k * p + (1 + 4 * INDEX) * e + 5 * INDEX * k + 3 * INDEX
    bwd = rows + 2 * k * p + p * e + 3 * INDEX * k + 2 * INDEX
    if chunk_sorts:
        fwd += 4 * k * c * h + 2 * k * p + 4 * INDEX * k
        bwd += 4 * k * c * h + 2 * k * p + 2 * INDEX * k
    return fwd, bwd


def loss_bytes(vocab: int, c: float, compiled: bool, unsloth: bool = False, fused_xentropy: bool = False,
               liger_flce: bool = False) -> float:
    """Bytes per token of the cross-entropy over ``vocab`` logits, forward and backward: (E3) eager, (E6)
    compiled, Unsloth's ``fast_cross_entropy_loss`` 3c V, flash-attn's fused kernel 4c V (E11), Liger's fused linear
    cross-entropy's kernel 3c V (E22) (module docstring)."""
    _check(c, vocab)
    if liger_flce:
        return 3 * c * vocab
    if fused_xentropy:
        return 4 * c * vocab
    if unsloth:
        return 3 * c * vocab
    return (4 * c if compiled else 2 * c + 10 * F32) * vocab


def metric_pass_bytes(vocab: int, c: float, autocast: bool, fp16: bool = False) -> float:
    """Eq. (E12): bytes per token of one eager no-grad cross-entropy (a training-metric pass) over ``vocab``
    logits of element size ``c``: under autocast the fp32 copy and the fp32 log-softmax (bf16), or the fused
    half-to-float log-softmax (``fp16``); without autocast, or on fp32 logits, the log-softmax in their dtype."""
    _check(c, vocab)
    if not autocast or c >= F32:
        return 2 * c * vocab
    return ((c + F32) if fp16 else (c + 3 * F32)) * vocab


def sequence_parallel_copy_bytes(hidden: int, c: float, block_linears: tuple[int, ...], sequences: int,
                                 fused: bool, gather_bytes: float | None = None) -> tuple[float, float, float]:
    """Eq. (E14): (forward, backward, again) bytes per token of the micro-batch's full T tokens and decoder layer
    that a compiled sequence-parallel rank moves around its collectives on the sequence dimension; ``block_linears``:
    n_b, the separate column-parallel linears of each block (Llama: (3, 2)); ``sequences``: the micro-batch's b;
    ``fused``: async tensor parallelism's fused pairs; ``again``: the all-gathers' copies once more (a layer whose
    backward gathers its block inputs again); ``gather_bytes``: the all-gathered elements' size when it is not c
    (float8 all-gathers, formulas/model_parallel_time.py eq. (T1''): the copies after them move 1-byte elements).

    >>> sequence_parallel_copy_bytes(10, 2.0, (3, 2), 4, False)   # copies of 40 B: 2 x 2 x 40; 2 x 40 + 80 + 60
    (160.0, 220.0, 80.0)
    >>> sequence_parallel_copy_bytes(10, 2.0, (3, 2), 1, False)   # the all-gathers' copies; the sums
    (80.0, 140.0, 80.0)
    >>> sequence_parallel_copy_bytes(10, 2.0, (3, 1), 4, True)    # the unfused reduce-scatter's sum only
    (0.0, 80.0, 0.0)
    """
    _check(c, hidden)
    if sequences < 1 or any(n < 1 for n in block_linears):
        raise InputError("sequences and linears per block must be >= 1")
    copy = 2.0 * c * hidden  # a reduce-scatter's input copied onto dimension 0
    gathered = copy if gather_bytes is None else 2.0 * gather_bytes * hidden  # an all-gather's output copied back
    many = sequences > 1
    blocks = len(block_linears)
    fwd = 0.0 if fused else blocks * (gathered + copy) if many else blocks * gathered
    bwd = 0.0
    for n in block_linears:
        if n > 1:
            bwd += (n + 1) * c * hidden
        elif many and not fused:
            bwd += copy
        if many and not fused:
            bwd += gathered
    return fwd, bwd, 0.0 if fused else blocks * gathered


def elementwise_seconds(total_bytes: float, memory_bandwidth: float, efficiency: float) -> float:
    """Eq. (E7): seconds the memory-bound kernels take for ``total_bytes`` at ``efficiency`` x
    ``memory_bandwidth`` [B/s]."""
    if total_bytes < 0 or memory_bandwidth <= 0 or not 0 < efficiency <= 1:
        raise InputError("bytes must not be negative, bandwidth positive, efficiency in (0, 1]")
    return total_bytes / (memory_bandwidth * efficiency)


def model_layer_widths(spec: ModelSpec, layer: int, tp: int = 1,
                       split: ActivationSplit = EVERY_BLOCK_SPLIT) -> LayerWidths:
    """The widths of decoder layer ``layer`` of ``spec`` per device (q, kv and intermediate widths split by
    ``tp`` where ``split`` says the engine splits that block: formulas/tensor_parallel.py ``activation_split``,
    transformers' plan keeps some whole on every rank; an MoE layer's activation is its top-k routed experts' and
    any shared expert's); its rotary kernels only where the layer applies rotary positions
    (ModelSpec.applies_rotary: not a Gated DeltaNet / Mamba or cross-attention layer, not a Llama 4 NoPE layer)."""
    q, k, _, _ = _head_dims(spec)
    if spec.moe is not None and spec.moe_layers[layer]:
        m = spec.moe
        routed, shared = m.experts_per_token * m.expert_intermediate_size, m.shared_intermediate_size
        e_ways, s_ways = split.ways("experts", tp), split.ways("shared_experts", tp)
        inter = -(-(routed + shared) // tp) if e_ways == s_ways == tp else -(-routed // e_ways) - (-shared // s_ways)
        gated, topk, experts = m.expert_gated, m.experts_per_token, m.num_experts
        routed_w = min(inter, -(-routed // e_ways))
    else:
        inter, gated = -(-spec.intermediate_size // split.ways("mlp", tp)), spec.mlp_gated
        topk = experts = routed_w = 0
    head = spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim if spec.mla is not None else spec.head_dim
    rotary = spec.applies_rotary(layer)
    rot_dim = spec.rotary_dim if spec.mla is None and 0 < spec.rotary_dim < head else 0
    return LayerWidths(spec.hidden_size, inter, -(-q // split.ways("attention", tp)),
                       max(head, k // split.ways("kv", tp)) if k else 0, head, gated, rotary,
                       spec.norm_kind == "layernorm", rot_dim, spec.rotary_pass_cat or rot_dim > 0,
                       attends=spec.layer_types[layer] != "none", topk=topk, experts=experts, routed=routed_w)


def _layer_rows(spec: ModelSpec, c: float, compiled: bool, norms_trained: bool,
                adapters: dict[int, tuple[tuple[int, int], ...]], tp: int, unsloth: bool, seq_shards: int,
                split: ActivationSplit = EVERY_BLOCK_SPLIT, megatron: bool = False, moe_permute: str = "none",
                liger: bool = False, liger_swiglu: bool = True) -> list[tuple[float, float, float]]:
    """(forward, backward, forward + backward) bytes per token of each decoder layer, in order. A layer's widths
    depend on it only through its kind (ModelSpec.layer_key) and whether it applies rotary positions
    (ModelSpec.rotary_layers: Llama 4's NoPE layers are of the same kind as its rotary ones): its bytes once per
    (kind, adapters, rotary)."""
    kinds = list(zip(layer_kind_firsts(spec), map(adapters.get, range(spec.num_layers), repeat(())),
                     spec.rotary_layers, strict=True))
    per_kind: dict[tuple[object, ...], tuple[float, float, float]] = {}
    for key in dict.fromkeys(kinds):
        n = kinds.index(key)  # the first layer of this kind
        widths = model_layer_widths(spec, n, tp, split)
        if moe_permute != "none" and widths.topk:
            widths = replace(widths, permuted=True, chunk_sorts=moe_permute == "permute+sort")
        f, b = layer_bytes(widths, c, compiled, norms_trained, key[1], unsloth, seq_shards, megatron, liger,
                           liger_swiglu)
        per_kind[key] = (f, b, f + b)
    return list(map(per_kind.__getitem__, kinds))


def step_bytes_per_token(spec: ModelSpec, c: float, compiled: bool, norms_trained: bool,
                         adapters: dict[int, tuple[tuple[int, int], ...]], recomputed_layers: int,
                         loss: str = "ce", tp: int = 1, unsloth: bool = False,
                         loss_compiled: bool | None = None, sequence_parallel: bool = False,
                         metric_passes: int = 0, metric_autocast: bool = True, fp16: bool = False,
                         megatron: bool = False, moe_permute: str = "none", liger: bool = False,
                         liger_swiglu: bool = True) -> float:
    """Eq. (E7)'s numerator per token: every decoder layer's forward and backward (E1/E2 or E4/E5), the forward
    again for ``recomputed_layers`` checkpointed layers, and the loss (E3/E6/E11; none for 'cut-ce', which never
    materialises the logits). ``adapters``: per layer, (in, out) of each LoRA-adapted linear. ``loss_compiled``:
    whether the loss is compiled too (None: as the layers; torchtitan @ 9dec370 compiles the blocks only).
    ``sequence_parallel``: the layers' hidden-width kernels run on 1/``tp`` of the tokens (eq. (E10)).
    ``metric_passes``: the loop's no-grad training-metric cross-entropies over the logits, each eq. (E12)
    (``metric_autocast``: under torch.autocast; ``fp16``: fp16 logits). ``megatron``: Megatron's fused layer,
    eqs. (E15)/(E16), in place of the eager (E1)/(E2). ``moe_permute``: the MoE layers' token permutation of
    Megatron's 'alltoall' dispatcher, eqs. (E17)/(E18): 'none', 'permute' (one local expert) or 'permute+sort'
    (the received chunks sorted by local expert and back). ``liger``: Liger-Kernel's layer modules, eqs. (E20)/(E21);
    ``liger_swiglu`` False: with Liger's SwiGLU off; ``loss`` 'liger-flce': its fused linear cross-entropy, eq. (E22) (the per-chunk weight-gradient sums,
    formulas/liger_kernels.py eq. LG5, are per micro-batch and added by the caller)."""
    if recomputed_layers < 0:
        raise InputError("recomputed layers must not be negative")
    if moe_permute not in ("none", "permute", "permute+sort"):
        raise InputError(f"moe_permute must be none, permute or permute+sort, got {moe_permute!r}")
    rows = _layer_rows(spec, c, compiled, norms_trained, adapters, tp, unsloth, tp if sequence_parallel else 1,
                       megatron=megatron, moe_permute=moe_permute, liger=liger,
                       liger_swiglu=liger_swiglu)
    total = running_sum(map(itemgetter(2), rows))
    fwd_sum = running_sum(map(itemgetter(0), rows))
    total += fwd_sum * recomputed_layers / spec.num_layers
    if loss != "cut-ce":
        total += loss_bytes(-(-spec.vocab_size // tp), c, compiled if loss_compiled is None else loss_compiled,
                            unsloth, fused_xentropy=loss == "fused-xentropy", liger_flce=loss == "liger-flce")
    if metric_passes < 0:
        raise InputError("training-metric passes must not be negative")
    if metric_passes:
        total += metric_passes * metric_pass_bytes(-(-spec.vocab_size // tp), c, metric_autocast, fp16)
    return total


def inference_forward_bytes_per_token(spec: ModelSpec, c: float, tp: int = 1,
                                      split: ActivationSplit = EVERY_BLOCK_SPLIT) -> float:
    """Eq. (E13): the memory-bound bytes per prompt token of one eager transformers forward (a prefill, or a decode
    step per sequence) with a DynamicCache and ``logits_to_keep=1``: every decoder layer's forward (E1) plus its
    cache append, the embedding gather and the final norm::

        F_inf = sum_layers (F_e + 4c k_w) + 2c h + N_f                                                (E13)

    The cache append is ``DynamicLayer.update``'s ``torch.cat`` of the cache and the new keys and values (transformers
    5.24 cache_utils.py L136-137): an empty cache at prefill, so it reads the new k and v and writes them once (4c
    k_w). (At a decode step the same ``cat`` copies the whole cache: not counted here.) The embedding lookup reads one
    row per token and writes it (2c h; modeling_llama.py L372 ``embed_tokens``); the final norm is one more RMSNorm
    (L404) or LayerNorm. The lm_head runs for the last token only (``slice_logits_to_keep``, L470), and the rotary
    module's cos/sin (fp32, head_dim wide, once per forward, not per layer) are left out: under 0.1 % of the count.
    Under tensor parallelism ``tp`` divides the widths of the blocks ``split`` says the engine splits
    (``model_layer_widths``; transformers' plan: formulas/tensor_parallel.py ``activation_split``)."""
    if tp < 1:
        raise InputError(f"tensor-parallel degree must be >= 1, got {tp}")
    rows = _layer_rows(spec, c, False, False, {}, tp, False, 1, split)
    total = running_sum(map(itemgetter(0), rows))
    firsts = layer_kind_firsts(spec)
    kv = {n: model_layer_widths(spec, n, tp, split).kv_width for n in set(firsts)}
    total += sum(4 * c * kv[n] for n, kind in zip(firsts, spec.layer_types, strict=True) if kind != "none")
    norm = (layernorm_bytes(spec.hidden_size, c)[0] if spec.norm_kind == "layernorm"
            else rmsnorm_bytes(spec.hidden_size, c, False, False)[0])
    return total + 2 * c * spec.hidden_size + norm
