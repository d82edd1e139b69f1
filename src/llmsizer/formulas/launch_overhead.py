"""Host-side cost of launching a training step's kernels: eager PyTorch is CPU-bound when each kernel is small.

Every aten op an eager PyTorch step runs costs host time before its kernel reaches the device: the Python call, the
autograd node, the dispatcher and ``cudaLaunchKernel``. Holistic Trace Analysis (facebookresearch/
HolisticTraceAnalysis docs/source/features/cuda_kernel_launch_stats.rst) measures the launch call alone at 5-20 us
and names the "short GPU kernels" whose device time is below it. Kernels are queued asynchronously (PyTorch docs,
"CUDA semantics: Asynchronous execution": the host enqueues and continues), so host and device work overlap and a
micro-step that never waits on the device takes::

    t_micro = max(t_device, K x tau_host)                                                             (K1)

with K the kernels the micro-step launches and tau_host the host seconds per kernel. A long step is device-bound
(the queue stays full, the launches hide); a short one (a few hundred tokens) waits on the host.

**Kernel count, eager.** The same op inventory as formulas/elementwise_traffic.py (transformers 5
``models/llama/modeling_llama.py``: ``LlamaRMSNorm.forward``, ``apply_rotary_pos_emb``/``rotate_half``,
``LlamaMLP.forward``, the two residual adds; autograd's derivatives for the backward), counted as kernels instead of
bytes, plus the GEMMs and the attention kernel. Per decoder layer, with n_lin linears (base and LoRA A/B), a
adapters, rot = 1 for rotary q/k::

    RMSNorm   forward 8 (``to(float32)``, ``pow``, ``mean``, ``+ eps``, ``rsqrt``, ``*``, ``to(dtype)``,
              ``weight *``; 6 in fp32, the casts are no-ops), backward 12 + 2 (half precision: the casts back)
              + 2 (trained weight: ``grad * normalised`` and its sum over tokens); a LayerNorm is one
              ``native_layer_norm`` each way
    forward   K_f = 2 n_f + n_lin + 10 rot + 1 [attention] + (2 gated | 1) [act (x up)] + 2 [residual adds]
              + 2 a [LoRA scale ``mul`` and ``add``]                                                  (K2)
    backward  K_b = 2 n_b + sum over linears (2 trained | 1 frozen, + 1 trained bias) + 16 rot [rotary: 14 ops and
              the two contiguous copies of the q/k gradients] + 1 [attention] + (3 gated | 1) [act]
              + 2 [residual-stream gradient sums] + 2 [q, k, v input-gradient sums] + (1 gated) [gate/up sum]
              + 2 a [LoRA scaled gradient ``mul``, input-gradient ``add``]                            (K3)

(a Llama layer: K_f = 38, K_b = 71 with trained norms; tests/formulas/test_launch_overhead.py counts them in a
real CPU step under ``TorchDispatchMode``).

**Fused linears and other layer code** (:class:`LayerCode`, from the model's flags). A fused q/k/v or gate/up
linear (Phi-3's ``qkv_proj``/``gate_up_proj``, Qwen-1's ``c_attn``) is one GEMM (one adapter when adapted, PEFT
wrapping the whole nn.Linear), and its output's parts are gathered back in the backward instead of the separate
linears' input-gradient sums: three ``slice_backward`` and two ``add`` for q/k/v taken by slices (Phi-3), one
``cat`` for a ``torch.split`` / ``chunk`` (Qwen-1's q/k/v, Phi-3's gate/up: autograd's split backward). A rotary
that concatenates its pass-through channels (Phi-3 ``torch.cat([rotated, q_pass])``) adds a ``cat`` per q and k
forward and a ``slice_backward`` and an ``add`` per q and k backward; a copied attention output (``attention_output
_copy``) one copy forward. flash-attn's Triton rotary as Qwen-1's remote code calls it (``t.float()``, the
``cos``/``sin`` halves made contiguous, the kernel, ``type_as``: flash-attn v2.3.2 flash_attn/ops/triton/rotary.py
L190, L198-233; its backward clones the gradient first, layers/rotary.py L68-83) launches 5 per q and k forward
and 6 backward, for the 10 / 16 of eq. K3's eager rotary; flash-attn's fused RMSNorm (``dropout_layer_norm``,
flash_attn/ops/rms_norm.py) one call each way, as a LayerNorm. (A Phi-3 layer with LoRA on every linear: K_f = 54,
K_b = 88; tests/formulas/test_training_step_kernels.py traces it.)

**LoRA dropout** (PEFT ``lora_dropout`` > 0: each adapter drops out its input, ``lora_B(lora_A(dropout(x)))``). On
CUDA ``torch.nn.functional.dropout`` with 0 < p < 1 is the fused ``native_dropout`` (aten/src/ATen/native/
Dropout.cpp ``is_fused_kernel_acceptable``: a CUDA input), backward ``native_dropout_backward``: one kernel per
adapter each way, again in a recomputed forward (a CPU trace runs the unfused ``bernoulli_``/``div_``/``mul``
instead, so this is read, not traced)::

    forward  + a [dropout]                  backward  + a [its backward]                                 (K7)

**Recompute, early stop.** A checkpointed layer runs its forward again in the backward, but PyTorch's
non-reentrant checkpoint stops that recomputation once every tensor the backward saved has been rebuilt (torch
2.13.0 torch/utils/checkpoint.py ``set_checkpoint_early_stop`` L773-804, default True; raised at L1128-1131; the rule
the FLOPs follow, formulas/selective_checkpointing.py ``full_recompute_flops``). The layer's last GEMM (the MLP down
projection, or its lora_B when adapted) saves only its inputs and feeds the residual add, which saves nothing, so
neither runs again, nor, after a lora_B, the adapter's scale ``mul`` and its ``add`` to the base output::

    K_f,recompute = K_f - 2 - 2 [last linear a lora_B]      (reentrant / no early stop: K_f)              (K2')

**Autocast over fp32 weights** (a full fine-tune under ``torch.autocast``: bf16-mixed / fp16-mixed, the fp32 model
being its own master copy). The residual stream, the norms and the rotary tables stay fp32 (their half-precision
casts are no-ops: counted with ``half`` False), and autocast casts what its lower-precision ops take (PyTorch AMP
docs, "CUDA Ops that can autocast to float16": ``linear``/``addmm``/``mm``, ``scaled_dot_product_attention``;
aten/src/ATen/autocast_mode.cpp ``cached_cast``: an fp32 leaf weight is cast once per autocast region). Per layer,
with n_w the linears' weights and biases and n_in the linears reading a norm's fp32 output (q, k, v, gate, up; the o
and down inputs are already half)::

    forward   + n_w [weights] + n_in [inputs] + 2 rot [SDPA's q, k: fp32 after the fp32 rotary]
    backward  + n_w [the gradients cast back to fp32] + n_in + 2 rot + 4 rot [the rotary's q, k gradient terms cast
              back to half] + 2 [the residual adds' gradients cast to the half branch]                (K6)

Outside the layers: the head weight's cast and, in the backward, its gradient's and the head input gradient's casts
(+1 / +2), while the rotary tables' two casts back are no-ops (-2). A recomputed layer runs its forward casts again
(autocast's cache was cleared when the forward's region exited). (A Qwen2 layer: +13 / +19; tests/formulas/
test_training_step_kernels.py traces whole bf16-mixed steps.)

**Autocast over fp32 adapters** (LoRA under ``torch.autocast`` on a half-precision base: PEFT keeps the adapters in
fp32, ``get_peft_model(..., autocast_adapter_dtype=True)`` by default, peft @5d602fdb src/peft/mapping_func.py:110 and
tuners/tuners_utils.py:2657-2672 ``cast_adapter_dtype``; PEFT 0.4.0 @0769587a made them fp32 and moved them only to
the base's device, src/peft/tuners/lora.py:691). The base, its residual stream and its norms stay half (K2/K3 as in
pure half precision). PEFT's ``Linear.forward`` casts the adapter's input to the adapter's dtype
(tuners/lora/layer.py:1061 ``_cast_input_dtype``, tuners_utils.py:2191 ``x.to(dtype)``; PEFT 0.4.0 lora.py:819
``x.to(self.lora_A[...].weight.dtype)``), then autocast casts that fp32 input back to half for ``lora_A`` (not a
leaf: not cached) and the two fp32 leaf weights A and B (cached per region); ``* scaling`` and the ``add`` are half.
PEFT's bitsandbytes 4-bit and 8-bit LoRA skip the input cast while autocast is on (tuners/lora/bnb.py:543
``requires_conversion = not torch.is_autocast_enabled()``; PEFT 0.4.0 lora.py:1129; that call without a device
reads CUDA's autocast state, so a CPU trace emulates it). Per adapter and pass::

    forward   + 2 [A, B weights] + 2 i [the input to fp32, and back to half]
    backward  + 2 [the A, B weight gradients cast to fp32] + 2 i [the input gradient to half, and to fp32]   (K6a)

with i = 1 for PEFT's ``Linear``, 0 for its bitsandbytes layers (its GPTQ layer casts the input as well,
tuners/lora/gptq.py:93; not counted, no GPTQ step traced; under DeepSpeed's fp16 engine, which halves the whole model
and runs no autocast, PEFT's GPTQ layer casts nothing: peft v0.5.0 @4df9c5a2 tuners/lora.py:1260-1268, ``x.to`` the
adapter's dtype, already fp16). A recomputed
layer casts again; an early-stopping checkpoint still casts the last lora_B weight (autocast casts before the GEMM
saves its inputs). (A Qwen2 layer with 7 adapters: +28 / +28, over NF4 +14 / +14; tests/formulas/
test_training_step_kernels.py traces whole bf16-mixed LoRA and QLoRA steps with PEFT's default fp32 adapters.)

The cross-entropy (``ForCausalLMLoss``) adds its cast, log-softmax and NLL each way, the head GEMM, the final norm,
the rotary tables, the embedding and the backward's seed (:func:`head_kernels`). Checkpointed layers run K_f again
(K2' with early stop).

**Compiled** (``torch.compile``, inductor): the GEMMs and attention stay extern kernels; the pointwise ops fuse into
the kernels inductor's scheduler emits, counted on a compiled transformers Llama layer (CPU backend, the scheduler
nodes that ``GraphLowering.count_bytes`` lists, less the no-op and multi-output nodes): forward the two norms (each
with the residual add before it), the SwiGLU, the layer output add (4) and the rotary embedding, 3 kernels each for
q and k (``rotate_half``'s negated half, its ``cat``, ``q cos + rot sin``: 6), plus one per LoRA adapter on q or k
(the base + adapter sum is materialised before the rotary); backward the two norm backwards (the weight-gradient
sums fused in), the SwiGLU backward, the attention-gradient layout copy and one gradient sum (5), the two rotary
backwards, plus one per LoRA adapter not on q or k::

    forward   K_f,c = n_lin + 1 + 4 + 6 rot + a_qk        backward  K_b,c = sum(GEMM backward) + 1 + 5 + 2 rot + a - a_qk

(dense, LoRA q,v and LoRA on every linear: equal to inductor's count; LoRA q,o: one kernel under). Triton on a GPU
may fuse differently from the CPU backend. The compiled loss is one fused kernel each way. Inductor's wrapper still
launches each kernel, so tau_host applies per kernel (an assumption: its launcher skips the dispatcher and
autograd, so this over-states the compiled host time).

**Inference, eager transformers** (a ``generate()`` decode or prefill step, ``torch.no_grad``; eq. K4).
The same forward inventory (K2, frozen norms, no LoRA), plus per attention layer the cache update: ``DynamicLayer.
update`` concatenates the new keys and values to the cache, two ``cat`` kernels a step (transformers 5.24.0
cache_utils.py:136-137). Outside the layers: the embedding, the positions (``torch.arange(...) + past_seen_tokens``,
models/llama/modeling_llama.py:378-379: 2), the rotary tables (``LlamaRotaryEmbedding.forward`` L111-116: the position
cast, ``* inv_freq``, ``cat``, ``cos``, ``sin``, the two ``* attention_scaling`` and the two casts back: 10; a learned
position table instead: its lookup and the add, 2), the final norm and the head GEMM (``logits_to_keep``: one
token's row, a view). ``generate()``'s greedy step adds (generation/utils.py ``_sample`` L3246-3288 with
``_update_model_kwargs_for_generation`` L1244-1281 and stopping_criteria.py:86, 109, 620): the next positions
(``arange``, two adds and their ``cat`` to ``position_ids``: 4), the logits' fp32 copy, ``argmax``, the ``cat`` of the
new token to ``input_ids``, the max-length criteria's ``full`` (2) and the list's ``|``, ``unfinished_sequences &
~done`` (2), the stop check's ``max``, ``== 0`` and its read back to the host (3), and two ``clone``s: 17; the forward
then takes the positions given, so 2 of them replace the forward's own::

    K_step = sum over layers (K_f + 2 [cache cat]) + 1 [embedding] + 2 [positions] + (10 rot | 2) + n_f + 1 [head]
             + 15 [generate's own ops]                                                               (K4)

(a Llama decode step: 40 L + 37; tests/formulas/test_inference_kernels.py counts a real ``generate()`` step of a
tiny Llama and Qwen2 under ``TorchDispatchMode``). A bare forward (no loop) launches K_step - 15, and the measure
worker's loop (measure/workloads.py ``_Forward``: the forward, which makes its own positions, then the last logits'
fp32 copy and ``argmax``) K_step - 13 (``WORKER_STEP_KERNELS`` = 2; counted the same way). A prefill step of
either loop is its forward over the prompt plus the loop's own ops, the same count. A step of ``b`` sequences launches the same kernels on wider
tensors, so its host time does not grow with ``b``. Host and device overlap within the step per eq. K1; on CUDA the
stop check's ``bool(unfinished_sequences.max() == 0)`` (generation/utils.py:396, its own comment at L407: it "blocks
the host until the device has caught up, every step") ends each step, so no step's launches run ahead of the
previous step's kernels: eq. K1 per step, not across steps. The worker's loop has no stop check (its argmax
stays on the device), so its launches may run ahead across steps; its steps being alike, the sum of the per-step
maxima is the maximum of the sums all the same.

**MoE layers, by implementation** (eq. K9, :func:`moe_layer_kernels`). A training micro-step's MoE block (router,
dispatch, routed experts, combine) is counted as the implementation its framework runs, which launches a count that
depends on the tokens, the top-k or the local experts in different ways:

- ``transformers-eager`` (transformers 5.24.0 ``Qwen3MoeExperts.forward``, models/qwen3_moe/modeling_qwen3_moe.py
  L223-245, the router L260-268, the block L277-282; the loop of transformers 4.x's MoE blocks): the router (GEMM,
  softmax, top-k, the renormalisation: 5 with its clone), ``zeros_like``, the ``one_hot`` mask (``zeros``,
  ``aminmax``'s bounds check, ``scatter_``), its ``sum`` and ``gt``, ``nonzero``, two host reads, then per expert hit
  14 (``expert_idx == num_experts`` and its host read, ``torch.where``'s ``nonzero`` and two host reads, the token
  gather, the gate/up GEMM, ``silu``, ``* up``, the down GEMM, the routing weight gather and ``*``, ``index_add_``):
  15 + 14 h forward; backward 9 + 22 h (per hit: 4 GEMMs, the two weight ``select_backward`` and their gradient
  ``add``, the two gathers' ``new_zeros`` + ``index_put``, ``index_select`` of ``index_add_``, the products'
  gradients, ``silu_backward``, the chunk's ``cat``, the sums);
- ``transformers-grouped-mm`` (the same file with ``experts_implementation="grouped_mm"``, integrations/moe.py
  ``grouped_mm_experts_forward`` L424-536, the default of every model whose experts class carries
  ``@use_experts_implementation``: modeling_utils.py L1893-1915 picks 'grouped_mm' when none is requested): the
  router, a ``sort``, the gathers, ``histc`` + ``cumsum`` offsets, two ``_grouped_mm`` (gate/up fused, down), the
  gate, the weights, the inverse permutation and the top-k sum: 22 forward, 31 backward, independent of tokens
  (at T >= 2), k and E;
- ``torchtitan`` (pytorch/torchtitan @b5bcd76 torchtitan/models/common/moe.py L55-120 ``GroupedExperts``: always
  ``torch._grouped_mm``, with w1 and w3 as two grouped GEMMs, so one more than transformers' fused gate/up; its router
  and ``LocalTokenDispatcher`` (token_dispatcher.py) are taken as transformers' grouped path's, not traced): 23 / 33;
- ``megatron-te`` (Megatron-Core's ``TEGroupedMLP`` under the all-to-all dispatcher with permute and router fusion,
  NVIDIA/Megatron-LM @d7288711, the commit Megatron-Bridge v0.4.1 pins; read, not traced): Transformer Engine's
  ``GroupedLinear`` launches one cuBLAS GEMM per local expert on a pool of streams unless
  ``NVTE_USE_CUTLASS_GROUPED_GEMM`` is set (NVIDIA/TransformerEngine v2.18 @27486e03
  transformer_engine/common/gemm/cublaslt_gemm.cu L1054-1077 ``nvte_multi_tensor_gemm``, the per-GEMM loop of
  ``multi_stream_cublas_gemm`` L985-1011), so fc1 and fc2 are 2 n_local GEMMs forward and 4 n_local backward
  (dgrad + wgrad), n_local = E / ep, independent of k. Around them, forward (:data:`MEGATRON_MOE_FIXED`): the router
  (router.py ``gating`` L85-108: the fp32 casts and GEMM, 3; the fused top-k + score function, 1; the fused aux-loss
  scores, the token count, its all-reduce and the fused aux loss, 4), the dispatcher's ``preprocess``
  (token_dispatcher.py L471-592: the routing-map sums and the count all-gather, 8, and the four device-to-host
  copies of the splits, 4), TE's fused ``permute`` (row-id map, 3, and the permute, 1), two all-to-alls (tokens,
  probs), the fused chunk sort (map and sort, 2), the fused weighted SwiGLU (experts.py ``bias_act_func``, 1), the
  sort back (2), the combine all-to-all (1) and the fused ``unpermute`` (1): 33; backward the router's two GEMMs and
  cast, the top-k's and aux loss's backward (3 + 1 + 2), the permute's and its probabilities' (2), the two
  all-to-alls, the chunk sorts (2 + 1), the SwiGLU's (1), the combine all-to-all and the unpermute (1 + 1): 16.
  Without expert parallelism the count all-gather, the split copies and the all-to-alls go (fwd - 9, bwd - 3).
  Transformer Engine launches its per-expert GEMMs from a C++ loop without PyTorch's dispatcher, so tau_host
  over-states their host time (as for inductor's launcher below).

Per MoE layer, forward and backward (h: the experts hit by T tokens, eq. K9a; half precision adds the router's two
casts each way in transformers' paths)::

    transformers-eager        K_moe,f = 15 + 14 h            K_moe,b = 9 + 22 h
    transformers-grouped-mm   K_moe,f = 22                   K_moe,b = 31
    torchtitan                K_moe,f = 23                   K_moe,b = 33
    megatron-te               K_moe,f = 33 + 2 n_local       K_moe,b = 16 + 4 n_local                   (K9)

    h = E (1 - (1 - k/E)^T)                                                                             (K9a)

(K9a: under uniform routing each token picks k distinct experts of E, so a given expert is missed by one token with
probability 1 - k/E and, the tokens independent, by all T with (1 - k/E)^T; the expected hit count is E times one
minus that, by linearity of expectation.) The block replaces the layer's MLP activation kernels of K2/K3
(:func:`mlp_activation_kernels`), which it contains. A compiled step keeps the top-k experts as linears (below).
tests/formulas/test_moe_kernels.py traces transformers' two paths on a CPU Qwen3-MoE block.

MoE layers in an inference step (eq. K4) and in a compiled training step are counted with the MLP of their top-k
experts (transformers' eager expert loop, e.g.
qwen3_moe/modeling_qwen3_moe.py:235-245 @5.24.0, launches about ten kernels and two host reads per expert hit, and a
prefill hits nearly every expert: an under-count, which estimate/speed.py warns of). A tensor-parallel forward's
all-reduces are not counted either (warned). A QLoRA base adds bitsandbytes' dequantization kernels per NF4 linear and pass and PEFT's
defensive clone per adapted one (:func:`nf4_linear_kernels`, eq. K5); a GPTQ int4 base, auto-gptq's eager unpacking per
linear and pass (:func:`gptq_linear_kernels`, eq. K8; PEFT 0.5.0's GPTQ LoRA layer also cloned the base output,
tuners/lora.py:1259 @4df9c5a2, dropped in 0.6.0 and absent today, tuners/lora/gptq.py:65 @5d602fdb: not counted);
an NF4 model's inference step adds K5's
forward kernels at its rows (0 at a decode step's few: the fused kernel). The optimizer step's kernels (once per step,
foreach/fused over many tensors) are not counted: torch's foreach AdamW (the CUDA default) runs 9 foreach ops
(one of them on the CPU ``step`` counters) and reads each parameter's ``step`` twice (``_local_scalar_dense``, no
device sync; tests/formulas/test_training_step_kernels.py), and on CUDA each of the other 8 launches
``multi_tensor_apply``'s chunked kernels (ATen native/cuda/MultiTensorApply.cuh: a launch per 320 chunks of 65,536
elements or per 110-30 tensors by depth): about 210 launches for Qwen2.5-0.5B's 290 tensors, 4.1 ms at tau_host,
under its optimizer step's device time (5.1 ms in bf16). torch's ``_default_to_fused_or_foreach`` (torch 2.13.0
torch/optim/optimizer.py L161-186) picks foreach only on the devices of torch/utils/_foreach_utils.py L8-10.

**Host-device syncs in Megatron-Core's MoE dispatchers** (eq. K10, :func:`synced_micro_step_seconds`). Eq. K1 lets
the host run ahead of the device across the whole micro-step. Megatron-Core's token dispatchers block the host once
per MoE layer forward (NVIDIA/Megatron-LM @d7288711, the commit Megatron-Bridge v0.4.1 pins;
:data:`MEGATRON_DISPATCH_SYNC`): 'alltoall' copies the splits to the host on a side stream after the router and waits
on that copy's event before the EP all-to-all (token_dispatcher.py:566 ``before_ep_alltoall``, 867-904
``d2h_event.synchronize()``; with ``moe_permute_fusion`` only the fused permute's few kernels are queued behind the
event); 'flex' with the HybridEP backend passes no ``num_permuted_tokens`` unless the input is padded to a capacity
(token_dispatcher.py:992, 1012-1022), so HybridEP runs blocking (fused_a2a.py:365-383 ``non_blocking =
num_permuted_tokens is not None``) and its metadata preprocessing calls ``cudaStreamSynchronize`` on the compute
stream (deepseek-ai/DeepEP hybrid-ep @94a9f8f6 csrc/hybrid_ep/executor/executor.cu:164-174); 'allgather' reads the
local token counts back with a blocking ``.cpu()`` (token_dispatcher.py:295). The backward has none: the all-to-all's
backward reuses the host-side splits saved in the forward (tensor_parallel/mappings.py:453-461
``_AllToAll.backward``) and HybridEP's backward passes reuse the forward's handle, skipping the preprocessing
(fused_a2a.py:397-407, 428-441), unless the MoE layer is recomputed (``recompute_modules`` 'moe':
moe_layer.py:599-616 re-runs route, preprocess and dispatch in the backward, a second sync per layer; so does full
recomputation, transformer_block.py:442-590). CUDA graphs of the ``moe_router`` / ``moe_preprocess`` scopes do not
remove it: they only move the copies after the graph (token_dispatcher.py:440-445 ``cuda_dtoh_point``); only a
padded-to-capacity input (``moe_pad_expert_input_to_capacity``) skips the copies and the sync
(token_dispatcher.py:487-510, 873), and, in later Megatron-Core, flex's ``moe_expert_rank_capacity_factor`` (a static
token budget: @d98e8a64 token_dispatcher.py:1098-1111), which no Megatron-Bridge v0.4.1 recipe sets and llmsizer does
not express.

After a sync the device queue is empty, so the kernels from one sync to the next can no longer hide their launches
behind work queued earlier. One CUDA stream fed by one host thread (PyTorch's "CUDA semantics: asynchronous
execution": the host enqueues a kernel, paying tau_host, and goes on; the device runs each kernel once it is queued and
the previous one is done; a synchronize waits for the device) is an exact recurrence over the kernels in launch order:
after a sync at time 0, kernel i is queued at h_i = i tau_host and ends at e_i = max(h_i, e_{i-1}) + d_i. Unrolled
(max-plus), the segment up to the next sync ends at::

    S = max_{1 <= m <= n} (m tau_host + d_m + ... + d_n)                                                   (K10a)

(the last kernel m whose launch the device waited for, then everything after it). A block of kernels is summarised as
(n, D = sum d_i, S), and two blocks A then B compose exactly::

    S_AB = max(S_A + D_B, n_A tau_host + S_B)                                                              (K10b)

(the maximum of K10a over m in A, where B's device time follows, or over m in B, launched n_A kernels later), so a
segment is O(1) per block once each block is summarised (:func:`stream_block` exact for listed kernels,
:func:`uniform_block` for n alike ones, :func:`chain_blocks` K10b). The micro-step is the sum of its segments from
each sync to the next, cyclically (micro-steps run back to back)::

    t_micro = sum_segments S_segment                                                                       (K10)

The estimate (estimate/duration.py ``_synced_seconds``) builds the segments from the step's own per-layer kernel
counts in a Megatron layer's order (:func:`megatron_layer_blocks`): the attention half's GEMMs with its other kernels
spread evenly between them, the router and the dispatcher's preprocessing, the sync, then the permute and
all-to-all, the fc1 GEMMs, the SwiGLU, the fc2 GEMMs and the combine (:data:`MEGATRON_MOE_AFTER_SYNC`), each kernel of a
class (GEMM and attention / other) at its class's mean device time (the one split of the device time llmsizer has);
where the backward syncs too (a recomputed MoE layer), each layer's backward (its GEMMs with its other kernels spread
between them) follows its recomputed part, layers in reverse. The part of the step outside the synced span (the head
and loss, and the backward when it does not sync) enters as one block at eq. K1, (n, D, max(D, n tau_host))
(:func:`overlapped_block`: its order is not known, the host running ahead of a device-bound backward); a pipeline
stage is taken as its share of the whole model's micro-step. Bounds: every segment's S is at least its D and its n tau_host, and at most their
sum (K10a), so t_micro lies between eq. K1's max(T_dev, T_host) and the fully serialised T_dev + T_host
(tests/formulas/test_moe_dispatch_sync.py checks K10a/K10b equal a simulated stream to rounding, on random and
Megatron-shaped sequences).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import and_

from ..errors import InputError
from .elementwise_traffic import LayerWidths
from .gemm_shapes import tally

SOURCE = ("kernels: transformers modeling_llama.py op inventory of formulas/elementwise_traffic.py (eqs. K2/K3); "
          "overlap: PyTorch CUDA semantics, asynchronous execution (eq. K1)")
INFERENCE_SOURCE = ("eq. K4: the eager forward of K2 + the DynamicCache cat of K and V per layer (transformers 5.24.0 "
                    "cache_utils.py:136-137) + embedding, positions, rotary tables, final norm, head + generate()'s "
                    "own 15 ops per step (generation/utils.py _sample L3246-3288), or the measure worker's 2 "
                    "(measure/workloads.py _Forward: the logits' fp32 copy, argmax)")

# eq. K4's constants: the cache update of one attention layer, and generate()'s own kernels per greedy step beyond
# the forward (the next positions, the logits copy, argmax, the input_ids cat, the stopping criteria and the stop
# check, two clones: 17, less the 2 position kernels the forward then skips)
CACHE_UPDATE_KERNELS = 2
GENERATE_STEP_KERNELS = 15
# the measure worker's loop (measure/workloads.py _Forward.__call__): the forward (which makes its own positions) then
# ``logits[:, -1, :].float()`` and ``argmax``: 2 kernels, no stop check
WORKER_STEP_KERNELS = 2
# the loops a transformers decode is timed for (estimate_speed's ``decode_loop``): their own kernels per step
DECODE_LOOP_KERNELS = {"generate": GENERATE_STEP_KERNELS, "forward": WORKER_STEP_KERNELS}

Linear = tuple[str, bool, bool]  # (name, trained, has bias); LoRA linears carry 'lora_' in the name


@dataclass(frozen=True)
class LayerCode:
    """Where a model's eager decoder-layer code departs from transformers' Llama layer in kernels (see the module
    docstring, "Fused linears and other layer code"): ``qkv_split`` the fused q/k/v output is split (one ``cat``
    back) rather than sliced; ``rotary_pass_cat`` the rotary concatenates its pass-through channels;
    ``output_copy`` the attention output is copied before the output projection; ``rotary_fused`` flash-attn's
    Triton rotary; ``norm_fused`` flash-attn's fused RMSNorm."""

    qkv_split: bool = False
    rotary_pass_cat: bool = False
    output_copy: bool = False
    rotary_fused: bool = False
    norm_fused: bool = False


LLAMA_CODE = LayerCode()
# the linear names of a fused q/k/v and gate/up (estimate/launch.py kernel_linears)
FUSED_QKV, FUSED_GATE_UP = "qkv", "gate_up"


def rmsnorm_kernels(half: bool, weight_trained: bool) -> tuple[int, int]:
    """(forward, backward) kernels of one eager ``LlamaRMSNorm`` (half precision casts in and out)."""
    return (8 if half else 6), 12 + (2 if half else 0) + (2 if weight_trained else 0)


# the linears reading a norm's output (the layer's fp32 stream under autocast over fp32 weights, eq. K6)
NORM_INPUT_LINEARS = frozenset(("q", "k", "v", "gate", "up", FUSED_QKV, FUSED_GATE_UP))


def autocast_cast_kernels(linears: Sequence[Linear], rotary: bool, pass_cat: bool = False) -> tuple[int, int]:
    """(forward, backward) cast kernels ``torch.autocast`` adds to one eager decoder layer whose weights and residual
    stream are fp32 (eq. K6), beside K2/K3 with fp32 norms. ``linears``: (name, trained, bias) as in
    :func:`layer_kernels`. ``pass_cat``: the rotary concatenates its half-precision pass-through channels to the
    fp32 rotated ones (LayerCode.rotary_pass_cat), a cast each for q and k, and for their gradients."""
    n_w = sum(1 + (1 if bias else 0) for _, _, bias in linears)
    n_in = sum(1 for name, _, _ in linears if name in NORM_INPUT_LINEARS)
    rot = (1 if rotary else 0)
    cat = 2 * rot if pass_cat else 0
    return n_w + n_in + 2 * rot + cat, n_w + n_in + 6 * rot + 2 + cat


def adapter_cast_kernels(input_cast: bool) -> int:
    """Cast kernels ``torch.autocast`` and PEFT add per fp32 LoRA adapter over a half-precision base, in each of the
    forward and the backward (eq. K6a): the A and B weights (their gradients back to fp32), and with ``input_cast``
    (PEFT's ``Linear``, not its bitsandbytes layers under autocast) the input to fp32 and back to half."""
    return 2 + (2 if input_cast else 0)


def recompute_skipped_kernels(linears: Sequence[Linear]) -> int:
    """Kernels of a layer's forward that an early-stopping non-reentrant checkpoint does not run again (eq. K2'):
    the last GEMM and the residual add, and after a last lora_B its scale ``mul`` and ``add``."""
    return 2 + (2 if linears and linears[-1][0].endswith("lora_B") else 0)


def layer_gemm_kernels(linears: Sequence[Linear]) -> tuple[int, int]:
    """(forward, backward) GEMM kernels of a layer's linears (eqs. K2/K3): one forward GEMM each, backward the input
    gradient's and, for a trained linear, the weight gradient's (a trained bias's sum is not a GEMM: counted apart
    by :func:`layer_kernels`)."""
    trained = sum(1 for _, t, _ in linears if t)
    return len(linears), len(linears) + trained


def layer_kernels(w: LayerWidths, linears: Sequence[Linear], compiled: bool, norms_trained: bool,
                  half: bool = True, code: LayerCode = LLAMA_CODE) -> tuple[int, int]:
    """(forward, backward) kernels one decoder layer launches: eqs. (K2)/(K3) eager, the fused kernels of
    elementwise_traffic eqs. (E4)/(E5) compiled. ``linears``: (name, trained, bias) of every linear the layer runs,
    base and LoRA (formulas/selective_checkpointing.layer_matmul_shapes order and names; a fused q/k/v or gate/up
    one named FUSED_QKV / FUSED_GATE_UP). ``code``: the model's departures from the Llama layer (eager only)."""
    # (the counts taken in C: names, trained and bias flags as columns)
    names, trained, bias = zip(*linears, strict=True) if linears else ((), (), ())
    adapters = sum(map(str.endswith, names, repeat("lora_A")))
    n_lin, gemm_bwd = layer_gemm_kernels(linears)
    # a trained linear's bias: its gradient's sum over the tokens, one kernel more backward
    gemm_bwd += sum(map(and_, map(bool, trained), map(bool, bias)))
    rot = 1 if w.rotary else 0
    if compiled:
        qk_adapters = sum(map(("q lora_A", "k lora_A", f"{FUSED_QKV} lora_A").__contains__, names))
        fwd = n_lin + 1 + 4 + 6 * rot + qk_adapters
        bwd = gemm_bwd + 1 + 5 + 2 * rot + (adapters - qk_adapters)
        return fwd, bwd
    nf, nb = (1, 1) if w.layernorm or code.norm_fused else rmsnorm_kernels(half, norms_trained)
    separate_qkv = sum(map(("q", "k", "v").__contains__, names))
    # the q/k/v input gradients: summed (separate linears) or gathered from the fused output's parts
    qkv_grad = max(0, separate_qkv - 1) if FUSED_QKV not in names else (1 if code.qkv_split else 3 + 2)
    rot_f, rot_b = (10, 12) if code.rotary_fused else (10 + (2 if code.rotary_pass_cat else 0),
                                                        16 + (4 if code.rotary_pass_cat else 0))
    act_f, act_b = mlp_activation_kernels(w.gated)
    fwd = 2 * nf + n_lin + rot_f * rot + 1 + act_f + 2 + 2 * adapters + (1 if code.output_copy else 0)
    bwd = 2 * nb + gemm_bwd + rot_b * rot + 1 + act_b + 2 + qkv_grad + 2 * adapters
    return fwd, bwd


def head_kernels(compiled: bool, head_trained: bool, embedding_trained: bool, layernorm: bool,
                 half: bool = True, loss: str = "ce", rotary: bool = True, loss_compiled: bool | None = None,
                 autocast: bool = False) -> int:
    """Kernels outside the decoder layers, forward and backward: the embedding lookup (and its dense gradient when
    it trains), the rotary cos/sin tables (``LlamaRotaryEmbedding.forward``: positions, ``inv_freq @ positions``,
    ``cat``, ``cos``, ``sin``, the attention scaling and the casts: 14, once per forward), the final norm, the head
    GEMM (dX, and dW when it trains), the backward's seed (``ones_like``: 1) and the loss (eager
    ``ForCausalLMLoss``: the logits' fp32 cast, the labels' ``pad``, ``_log_softmax``, ``nll_loss``; backward two
    ``zeros`` fills, ``nll_loss_backward``, ``_log_softmax_backward_data`` and the cast back: 9; compiled: one fused
    kernel each way; 'cut-ce' fuses head and loss into one kernel each way; 'fused-xentropy' is counted as the eager
    loss's 9: flash-attn's kernel each way with its ignore-index masks and the mean's reductions are about as many).
    ``loss_compiled``: whether the loss is compiled too (None: as the rest). ``autocast``: fp32 weights under
    torch.autocast, eager (eq. K6): the head weight's cast and two gradient casts, the rotary tables' two casts
    no-ops (+1), the final norm in fp32 (pass ``half`` False)."""
    # the embedding, its gradient when it trains, the rotary tables, and the backward's seed: ``loss.backward()`` fills
    # the loss's gradient with ``ones_like`` (torch/autograd/__init__.py ``_make_grads``)
    n = 1 + (1 if embedding_trained else 0) + (14 if rotary else 0) + 1
    if compiled:
        n += 2
    else:
        nf, nb = (1, 1) if layernorm else rmsnorm_kernels(half, head_trained)
        n += nf + nb
    if loss == "cut-ce":
        return n + 2
    n += 1 + (2 if head_trained else 1)
    if autocast and not compiled:
        n += 1 + 2 - (2 if rotary else 0)
    return n + (2 if (compiled if loss_compiled is None else loss_compiled) else 9)


# bitsandbytes releases whose 4-bit matmul can run a fused kernel at more than one row: from 0.50, ``MatMul4Bit.forward``
# calls ``bitsandbytes::gemm_4bit`` (autograd/_functions.py:304-345 @37d2a938 = tag 0.50.1), whose CUDA kernel picks the
# fused ``cgemm_4bit`` or the dequantize + ``F.linear`` fallback by rows, shape and GPU (backends/cuda/ops.py:584-806,
# 921-971). Before 0.50 (tags 0.42.0 @4870580f _functions.py:516 to 0.49.2 @f0e6ca31 _functions.py:315) the forward
# always dequantizes: ``F.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t(), bias)``; only a single row
# without a gradient takes ``gemv_4bit`` (``matmul_4bit``, 0.42.0 :567), never a training forward
BNB_FUSED_GEMM_RELEASES = ("0.50",)
# the release a transformers serving run over a bitsandbytes NF4 checkpoint loads: the installed (current) one, 0.50
# (0.50.2 in the project's environment and on the machine of validation/measured/gpu-h200-2026-12-04.jsonl)
BNB_SERVING_RELEASE = "0.50"
BNB_RELEASES = ("0.42", "0.43-0.49", "0.50")

# 0.50's largest row count M at which ``_gemm_4bit_use_custom_cuda`` (ops.py:584) keeps the fused kernel for a weight of
# N x K, per compute capability (major x 10 + minor), half precision (bf16; fp16 on sm75, which has no bf16 MMA), the
# highest of its occupancy tiers (more output blocks than SMs raise it): (small weight N K < 4 Mi with 2 K < N, other
# small weight, larger weight) -- ops.py:635-674 the small-weight tiers, :677 no fused kernel past M = 512 for a larger
# one, :701-806 the per-architecture ladders (sm90 :745-757: at most M = 64), :605-614 sm100 (at most 32), :599-600 the
# floor M <= 4, :926 the cap 1536. tests/formulas/test_launch_overhead.py re-derives each row from the installed
# bitsandbytes' own function.
NF4_FUSED_MAX_ROWS: dict[int, tuple[int, int, int]] = {
    75: (320, 64, 128), 80: (1536, 384, 128), 86: (320, 32, 128), 87: (4, 4, 4), 89: (320, 32, 256),
    90: (512, 32, 64), 100: (32, 4, 32), 110: (4, 4, 4), 120: (320, 32, 256), 121: (320, 32, 256)}
NF4_FUSED_MAX_ROWS_OTHER = (320, 32, 256)  # an unlisted architecture: ops.py:776-806, the sm89 fallback ladder
NF4_SMALL_WEIGHT = 4 * 1024 * 1024  # N x K below which ops.py:635 takes the small-weight tiers


def nf4_fused_max_rows(release: str, capability: int | None, n: int, k: int) -> int:
    """The largest rows M at which a bitsandbytes ``release``'s 4-bit forward of an N x K weight (``n`` output,
    ``k`` input features) can run the fused kernel on a GPU of ``capability`` (None: unknown, the fallback ladder):
    0 before 0.50 (the forward always dequantizes), else :data:`NF4_FUSED_MAX_ROWS` (pre-Volta/Turing-bf16: 7,
    ops.py:603-607). An upper bound: below its top occupancy tier the fused kernel stops earlier."""
    if release not in BNB_RELEASES:
        raise InputError(f"bitsandbytes release must be one of {', '.join(BNB_RELEASES)}, got {release!r}")
    if n < 1 or k < 1:
        raise InputError("a 4-bit weight needs at least one input and one output feature")
    if release not in BNB_FUSED_GEMM_RELEASES:
        return 0
    if capability is not None and capability < 75:
        return 7  # no MMA kernel: the SIMT kernel only, M < 8
    short_k, other, large = NF4_FUSED_MAX_ROWS.get(capability, NF4_FUSED_MAX_ROWS_OTHER) if capability is not None \
        else NF4_FUSED_MAX_ROWS_OTHER
    if n * k < NF4_SMALL_WEIGHT:
        return short_k if 2 * k < n else other
    return large


def nf4_linear_kernels(nested: bool, tokens: int, fused_max_rows: int = 0) -> tuple[int, int]:
    """(forward, backward) kernels a bitsandbytes NF4 ``Linear4bit`` launches beside its GEMM (eq. K5), per pass.

    Forward: the dequantize + ``F.linear`` path -- 0.50's ``_dequant_linear_fallback`` (ops.py:904-916 @37d2a938)
    and every earlier release's ``MatMul4Bit.forward`` (``F.dequantize_4bit`` then ``F.linear``) -- dequantizes the
    8-bit absmax (``cdequantize_blockwise_fp32``), adds its offset, dequantizes the weight
    (``cdequantize_blockwise_bf16_nf4``) and runs the GEMM: 3 kernels beside it with double quantization, 1
    without; at or below ``fused_max_rows`` (:func:`nf4_fused_max_rows`; 0 before 0.50) 0.50's fused ``cgemm_4bit``
    kernel replaces the GEMM (0). Backward, ``MatMul4Bit.backward`` (_functions.py:384): ``F.dequantize_4bit``
    (functional.py:1053-1063: the same three) then ``torch.matmul``: 3 (1) at every size
    (tests/formulas/test_launch_overhead.py counts them in a real CPU backward of a ``Linear4bit`` under
    ``TorchDispatchMode``)::

        K_nf4,f = (3 nested | 1) [tokens > M_fused]      K_nf4,b = 3 nested | 1                            (K5)

    Inference (``torch.no_grad``, eq. K4) takes the same forward: 0.50.2's ``matmul_4bit``
    (autograd/_functions.py:453-483) calls the ``gemm_4bit`` op, whose CUDA dispatch (backends/cuda/ops.py:952-975)
    is the fused-or-fallback choice above; a one-token decode step (M = 1, under the floor M <= 4, ops.py:600-601)
    runs the fused kernel with the 8-bit absmax (ops.py:846-891): 0 kernels beside it, nested or not. ``gemv_4bit``
    and its separate absmax dequantize (functional.py:1311-1313) run only on CPU-packed weights (_functions.py:
    422-423), not on a GPU.
    """
    if tokens < 1:
        raise InputError("tokens per micro-step must be at least 1")
    if fused_max_rows < 0:
        raise InputError("fused_max_rows must not be negative")
    dq = 3 if nested else 1
    return (dq if tokens > fused_max_rows else 0), dq


# auto-gptq's QuantLinear (qlinear_cuda_old, the one transformers' GPTQConfig(disable_exllama=True) loads for desc_act
# False: auto_gptq/utils/import_utils.py dynamically_import_QuantLinear) below this many rows runs its CUDA matrix-vector
# kernel, at or above it unpacks the weight with eager PyTorch ops (qlinear_cuda_old.py:32 ``kernel_switch_threshold=128``
# and :199-201 @ef442d9f = tag v0.4.2; the same at v0.5.0)
GPTQ_KERNEL_SWITCH_ROWS = 128
# the eager unpacking's kernels beside the GEMM, per 2/4/8-bit QuantLinear forward (qlinear_cuda_old.py @ef442d9f):
# the zeros' ``bitwise_right_shift`` + ``.to(int8)`` (:231), ``bitwise_and(..., out=zeros)`` (:232), ``zeros + 1``
# (:234); the weight's ``bitwise_right_shift`` + ``.to(int8)`` (:240), ``bitwise_and(..., out=weight)`` (:241);
# ``scales * (weight - zeros)`` (:266: 2); the reshapes are views, and at fp16 activations ``x.half()`` (:269) and
# ``out.half()`` (:270) are no-ops
GPTQ_EAGER_DEQUANT_KERNELS = 9


def gptq_linear_kernels(tokens: int, bias: bool) -> tuple[int, int]:
    """(forward, backward) kernels an auto-gptq ``qlinear_cuda_old`` QuantLinear (v0.4.2-0.5.x) launches beside the
    GEMM its linear is counted with (eq. K8), per pass, at fp16 activations.

    At ``tokens`` >= :data:`GPTQ_KERNEL_SWITCH_ROWS` the forward unpacks the int4 weight with eager ops
    (:data:`GPTQ_EAGER_DEQUANT_KERNELS`) then ``torch.matmul`` (the GEMM); its bias is a separate ``out + self.bias``
    (:271), not the nn.Linear's fused ``addmm``: +1 with a bias. The dequantized weight is a buffer-derived tensor that
    ``torch.matmul`` saves for the input gradient, so the backward adds nothing beside the counted input-gradient
    GEMM. Below the switch the forward is ``torch.zeros`` (:202), ``scales.float()`` and the CUDA kernel in place of
    the GEMM (:210), ``out.half()`` (:270): 2 + 1 beside it (that path has no autograd formula: not a training path)::

        K_gptq,f = 9 + bias [tokens >= 128] | 3 + bias      K_gptq,b = 0                                   (K8)
    """
    if tokens < 1:
        raise InputError("tokens per micro-step must be at least 1")
    extra = 1 if bias else 0
    return (GPTQ_EAGER_DEQUANT_KERNELS if tokens >= GPTQ_KERNEL_SWITCH_ROWS else 3) + extra, 0


# PEFT's LoRA over a bitsandbytes 4-bit linear clones the base output before adding the adapter
# (peft @5d602fdb src/peft/tuners/lora/bnb.py:533, ``result = result.clone()``): one copy kernel per forward
PEFT_4BIT_CLONE_KERNELS = 1


# eq. K9's implementations of an MoE block (see the module docstring)
MOE_IMPLEMENTATIONS = ("transformers-eager", "transformers-grouped-mm", "torchtitan", "megatron-te")
# transformers' two paths, traced in fp32 on a CPU Qwen3-MoE block (tests/formulas/test_moe_kernels.py): (forward,
# backward) per layer, and the eager loop's per expert hit
HF_EAGER_MOE_FIXED, HF_EAGER_MOE_PER_HIT = (15, 9), (14, 22)
HF_GROUPED_MOE = (22, 31)
# in half precision the router's fp32 softmax output and the weights are cast back, a kernel each way (traced)
HF_MOE_HALF_CASTS = (2, 2)
# torchtitan's GroupedExperts: w1 and w3 as two grouped GEMMs (one forward, two backward more than a fused gate/up)
TORCHTITAN_EXTRA_GROUPED_GEMM = (1, 2)
# Megatron-Core's router, dispatcher, fused permute/sort/unpermute and SwiGLU around TE's GEMMs (read), with expert
# parallelism; without it the count all-gather, the 4 split copies, the all-to-alls go
MEGATRON_MOE_FIXED, MEGATRON_MOE_NO_EP = (33, 16), (9, 3)


def expected_hit_experts(experts: int, top_k: int, tokens: float) -> float:
    """Eq. (K9a): the experts that at least one of ``tokens`` tokens is routed to, in expectation, when each token picks
    ``top_k`` distinct experts of ``experts`` uniformly: E (1 - (1 - k/E)^T)."""
    if experts < 1 or not 1 <= top_k <= experts:
        raise InputError("an MoE layer needs 1 <= top-k <= experts")
    if tokens < 0:
        raise InputError("tokens must not be negative")
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def mlp_activation_kernels(gated: bool) -> tuple[int, int]:
    """(forward, backward) kernels of a layer's eager MLP activation in eqs. K2/K3: ``act(gate) * up`` (2) and its
    backward (3) with the gate/up input-gradient sum (1); ``act`` alone (1, 1) ungated."""
    return (2, 4) if gated else (1, 1)


def megatron_expert_gemm_kernels(experts: int, ep: int = 1) -> tuple[int, int]:
    """(forward, backward) GEMM kernels of a Megatron-Core TEGroupedMLP per micro-step on one device (eq. K9): TE's
    ``GroupedLinear`` runs one cuBLAS GEMM per local expert for fc1 and fc2, 2 n_local forward, and dgrad + wgrad
    of each backward, 4 n_local, n_local = E / ep.

    >>> megatron_expert_gemm_kernels(128, 16)
    (16, 32)
    """
    if ep < 1 or experts < 1 or experts % ep:
        raise InputError(f"expert parallelism {ep} must divide the {experts} experts")
    n_local = experts // ep
    return 2 * n_local, 4 * n_local


def moe_layer_kernels(implementation: str, experts: int, top_k: int, tokens: float, ep: int = 1,
                      half: bool = True) -> tuple[float, float]:
    """Eq. (K9): (forward, backward) kernels one MoE block (router, dispatch, routed experts, combine) launches per
    micro-step on one device, by ``implementation`` (:data:`MOE_IMPLEMENTATIONS`): ``experts`` E of the layer,
    ``top_k``, ``tokens`` T the device's layer sees per micro-step, ``ep`` the expert-parallel degree (Megatron:
    n_local = E / ep GEMMs per fc), ``half`` half-precision activations (transformers' router casts).

    >>> moe_layer_kernels("transformers-grouped-mm", 128, 8, 4096)
    (24, 33)
    >>> moe_layer_kernels("megatron-te", 128, 8, 4096, ep=16)
    (49, 48)
    """
    if implementation not in MOE_IMPLEMENTATIONS:
        raise InputError(f"MoE implementation must be one of {', '.join(MOE_IMPLEMENTATIONS)}, got {implementation!r}")
    if ep < 1 or experts % ep:
        raise InputError(f"expert parallelism {ep} must divide the {experts} experts")
    if tokens < 1:
        raise InputError("tokens per micro-step must be at least 1")
    if implementation == "megatron-te":
        f, b = MEGATRON_MOE_FIXED
        if ep == 1:
            f, b = f - MEGATRON_MOE_NO_EP[0], b - MEGATRON_MOE_NO_EP[1]
        gf, gb = megatron_expert_gemm_kernels(experts, ep)
        return f + gf, b + gb
    cf, cb = HF_MOE_HALF_CASTS if half else (0, 0)
    if implementation == "transformers-eager":
        h = expected_hit_experts(experts, top_k, tokens)
        return (HF_EAGER_MOE_FIXED[0] + cf + HF_EAGER_MOE_PER_HIT[0] * h,
                HF_EAGER_MOE_FIXED[1] + cb + HF_EAGER_MOE_PER_HIT[1] * h)
    f, b = HF_GROUPED_MOE[0] + cf, HF_GROUPED_MOE[1] + cb
    if implementation == "torchtitan":
        f, b = f + TORCHTITAN_EXTRA_GROUPED_GEMM[0], b + TORCHTITAN_EXTRA_GROUPED_GEMM[1]
    return f, b


def host_seconds(kernels: float, seconds_per_kernel: float) -> float:
    """Host seconds to launch ``kernels`` kernels at ``seconds_per_kernel`` each (the right side of eq. K1)."""
    if kernels < 0 or seconds_per_kernel < 0:
        raise InputError("kernel count and seconds per kernel must not be negative")
    return kernels * seconds_per_kernel


def overlapped_seconds(device_seconds: float, host: float) -> float:
    """Eq. (K1): a micro-step whose launches overlap the device's work takes the longer of the two."""
    if device_seconds < 0 or host < 0:
        raise InputError("seconds must not be negative")
    return max(device_seconds, host)


# Megatron-Core's token dispatchers that block the host once per MoE layer forward (eq. K10), NVIDIA/Megatron-LM
# @d7288711 megatron/core/transformer/moe/token_dispatcher.py unless named otherwise
MEGATRON_DISPATCH_SYNC: dict[str, str] = {
    "alltoall": "token_dispatcher.py:566 (sync point before_ep_alltoall), 904 (d2h_event.synchronize())",
    "allgather": "token_dispatcher.py:295 (tokens_per_expert ... .cpu(), blocking)",
    "flex": ("token_dispatcher.py:1046-1051 (HybridEP without num_permuted_tokens), fused_a2a.py:367 (non_blocking "
             "False); deepseek-ai/DeepEP hybrid-ep @94a9f8f6 csrc/hybrid_ep/executor/executor.cu:166-167 "
             "(cudaStreamSynchronize)"),
}


def moe_dispatch_syncs(moe_layers: int, dispatcher: str, moe_recomputed: bool = False) -> int:
    """Eq. (K10)'s syncs per micro-step on one device: one per MoE layer forward under each Megatron-Core dispatcher
    (:data:`MEGATRON_DISPATCH_SYNC`), and one more per layer when the MoE layer is recomputed in the backward
    (``recompute_modules`` 'moe', moe_layer.py:599-616 @d7288711, or full recomputation); none in the backward
    otherwise.

    >>> moe_dispatch_syncs(48, "flex")
    48
    >>> moe_dispatch_syncs(23, "flex", moe_recomputed=True)
    46
    """
    if moe_layers < 0:
        raise InputError("MoE layers must not be negative")
    if dispatcher not in MEGATRON_DISPATCH_SYNC:
        raise InputError(f"dispatcher must be one of {', '.join(MEGATRON_DISPATCH_SYNC)}, got {dispatcher!r}")
    return moe_layers * (2 if moe_recomputed else 1)


# a block of kernels in one stream as eq. K10 composes it: (kernels n, device seconds D, span S of eq. K10a)
StreamBlock = tuple[int, float, float]
EMPTY_BLOCK: StreamBlock = (0, 0.0, 0.0)
# the MoE block's non-GEMM kernels of eq. K9's megatron-te count launched after the sync, as (before fc1, between fc1
# and fc2, after fc2), by expert parallelism (ep > 1, ep = 1), read from the inventory of the module docstring: with
# ep > 1 the sync is before the EP all-to-all, and after it come TE's fused permute (row-id map 3, permute 1), the
# token and probability all-to-alls (2), the chunk sort (2); the fused weighted SwiGLU (1); the sort back (2), the
# combine all-to-all and the fused unpermute (2). With ep = 1 'alltoall' syncs ``before_finish``
# (token_dispatcher.py:575, 745 @d7288711), after the permute: the SwiGLU, the sort back and the unpermute follow
MEGATRON_MOE_AFTER_SYNC: dict[bool, tuple[int, int, int]] = {True: (8, 1, 4), False: (0, 1, 3)}


def stream_block(durations: Sequence[float], seconds_per_kernel: float) -> StreamBlock:
    """Eq. (K10a): kernels of ``durations`` [s] launched in order into an empty stream at ``seconds_per_kernel``
    tau_host each, as a :data:`StreamBlock` (n, D, S): S = max_m (m tau_host + d_m + ... + d_n), the time from the
    sync to the last kernel's end.

    >>> stream_block([5e-6, 100e-6, 5e-6], 20e-6)[2] * 1e6
    145.0
    """
    if seconds_per_kernel < 0 or any(d < 0 for d in durations):
        raise InputError("seconds must not be negative")
    span = suffix = 0.0
    for m in range(len(durations), 0, -1):
        suffix += durations[m - 1]
        span = max(span, m * seconds_per_kernel + suffix)
    return len(durations), suffix, span


def uniform_block(kernels: int, seconds_each: float, seconds_per_kernel: float) -> StreamBlock:
    """Eq. (K10a) for ``kernels`` alike kernels of ``seconds_each``: linear in m, so its maximum is at an end:
    S = max(tau_host + n d, n tau_host + d)."""
    if kernels < 0 or seconds_each < 0 or seconds_per_kernel < 0:
        raise InputError("kernels and seconds must not be negative")
    if not kernels:
        return EMPTY_BLOCK
    return (kernels, kernels * seconds_each,
            max(seconds_per_kernel + kernels * seconds_each, kernels * seconds_per_kernel + seconds_each))


def chain_blocks(blocks: Sequence[StreamBlock], seconds_per_kernel: float) -> StreamBlock:
    """Eq. (K10b): the blocks launched one after another, S_AB = max(S_A + D_B, n_A tau_host + S_B), exact."""
    n, dev, span = EMPTY_BLOCK
    for k, d, s in blocks:
        span = max(span + d, n * seconds_per_kernel + s)
        n, dev = n + k, dev + d
    return n, dev, span


def repeated_block(block: StreamBlock, times: int, seconds_per_kernel: float) -> StreamBlock:
    """Eq. (K10b) applied to ``times`` copies of ``block`` (n, D, S): K10b's maximum over which copy holds the waited-for
    launch j is linear in j, so S_times = S + (times - 1) max(D, n tau_host), exact."""
    if times < 0:
        raise InputError("a block's repeat count must not be negative")
    if not times:
        return EMPTY_BLOCK
    n, d, span = block
    return n * times, d * times, span + (times - 1) * max(d, n * seconds_per_kernel)


def interleaved_block(gemms: int, gemm_seconds: float, others: int, other_seconds: float,
                      seconds_per_kernel: float) -> StreamBlock:
    """``gemms`` GEMMs of ``gemm_seconds`` each with ``others`` other kernels of ``other_seconds`` spread evenly over
    the gemms + 1 gaps around them, one GEMM after each gap but the last (the earlier gaps one kernel more where they
    do not divide), composed by eqs. K10b (:func:`repeated_block` for the alike gaps)."""
    if gemms < 0 or others < 0:
        raise InputError("kernels must not be negative")
    tau = seconds_per_kernel
    q, r = divmod(others, gemms + 1)
    gemm = uniform_block(1, gemm_seconds, tau)
    long_gap = chain_blocks([uniform_block(q + 1, other_seconds, tau), gemm], tau)
    short_gap = chain_blocks([uniform_block(q, other_seconds, tau), gemm], tau)
    # r <= gemms: the first r gaps of q + 1, each before a GEMM, then those of q, the last after the last GEMM
    return chain_blocks([repeated_block(long_gap, r, tau), repeated_block(short_gap, gemms - r, tau),
                         uniform_block(q, other_seconds, tau)], tau)


def overlapped_block(kernels: float, device_seconds: float, seconds_per_kernel: float) -> StreamBlock:
    """A part of the step outside the synced span, its order unknown, as eq. K1 takes it: (n, D, max(D, n tau))."""
    if kernels < 0 or device_seconds < 0 or seconds_per_kernel < 0:
        raise InputError("kernels and seconds must not be negative")
    return round(kernels), device_seconds, max(device_seconds, kernels * seconds_per_kernel)


def megatron_layer_blocks(dense_gemms: int, dense_others: int, expert_gemms: int, moe_others: int, ep: int,
                          gemm_seconds: float, other_seconds: float,
                          seconds_per_kernel: float) -> tuple[StreamBlock, StreamBlock]:
    """One Megatron decoder layer's forward as (before its dispatcher's sync, after it), eq. K10b blocks: the layer's
    ``dense_gemms`` (linears and attention) with its ``dense_others`` spread between them, the MoE block's
    ``moe_others`` non-GEMM kernels less those after the sync (:data:`MEGATRON_MOE_AFTER_SYNC` by ``ep``), the sync;
    then the dispatch, the fc1 GEMMs (``expert_gemms`` / 2), the SwiGLU, the fc2 GEMMs and the combine. A dense layer
    (``expert_gemms`` 0 and ``moe_others`` 0) is all before. Each kernel at its class's mean seconds."""
    tau = seconds_per_kernel
    dense = interleaved_block(dense_gemms, gemm_seconds, dense_others, other_seconds, tau)
    if not expert_gemms and not moe_others:
        return dense, EMPTY_BLOCK
    after = MEGATRON_MOE_AFTER_SYNC[ep > 1]
    # (fewer non-GEMM kernels than the inventory's after the sync: those after it first, in order)
    k = min(sum(after), moe_others)
    before_fc1 = min(after[0], k)
    between = min(after[1], k - before_fc1)
    after_fc2, pre = k - before_fc1 - between, moe_others - k
    fc1 = expert_gemms // 2
    return (chain_blocks([dense, uniform_block(pre, other_seconds, tau)], tau),
            chain_blocks([uniform_block(before_fc1, other_seconds, tau), uniform_block(fc1, gemm_seconds, tau),
                          uniform_block(between, other_seconds, tau),
                          uniform_block(expert_gemms - fc1, gemm_seconds, tau),
                          uniform_block(after_fc2, other_seconds, tau)], tau))


def synced_micro_step_seconds(segments: Sequence[tuple[Sequence[StreamBlock], int]],
                              seconds_per_kernel: float) -> float:
    """Eq. (K10): a micro-step [s] whose host blocks on the device (a Megatron MoE dispatcher's sync, one per MoE layer
    and pass that syncs): the sum over its ``segments`` (the blocks from one sync to the next, in launch order, and
    how many times that segment occurs) of each segment's span (eqs. K10a/K10b), ``seconds_per_kernel`` tau_host.
    Between eq. K1's max(T_dev, T_host) and the serialised T_dev + T_host of the same kernels.

    >>> b = uniform_block(10, 5e-6, 20e-6)
    >>> round(synced_micro_step_seconds([([b, uniform_block(1, 300e-6, 20e-6)], 4)], 20e-6) * 1e6, 1)
    2080.0
    """
    if any(n < 0 for _, n in segments):
        raise InputError("a segment's count must not be negative")
    return sum(n * chain_blocks(blocks, seconds_per_kernel)[2] for blocks, n in segments)


def step_kernels(widths: Sequence[LayerWidths], linears: Sequence[Sequence[Linear]], compiled: bool,
                 norms_trained: bool, recomputed_layers: int, head: int, half: bool = True,
                 early_stop: bool = False, autocast: bool = False, adapter_casts: int = 0,
                 code: LayerCode = LLAMA_CODE, adapter_dropout: bool = False) -> int:
    """Kernels of one micro-step: every decoder layer's forward and backward (K2/K3), the forward again for
    ``recomputed_layers`` checkpointed layers (their mean forward count; ``early_stop``: an early-stopping
    non-reentrant checkpoint's, eq. K2', eager), and ``head`` (:func:`head_kernels`). ``autocast``: fp32 weights
    under torch.autocast, eager: each layer's casts (eq. K6), its norms in fp32. ``adapter_casts``: fp32 LoRA
    adapters over a half base under torch.autocast, eager: the casts per adapter and pass
    (:func:`adapter_cast_kernels`, eq. K6a; 0: none). ``code``: the model's layer code (:class:`LayerCode`);
    ``adapter_dropout``: each adapter drops out its input (eq. K7, eager)."""
    if adapter_casts < 0:
        raise InputError("adapter casts must not be negative")
    if len(widths) != len(linears) or not widths:
        raise InputError("one set of linears per decoder layer is needed")
    if recomputed_layers < 0:
        raise InputError("recomputed layers must not be negative")
    # layers sharing widths and linears (the same objects) count once, times how many there are (integers: exact)
    keys = list(zip(map(id, widths), map(id, linears), strict=True))
    alike = tally(keys)
    first = dict(zip(keys, zip(widths, linears, strict=True), strict=True))
    fwd_sum = total = 0
    amp = autocast and not compiled
    for key, n in alike.items():
        w, lin = first[key]
        f, b = layer_kernels(w, lin, compiled, norms_trained, half and not amp, code)
        if amp:
            cf, cb = autocast_cast_kernels(lin, w.rotary, code.rotary_pass_cat)
            f, b = f + cf, b + cb
        per_adapter = (adapter_casts + (1 if adapter_dropout else 0)) if not compiled else 0
        if per_adapter:
            extra = per_adapter * sum(1 for name, _, _ in lin if name.endswith("lora_A"))
            f, b = f + extra, b + extra
        fwd_sum += n * (f - (recompute_skipped_kernels(lin) if early_stop and not compiled else 0))
        total += n * (f + b)
    return total + round(fwd_sum * recomputed_layers / len(widths)) + head


def forward_head_kernels(layernorm: bool, rotary: bool, half: bool = True) -> int:
    """Kernels of an eager inference forward outside its decoder layers (eq. K4): the embedding, the positions (2),
    the rotary tables (10; a learned position table: 2), the final norm, the head GEMM."""
    nf = 1 if layernorm else rmsnorm_kernels(half, False)[0]
    return 1 + 2 + (10 if rotary else 2) + nf + 1


def inference_step_kernels(widths: Sequence[LayerWidths], linears: Sequence[Sequence[Linear]], head: int,
                           per_step: int = GENERATE_STEP_KERNELS, half: bool = True,
                           code: LayerCode = LLAMA_CODE) -> int:
    """Eq. (K4): kernels of one eager inference step: each decoder layer's forward (K2, frozen norms) and its cache
    update, ``head`` (:func:`forward_head_kernels`) and ``per_step``, the decoding loop's own kernels
    (``generate()``: GENERATE_STEP_KERNELS; the measure worker's forward + argmax loop: WORKER_STEP_KERNELS; a bare
    forward: 0)."""
    if len(widths) != len(linears) or not widths:
        raise InputError("one set of linears per decoder layer is needed")
    if head < 0 or per_step < 0:
        raise InputError("kernel counts must not be negative")
    keys = list(zip(map(id, widths), map(id, linears), strict=True))
    first = dict(zip(keys, zip(widths, linears, strict=True), strict=True))
    total = 0
    for key, n in tally(keys).items():
        total += n * (layer_kernels(*first[key], False, False, half, code)[0] + CACHE_UPDATE_KERNELS)
    return total + head + per_step
